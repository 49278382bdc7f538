#pragma once
// Generates a COCO 2017-layout detection and instance-segmentation set for the mini SSD and Mask R-CNN
// benchmarks: real object shapes (Fashion-MNIST items, Debian's dataset-fashion-mnist) pasted on real textures
// (scikit-image's brick, grass and gravel photographs, Debian's python3-skimage), with exact annotations.
//
//   <out_dir>/train2017/<12-digit id>.jpg, <out_dir>/val2017/<12-digit id>.jpg
//   <out_dir>/annotations/instances_train2017.json, instances_val2017.json
//
// Each item's mask is its thresholded, upscaled Fashion-MNIST picture (largest 4-connected part, holes
// filled); only mask pixels are painted, so the mask is exact. Items are painted in order and later ones
// occlude earlier ones: an annotation describes the visible part, written as polygons that trace the pixel
// edges, which pycocotools' rasteriser (coco/mask.h) turns back into exactly those pixels (the generator
// checks this for every object). A placement that would hide more than half of an earlier item or punch a
// hole in it is drawn again. Some images get a crowd region: a cluster of small items of one category,
// annotated once with iscrowd = 1 and an uncompressed RLE, as COCO writes crowds. A few images have no
// objects at all (the SSD reference drops those). Item sizes span COCO's small (< 32^2 px), medium and large
// (> 96^2 px) area ranges when the image is large enough. Validation items come from Fashion-MNIST's test
// split, training items from its training split. Output is a pure function of the options.
#include <cstdint>
#include <string>
#include <vector>

namespace trainbench::data {

struct CocoObjectsOptions {
  int train_images = 512;
  int val_images = 64;
  int min_image_size = 192;  // each side drawn in [min, max]
  int max_image_size = 320;
  int min_objects = 1;  // regular (non-crowd) items per image
  int max_objects = 6;
  double min_object_size = 12;  // the item's square side in pixels, drawn log-uniformly
  double max_object_size = 200;
  std::vector<int> classes = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};  // Fashion-MNIST classes, one category each
  double crowd_fraction = 0.1;  // share of images with a crowd region
  double empty_fraction = 0.03;  // share of images without any object
  uint64_t seed = 1;
  int jpeg_quality = 90;
  std::string fashion_mnist_dir = "/usr/share/datasets/fashion-mnist";
  std::string texture_dir = "/usr/lib/python3/dist-packages/skimage/data";
};

struct CocoObjectsCounts {
  int64_t train_images = 0;
  int64_t val_images = 0;
  int64_t objects = 0;  // annotations with iscrowd = 0, both splits
  int64_t crowd_regions = 0;
};

// Builds the tree in "<out_dir>.partial" and renames it when complete. out_dir must not exist (an empty
// directory is replaced). Throws Error naming the Fashion-MNIST or texture file when one is missing.
CocoObjectsCounts make_coco_objects_dataset(const std::string& out_dir, const CocoObjectsOptions& options = {});

// The COCO category id and name of a Fashion-MNIST class: ids 1, 3, 5, ... (gaps, as COCO's 1..90 has), so
// readers must map ids to contiguous labels.
int64_t fashion_category_id(int fashion_class);
const char* fashion_category_name(int fashion_class);

// The outer pixel-edge outlines of a mask's 4-connected parts, as COCO polygon parts [x1,y1,x2,y2,...] in
// pixel coordinates offset by (x0, y0). mask is row-major width x height, nonzero = inside. A mask whose
// background has holes (not 8-connected to the border) is not traced exactly: its holes would be filled.
std::vector<std::vector<double>> trace_polygons(const std::vector<uint8_t>& mask, int width, int height, int x0, int y0);

}  // namespace trainbench::data
