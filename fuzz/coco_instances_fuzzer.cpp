// libFuzzer target: any bytes as a COCO instances file (coco-eval --gt, the SSD and Mask R-CNN annotations), read
// and then rasterised as segm evaluation does. Every outcome must be a ground truth or an Error naming the file;
// never a crash, a hang or an out-of-bounds read.
#include <cstdlib>
#include <string>

#include "coco/annotations.h"
#include "coco/mask.h"
#include "fuzz_entry.h"
#include "util/error.h"

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  const std::string source = "gt.json";
  try {
    const trainbench::coco::GroundTruth truth =
        trainbench::coco::parse_ground_truth(std::string(reinterpret_cast<const char*>(data), size), source);
    for (const auto& annotation : truth.annotations) {
      if (annotation.segmentation.empty()) continue;
      uint32_t height = 32, width = 32;  // the evaluator rasterises on the annotation's image, here a small one
      for (const auto& image : truth.images)
        if (image.id == annotation.image_id && image.height > 0 && image.width > 0 && image.height <= 4096 &&
            image.width <= 4096) {
          height = image.height;
          width = image.width;
        }
      const trainbench::coco::Rle rle = segmentation_to_rle(annotation.segmentation, height, width, source);
      (void)trainbench::coco::area(rle);
      (void)trainbench::coco::to_box(rle);
    }
  } catch (const trainbench::Error& error) {
    if (std::string(error.what()).rfind(source, 0) != 0) std::abort();  // every error names the file
  }
  return 0;
}
