#include "util/printable.h"

#include <cstdio>

namespace trainbench {

namespace {

// Length of the valid UTF-8 sequence starting at text[i], or 0 when the bytes there are not one.
size_t utf8_sequence_length(const std::string& text, size_t i) {
  const auto byte = [&](size_t at) { return static_cast<unsigned char>(text[at]); };
  const unsigned char lead = byte(i);
  size_t length = 0;
  unsigned min_code = 0;
  unsigned code = 0;
  if (lead >= 0xC2 && lead <= 0xDF)
    length = 2, min_code = 0x80, code = lead & 0x1F;
  else if (lead >= 0xE0 && lead <= 0xEF)
    length = 3, min_code = 0x800, code = lead & 0x0F;
  else if (lead >= 0xF0 && lead <= 0xF4)
    length = 4, min_code = 0x10000, code = lead & 0x07;
  else
    return 0;
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  const bool surrogate = code >= 0xD800 && code <= 0xDFFF;
  return code < min_code || code > 0x10FFFF || surrogate ? 0 : length;
}

}  // namespace

std::string printable(const std::string& text, size_t max_bytes) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (out.size() >= max_bytes) {
      out += "...";
      break;
    }
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
      ++i;
    } else if (const size_t length = c >= 0x80 ? utf8_sequence_length(text, i) : 0) {
      out.append(text, i, length);
      i += length;
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02X", c);
      out += escaped;
      ++i;
    }
  }
  return out;
}

}  // namespace trainbench
