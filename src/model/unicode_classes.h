#pragma once
// The Unicode character classes that the BPE tokenizer's pre-tokenizer split needs
// (docs/tokenizers.md): \p{L} (general category L: Lu Ll Lt Lm Lo), \p{N} (N: Nd Nl No) and
// \s as Oniguruma takes it for Unicode text (the White_Space property). The L and N tables
// are generated (tools/gen_unicode_classes.py -> unicode_classes.cpp).

namespace bitsim::model {

const char* unicode_classes_version();  // the Unicode version of the L and N tables
bool is_unicode_letter(char32_t c);
bool is_unicode_number(char32_t c);

// White_Space: U+0009..000D, U+0020, U+0085, U+00A0, U+1680, U+2000..200A, U+2028, U+2029,
// U+202F, U+205F, U+3000.
constexpr bool is_unicode_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace bitsim::model
