#pragma once
// SHA-256 (FIPS 180-4), for the provenance of inputs (a text's, a checkpoint's sha256 in
// eval's records): streaming, so that a file of any size is hashed in constant memory.
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace bitsim {

class Sha256 {
 public:
  Sha256& update(const void* data, size_t bytes);
  Sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  // Lowercase hex of the digest of everything given so far (the object stays usable).
  std::string hex() const;

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<uint8_t, 64> pending_{};
  size_t pending_bytes_ = 0;
  uint64_t total_bytes_ = 0;
};

// Lowercase hex SHA-256 of a byte string.
std::string sha256_hex(std::string_view bytes);
// Of a file's bytes, read in blocks (io::check_input_file first; `what` names it in errors).
std::string sha256_file(const std::filesystem::path& path, const std::string& what);

}  // namespace bitsim
