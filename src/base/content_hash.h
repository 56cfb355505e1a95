#pragma once
// ContentHash: a fast, deterministic 128-bit hash of a byte stream, for content addressing
// (the start-up cache's keys, sim/cache_store.h) and for checksums of large payloads (the
// cached ternary model, about 1.1 GB for bitnet-large). Not cryptographic: it guards against
// accidental corruption and keys a local cache, nothing more.
//
// Algorithm (one pass, little-endian, independent of the host's word size):
//   four 64-bit lanes v0..v3 start at seed-derived values; each 32-byte stripe feeds its four
//   64-bit words w0..w3 through v_i = rotl(v_i + w_i * P2, 31) * P1 (the XXH64 round);
//   the digest merges the lanes, the total length and the remaining < 32 bytes, and
//   avalanches the result twice with different constants for the two 64-bit halves.
// The same bytes give the same digest however update() splits them.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace bitsim::model {

class ContentHash {
 public:
  ContentHash();
  ContentHash& update(const void* data, size_t bytes);
  // A trivially copyable value by its bytes (integers, floats, enums).
  template <class T>
    requires std::is_trivially_copyable_v<T>
  ContentHash& add(const T& v) {
    return update(&v, sizeof v);
  }
  // A string with its length, so that ("ab", "c") and ("a", "bc") differ.
  ContentHash& add(std::string_view s) {
    add(uint64_t(s.size()));
    return update(s.data(), s.size());
  }
  ContentHash& add(const char* s) { return add(std::string_view(s)); }
  ContentHash& add(const std::string& s) { return add(std::string_view(s)); }

  std::array<uint64_t, 2> digest() const;
  std::string hex() const;  // 32 lowercase hex digits of digest()
  uint64_t total_bytes() const { return total_; }

 private:
  void stripe(const uint8_t* p);
  uint64_t v_[4];
  uint8_t buf_[32];
  size_t buffered_ = 0;
  uint64_t total_ = 0;
};

// The 64-bit checksum of a buffer (the first half of ContentHash's digest).
uint64_t checksum64(const void* data, size_t bytes);

}  // namespace bitsim::model
