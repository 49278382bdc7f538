#pragma once
// The Mask R-CNN input pipeline of the MLPerf v1.1 reference (maskrcnn_benchmark: data/datasets/coco.py,
// data/transforms/, data/samplers/grouped_batch_sampler.py, structures/image_list.py), torch-free:
//   samples:   COCO instances -> per image the non-crowd objects with inclusive-pixel boxes and polygons;
//   train:     decode -> Resize(min_size, max_size) -> horizontal flip p=0.5 -> the pixels the body's weights
//              expect (BGR 0..255 minus the pixel mean for MSRA's) -> batch padded with zeros bottom/right to a
//              multiple of size_divisibility, images grouped by aspect ratio;
//   eval:      the same without the flip, every image of the file in file order.
// Boxes and polygons follow the image through resize and flip, in Detectron's inclusive-pixel convention.
#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/batch_pipeline.h"
#include "data/image_loader.h"
#include "detection/coco_detection.h"

namespace trainbench::detection {

struct RcnnObject {
  std::array<float, 4> box;                   // inclusive pixels in the ORIGINAL image
  int64_t label = 0;                          // 1..C (category_ids order of CocoDetectionSet)
  std::vector<std::vector<double>> polygons;  // pixels in the original image
};

struct RcnnSample {
  std::string path;
  int64_t image_id = 0;
  int width = 0, height = 0;        // from the annotation file
  std::vector<RcnnObject> objects;  // train: crowd removed; eval: may be empty
};

struct RcnnSamples {
  std::vector<RcnnSample> samples;
  int64_t dropped_polygons = 0;  // non-crowd annotations left out for a first polygon of 4 numbers or fewer
};

// The samples of `set`, as the reference's COCODataset builds its targets:
// - Crowd annotations are removed. Each box [x, y, w, h] becomes (x, y, x + max(w - 1, 0), y + max(h - 1, 0)),
//   is clipped to [0, W - 1] x [0, H - 1], and the object is dropped unless x2 > x1 and y2 > y1 after
//   clipping (BoxList.clip_to_image(remove_empty=True)); so a box partly outside the image is cut to it and
//   one wholly outside (or of width or height <= 1) is dropped, as the reference does. Polygons are kept as
//   the file has them (the reference does not clip them either).
// - Train: annotations without polygons (an RLE-only non-crowd object, which the reference's polygon masks
//   cannot hold) are dropped, and images left without any object are dropped. The reference filters images
//   before removing crowds (an image whose only usable boxes are crowds survives its filter and then fails
//   its Matcher with "No ground-truth boxes"); filtering after removal keeps only images the model can use.
// - Eval: every image of the file, in file order, including images without annotations (the evaluator
//   scores detections on them as false positives); objects without polygons are kept with none.
// - Short polygons, as the reference trains on them: it checks none (its loader's has_valid_annotation looks at
//   boxes only, data/datasets/coco.py) and rasterises an object's parts with pycocotools' frPyObjects
//   (structures/segmentation_mask.py, Polygons.convert), which decides by the first part. Over 4 numbers: every
//   part is a polygon of len / 2 points (frPoly; an odd last number is ignored, a later part of 2 to 4 numbers
//   is its 1 or 2 points), kept as the file has it and rasterised so by polygon_mask_target. Exactly 4: frBbox
//   of a list, which raises TypeError (it takes only an ndarray); fewer: "input type is not supported". Where
//   the reference's training would stop so, the annotation is dropped and counted in dropped_polygons.
// - A polygon coordinate beyond +-1e6 is an Error naming the file, the annotation's index and id and the number.
// Labels are 1..C in set.category_ids order, as the reference's json_category_id_to_contiguous_id. Images come
// in the file's order; the reference sorts them by id, which changes only where the training shuffle starts
// from and nothing the evaluator computes.
RcnnSamples rcnn_samples(const CocoDetectionSet& set, bool training);

// The reference's Resize(min_size, max_size).get_size: (width, height) of the resized image. The short side
// becomes min_size unless the long side would then exceed max_size, in which case the short side becomes
// int(round(max_size * short / long)) (Python's round: half to even); the long side is int(size * long /
// short) (truncated); an image whose short side already equals the size is left as it is.
std::array<int, 2> rcnn_resized_size(int width, int height, int min_size, int max_size);

// The pixels the body's ImageNet weights were trained on. MSRA's Caffe2 weights: BGR 0..255 minus the pixel mean,
// std 1 (the reference's INPUT.TO_BGR255, PIXEL_MEAN and PIXEL_STD, maskrcnn_benchmark/config/defaults.py).
// torchvision's: RGB 0..1 normalised by ImageNet's mean (0.485, 0.456, 0.406) and std (0.229, 0.224, 0.225).
enum class RcnnPixels { kBgr255MinusMean, kRgbImageNet };

struct RcnnLoaderOptions {
  data::LoaderMode mode = data::LoaderMode::Train;
  RcnnPixels pixels = RcnnPixels::kBgr255MinusMean;
  int min_size = 800, max_size = 1333;
  int size_divisibility = 32;
  int64_t batch_size = 2;  // images per rank
  bool drop_last = true;   // eval: false
  bool group_by_aspect_ratio = true;
  double flip_probability = 0.5;  // train only
  int workers = 2, prefetch_batches = 4;
  uint64_t seed = 1;
  int rank = 0, world = 1;
  // Evaluation over ranks: rank r takes whole batches r, r + world, ... of the batches one rank forms, so every
  // image is evaluated in the batch (and padding) it has with one rank, and the results do not depend on the
  // world size. The ranks then run different numbers of batches: only for mode Eval, which has no collectives.
  bool shard_whole_batches = false;
};

struct RcnnBatch {
  std::vector<float> images;  // size x 3 x padded_height x padded_width as options.pixels says, zero padding bottom/right
  int64_t padded_height = 0, padded_width = 0;
  std::vector<int> heights, widths;  // each image after resize (before padding)
  std::vector<int> original_heights, original_widths;
  std::vector<int64_t> image_ids;
  std::vector<float> boxes;    // 4 per object: inclusive pixels in the resized (and flipped) image
  std::vector<int64_t> labels;  // 1..C per object
  std::vector<std::vector<std::vector<double>>> polygons;  // per object, pixels in the resized (flipped) image
  std::vector<int64_t> object_offsets;                     // size + 1
  int64_t size = 0;
};

// The pixel mean subtracted from BGR 0..255 values (the reference's INPUT.PIXEL_MEAN), std 1.
constexpr std::array<float, 3> kRcnnPixelMeanBgr{102.9801f, 115.9465f, 122.7717f};

// Threaded, seeded batch loader built like DetectionLoader on data::BatchPipeline: all randomness (shuffle,
// flips) comes from (seed, epoch, position in the epoch's order), so output is the same with any number of
// workers; a worker's Error (a corrupt image, an image whose size differs from the annotation file) is
// rethrown by next().
//
// Transforms, per image: resize to rcnn_resized_size (torchvision's Resize on a PIL image is PIL's bilinear
// filter: a triangle widened when shrinking, as data::resize_normalize does; PIL rounds to 8 bits after each
// pass and this keeps floats, so pixels differ from it by less than one level, mean about 0.3), boxes and polygon coordinates scaled
// by (new_w / old_w, new_h / old_h) as BoxList.resize and Polygons.resize do (inclusive coordinates are
// multiplied, not their +1 edges, and not clipped again: shrinking moves x2 = W0 - 1 to W - W / W0, so a box
// at the right or bottom edge may reach up to 1 px past W - 1, and a flipped one below 0); train only, with flip_probability: mirror the image, boxes
// x1' = W - x2 - 1, x2' = W - x1 - 1 and polygons x' = W - x - 1 (FLIP_LEFT_RIGHT, TO_REMOVE = 1) with W the
// resized width. The batch's padded size is the largest resized height and width rounded up to a multiple
// of size_divisibility (to_image_list).
//
// Batching. The epoch's order is a permutation drawn from (seed, epoch) in training, file order in eval. It
// is cut into global batches of world x batch_size positions; rank r takes positions r, r + world, ... of
// each global batch, so all ranks run the same number of steps. With group_by_aspect_ratio the global batches
// are formed as the reference's GroupedBatchSampler forms them: images with height / width >= 1 (the
// reference's bisect_right(bins=[1])) and the others fill separate batches, each group in the order the
// epoch's order yields them, and the batches are taken in the order of their first image's position.
// Leftover partial groups: the reference (drop_uneven=False) keeps them as smaller batches; here drop_last
// (train) drops each group's leftover, which is a different set of images every epoch, so every rank steps
// with full batches; without drop_last (eval) they are kept, and a rank whose share of a partial global batch
// is empty skips it. The reference groups each rank's DistributedSampler share separately and lets its
// iteration-based sampler hide the unequal batch counts; grouping the whole epoch once keeps the ranks in
// step instead. The reference groups its test batches too (moot at its TEST.IMS_PER_BATCH of 1). With
// shard_whole_batches the global batch is one rank's batch_size and the batches are dealt out whole.
class RcnnLoader {
 public:
  RcnnLoader(std::vector<RcnnSample> samples, const RcnnLoaderOptions& options);
  ~RcnnLoader();  // stops and joins the workers, also in the middle of an epoch
  RcnnLoader(const RcnnLoader&) = delete;
  RcnnLoader& operator=(const RcnnLoader&) = delete;

  // Abandons any unfinished epoch and starts producing `epoch`'s batches.
  void start_epoch(int64_t epoch);
  // The next batch of the epoch, or nullopt after the last one; rethrows a worker's Error.
  std::optional<RcnnBatch> next();

  int64_t batches_per_epoch() const;  // for this rank; the same every epoch
  int64_t samples_per_epoch() const;  // images this rank sees per epoch

 private:
  RcnnBatch build_batch(int64_t batch_index, const std::atomic<bool>& stopping) const;
  // This rank's batches of an epoch whose order of sample indices is `order`: positions in it.
  std::vector<std::vector<int64_t>> rank_batches(const std::vector<int64_t>& order) const;

  const std::vector<RcnnSample> samples_;
  const RcnnLoaderOptions options_;
  std::vector<int> groups_;  // each sample's aspect-ratio group (all 0 without grouping)
  int64_t batches_per_epoch_ = 0;
  int64_t samples_per_epoch_ = 0;
  int64_t epoch_ = -1;
  std::vector<int64_t> order_;                 // the epoch's order of sample indices
  std::vector<std::vector<int64_t>> batches_;  // this rank's batches: positions in order_
  data::BatchPipeline<RcnnBatch> pipeline_;
};

}  // namespace trainbench::detection
