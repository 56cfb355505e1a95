#include "base/content_hash.h"

#include <cstring>

#include <fmt/format.h>

namespace bitsim::model {

namespace {
constexpr uint64_t P1 = 0x9E3779B185EBCA87ull, P2 = 0xC2B2AE3D27D4EB4Full, P3 = 0x165667B19E3779F9ull,
                   P4 = 0x85EBCA77C2B2AE63ull, P5 = 0x27D4EB2F165667C5ull;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t read64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);  // little-endian on every host
  return v;
}
inline uint64_t round(uint64_t acc, uint64_t w) { return rotl(acc + w * P2, 31) * P1; }
inline uint64_t merge(uint64_t h, uint64_t v) { return (h ^ round(0, v)) * P1 + P4; }
inline uint64_t avalanche(uint64_t h, uint64_t a, uint64_t b) {
  h ^= h >> 33;
  h *= a;
  h ^= h >> 29;
  h *= b;
  h ^= h >> 32;
  return h;
}
}  // namespace

ContentHash::ContentHash() : v_{P1 + P2, P2, 0, 0 - P1}, buf_{} {}

void ContentHash::stripe(const uint8_t* p) {
  v_[0] = round(v_[0], read64(p));
  v_[1] = round(v_[1], read64(p + 8));
  v_[2] = round(v_[2], read64(p + 16));
  v_[3] = round(v_[3], read64(p + 24));
}

ContentHash& ContentHash::update(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  total_ += n;
  if (buffered_) {
    const size_t take = std::min(n, sizeof buf_ - buffered_);
    std::memcpy(buf_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    n -= take;
    if (buffered_ < sizeof buf_) return *this;
    stripe(buf_);
    buffered_ = 0;
  }
  for (; n >= 32; p += 32, n -= 32) stripe(p);
  if (n) std::memcpy(buf_, p, n);
  buffered_ = n;
  return *this;
}

std::array<uint64_t, 2> ContentHash::digest() const {
  // Two merges of the 256-bit lane state (different rotations and order), so the halves are
  // independent functions of it.
  uint64_t h = rotl(v_[0], 1) + rotl(v_[1], 7) + rotl(v_[2], 12) + rotl(v_[3], 18);
  uint64_t g = rotl(v_[3], 5) + rotl(v_[2], 23) + rotl(v_[1], 41) + rotl(v_[0], 59);
  for (int k = 0; k < 4; ++k) {
    h = merge(h, v_[k]);
    g = merge(g ^ P5, v_[3 - k]);
  }
  h += total_;
  g += total_ * P3;
  size_t i = 0;
  for (; i + 8 <= buffered_; i += 8) {
    const uint64_t w = read64(buf_ + i);
    h = rotl(h ^ round(0, w), 27) * P1 + P4;
    g = rotl(g ^ round(P5, w), 31) * P2 + P3;
  }
  for (; i < buffered_; ++i) {
    h = rotl(h ^ (uint64_t(buf_[i]) * P5), 11) * P1;
    g = rotl(g ^ (uint64_t(buf_[i]) * P1), 13) * P2;
  }
  return {avalanche(h, P2, P3), avalanche(g, P4, P1)};
}

std::string ContentHash::hex() const {
  const auto d = digest();
  return fmt::format("{:016x}{:016x}", d[0], d[1]);
}

uint64_t checksum64(const void* data, size_t bytes) { return ContentHash().update(data, bytes).digest()[0]; }

}  // namespace bitsim::model
