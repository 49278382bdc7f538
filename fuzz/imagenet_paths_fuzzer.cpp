// libFuzzer target: the ImageNet layout's user-written text, LOC_val_solution.csv, as any bytes, under a
// fixed tree (two classes, a flat val/ folder). The index must hold every val image with a known class, or
// the result is an Error naming the file.
#include <cstdlib>
#include <fstream>

#include "data/image_folder.h"
#include "fuzz_entry.h"
#include "util/error.h"

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  static const fs::path root = [] {
    const fs::path tree = trainbench::fuzz::scratch_dir() / "imagenet";
    for (const char* file : {"train/n01/a.JPEG", "train/n02/b.png", "val/ILSVRC_1.JPEG", "val/ILSVRC_2.JPEG"}) {
      fs::create_directories((tree / file).parent_path());
      std::ofstream(tree / file) << "x";
    }
    return tree;
  }();
  trainbench::fuzz::write_scratch_file("imagenet/LOC_val_solution.csv", data, size);
  try {
    const trainbench::data::ImageFolderIndex index = trainbench::data::index_imagenet(root.string());
    if (index.train.size() != 2 || index.val.size() != 2) std::abort();
    for (const auto& sample : index.val)
      if (sample.label < 0 || sample.label >= static_cast<int64_t>(index.classes.size())) std::abort();
  } catch (const trainbench::Error&) {
  }
  return 0;
}
