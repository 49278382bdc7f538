#include "data/generators/image_classes.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "data/generators/dataset_directory.h"
#include "data/image_decode.h"
#include "data/random.h"
#include "util/error.h"

namespace trainbench::data {
namespace {

namespace fs = std::filesystem;

enum class Family {
  Disk,
  Ring,
  Square,
  Triangle,
  Plus,
  HorizontalStripes,
  VerticalStripes,
  Checkerboard,
  DiagonalStripes,
  Star,
};
constexpr int kFamilyCount = 10;

// Streams of the dataset seed, kept apart so e.g. the val order never shifts when image drawing changes.
constexpr uint64_t kTrainStream = 1;
constexpr uint64_t kValStream = 2;
constexpr uint64_t kValOrderStream = 3;

constexpr double kPi = 3.14159265358979323846;
constexpr double kDegree = kPi / 180.0;

using Colour = std::array<float, 3>;

// The class's figure, or Clutter: small ellipses scattered over every image, whatever its class, so
// that "has a small round blob" cannot stand in for recognising the class's shape.
enum class Kind { Figure, Clutter };

// One layer of a picture. Lengths are in pixels, angles in radians.
struct Shape {
  Kind kind = Kind::Figure;
  Family family = Family::Disk;
  float center_x = 0, center_y = 0;
  float radius = 0;  // outer size; clutter: the ellipse's long semi-axis
  float cos_angle = 1, sin_angle = 0;
  float period = 0, phase_x = 0, phase_y = 0, duty = 0.5f;  // patterns
  // ring: inner/outer radius; plus: arm half-width/radius; star: inner/outer radius;
  // clutter: short/long semi-axis
  float detail = 0;
  Colour colour{};
  float reach = 0;  // no pixel farther than this from the centre (in x or y) is inside; 0 = unbounded
};

// Everything random about one image.
struct Scene {
  std::vector<Shape> layers;  // painted in order over the background
  Colour background{};
  Colour gradient{};  // colour change across the image along (gradient_x, gradient_y)
  float gradient_x = 0, gradient_y = 0;
  struct Wave {
    float frequency_x, frequency_y, phase, amplitude;
  };
  std::array<Wave, 2> waves{};  // soft brightness undulations of the whole picture
  float blur = 0;               // 0 = sharp, 1 = full 3x3 binomial blur
  float noise = 0;              // standard deviation of per-pixel noise
};

bool is_pattern(Family family) {
  return family == Family::HorizontalStripes || family == Family::VerticalStripes ||
         family == Family::Checkerboard || family == Family::DiagonalStripes;
}

float fraction(float value) { return value - std::floor(value); }

Colour random_colour(Rng& rng) {
  Colour colour;
  for (auto& channel : colour) channel = static_cast<float>(rng.uniform(16, 240));
  return colour;
}

// Figure and background colours, just far enough apart to tell them apart (low-contrast images are
// meant to be hard). The rule is symmetric in the pair, so figure and background colours have the
// same distribution and every class has the same expected mean colour.
void draw_colours(Rng& rng, Colour& first, Colour& second) {
  while (true) {
    first = random_colour(rng);
    second = random_colour(rng);
    float distance_squared = 0;
    for (int c = 0; c < 3; ++c) distance_squared += (first[c] - second[c]) * (first[c] - second[c]);
    if (distance_squared >= 40.0f * 40.0f) return;
  }
}

void set_angle(Shape& shape, double angle) {
  shape.cos_angle = static_cast<float>(std::cos(angle));
  shape.sin_angle = static_cast<float>(std::sin(angle));
}

// Parameter ranges are wide on purpose: thick rings approach disks, wide-armed pluses approach squares,
// fat stars approach pentagons, and shapes may sit off-centre, so a crop can cut them.
Shape draw_figure(Family family, double n, Rng& rng) {
  Shape figure;
  figure.family = family;
  figure.center_x = static_cast<float>(n * rng.uniform(0.3, 0.7));
  figure.center_y = static_cast<float>(n * rng.uniform(0.3, 0.7));
  figure.radius = static_cast<float>(n * rng.uniform(0.16, 0.36));
  figure.period = static_cast<float>(n * rng.uniform(0.1, 0.25));
  figure.phase_x = static_cast<float>(rng.uniform());
  figure.phase_y = static_cast<float>(rng.uniform());
  figure.duty = static_cast<float>(rng.uniform(0.35, 0.65));
  double angle = 0;
  switch (family) {
    case Family::Disk:
      break;
    case Family::Ring:
      figure.detail = static_cast<float>(rng.uniform(0.3, 0.7));
      break;
    case Family::Square:
    case Family::Plus:
      angle = rng.uniform(-20, 20) * kDegree;
      figure.detail = static_cast<float>(rng.uniform(0.22, 0.42));
      break;
    case Family::HorizontalStripes:
    case Family::VerticalStripes:
    case Family::Checkerboard:
      angle = rng.uniform(-20, 20) * kDegree;
      break;
    case Family::DiagonalStripes:  // both diagonals, so a horizontal flip keeps the class
      angle = (rng.uniform() < 0.5 ? 45 : -45) * kDegree + rng.uniform(-18, 18) * kDegree;
      break;
    case Family::Triangle:
    case Family::Star:
      angle = rng.uniform(0, 360) * kDegree;
      figure.detail = static_cast<float>(rng.uniform(0.4, 0.6));
      break;
  }
  set_angle(figure, angle);
  // The triangle's circumradius (1.15 r) is the largest extent of any figure; patterns fill the image.
  if (!is_pattern(family)) figure.reach = 1.2f * figure.radius + 1;
  return figure;
}

Shape draw_clutter(double n, Rng& rng) {
  Shape blob;
  blob.kind = Kind::Clutter;
  blob.center_x = static_cast<float>(n * rng.uniform());
  blob.center_y = static_cast<float>(n * rng.uniform());
  blob.radius = static_cast<float>(n * rng.uniform(0.03, 0.09));
  blob.detail = static_cast<float>(rng.uniform(0.3, 1.0));
  set_angle(blob, rng.uniform(0, kPi));
  blob.colour = random_colour(rng);
  blob.reach = blob.radius + 1;
  return blob;
}

Scene draw_scene(Family family, int size, Rng& rng) {
  const double n = size;
  Scene scene;
  Shape figure = draw_figure(family, n, rng);
  draw_colours(rng, figure.colour, scene.background);
  const int clutter = static_cast<int>(rng.uniform_int(0, 4));
  for (int i = 0; i < clutter; ++i) scene.layers.push_back(draw_clutter(n, rng));
  // The figure goes in at a random depth: some clutter lies behind it, some on top.
  scene.layers.insert(scene.layers.begin() + rng.uniform_int(0, clutter), figure);

  for (auto& channel : scene.gradient) channel = static_cast<float>(rng.uniform(-40, 40));
  const double gradient_angle = rng.uniform(0, 2 * kPi);
  scene.gradient_x = static_cast<float>(std::cos(gradient_angle) / n);
  scene.gradient_y = static_cast<float>(std::sin(gradient_angle) / n);
  for (auto& wave : scene.waves) {
    const double direction = rng.uniform(0, 2 * kPi);
    const double cycles_per_image = rng.uniform(0.5, 3.0);
    wave.frequency_x = static_cast<float>(2 * kPi * cycles_per_image * std::cos(direction) / n);
    wave.frequency_y = static_cast<float>(2 * kPi * cycles_per_image * std::sin(direction) / n);
    wave.phase = static_cast<float>(rng.uniform(0, 2 * kPi));
    wave.amplitude = static_cast<float>(rng.uniform(0, 16));
  }
  scene.blur = static_cast<float>(rng.uniform());
  scene.noise = static_cast<float>(rng.uniform(2, 16));
  return scene;
}

// Whether point (x, y) (pixel units) belongs to the shape.
bool inside(const Shape& s, float x, float y) {
  const float dx = x - s.center_x, dy = y - s.center_y;
  const float u = s.cos_angle * dx + s.sin_angle * dy;  // the shape's own frame
  const float v = -s.sin_angle * dx + s.cos_angle * dy;
  const float r = s.radius;
  if (s.kind == Kind::Clutter) {
    const float short_axis = r * s.detail;
    return u * u * short_axis * short_axis + v * v * r * r < r * r * short_axis * short_axis;
  }
  switch (s.family) {
    case Family::Disk:
      return u * u + v * v < r * r;
    case Family::Ring: {
      const float d2 = u * u + v * v;
      return d2 < r * r && d2 > r * r * s.detail * s.detail;
    }
    case Family::Square:
      return std::max(std::abs(u), std::abs(v)) < 0.8f * r;
    case Family::Plus: {
      const float arm = r * s.detail;
      return (std::abs(u) < r && std::abs(v) < arm) || (std::abs(v) < r && std::abs(u) < arm);
    }
    case Family::Triangle: {
      // Equilateral, circumradius 1.15 r: inside all three edges, whose normals point at 30, 150, 270 deg.
      const float inradius = 0.5f * 1.15f * r;
      constexpr float kCos30 = 0.8660254f;
      return 0.5f * v + kCos30 * u < inradius && 0.5f * v - kCos30 * u < inradius && -v < inradius;
    }
    case Family::Star: {
      // Five points: fold the angle into the half-sector between a tip (angle 0, radius r) and the
      // next inner corner (36 deg, radius detail * r), then test against the edge joining them.
      const float rho = std::sqrt(u * u + v * v);
      if (rho >= r) return false;
      constexpr float kSector = static_cast<float>(2 * kPi / 5);
      float phi = std::atan2(v, u);
      phi = phi - kSector * std::floor(phi / kSector);
      if (phi > kSector / 2) phi = kSector - phi;
      const float px = rho * std::cos(phi), py = rho * std::sin(phi);
      const float inner = s.detail * r;
      const float ex = inner * 0.809017f - r, ey = inner * 0.5877853f;  // tip -> inner corner
      return ex * py - ey * (px - r) > 0;  // same side of that edge as the centre
    }
    case Family::HorizontalStripes:
    case Family::DiagonalStripes:
      return fraction(v / s.period + s.phase_y) < s.duty;
    case Family::VerticalStripes:
      return fraction(u / s.period + s.phase_x) < s.duty;
    case Family::Checkerboard: {
      const auto cell = static_cast<int64_t>(std::floor(u / s.period + s.phase_x)) +
                        static_cast<int64_t>(std::floor(v / s.period + s.phase_y));
      return (cell & 1) != 0;
    }
  }
  return false;
}

// Approximately normal noise from four uniforms (Irwin-Hall), scaled to unit variance.
float standard_noise(Rng& rng) {
  const double sum = rng.uniform() + rng.uniform() + rng.uniform() + rng.uniform();
  return static_cast<float>((sum - 2.0) * std::sqrt(3.0));
}

struct RenderedImage {
  Image image;
  std::array<int, 4> box{};  // x_min, y_min, x_max, y_max of the figure, inclusive
};

RenderedImage render(Family family, int size, Rng& rng) {
  const Scene scene = draw_scene(family, size, rng);
  const size_t pixels = size_t(size) * size;
  std::vector<float> picture(pixels * 3);
  int x_min = size, y_min = size, x_max = -1, y_max = -1;
  for (int y = 0; y < size; ++y) {
    for (int x = 0; x < size; ++x) {
      Colour colour = scene.background;
      for (const Shape& shape : scene.layers) {
        if (shape.reach > 0 &&
            (std::abs(x + 0.5f - shape.center_x) > shape.reach || std::abs(y + 0.5f - shape.center_y) > shape.reach))
          continue;
        // 2x2 supersampling for antialiased edges.
        int hits = 0;
        for (float oy : {0.25f, 0.75f})
          for (float ox : {0.25f, 0.75f}) hits += inside(shape, x + ox, y + oy);
        const float coverage = hits * 0.25f;
        for (int c = 0; c < 3; ++c) colour[c] += coverage * (shape.colour[c] - colour[c]);
        if (shape.kind == Kind::Figure && coverage >= 0.5f) {
          x_min = std::min(x_min, x);
          y_min = std::min(y_min, y);
          x_max = std::max(x_max, x);
          y_max = std::max(y_max, y);
        }
      }
      const float ramp = (x - 0.5f * size) * scene.gradient_x + (y - 0.5f * size) * scene.gradient_y;
      float shade = 0;
      for (const auto& wave : scene.waves)
        shade += wave.amplitude * std::sin(wave.frequency_x * x + wave.frequency_y * y + wave.phase);
      float* out = &picture[(size_t(y) * size + x) * 3];
      for (int c = 0; c < 3; ++c) out[c] = colour[c] + ramp * scene.gradient[c] + shade;
    }
  }

  // Partial 3x3 binomial blur (edges clamped), then noise, then quantisation.
  RenderedImage result;
  result.image.width = size;
  result.image.height = size;
  result.image.rgb.resize(pixels * 3);
  static constexpr float kBinomial[3] = {0.25f, 0.5f, 0.25f};
  for (int y = 0; y < size; ++y) {
    for (int x = 0; x < size; ++x) {
      for (int c = 0; c < 3; ++c) {
        float blurred = 0;
        for (int ky = -1; ky <= 1; ++ky) {
          const int sy = std::clamp(y + ky, 0, size - 1);
          for (int kx = -1; kx <= 1; ++kx) {
            const int sx = std::clamp(x + kx, 0, size - 1);
            blurred += kBinomial[ky + 1] * kBinomial[kx + 1] * picture[(size_t(sy) * size + sx) * 3 + c];
          }
        }
        const float sharp = picture[(size_t(y) * size + x) * 3 + c];
        const float value = sharp + scene.blur * (blurred - sharp) + scene.noise * standard_noise(rng);
        result.image.rgb[(size_t(y) * size + x) * 3 + c] =
            static_cast<uint8_t>(std::clamp(std::lround(value), 0L, 255L));
      }
    }
  }
  if (is_pattern(family) || x_max < 0)
    result.box = {0, 0, size - 1, size - 1};
  else
    result.box = {x_min, y_min, x_max, y_max};
  return result;
}

std::string wnid(int label) {
  char name[16];
  std::snprintf(name, sizeof(name), "n%08d", 90000000 + label);
  return name;
}

std::string val_image_id(int64_t number) {
  char name[48];
  std::snprintf(name, sizeof(name), "ILSVRC2012_val_%08lld", static_cast<long long>(number));
  return name;
}

void validate(const ImageClassesOptions& options) {
  auto in_range = [](int64_t value, int64_t low, int64_t high, const char* field) {
    if (value < low || value > high)
      fail(field, "expected " + std::to_string(low) + ".." + std::to_string(high) + ", got " + std::to_string(value));
  };
  in_range(options.classes, 1, kFamilyCount, "classes");
  in_range(options.train_per_class, 1, 10'000'000, "train_per_class");
  in_range(options.val_per_class, 1, 10'000'000, "val_per_class");
  in_range(options.image_size, 16, 4096, "image_size");
  in_range(options.jpeg_quality, 1, 100, "jpeg_quality");
  if (int64_t{options.classes} * options.val_per_class > 99'999'999)
    fail("val_per_class", "more val images than the 8-digit ILSVRC2012_val_ numbering allows");
}

// Runs job(0..count-1) on a few threads; the first exception stops the rest and is rethrown here.
template <typename Job>
void run_parallel(int64_t count, const Job& job) {
  const int threads = static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 8));
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int64_t i = next++; i < count && !failed; i = next++) {
        try {
          job(i);
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) error = std::current_exception();
          failed = true;
        }
      }
    });
  }
  for (auto& thread : pool) thread.join();
  if (error) std::rethrow_exception(error);
}

void generate_tree(const fs::path& root, const ImageClassesOptions& options) {
  const int size = options.image_size;
  std::vector<std::string> wnids;
  for (int label = 0; label < options.classes; ++label) {
    wnids.push_back(wnid(label));
    fs::create_directories(root / "train" / wnids.back());
  }
  fs::create_directories(root / "val");

  const int64_t train_count = int64_t{options.classes} * options.train_per_class;
  run_parallel(train_count, [&](int64_t job) {
    const int label = static_cast<int>(job / options.train_per_class);
    const int64_t number = job % options.train_per_class + 1;
    Rng rng(mix_seed(options.seed, kTrainStream, static_cast<uint64_t>(label), static_cast<uint64_t>(number)));
    const RenderedImage rendered = render(static_cast<Family>(label), size, rng);
    write_bytes(root / "train" / wnids[label] / (wnids[label] + "_" + std::to_string(number) + ".JPEG"),
                encode_jpeg(rendered.image, options.jpeg_quality));
  });

  // Val images are numbered in a seeded random class order, like the real validation set.
  const int64_t val_count = int64_t{options.classes} * options.val_per_class;
  std::vector<int> val_labels(val_count);
  for (int64_t i = 0; i < val_count; ++i) val_labels[i] = static_cast<int>(i % options.classes);
  Rng order_rng(mix_seed(options.seed, kValOrderStream));
  for (int64_t i = val_count - 1; i > 0; --i) std::swap(val_labels[i], val_labels[order_rng.below(i + 1)]);

  std::vector<std::string> solution_rows(val_count);
  run_parallel(val_count, [&](int64_t job) {
    const int label = val_labels[job];
    const std::string id = val_image_id(job + 1);
    Rng rng(mix_seed(options.seed, kValStream, static_cast<uint64_t>(job)));
    const RenderedImage rendered = render(static_cast<Family>(label), size, rng);
    write_bytes(root / "val" / (id + ".JPEG"), encode_jpeg(rendered.image, options.jpeg_quality));
    solution_rows[job] = id + "," + wnids[label] + " " + std::to_string(rendered.box[0]) + " " +
                         std::to_string(rendered.box[1]) + " " + std::to_string(rendered.box[2]) + " " +
                         std::to_string(rendered.box[3]) + "\n";
  });
  std::string csv = "ImageId,PredictionString\n";
  for (const auto& row : solution_rows) csv += row;
  write_bytes(root / "LOC_val_solution.csv", std::vector<uint8_t>(csv.begin(), csv.end()));
}

}  // namespace

ImageClassesCounts make_image_classification_dataset(const std::string& out_dir, const ImageClassesOptions& options) {
  validate(options);
  write_new_dataset_directory(out_dir, [&](const fs::path& staging) { generate_tree(staging, options); });
  ImageClassesCounts counts;
  counts.classes = options.classes;
  counts.train_images = int64_t{options.classes} * options.train_per_class;
  counts.val_images = int64_t{options.classes} * options.val_per_class;
  return counts;
}

}  // namespace trainbench::data
