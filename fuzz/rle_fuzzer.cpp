// libFuzzer target: the COCO mask API on any compressed RLE string. The first 3 bytes give the size (height and
// width, 1..256 each) and whether the second mask is a crowd; the rest is the "counts" string. A decoded RLE must round-trip through the encoder and
// the compressed string, and merge, area, box and IoU must stay within the image.
#include <cstdlib>
#include <string>

#include "coco/mask.h"
#include "fuzz_entry.h"
#include "util/error.h"

using namespace trainbench::coco;

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint32_t height = 1 + data[0], width = 1 + data[1];
  const bool crowd = data[2] & 1;
  const std::string counts(reinterpret_cast<const char*>(data) + 3, size - 3);
  Rle rle;
  try {
    rle = from_compressed_string(counts, height, width, "counts");
  } catch (const trainbench::Error& error) {
    if (std::string(error.what()).rfind("counts: ", 0) != 0) std::abort();
    return 0;
  }
  const std::vector<uint8_t> mask = decode(rle);
  if (mask.size() != uint64_t{height} * width) std::abort();
  const Rle again = encode(mask, height, width);
  if (area(again) != area(rle) || area(rle) > mask.size()) std::abort();
  if (!(from_compressed_string(to_compressed_string(again), height, width, "again") == again)) std::abort();
  // rleToBbox places an empty foreground run (a zero count) where it falls, even past the image, as maskApi.c
  // does; the encoder writes none, so its box must lie inside the image.
  const Box box = to_box(again);
  if (box.x + box.width > width || box.y + box.height > height) std::abort();
  const Rle merged = merge({rle, again});
  if (area(merged) != area(rle)) std::abort();
  const double iou = mask_iou(rle, to_box(rle), again, box, crowd);
  if (area(rle) > 0 && !(iou >= 0 && iou <= 1)) std::abort();
  return 0;
}
