#pragma once
// Indexes an ImageNet (ILSVRC2012) directory tree:
//   <root>/train/<wnid>/*.JPEG                          one directory per class
//   <root>/val/<wnid>/*.JPEG                            PyTorch-style sorted validation set, or
//   <root>/val/ILSVRC2012_val_000NNNNN.JPEG + <root>/LOC_val_solution.csv   the flat Kaggle layout
// Image files are recognised by extension (.JPEG/.jpeg/.jpg/.png in any letter case), directories are
// read one level deep, and everything is sorted so the index (and hence label ids) is deterministic.
#include <cstdint>
#include <string>
#include <vector>

namespace trainbench::data {

struct ImageSample {
  std::string path;
  int64_t label = 0;  // index into ImageFolderIndex::classes
};

struct ImageFolderIndex {
  std::vector<std::string> classes;  // sorted names of <root>/train's subdirectories (wnids)
  std::vector<ImageSample> train;    // by class, then by file name (torchvision ImageFolder order)
  std::vector<ImageSample> val;      // likewise, or by file name for the flat layout
};

// Throws Error naming the offending directory, file or CSV line when the tree does not have this layout.
ImageFolderIndex index_imagenet(const std::string& root);

}  // namespace trainbench::data
