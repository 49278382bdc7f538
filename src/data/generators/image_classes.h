#pragma once
// Generates the mini ImageNet stand-in: a real ILSVRC2012-layout JPEG tree whose classes are procedural
// shape/pattern families (disk, ring, square, triangle, plus, horizontal/vertical/diagonal stripes,
// checkerboard, star). Colours, position, size, rotation, clutter blobs, background texture, blur and noise
// are random and drawn identically for every class, so only shape tells the classes apart; mean colour
// does not.
//
//   <out_dir>/train/<wnid>/<wnid>_<n>.JPEG        n = 1..train_per_class
//   <out_dir>/val/ILSVRC2012_val_<8 digits>.JPEG  1-based, classes interleaved in a seeded order
//   <out_dir>/LOC_val_solution.csv                Kaggle format; the box is the shape's extent
//
// The wnids n90000000, n90000001, ... are synthetic: real WordNet noun offsets stay below n16000000, so
// they can never be mistaken for real ImageNet classes. Output is a pure function of the options: the
// same options give byte-identical files (on the same platform's libm and libjpeg-turbo).
#include <cstdint>
#include <string>

namespace trainbench::data {

struct ImageClassesOptions {
  int classes = 10;  // 1..10, one shape family each
  int train_per_class = 1000;
  int val_per_class = 100;
  int image_size = 64;  // square images, at least 16
  uint64_t seed = 1;
  int jpeg_quality = 90;
};

struct ImageClassesCounts {
  int64_t classes = 0;
  int64_t train_images = 0;
  int64_t val_images = 0;
};

// Builds the tree in "<out_dir>.partial" and renames it to out_dir when complete, so out_dir is either
// absent or whole. out_dir must not exist (an empty directory is replaced). Prints nothing.
ImageClassesCounts make_image_classification_dataset(const std::string& out_dir,
                                                     const ImageClassesOptions& options = {});

}  // namespace trainbench::data
