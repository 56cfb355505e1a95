// SHA-256 against FIPS 180-4's examples, however the bytes are split, and of a file.
#include "base/sha256.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "support/temp_dir.h"

namespace {

using namespace bitsim;

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, TheDigestDoesNotDependOnHowTheBytesAreSplit) {
  std::string msg;
  for (int i = 0; i < 1000; ++i) msg.push_back(char(i * 37 + 11));
  const std::string whole = sha256_hex(msg);
  for (size_t step : {1u, 3u, 55u, 56u, 63u, 64u, 65u, 200u}) {
    Sha256 h;
    for (size_t i = 0; i < msg.size(); i += step) h.update(std::string_view(msg).substr(i, step));
    EXPECT_EQ(h.hex(), whole) << "step " << step;
    EXPECT_EQ(h.hex(), whole) << "hex() leaves the object usable";
  }
}

TEST(Sha256, OfAFileInBlocks) {
  test::MadeTempDir d;
  const auto f = d.path / "f";
  std::ofstream(f, std::ios::binary) << std::string(200000, 'a');
  EXPECT_EQ(sha256_file(f, "checkpoint"), sha256_hex(std::string(200000, 'a')));
  try {
    sha256_file(d.path / "missing", "checkpoint");
    ADD_FAILURE() << "a missing file was hashed";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint " + (d.path / "missing").string()), std::string::npos) << e.what();
  }
}

}  // namespace
