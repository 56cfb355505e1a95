#pragma once
// UTF-8 as RFC 3629 defines it: no overlong forms, no surrogates (U+D800..U+DFFF), nothing
// above U+10FFFF, no sequence cut short. The texts bitsim reads (a prompt, eval's text) must
// be UTF-8; a byte that is not is named with its offset.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bitsim {

// The offset of the first byte that does not begin a well-formed sequence (a sequence cut
// short by the end of `s` counts as ill-formed at its first byte); nullopt if `s` is UTF-8.
std::optional<size_t> first_invalid_utf8(std::string_view s);

// Throws bitsim::Error "WHAT: byte offset N (0xBB) is not UTF-8" (N counted from `offset`,
// the position of `s` in a longer text).
void check_utf8(std::string_view s, const std::string& what, uint64_t offset = 0);

}  // namespace bitsim
