#pragma once
// Damages a file in place, one byte (for the tests of the caches' checks).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>

namespace bitsim::test {

// Replaces the byte at `offset` of `file` by change(byte).
inline void edit_byte(const std::filesystem::path& file, uint64_t offset, const std::function<char(char)>& change) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  const auto at = std::streamoff(offset);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = change(c);
  f.seekp(at);
  f.write(&c, 1);
}

// XORs the byte at `offset` of `file` with `mask`.
inline void flip_byte(const std::filesystem::path& file, uint64_t offset, uint8_t mask) {
  edit_byte(file, offset, [mask](char c) { return char(c ^ mask); });
}

}  // namespace bitsim::test
