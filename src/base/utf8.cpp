#include "base/utf8.h"

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim {

std::optional<size_t> first_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = uint8_t(s[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    // The sequence's length and the range its second byte must lie in (RFC 3629 section 4).
    size_t len = 0;
    uint8_t lo = 0x80, hi = 0xbf;
    if (b0 >= 0xc2 && b0 <= 0xdf) len = 2;
    else if (b0 == 0xe0) len = 3, lo = 0xa0;
    else if (b0 >= 0xe1 && b0 <= 0xec) len = 3;
    else if (b0 == 0xed) len = 3, hi = 0x9f;
    else if (b0 >= 0xee && b0 <= 0xef) len = 3;
    else if (b0 == 0xf0) len = 4, lo = 0x90;
    else if (b0 >= 0xf1 && b0 <= 0xf3) len = 4;
    else if (b0 == 0xf4) len = 4, hi = 0x8f;
    else return i;
    if (i + len > s.size()) return i;
    const auto b1 = uint8_t(s[i + 1]);
    if (b1 < lo || b1 > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if ((uint8_t(s[i + k]) & 0xc0) != 0x80) return i;
    i += len;
  }
  return std::nullopt;
}

void check_utf8(std::string_view s, const std::string& what, uint64_t offset) {
  if (const auto bad = first_invalid_utf8(s))
    throw Error(fmt::format("{}: byte offset {} (0x{:02x}) is not UTF-8", what, offset + *bad, uint8_t(s[*bad])));
}

}  // namespace bitsim
