// UTF-8 validation (RFC 3629): every class of ill-formed sequence is named at its offset.
#include "base/utf8.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"

namespace {

using namespace bitsim;

TEST(Utf8, WellFormedTextPasses) {
  EXPECT_EQ(first_invalid_utf8(""), std::nullopt);
  EXPECT_EQ(first_invalid_utf8("plain ASCII\n\t"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xed\x9f\xbf \xf4\x8f\xbf\xbf"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8(std::string("a\0b", 3)), std::nullopt);  // NUL is a character
}

TEST(Utf8, EachIllFormedClassIsFoundAtItsFirstByte) {
  const std::pair<std::string, size_t> cases[] = {
      {"ab\xff", 2},               // never valid
      {"a\x80", 1},                // a stray continuation byte
      {"\xc0\xaf", 0},             // overlong '/'
      {"\xc1\xbf", 0},             // overlong
      {"\xe0\x80\xaf", 0},         // overlong 3-byte
      {"\xf0\x80\x80\xaf", 0},     // overlong 4-byte
      {"x\xed\xa0\x80", 1},        // a surrogate U+D800
      {"\xf4\x90\x80\x80", 0},     // above U+10FFFF
      {"\xf5\x80\x80\x80", 0},     // never valid lead
      {"ok \xe2\x82", 3},          // cut short by the end
      {"\xe2\x28\xa1", 0},         // a bad second byte
      {"\xf0\x9f\x98 ", 0},        // a bad fourth byte
  };
  for (const auto& [s, at] : cases) EXPECT_EQ(first_invalid_utf8(s), at) << s;
}

TEST(Utf8, TheErrorNamesTheTextAndTheOffset) {
  try {
    check_utf8("abc\xff", "text file t.txt", 100);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "text file t.txt: byte offset 103 (0xff) is not UTF-8");
  }
}

}  // namespace
