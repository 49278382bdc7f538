#pragma once
// Image file decoding for the ImageNet-style workloads: JPEG (TurboJPEG) and PNG (libpng) to RGB8.
// The format is taken from the file's magic bytes, never from its extension: ImageNet itself holds a PNG
// named .JPEG and a few dozen CMYK JPEGs, and both must decode to correct RGB.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace trainbench::data {

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // height * width * 3 bytes, row-major, interleaved RGB
};

// Decodes a JPEG or PNG file. Throws Error naming `path` when the file cannot be read, is neither JPEG
// nor PNG, or is truncated/corrupt (libjpeg's "premature end" warnings count as errors, not as images).
Image decode_image_file(const std::string& path);

// Same, from memory; `name_for_errors` is what error messages call the data (normally its path).
Image decode_image(const uint8_t* bytes, size_t size, const std::string& name_for_errors);

// Encoders for the dataset generator and for test fixtures.
std::vector<uint8_t> encode_jpeg(const Image& image, int quality);

// Writes a 4-component JPEG the way Adobe applications do: `ink` holds conventional CMYK ink amounts
// (height*width*4 bytes, 0 = no ink, 255 = full ink) and the file stores them inverted with an Adobe
// APP14 marker. decode_image turns such files back into the intended colours.
std::vector<uint8_t> encode_jpeg_cmyk(const std::vector<uint8_t>& ink, int width, int height, int quality);

std::vector<uint8_t> encode_png(const Image& image);

}  // namespace trainbench::data
