#include "data/image_folder.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <unordered_map>

#include "util/error.h"

namespace trainbench::data {
namespace {

namespace fs = std::filesystem;

constexpr const char* kImageExtensions = ".JPEG/.jpeg/.jpg/.png";
constexpr const char* kValSolutionName = "LOC_val_solution.csv";

bool named_like_image(const fs::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension == ".jpeg" || extension == ".jpg" || extension == ".png";
}

struct DirectoryListing {
  std::vector<fs::path> subdirectories;
  std::vector<fs::path> images;
  std::vector<fs::path> not_files;  // named like images, but directories, sockets, broken links

  // Where images are expected, something named like one that is not a file is an error, not a silent skip.
  void require_image_files() const {
    if (!not_files.empty())
      fail(not_files.front().string(), std::string("is named like an image (") + kImageExtensions +
                                           ") but is not a regular file (a directory, a broken link?)");
  }
};

// Sorted by name (byte order, like Python's sorted()) so indexing never depends on readdir order.
DirectoryListing list_directory(const fs::path& directory) {
  DirectoryListing listing;
  std::error_code ec;
  fs::directory_iterator it(directory, ec);
  if (ec) fail(directory.string(), "cannot list directory: " + ec.message());
  for (const auto& entry : it) {
    std::error_code type_ec;
    const bool image_name = named_like_image(entry.path());
    if (image_name && entry.is_regular_file(type_ec))
      listing.images.push_back(entry.path());
    else if (image_name)
      listing.not_files.push_back(entry.path());
    if (entry.is_directory(type_ec)) listing.subdirectories.push_back(entry.path());
  }
  std::sort(listing.not_files.begin(), listing.not_files.end());
  std::sort(listing.subdirectories.begin(), listing.subdirectories.end());
  std::sort(listing.images.begin(), listing.images.end());
  return listing;
}

void require_directory(const fs::path& directory, const std::string& what) {
  std::error_code ec;
  if (!fs::is_directory(directory, ec)) fail(directory.string(), "missing; expected " + what);
}

std::vector<ImageSample> class_directory_samples(const fs::path& directory, int64_t label) {
  const DirectoryListing listing = list_directory(directory);
  listing.require_image_files();
  if (listing.images.empty())
    fail(directory.string(), std::string("no image files (") + kImageExtensions + ") in class directory");
  std::vector<ImageSample> samples;
  samples.reserve(listing.images.size());
  for (const auto& image : listing.images) samples.push_back({image.string(), label});
  return samples;
}

// Maps ImageId -> label from Kaggle's LOC_val_solution.csv; the label is the first wnid of each row's
// PredictionString (a list of "wnid x_min y_min x_max y_max" boxes, all of the image's one class).
std::unordered_map<std::string, int64_t> read_val_solution(const fs::path& csv_path,
                                                           const std::map<std::string, int64_t>& class_ids) {
  std::ifstream in(csv_path);
  if (!in)
    fail(csv_path.string(), "missing; a flat val/ directory needs this label file (header ImageId,PredictionString)");
  std::unordered_map<std::string, int64_t> labels;
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = csv_path.string() + ":" + std::to_string(line_number);
    if (line_number == 1) {
      if (line.rfind("ImageId,PredictionString", 0) != 0)
        fail(where, "expected the header 'ImageId,PredictionString', got '" + line + "'");
      continue;
    }
    if (line.empty()) continue;
    const size_t comma = line.find(',');
    if (comma == std::string::npos || comma == 0)
      fail(where, "expected 'ImageId,wnid x_min y_min x_max y_max ...', got '" + line + "'");
    const std::string image_id = line.substr(0, comma);
    const size_t wnid_begin = line.find_first_not_of(' ', comma + 1);
    if (wnid_begin == std::string::npos) fail(where, "no wnid after the image id '" + image_id + "'");
    const std::string wnid = line.substr(wnid_begin, line.find(' ', wnid_begin) - wnid_begin);
    const auto id = class_ids.find(wnid);
    if (id == class_ids.end())
      fail(where, "label '" + wnid + "' is not one of the " + std::to_string(class_ids.size()) +
                      " class directories under train/");
    if (!labels.emplace(image_id, id->second).second) fail(where, "second row for image '" + image_id + "'");
  }
  return labels;
}

}  // namespace

ImageFolderIndex index_imagenet(const std::string& root_string) {
  const fs::path root(root_string);
  require_directory(root, "an ImageNet root directory containing train/ and val/");
  const fs::path train_dir = root / "train";
  require_directory(train_dir, "one subdirectory per class (train/<wnid>/*.JPEG)");
  const fs::path val_dir = root / "val";
  require_directory(val_dir, "val/<wnid>/*.JPEG or val/*.JPEG with " + std::string(kValSolutionName));

  ImageFolderIndex index;
  std::map<std::string, int64_t> class_ids;
  const DirectoryListing train_listing = list_directory(train_dir);
  if (train_listing.subdirectories.empty())
    fail(train_dir.string(), "no class subdirectories; expected train/<wnid>/*.JPEG");
  for (const auto& class_dir : train_listing.subdirectories) {
    const auto label = static_cast<int64_t>(index.classes.size());
    index.classes.push_back(class_dir.filename().string());
    class_ids[index.classes.back()] = label;
    auto samples = class_directory_samples(class_dir, label);
    index.train.insert(index.train.end(), samples.begin(), samples.end());
  }

  const DirectoryListing val_listing = list_directory(val_dir);
  if (!val_listing.subdirectories.empty() && !val_listing.images.empty())
    fail(val_dir.string(), "holds both class subdirectories and loose images; expected one layout: "
                           "val/<wnid>/*.JPEG or val/*.JPEG with " + std::string(kValSolutionName));
  if (!val_listing.subdirectories.empty()) {
    for (const auto& class_dir : val_listing.subdirectories) {
      const auto id = class_ids.find(class_dir.filename().string());
      if (id == class_ids.end())
        fail(class_dir.string(), "is not one of the " + std::to_string(class_ids.size()) +
                                     " class directories under train/");
      auto samples = class_directory_samples(class_dir, id->second);
      index.val.insert(index.val.end(), samples.begin(), samples.end());
    }
  } else {
    val_listing.require_image_files();
    if (val_listing.images.empty())
      fail(val_dir.string(), std::string("no images; expected val/<wnid>/*.JPEG or val/*.JPEG with ") +
                                 kValSolutionName);
    const fs::path csv_path = root / kValSolutionName;
    const auto labels = read_val_solution(csv_path, class_ids);
    for (const auto& image : val_listing.images) {
      const auto label = labels.find(image.stem().string());
      if (label == labels.end())
        fail(image.string(), "no label row for '" + image.stem().string() + "' in " + csv_path.string());
      index.val.push_back({image.string(), label->second});
    }
  }
  return index;
}

}  // namespace trainbench::data
