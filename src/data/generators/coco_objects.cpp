#include "data/generators/coco_objects.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "coco/mask.h"
#include "data/generators/dataset_directory.h"
#include "data/image_decode.h"
#include "data/random.h"
#include "util/error.h"

namespace trainbench::data {
namespace {

namespace fs = std::filesystem;

constexpr int kItemSide = 28;  // Fashion-MNIST pictures are 28 x 28
constexpr int kItemThreshold = 48;  // grey level above which an upscaled item pixel belongs to the item
constexpr const char* kTextures[] = {"brick.png", "grass.png", "gravel.png"};
constexpr uint64_t kTrainStream = 1;
constexpr uint64_t kValStream = 2;
constexpr int kPlacementTries = 12;

const char* const kFashionNames[] = {"t-shirt", "trouser", "pullover", "dress", "coat",
                                     "sandal",  "shirt",   "sneaker",  "bag",   "ankle boot"};
const char* const kFashionSupercategories[] = {"clothing", "clothing", "clothing", "clothing", "clothing",
                                               "footwear", "clothing", "footwear", "accessory", "footwear"};

// Fashion-MNIST pictures of one split, grouped by class.
struct FashionItems {
  std::vector<uint8_t> pixels;                      // count * 28 * 28
  std::array<std::vector<int>, 10> items_of_class;  // picture indices
};

std::vector<uint8_t> read_gzip(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file)
    fail(path, "cannot open (Fashion-MNIST comes with Debian's dataset-fashion-mnist package)");
  std::vector<uint8_t> bytes;
  std::array<uint8_t, 1 << 16> buffer;
  int read = 0;
  while ((read = gzread(file, buffer.data(), buffer.size())) > 0) bytes.insert(bytes.end(), buffer.begin(), buffer.begin() + read);
  const bool failed = read < 0;
  gzclose(file);
  if (failed) fail(path, "is not a readable gzip file");
  return bytes;
}

uint32_t big_endian(const std::vector<uint8_t>& bytes, size_t offset) {
  return uint32_t(bytes[offset]) << 24 | uint32_t(bytes[offset + 1]) << 16 | uint32_t(bytes[offset + 2]) << 8 |
         bytes[offset + 3];
}

// IDX files (the MNIST format): a big-endian magic (0x803 images, 0x801 labels), the count, then the sizes.
FashionItems load_fashion(const std::string& dir, const std::string& split) {
  const std::string images_path = dir + "/" + split + "-images-idx3-ubyte.gz";
  const std::string labels_path = dir + "/" + split + "-labels-idx1-ubyte.gz";
  const std::vector<uint8_t> images = read_gzip(images_path), labels = read_gzip(labels_path);
  if (images.size() < 16 || big_endian(images, 0) != 0x803 || big_endian(images, 8) != kItemSide ||
      big_endian(images, 12) != kItemSide)
    fail(images_path, "is not an IDX file of 28x28 images");
  if (labels.size() < 8 || big_endian(labels, 0) != 0x801) fail(labels_path, "is not an IDX label file");
  const uint32_t count = big_endian(images, 4);
  if (big_endian(labels, 4) != count || images.size() != 16 + size_t(count) * kItemSide * kItemSide ||
      labels.size() != 8 + size_t(count))
    fail(images_path, "image and label counts disagree with " + labels_path);
  FashionItems items;
  items.pixels.assign(images.begin() + 16, images.end());
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t label = labels[8 + i];
    if (label >= 10) fail(labels_path, "label " + std::to_string(label) + " at index " + std::to_string(i) + " is not 0..9");
    items.items_of_class[label].push_back(static_cast<int>(i));
  }
  return items;
}

// Grey textures (the red channel of the decoded image).
struct Texture {
  int width = 0, height = 0;
  std::vector<uint8_t> grey;
};

std::vector<Texture> load_textures(const std::string& dir) {
  std::vector<Texture> textures;
  for (const char* name : kTextures) {
    const std::string path = dir + "/" + name;
    if (!fs::exists(path)) fail(path, "missing (the textures come with Debian's python3-skimage package)");
    const Image image = decode_image_file(path);
    Texture texture{image.width, image.height, std::vector<uint8_t>(size_t(image.width) * image.height)};
    for (size_t i = 0; i < texture.grey.size(); ++i) texture.grey[i] = image.rgb[3 * i];
    textures.push_back(std::move(texture));
  }
  return textures;
}

using Colour = std::array<float, 3>;

// One pasted item: a square of `side` pixels at (x0, y0), its mask and its shading.
struct Piece {
  int x0 = 0, y0 = 0, side = 0;
  std::vector<uint8_t> mask;  // side * side, row-major
  std::vector<float> shade;   // 0..1
  Colour colour{};
  int annotation = 0;  // which annotation the piece belongs to
};

struct PlannedAnnotation {
  int fashion_class = 0;
  bool crowd = false;
  int64_t full_area = 0;  // the pixels of its pieces before occlusion (regular items only)
};

// The background pixels of a row-major width x height mask that reach the border through 8-neighbours.
std::vector<uint8_t> outside_background(const std::vector<uint8_t>& mask, int width, int height) {
  std::vector<uint8_t> outside(mask.size(), 0);
  std::vector<int> stack;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      const int i = y * width + x;
      if ((x == 0 || y == 0 || x == width - 1 || y == height - 1) && !mask[i]) outside[i] = 1, stack.push_back(i);
    }
  while (!stack.empty()) {
    const int at = stack.back();
    stack.pop_back();
    const int x = at % width, y = at / width;
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx) {
        const int nx = x + dx, ny = y + dy;
        if (nx < 0 || ny < 0 || nx >= width || ny >= height) continue;
        const int next = ny * width + nx;
        if (!mask[next] && !outside[next]) outside[next] = 1, stack.push_back(next);
      }
  }
  return outside;
}

// Keeps the largest 4-connected foreground part and fills its holes (background not 8-connected to the border).
void clean_mask(std::vector<uint8_t>& mask, int side) {
  std::vector<int> component(mask.size(), -1);
  std::vector<int> stack;
  int best = -1;
  size_t best_size = 0;
  for (int start = 0; start < side * side; ++start) {
    if (!mask[start] || component[start] >= 0) continue;
    size_t size = 0;
    stack.push_back(start);
    component[start] = start;
    while (!stack.empty()) {
      const int at = stack.back();
      stack.pop_back();
      ++size;
      const int x = at % side, y = at / side;
      const std::array<std::pair<int, int>, 4> neighbours{{{x - 1, y}, {x + 1, y}, {x, y - 1}, {x, y + 1}}};
      for (const auto& [nx, ny] : neighbours) {
        if (nx < 0 || ny < 0 || nx >= side || ny >= side) continue;
        const int next = ny * side + nx;
        if (mask[next] && component[next] < 0) {
          component[next] = start;
          stack.push_back(next);
        }
      }
    }
    if (size > best_size) best_size = size, best = start;
  }
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = best >= 0 && component[i] == best;
  // Background reachable from the border through 8-neighbours stays background; the rest is a hole.
  const std::vector<uint8_t> outside = outside_background(mask, side, side);
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = !outside[i];
}

// True when the background of a width x height mask is 8-connected to the border (the mask has no hole).
bool hole_free(const std::vector<uint8_t>& mask, int width, int height) {
  const std::vector<uint8_t> outside = outside_background(mask, width, height);
  for (size_t i = 0; i < mask.size(); ++i)
    if (!mask[i] && !outside[i]) return false;
  return true;
}

// A Fashion-MNIST picture upscaled (bilinear) to side x side, thresholded into its cleaned mask.
Piece make_piece(const FashionItems& items, int picture, int side, Rng& rng) {
  const uint8_t* source = items.pixels.data() + size_t(picture) * kItemSide * kItemSide;
  Piece piece;
  piece.side = side;
  piece.mask.resize(size_t(side) * side);
  piece.shade.resize(size_t(side) * side);
  const double scale = double(kItemSide) / side;
  auto at = [&](int x, int y) {
    return double(source[std::clamp(y, 0, kItemSide - 1) * kItemSide + std::clamp(x, 0, kItemSide - 1)]);
  };
  for (int y = 0; y < side; ++y)
    for (int x = 0; x < side; ++x) {
      const double sx = (x + 0.5) * scale - 0.5, sy = (y + 0.5) * scale - 0.5;
      const int ix = static_cast<int>(std::floor(sx)), iy = static_cast<int>(std::floor(sy));
      const double fx = sx - ix, fy = sy - iy;
      const double value = (at(ix, iy) * (1 - fx) + at(ix + 1, iy) * fx) * (1 - fy) +
                           (at(ix, iy + 1) * (1 - fx) + at(ix + 1, iy + 1) * fx) * fy;
      piece.mask[size_t(y) * side + x] = value > kItemThreshold;
      piece.shade[size_t(y) * side + x] = static_cast<float>(value / 255.0);
    }
  clean_mask(piece.mask, side);
  // A saturated colour: one channel high, one low, one anywhere, in a random arrangement.
  std::array<float, 3> colour{static_cast<float>(rng.uniform(190, 255)), static_cast<float>(rng.uniform(0, 90)),
                              static_cast<float>(rng.uniform(0, 255))};
  for (int i = 2; i > 0; --i) std::swap(colour[i], colour[rng.below(i + 1)]);
  piece.colour = colour;
  return piece;
}

int64_t mask_area(const Piece& piece) { return std::count(piece.mask.begin(), piece.mask.end(), uint8_t{1}); }

// One image being composed: which piece owns each pixel (-1: background).
class Scene {
 public:
  Scene(int width, int height) : width_(width), height_(height), owner_(size_t(width) * height, -1) {}

  // Pastes the piece on top unless it would hide more than half of a regular item or punch a hole in one.
  bool try_paste(Piece piece, const std::vector<PlannedAnnotation>& annotations) {
    std::vector<int64_t> lost(annotations.size(), 0);
    for (int y = 0; y < piece.side; ++y)
      for (int x = 0; x < piece.side; ++x) {
        if (!piece.mask[size_t(y) * piece.side + x]) continue;
        const int owner = owner_[size_t(piece.y0 + y) * width_ + piece.x0 + x];
        if (owner >= 0) ++lost[pieces_[owner].annotation];
      }
    for (size_t a = 0; a < annotations.size(); ++a) {
      if (lost[a] == 0 || annotations[a].crowd) continue;
      const int64_t visible = visible_area(static_cast<int>(a)) - lost[a];
      if (2 * visible < annotations[a].full_area) return false;
      if (!hole_free(visible_mask(static_cast<int>(a), &piece), width_, height_)) return false;
    }
    const int index = static_cast<int>(pieces_.size());
    for (int y = 0; y < piece.side; ++y)
      for (int x = 0; x < piece.side; ++x)
        if (piece.mask[size_t(y) * piece.side + x]) owner_[size_t(piece.y0 + y) * width_ + piece.x0 + x] = index;
    pieces_.push_back(std::move(piece));
    return true;
  }

  // Row-major width x height mask of what is visible of an annotation, optionally after `on_top` is pasted.
  std::vector<uint8_t> visible_mask(int annotation, const Piece* on_top = nullptr) const {
    std::vector<uint8_t> mask(owner_.size(), 0);
    for (size_t i = 0; i < owner_.size(); ++i) mask[i] = owner_[i] >= 0 && pieces_[owner_[i]].annotation == annotation;
    if (on_top)
      for (int y = 0; y < on_top->side; ++y)
        for (int x = 0; x < on_top->side; ++x)
          if (on_top->mask[size_t(y) * on_top->side + x]) mask[size_t(on_top->y0 + y) * width_ + on_top->x0 + x] = 0;
    return mask;
  }

  int64_t visible_area(int annotation) const {
    int64_t area = 0;
    for (int owner : owner_) area += owner >= 0 && pieces_[owner].annotation == annotation;
    return area;
  }

  // Paints the owning piece's colour, shaded by the item's own grey levels, over `rgb`.
  void paint(std::vector<uint8_t>& rgb) const {
    for (int y = 0; y < height_; ++y)
      for (int x = 0; x < width_; ++x) {
        const int owner = owner_[size_t(y) * width_ + x];
        if (owner < 0) continue;
        const Piece& piece = pieces_[owner];
        const float shade = 0.3f + 0.7f * piece.shade[size_t(y - piece.y0) * piece.side + (x - piece.x0)];
        for (int c = 0; c < 3; ++c)
          rgb[(size_t(y) * width_ + x) * 3 + c] = static_cast<uint8_t>(std::lround(piece.colour[c] * shade));
      }
  }

 private:
  int width_, height_;
  std::vector<int> owner_;
  std::vector<Piece> pieces_;
};

// A tinted, randomly cropped and scaled texture (bilinear), width x height RGB.
std::vector<uint8_t> background(const std::vector<Texture>& textures, int width, int height, Rng& rng) {
  const Texture& texture = textures[rng.below(textures.size())];
  const double crop = rng.uniform(0.3, 1.0) * std::min(texture.width, texture.height);
  const double scale_x = crop / width, scale_y = crop * rng.uniform(0.8, 1.25) / height;
  const double x0 = rng.uniform(0, std::max(0.0, texture.width - width * scale_x - 1));
  const double y0 = rng.uniform(0, std::max(0.0, texture.height - height * scale_y - 1));
  std::array<double, 3> tint{};
  for (double& channel : tint) channel = rng.uniform(0.35, 0.85);
  const double offset = rng.uniform(0, 40);
  std::vector<uint8_t> rgb(size_t(width) * height * 3);
  auto at = [&](int x, int y) {
    return double(texture.grey[size_t(std::clamp(y, 0, texture.height - 1)) * texture.width +
                               std::clamp(x, 0, texture.width - 1)]);
  };
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      const double sx = x0 + (x + 0.5) * scale_x, sy = y0 + (y + 0.5) * scale_y;
      const int ix = static_cast<int>(sx), iy = static_cast<int>(sy);
      const double fx = sx - ix, fy = sy - iy;
      const double grey = (at(ix, iy) * (1 - fx) + at(ix + 1, iy) * fx) * (1 - fy) +
                          (at(ix, iy + 1) * (1 - fx) + at(ix + 1, iy + 1) * fx) * fy;
      for (int c = 0; c < 3; ++c)
        rgb[(size_t(y) * width + x) * 3 + c] = static_cast<uint8_t>(std::clamp(grey * tint[c] + offset, 0.0, 255.0));
    }
  return rgb;
}

// Column-major copy of a row-major mask, as the COCO mask API stores masks.
std::vector<uint8_t> column_major(const std::vector<uint8_t>& mask, int width, int height) {
  std::vector<uint8_t> columns(mask.size());
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) columns[size_t(x) * height + y] = mask[size_t(y) * width + x];
  return columns;
}

struct SplitOutput {
  nlohmann::ordered_json images = nlohmann::ordered_json::array();
  nlohmann::ordered_json annotations = nlohmann::ordered_json::array();
  int64_t objects = 0;
  int64_t crowds = 0;
};

// Draws, paints and annotates one image; appends its entries to `out` and writes its JPEG to `path`.
void make_image(const CocoObjectsOptions& options, const FashionItems& items, const std::vector<Texture>& textures,
                int64_t image_id, const fs::path& path, Rng& rng, SplitOutput& out) {
  const int width = static_cast<int>(rng.uniform_int(options.min_image_size, options.max_image_size));
  const int height = static_cast<int>(rng.uniform_int(options.min_image_size, options.max_image_size));
  Image image{width, height, background(textures, width, height, rng)};
  Scene scene(width, height);
  std::vector<PlannedAnnotation> planned;
  auto random_class = [&] { return options.classes[rng.below(options.classes.size())]; };
  auto random_picture = [&](int fashion_class) {
    const auto& pictures = items.items_of_class[fashion_class];
    return pictures[rng.below(pictures.size())];
  };

  const bool empty = rng.uniform() < options.empty_fraction;
  if (!empty && rng.uniform() < options.crowd_fraction) {
    // A crowd: several small items of one class clustered together, painted first (at the back).
    const int fashion_class = random_class();
    const int side = static_cast<int>(std::clamp(rng.uniform(10, 20), 8.0, std::min(width, height) / 3.0));
    const double cx = rng.uniform(side * 2.0, width - side * 2.0), cy = rng.uniform(side * 2.0, height - side * 2.0);
    const int count = static_cast<int>(rng.uniform_int(4, 8));
    planned.push_back({fashion_class, true, 0});
    for (int i = 0; i < count; ++i) {
      Piece piece = make_piece(items, random_picture(fashion_class), side, rng);
      piece.x0 = std::clamp(static_cast<int>(cx + rng.uniform(-1.5, 1.5) * side - side / 2.0), 0, width - side);
      piece.y0 = std::clamp(static_cast<int>(cy + rng.uniform(-1.5, 1.5) * side - side / 2.0), 0, height - side);
      piece.annotation = 0;
      scene.try_paste(std::move(piece), planned);
    }
  }
  const int object_count = empty ? 0 : static_cast<int>(rng.uniform_int(options.min_objects, options.max_objects));
  const double largest = std::min<double>(options.max_object_size, std::min(width, height));
  for (int i = 0; i < object_count; ++i) {
    const int fashion_class = random_class();
    const double log_side = rng.uniform(std::log(options.min_object_size), std::log(std::max(largest, options.min_object_size)));
    const int side = std::max(4, static_cast<int>(std::exp(log_side)));
    Piece piece = make_piece(items, random_picture(fashion_class), side, rng);
    const int64_t area = mask_area(piece);
    if (area == 0) continue;
    piece.annotation = static_cast<int>(planned.size());
    planned.push_back({fashion_class, false, area});
    bool pasted = false;
    for (int attempt = 0; attempt < kPlacementTries && !pasted; ++attempt) {
      piece.x0 = static_cast<int>(rng.uniform_int(0, width - side));
      piece.y0 = static_cast<int>(rng.uniform_int(0, height - side));
      pasted = scene.try_paste(piece, planned);
    }
    if (!pasted) planned.pop_back();
  }
  scene.paint(image.rgb);
  const std::string file_name = path.filename().string();
  write_bytes(path, encode_jpeg(image, options.jpeg_quality));
  out.images.push_back({{"id", image_id}, {"file_name", file_name}, {"width", width}, {"height", height}});

  const std::string where = path.string();
  for (size_t a = 0; a < planned.size(); ++a) {
    const std::vector<uint8_t> visible = scene.visible_mask(static_cast<int>(a));
    const coco::Rle rle = coco::encode(column_major(visible, width, height), height, width);
    const uint32_t area = coco::area(rle);
    if (area == 0) continue;  // a crowd hidden entirely by the items on top of it
    const coco::Box box = coco::to_box(rle);
    nlohmann::ordered_json annotation{{"id", 0},
                                      {"image_id", image_id},
                                      {"category_id", fashion_category_id(planned[a].fashion_class)},
                                      {"bbox", {box.x, box.y, box.width, box.height}},
                                      {"area", area},
                                      {"iscrowd", planned[a].crowd ? 1 : 0}};
    if (planned[a].crowd) {
      annotation["segmentation"] = {{"counts", rle.counts}, {"size", {height, width}}};
      ++out.crowds;
    } else {
      coco::Segmentation segmentation;
      segmentation.polygons = trace_polygons(visible, width, height, 0, 0);
      // The polygons must give back exactly the pixels painted, through pycocotools' own rasteriser.
      if (!(coco::segmentation_to_rle(segmentation, height, width, where) == rle))
        fail(where, "object " + std::to_string(a) + ": traced polygons do not rasterise to its mask");
      annotation["segmentation"] = segmentation.polygons;
      ++out.objects;
    }
    out.annotations.push_back(std::move(annotation));
  }
}

void write_split(const fs::path& root, const std::string& split, int images, int64_t first_id, uint64_t stream,
                 const CocoObjectsOptions& options, const FashionItems& items, const std::vector<Texture>& textures,
                 CocoObjectsCounts& counts) {
  fs::create_directories(root / split);
  SplitOutput out;
  for (int i = 0; i < images; ++i) {
    Rng rng(mix_seed(options.seed, stream, static_cast<uint64_t>(i)));
    const int64_t id = first_id + i;
    char name[32];
    std::snprintf(name, sizeof name, "%012lld.jpg", static_cast<long long>(id));
    make_image(options, items, textures, id, root / split / name, rng, out);
  }
  int64_t next_id = first_id * 100 + 1;  // annotation ids are unique across the split and never 0
  for (auto& annotation : out.annotations) annotation["id"] = next_id++;
  nlohmann::ordered_json categories = nlohmann::ordered_json::array();
  for (int fashion_class : options.classes)
    categories.push_back({{"supercategory", kFashionSupercategories[fashion_class]},
                          {"id", fashion_category_id(fashion_class)},
                          {"name", fashion_category_name(fashion_class)}});
  const nlohmann::ordered_json file{
      {"info", {{"description", "trainbench generated COCO-format set: Fashion-MNIST items on scikit-image textures"},
                {"version", "1"}}},
      {"licenses", nlohmann::ordered_json::array()},
      {"images", std::move(out.images)},
      {"annotations", std::move(out.annotations)},
      {"categories", std::move(categories)}};
  const std::string text = file.dump();
  fs::create_directories(root / "annotations");
  write_bytes(root / "annotations" / ("instances_" + split + ".json"), std::vector<uint8_t>(text.begin(), text.end()));
  counts.objects += out.objects;
  counts.crowd_regions += out.crowds;
}

void validate(const CocoObjectsOptions& options) {
  auto in_range = [](double value, double low, double high, const char* field) {
    if (!(value >= low && value <= high))
      fail(field, "expected " + std::to_string(low) + ".." + std::to_string(high) + ", got " + std::to_string(value));
  };
  in_range(options.train_images, 1, 10'000'000, "train_images");
  in_range(options.val_images, 1, 10'000'000, "val_images");
  in_range(options.min_image_size, 32, 4096, "min_image_size");
  in_range(options.max_image_size, options.min_image_size, 4096, "max_image_size");
  in_range(options.min_objects, 0, 100, "min_objects");
  in_range(options.max_objects, options.min_objects, 100, "max_objects");
  in_range(options.min_object_size, 4, options.min_image_size, "min_object_size");
  in_range(options.max_object_size, options.min_object_size, 4096, "max_object_size");
  in_range(options.crowd_fraction, 0, 1, "crowd_fraction");
  in_range(options.empty_fraction, 0, 1, "empty_fraction");
  if (options.classes.empty()) fail("classes", "expected at least one Fashion-MNIST class");
  for (int fashion_class : options.classes) in_range(fashion_class, 0, 9, "classes");
  for (size_t i = 0; i < options.classes.size(); ++i)
    if (std::count(options.classes.begin(), options.classes.end(), options.classes[i]) > 1)
      fail("classes", "class " + std::to_string(options.classes[i]) + " is listed twice");
}

}  // namespace

int64_t fashion_category_id(int fashion_class) { return 2 * fashion_class + 1; }
const char* fashion_category_name(int fashion_class) { return kFashionNames[fashion_class]; }

std::vector<std::vector<double>> trace_polygons(const std::vector<uint8_t>& mask, int width, int height, int x0, int y0) {
  // Directed pixel edges with the inside on the right (y grows downwards): direction 0 east, 1 south, 2 west,
  // 3 north. Edges start at grid vertices (x, y), x in 0..width, y in 0..height.
  const int columns = width + 1;
  auto inside = [&](int x, int y) { return x >= 0 && y >= 0 && x < width && y < height && mask[size_t(y) * width + x]; };
  constexpr int kDx[4] = {1, 0, -1, 0};
  constexpr int kDy[4] = {0, 1, 0, -1};
  // edges[vertex * 4 + direction]: 1 when that edge exists, 2 once it is traced.
  std::vector<uint8_t> edges(size_t(columns) * (height + 1) * 4, 0);
  auto edge = [&](int x, int y, int direction) -> uint8_t& { return edges[(size_t(y) * columns + x) * 4 + direction]; };
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      if (!inside(x, y)) continue;
      if (!inside(x, y - 1)) edge(x, y, 0) = 1;          // top, eastwards
      if (!inside(x + 1, y)) edge(x + 1, y, 1) = 1;      // right, southwards
      if (!inside(x, y + 1)) edge(x + 1, y + 1, 2) = 1;  // bottom, westwards
      if (!inside(x - 1, y)) edge(x, y + 1, 3) = 1;      // left, northwards
    }
  std::vector<std::vector<double>> polygons;
  for (size_t start = 0; start < edges.size(); ++start) {
    if (edges[start] != 1) continue;
    int x = static_cast<int>((start / 4) % columns), y = static_cast<int>((start / 4) / columns);
    int direction = static_cast<int>(start % 4);
    std::vector<double> polygon;
    int previous = -1;
    while (edge(x, y, direction) == 1) {
      edge(x, y, direction) = 2;
      if (direction != previous) {
        polygon.push_back(x + x0);
        polygon.push_back(y + y0);
      }
      previous = direction;
      x += kDx[direction];
      y += kDy[direction];
      // Right turn first: where two parts touch only at a corner they stay separate outlines, so the parts
      // are 4-connected and the background 8-connected, as hole filling assumed. The choice looks at every
      // edge, traced or not, so an outline closes where it began.
      for (int turn : {1, 0, 3}) {
        direction = (previous + turn) % 4;
        if (edge(x, y, direction)) break;
      }
    }
    polygons.push_back(std::move(polygon));
  }
  return polygons;
}

CocoObjectsCounts make_coco_objects_dataset(const std::string& out_dir, const CocoObjectsOptions& options) {
  validate(options);
  const FashionItems train_items = load_fashion(options.fashion_mnist_dir, "train");
  const FashionItems val_items = load_fashion(options.fashion_mnist_dir, "t10k");
  const std::vector<Texture> textures = load_textures(options.texture_dir);
  CocoObjectsCounts counts;
  counts.train_images = options.train_images;
  counts.val_images = options.val_images;
  write_new_dataset_directory(out_dir, [&](const fs::path& root) {
    write_split(root, "train2017", options.train_images, 1, kTrainStream, options, train_items, textures, counts);
    write_split(root, "val2017", options.val_images, 1'000'000, kValStream, options, val_items, textures, counts);
  });
  return counts;
}

}  // namespace trainbench::data
