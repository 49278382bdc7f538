#include "data/image_decode.h"

#include <png.h>
#include <turbojpeg.h>

#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

#include "util/error.h"

namespace trainbench::data {
namespace {

// Corrupt headers can claim absurd sizes; refuse them instead of trying to allocate gigabytes.
constexpr int kMaxSide = 1 << 16;
constexpr int64_t kMaxPixels = int64_t{1} << 28;

void check_dimensions(int width, int height, const std::string& name) {
  if (width <= 0 || height <= 0 || width > kMaxSide || height > kMaxSide ||
      int64_t{width} * height > kMaxPixels)
    fail(name, "implausible image size " + std::to_string(width) + "x" + std::to_string(height) +
                   " (corrupt header?)");
}

bool is_jpeg(const uint8_t* bytes, size_t size) {
  return size >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
}

bool is_png(const uint8_t* bytes, size_t size) {
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return size >= 8 && std::memcmp(bytes, kSignature, 8) == 0;
}

// ---------------------------------------------------------------------------------------------- JPEG

// TurboJPEG handles are expensive to create and not thread-safe, so each thread keeps its own. A handle
// that reported an error is thrown away: libjpeg-turbo 2.1 leaves it mid-header after a failed
// tjDecompressHeader3, and the next, valid file decoded with it fails with the old error.
class ThreadHandle {
 public:
  explicit ThreadHandle(tjhandle (*create)()) : create_(create) {}
  ~ThreadHandle() { discard(); }
  ThreadHandle(const ThreadHandle&) = delete;
  ThreadHandle& operator=(const ThreadHandle&) = delete;

  tjhandle get() {
    if (!handle_) handle_ = create_();
    if (!handle_) fail("TurboJPEG", std::string("cannot create a codec handle: ") + tjGetErrorStr2(nullptr));
    return handle_;
  }
  // The handle's error message, after which the handle is discarded.
  std::string take_error() {
    std::string message = tjGetErrorStr2(handle_);
    discard();
    return message;
  }

 private:
  void discard() {
    if (handle_) tjDestroy(handle_);
    handle_ = nullptr;
  }
  tjhandle (*create_)();
  tjhandle handle_ = nullptr;
};

thread_local ThreadHandle decompressor(tjInitDecompress);
thread_local ThreadHandle compressor(tjInitCompress);

// Looks for the APP14 "Adobe" segment before the first scan. Adobe applications store CMYK inverted
// (0 = full ink) and mark such files with it; libjpeg hands the stored values through unchanged.
bool has_adobe_marker(const uint8_t* bytes, size_t size) {
  size_t pos = 2;  // after SOI
  while (pos + 4 <= size) {
    if (bytes[pos] != 0xFF) return false;
    const uint8_t marker = bytes[pos + 1];
    if (marker == 0xFF) {  // fill byte
      ++pos;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return false;  // start of scan / end of image
    const size_t length = (size_t{bytes[pos + 2]} << 8) | bytes[pos + 3];
    if (marker == 0xEE && length >= 7 && pos + 9 <= size && std::memcmp(bytes + pos + 4, "Adobe", 5) == 0)
      return true;
    pos += 2 + length;
  }
  return false;
}

// libjpeg reports some corruption only as a warning. Data after the last scan ("extraneous bytes before
// marker 0xd9", i.e. before end-of-image) leaves a complete image and is common in real photo collections;
// every other warning (above all "Premature end of JPEG file") means pixels are missing or wrong.
bool is_harmless_jpeg_warning(const std::string& message) {
  return message.find("extraneous bytes before marker 0xd9") != std::string::npos;
}

// Converts decoded 4-component pixels to RGB with the naive formula R = (1-C)(1-K) etc. (the same one
// PIL uses; real colour management needs an ICC profile, which is out of scope). `inverted` selects the
// Adobe convention, where the stored value is 255 - ink, so R = stored_C * stored_K / 255.
void cmyk_to_rgb(const uint8_t* cmyk, size_t pixels, bool inverted, uint8_t* rgb) {
  for (size_t i = 0; i < pixels; ++i, cmyk += 4, rgb += 3) {
    const unsigned flip = inverted ? 0 : 255;
    const unsigned k = cmyk[3] ^ flip;
    for (int c = 0; c < 3; ++c) rgb[c] = static_cast<uint8_t>(((cmyk[c] ^ flip) * k + 127) / 255);
  }
}

Image decode_jpeg(const uint8_t* bytes, size_t size, const std::string& name) {
  tjhandle handle = decompressor.get();
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle, bytes, static_cast<unsigned long>(size), &width, &height, &subsampling,
                          &colorspace) != 0)
    fail(name, "corrupt JPEG header: " + decompressor.take_error());
  check_dimensions(width, height, name);

  // TurboJPEG refuses CMYK/YCCK -> RGB ("Unsupported color conversion request"), so decode to CMYK.
  const bool four_components = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  Image image;
  image.width = width;
  image.height = height;
  image.rgb.resize(size_t(width) * height * 3);
  std::vector<uint8_t> cmyk;
  if (four_components) cmyk.resize(size_t(width) * height * 4);
  uint8_t* destination = four_components ? cmyk.data() : image.rgb.data();
  const int pixel_format = four_components ? TJPF_CMYK : TJPF_RGB;
  if (tjDecompress2(handle, bytes, static_cast<unsigned long>(size), destination, width, 0, height, pixel_format,
                    0) != 0) {
    const bool warning = tjGetErrorCode(handle) == TJERR_WARNING;
    const std::string message = decompressor.take_error();
    if (!warning || !is_harmless_jpeg_warning(message)) fail(name, "corrupt or truncated JPEG: " + message);
  }
  if (four_components)
    cmyk_to_rgb(cmyk.data(), size_t(width) * height, has_adobe_marker(bytes, size), image.rgb.data());
  return image;
}

std::vector<uint8_t> compress(const uint8_t* pixels, int width, int height, int pixel_format, int quality,
                              const char* what) {
  if (quality < 1 || quality > 100) fail("jpeg_quality", "expected 1..100, got " + std::to_string(quality));
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  if (tjCompress2(compressor.get(), pixels, width, 0, height, pixel_format, &buffer, &size, TJSAMP_420, quality,
                  0) != 0) {
    const std::string message = compressor.take_error();
    tjFree(buffer);
    fail(what, "JPEG compression failed: " + message);
  }
  std::vector<uint8_t> jpeg(buffer, buffer + size);
  tjFree(buffer);
  return jpeg;
}

// ----------------------------------------------------------------------------------------------- PNG

struct PngReader {
  const uint8_t* bytes;
  size_t size;
  size_t offset;
  char message[200];
};

void read_png_bytes(png_structp png, png_bytep out, png_size_t length) {
  auto* reader = static_cast<PngReader*>(png_get_io_ptr(png));
  if (length > reader->size - reader->offset) png_error(png, "unexpected end of file");
  std::memcpy(out, reader->bytes + reader->offset, length);
  reader->offset += length;
}

// libpng reports errors through a callback that must not return; C++ exceptions must not cross its C
// frames, so the message is stored and control goes back to the setjmp in decode_png.
void on_png_error(png_structp png, png_const_charp message) {
  auto* reader = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(reader->message, sizeof(reader->message), "%s", message);
  png_longjmp(png, 1);
}

void on_png_warning(png_structp, png_const_charp) {}  // e.g. "iCCP: known incorrect sRGB profile"

Image decode_png(const uint8_t* bytes, size_t size, const std::string& name) {
  PngReader reader{bytes, size, 0, {}};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, on_png_error, on_png_warning);
  if (!png) fail(name, "cannot create a PNG decoder");
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    fail(name, "cannot create a PNG decoder");
  }
  // C++ objects are only changed between the two setjmp phases, never between a setjmp and its longjmp.
  Image image;
  std::vector<png_bytep> rows;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    fail(name, std::string("corrupt or truncated PNG: ") + reader.message);
  }
  png_set_read_fn(png, &reader, read_png_bytes);
  png_read_info(png, info);
  // Everything becomes 8-bit RGB: palette and low-bit grey expand, 16-bit keeps its high byte, grey is
  // replicated, alpha (including tRNS transparency) is dropped. No gamma correction is applied.
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const auto width = static_cast<int>(png_get_image_width(png, info));
  const auto height = static_cast<int>(png_get_image_height(png, info));
  const bool rgb8 = png_get_rowbytes(png, info) == size_t(width) * 3;

  if (width <= 0 || height <= 0 || width > kMaxSide || height > kMaxSide || int64_t{width} * height > kMaxPixels ||
      !rgb8) {
    png_destroy_read_struct(&png, &info, nullptr);
    check_dimensions(width, height, name);
    fail(name, "unsupported PNG pixel layout (could not convert to 8-bit RGB)");
  }
  image.width = width;
  image.height = height;
  image.rgb.resize(size_t(width) * height * 3);
  rows.resize(height);
  for (int y = 0; y < height; ++y) rows[y] = image.rgb.data() + size_t(y) * width * 3;

  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    fail(name, std::string("corrupt or truncated PNG: ") + reader.message);
  }
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return image;
}

void check_image(const Image& image, const char* what) {
  if (image.width <= 0 || image.height <= 0 || image.rgb.size() != size_t(image.width) * image.height * 3)
    fail(what, "image buffer does not hold width*height*3 bytes");
}

}  // namespace

Image decode_image(const uint8_t* bytes, size_t size, const std::string& name_for_errors) {
  if (is_jpeg(bytes, size)) return decode_jpeg(bytes, size, name_for_errors);
  if (is_png(bytes, size)) return decode_png(bytes, size, name_for_errors);
  if (size == 0) fail(name_for_errors, "empty file; expected a JPEG or PNG image");
  fail(name_for_errors, "unrecognised image format; expected JPEG (starts FF D8 FF) or PNG (starts 89 'PNG')");
}

Image decode_image_file(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!file) fail(path, std::string("cannot open image: ") + std::strerror(errno));
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof(chunk), file.get())) > 0) bytes.insert(bytes.end(), chunk, chunk + got);
  if (std::ferror(file.get())) fail(path, std::string("cannot read image: ") + std::strerror(errno));
  return decode_image(bytes.data(), bytes.size(), path);
}

std::vector<uint8_t> encode_jpeg(const Image& image, int quality) {
  check_image(image, "encode_jpeg");
  return compress(image.rgb.data(), image.width, image.height, TJPF_RGB, quality, "encode_jpeg");
}

std::vector<uint8_t> encode_jpeg_cmyk(const std::vector<uint8_t>& ink, int width, int height, int quality) {
  if (width <= 0 || height <= 0 || ink.size() != size_t(width) * height * 4)
    fail("encode_jpeg_cmyk", "ink buffer does not hold width*height*4 bytes");
  // TurboJPEG writes an Adobe-marked YCCK file and stores the bytes it is given, so invert them first.
  std::vector<uint8_t> stored(ink.size());
  for (size_t i = 0; i < ink.size(); ++i) stored[i] = static_cast<uint8_t>(255 - ink[i]);
  return compress(stored.data(), width, height, TJPF_CMYK, quality, "encode_jpeg_cmyk");
}

std::vector<uint8_t> encode_png(const Image& image) {
  check_image(image, "encode_png");
  png_image description;
  std::memset(&description, 0, sizeof(description));
  description.version = PNG_IMAGE_VERSION;
  description.width = static_cast<png_uint_32>(image.width);
  description.height = static_cast<png_uint_32>(image.height);
  description.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&description, nullptr, &size, 0, image.rgb.data(), 0, nullptr))
    fail("encode_png", std::string("PNG encoding failed: ") + description.message);
  std::vector<uint8_t> png(size);
  if (!png_image_write_to_memory(&description, png.data(), &size, 0, image.rgb.data(), 0, nullptr))
    fail("encode_png", std::string("PNG encoding failed: ") + description.message);
  png.resize(size);
  return png;
}

}  // namespace trainbench::data
