// libFuzzer target: any bytes as an image file (JPEG or PNG by magic bytes, through TurboJPEG and libpng).
// The result is an Error naming the file or an image whose buffer matches its size.
#include <cstdlib>

#include "data/image_decode.h"
#include "fuzz_entry.h"
#include "util/error.h"

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  try {
    const trainbench::data::Image image = trainbench::data::decode_image(data, size, "fuzz.JPEG");
    if (image.width <= 0 || image.height <= 0 ||
        image.rgb.size() != static_cast<size_t>(image.width) * static_cast<size_t>(image.height) * 3)
      std::abort();
  } catch (const trainbench::Error&) {
  }
  return 0;
}
