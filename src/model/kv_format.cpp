#include "model/kv_format.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "base/error.h"
#include "numerics/numerics.h"

namespace bitsim::model {

KvFormat kv_format_of(const std::string& name) {
  if (name == "int8") return KvFormat::Int8;
  if (name == "int4") return KvFormat::Int4;
  if (name == "tip") return KvFormat::Tip;
  throw Error(fmt::format("kv.format = '{}' is not one of: int8, int4, tip", name));
}

bool kv_head_dim_fits(KvFormat format, int d) {
  return head_dim_in_range(d) && (format == KvFormat::Int8 || d % kKvVGroup == 0);
}

void check_head_dim(KvFormat format, int d) {
  if (!head_dim_in_range(d))
    throw Error(fmt::format("attention.head_dim = {} is out of range: a multiple of {} in [{}, {}]", d, kHeadDimStep,
                            kHeadDimStep, kMaxHeadDim));
  if (!kv_head_dim_fits(format, d))
    throw Error(fmt::format("attention.head_dim = {}: kv.format = {} needs a multiple of {} (its V rows' fp16 scale "
                            "groups of {} values)",
                            d, format == KvFormat::Int4 ? "int4" : "tip", kKvVGroup, kKvVGroup));
}

KvStorage kv_storage(KvFormat format, int n, int d) {
  check_head_dim(format, d);
  if (n < 0 || n > kKvMaxOutlierChannels)
    throw Error(fmt::format("kv.outlier_channels = {} is out of range [0, {}]", n, kKvMaxOutlierChannels));
  KvStorage s;
  s.format = format;
  s.outlier_channels = n;
  s.head_dim = d;
  if (format == KvFormat::Int8) {
    if (n != 0) throw Error(fmt::format("kv.outlier_channels = {}: outlier lanes exist in kv.format = int4 only", n));
    s.k.payload = s.v.payload = uint64_t(d);  // d int8, a whole number of beats
    return s;
  }
  // K: d nibbles (d / 2 bytes), the n outlier channels' nibbles unused (padding), their values
  // as fp16 lanes behind the payload; the row padded to a beat.
  const uint64_t nibbles = uint64_t(d) * kKvInt4Bits / 8;  // 48 at d = 96
  s.k.payload = uint64_t(d - n) * kKvInt4Bits / 8;
  s.k.outliers = uint64_t(n) * kKvFp16Bytes;
  s.k.padding = (nibbles - s.k.payload) + kv_pad_to_beat(nibbles + s.k.outliers) - (nibbles + s.k.outliers);
  // V: d / 2 bytes of nibbles, one fp16 scale per group of 32 values, padded to a beat.
  s.v.payload = nibbles;
  s.v.scales = uint64_t(d / kKvVGroup) * kKvFp16Bytes;
  s.v.padding = kv_pad_to_beat(s.v.payload + s.v.scales) - (s.v.payload + s.v.scales);
  // The bank: d fp16 K channel scales, then (with outliers) one byte per outlier channel
  // index, padded to a beat.
  s.bank = kv_pad_to_beat(uint64_t(d) * kKvFp16Bytes + uint64_t(n));
  return s;
}

int largest_context(const KvStorage& s, uint64_t layer_heads, uint64_t free_bytes, int limit) {
  if (layer_heads == 0 || s.per_position() == 0) return limit;
  const uint64_t fixed = layer_heads * s.bank;
  if (fixed > free_bytes) return 0;
  const uint64_t t = (free_bytes - fixed) / (layer_heads * s.per_position());
  return t < uint64_t(limit) ? int(t) : limit;
}

uint16_t fp16_from_float(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  const uint16_t sign = uint16_t((b >> 16) & 0x8000u);
  const uint32_t exp = (b >> 23) & 0xFF, man = b & 0x7FFFFFu;
  if (exp == 0xFF) return uint16_t(sign | 0x7C00u | (man ? 0x200u : 0u));  // inf, NaN
  const int e = int(exp) - 127 + 15;                                       // half's biased exponent
  if (e >= 31) return uint16_t(sign | 0x7C00u);                            // overflow
  if (e <= 0) {                                                            // subnormal or zero
    if (e < -10) return sign;
    const uint32_t m = man | 0x800000u;  // 24 bits
    const int shift = 14 - e;            // to the half's 10-bit subnormal field
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = (uint32_t(e) << 10) | (man >> 13);
  const uint32_t rem = man & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
  return uint16_t(sign | h);                                 // (0x7C00 = inf on overflow)
}

float float_from_fp16(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FFu;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));
  if (exp == 0) {
    // man * 2^-24, exact in float.
    const float v = float(man) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

int kv_nibble(const uint8_t* row, int d) {
  const uint8_t n = d % 2 ? row[d / 2] >> 4 : row[d / 2] & 0xF;
  return n >= 8 ? int(n) - 16 : int(n);
}

void kv_set_nibble(uint8_t* row, int d, int q) {
  const uint8_t n = uint8_t(q) & 0xF;
  row[d / 2] = uint8_t(d % 2 ? (row[d / 2] & 0x0F) | (n << 4) : (row[d / 2] & 0xF0) | n);
}

namespace {
int8_t quantize4(float x, float inv_or_scale, bool divide) {
  const float q = num::rne(divide ? x / inv_or_scale : x * inv_or_scale);
  return int8_t(q < -8.0f ? -8 : q > 7.0f ? 7 : (q != q ? 0 : int(q)));
}
int8_t get_nibble(const uint8_t* row, int d) { return int8_t(kv_nibble(row, d)); }
bool is_outlier(int d, const int* outliers, int n) { return std::find(outliers, outliers + n, d) != outliers + n; }
}  // namespace

void encode_k_int4(const float* k, const uint16_t* sk, const int* outliers, int n, int D, uint8_t* row) {
  const KvStorage st = kv_storage(KvFormat::Int4, n, D);
  std::memset(row, 0, st.k.total());
  for (int d = 0; d < D; ++d)
    kv_set_nibble(row, d, is_outlier(d, outliers, n) ? int8_t(0) : quantize4(k[d], float_from_fp16(sk[d]), true));
  for (int j = 0; j < n; ++j) {
    const uint16_t h = fp16_from_float(k[outliers[j]]);
    std::memcpy(row + kv_nibble_bytes(D) + 2 * j, &h, 2);
  }
}

void decode_k_int4(const uint8_t* row, const uint16_t* sk, const int* outliers, int n, int D, float* k) {
  for (int d = 0; d < D; ++d) k[d] = float(get_nibble(row, d)) * float_from_fp16(sk[d]);
  for (int j = 0; j < n; ++j) {
    uint16_t h;
    std::memcpy(&h, row + kv_nibble_bytes(D) + 2 * j, 2);
    k[outliers[j]] = float_from_fp16(h);
  }
}

void encode_v_int4(const float* v, int d, uint8_t* row) {
  std::memset(row, 0, kv_storage(KvFormat::Int4, 0, d).v.total());
  for (int g = 0; g < d / kKvVGroup; ++g) {
    const float a = std::max(num::max_abs(v + g * kKvVGroup, kKvVGroup), 1e-5f);
    const uint16_t s = fp16_from_float(a / 7.0f);
    std::memcpy(row + kv_nibble_bytes(d) + 2 * g, &s, 2);
    const float sf = float_from_fp16(s);
    for (int i = 0; i < kKvVGroup; ++i) kv_set_nibble(row, g * kKvVGroup + i, quantize4(v[g * kKvVGroup + i], sf, true));
  }
}

void decode_v_int4(const uint8_t* row, int d, float* v) {
  for (int g = 0; g < d / kKvVGroup; ++g) {
    uint16_t s;
    std::memcpy(&s, row + kv_nibble_bytes(d) + 2 * g, 2);
    const float sf = float_from_fp16(s);
    for (int i = 0; i < kKvVGroup; ++i) v[g * kKvVGroup + i] = float(get_nibble(row, g * kKvVGroup + i)) * sf;
  }
}

KvInt4Bank kv_int4_bank(const float* kmax, int n, int D) {
  kv_storage(KvFormat::Int4, n, D);  // checks n and D
  KvInt4Bank b;
  b.sk.resize(size_t(D));
  for (int d = 0; d < D; ++d) b.sk[size_t(d)] = fp16_from_float(std::max(kmax[d], 1e-5f) / 7.0f);
  std::vector<int> order(static_cast<size_t>(D));
  for (int d = 0; d < D; ++d) order[size_t(d)] = d;
  std::stable_sort(order.begin(), order.end(), [&](int a, int c) { return kmax[a] > kmax[c]; });
  b.outliers.assign(order.begin(), order.begin() + n);
  std::sort(b.outliers.begin(), b.outliers.end());
  return b;
}

void write_kv_bank(const KvInt4Bank& bank, uint8_t* out) {
  const int n = int(bank.outliers.size()), D = bank.head_dim();
  std::memset(out, 0, kv_storage(KvFormat::Int4, n, D).bank);
  std::memcpy(out, bank.sk.data(), size_t(D) * 2);
  for (int j = 0; j < n; ++j) out[size_t(D) * 2 + size_t(j)] = uint8_t(bank.outliers[size_t(j)]);
}

KvInt4Bank read_kv_bank(const uint8_t* in, int n, int D) {
  kv_storage(KvFormat::Int4, n, D);
  KvInt4Bank b;
  b.sk.resize(size_t(D));
  std::memcpy(b.sk.data(), in, size_t(D) * 2);
  for (int j = 0; j < n; ++j) {
    const int d = in[size_t(D) * 2 + size_t(j)];
    if (d >= D || is_outlier(d, b.outliers.data(), j))
      throw Error(fmt::format("KV bank: outlier channel {} (entry {}) is not a channel or repeats", d, j));
    b.outliers.push_back(d);
  }
  return b;
}

Fp16Fields fp16_fields(uint16_t h) {
  Fp16Fields f;
  f.negative = (h & 0x8000u) != 0;
  const int e = (h >> 10) & 0x1F;
  const uint32_t frac = h & 0x3FFu;
  if (e == 31) {
    f.E = 30;
    f.M = 2047;
  } else {
    f.E = std::max(e, 1);
    f.M = e ? frac + 1024 : frac;
  }
  return f;
}

int32_t kv_outlier_fixed(uint16_t lane, uint16_t sk) {
  const Fp16Fields h = fp16_fields(lane), s = fp16_fields(sk);
  if (s.M == 0) return 0;  // cannot happen: sk >= fp16(1e-5 / 7) > 0
  const int sh = h.E - s.E + kKvFixedShift;
  uint64_t num = h.M, den = s.M;
  if (sh >= 0) num <<= std::min(sh, 22);
  else den <<= std::min(-sh, 13);
  uint64_t k = num / den;
  const uint64_t rem = num % den;
  if (2 * rem > den || (2 * rem == den && (k & 1))) ++k;
  const int64_t v = h.negative ? -int64_t(k) : int64_t(k);
  return int32_t(std::clamp<int64_t>(v, kKvOutlierMin, kKvOutlierMax));
}

int64_t kv_v_weight(uint32_t p, uint16_t sv) {
  const Fp16Fields f = fp16_fields(sv);
  const int64_t P = int64_t(p) * int64_t(f.M);
  const int64_t w = f.E >= 9 ? P << (f.E - 9) : (P + (int64_t(1) << (8 - f.E))) >> (9 - f.E);
  return f.negative ? -w : w;
}

void kv_normalize(const int64_t* acc, uint32_t sum, int n, int32_t* o) {
  const uint64_t r = (uint64_t(1) << 46) / uint64_t(sum);
  for (int i = 0; i < n; ++i) {
    const __int128 x = (__int128(acc[i]) * __int128(r) + (__int128(1) << 45)) >> 46;
    o[i] = int32_t(x > INT32_MAX ? __int128(INT32_MAX) : x < INT32_MIN ? __int128(INT32_MIN) : x);
  }
}

}  // namespace bitsim::model
