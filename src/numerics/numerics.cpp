// bitsim numerics: implementation. The float sequences are documented in numerics.h; the
// code below follows them literally. Element-wise kernels are written as internal inline
// functions so that the array loops can inline and vectorize them.

#include "numerics/numerics.h"

#include <bit>
#include <cfloat>
#include <limits>
#include <stdexcept>
#include <string>

#ifdef __FAST_MATH__
#error "bitsim numerics must not be compiled with -ffast-math (CIRCUITS.md section 4)"
#endif
static_assert(std::numeric_limits<float>::is_iec559 && std::numeric_limits<double>::is_iec559,
              "bitsim numerics needs IEEE-754 binary32/binary64");
static_assert(FLT_EVAL_METHOD == 0,
              "bitsim numerics needs float/double expressions evaluated in their own type");

namespace bitsim::num {
namespace {

constexpr uint32_t kSignBit = 0x80000000u;
constexpr uint32_t kExpMask = 0x7f800000u;

inline uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
inline float float_of(uint32_t b) { return std::bit_cast<float>(b); }
inline uint64_t bits_of(double x) { return std::bit_cast<uint64_t>(x); }
inline double double_of(uint64_t b) { return std::bit_cast<double>(b); }

// 1.5 * 2^23: adding it to a float of magnitude < 2^22 leaves a float whose ulp is 1.
constexpr float kRoundMagic = 12582912.0f;
// rne on |x| uses 2^23 instead: for 0 <= ax < 2^22, (ax + 1.5*2^23) - 1.5*2^23 and
// (ax + 2^23) - 2^23 are both the exact round-half-even of ax (the sums lie in [2^23, 2^24)),
// and 2^23 also covers 2^22 <= ax < 2^23.

inline float flush_impl(float x) {
  const uint32_t b = bits_of(x);
  return (b & kExpMask) == 0 ? float_of(b & kSignBit) : x;
}

inline float rne_impl(float x) {
  const uint32_t b = bits_of(x);
  const uint32_t sign = b & kSignBit;
  const uint32_t abits = b ^ sign;
  const float r = (float_of(abits) + 8388608.0f) - 8388608.0f;  // 2^23
  // Select with a bit mask rather than ?: so that the compiler keeps the float ops
  // unconditional and vectorizes the loops (GCC will not if-convert trapping float ops).
  const uint32_t keep = 0u - static_cast<uint32_t>(abits >= 0x4b000000u);  // |x| >= 2^23, inf, NaN
  return float_of(((bits_of(r) | sign) & ~keep) | (b & keep));
}

// sat8 of the header: clamp an integer-valued float to int8, NaN -> 0.
inline int8_t sat8(float v) {
  v = v < -128.0f ? -128.0f : v;
  v = v > 127.0f ? 127.0f : v;
  v = v == v ? v : 0.0f;
  return static_cast<int8_t>(static_cast<int>(v));
}

constexpr float kExpHi = 88.72283172607421875f;  // largest float with a finite e^x
constexpr float kExpLo = -87.5f;                 // below: +0 (e^-87.5 < 2^-126)

// 2^k for -126 <= k <= 127, from the exponent bits.
inline float pow2_f(int k) { return float_of(static_cast<uint32_t>(k + 127) << 23); }

// Branch-free (selects by masks, integer clamps) so that silu_gate vectorizes.
inline float exp_impl(float x) {
  // k = rne(x * log2e), read from the bits of x*log2e + 1.5*2^23 (ulp 1 there), clamped
  // as an integer: out-of-range x give a garbage k but no UB, and are masked below.
  const float t = x * 1.44269502162933349609375f + kRoundMagic;
  int k = static_cast<int>(bits_of(t) - 0x4b400000u);  // bits_of(1.5*2^23) = 0x4b400000
  k = k < -126 ? -126 : k;
  k = k > 128 ? 128 : k;
  const float kf = static_cast<float>(k);

  const float r = (x - kf * 0.693359375f) - kf * -0.000212194441701285541057586669921875f;
  const float z = r * r;
  float p = 0.000198756912141107022762298583984375f;
  p = p * r + 0.00139819993637502193450927734375f;
  p = p * r + 0.008333452045917510986328125f;
  p = p * r + 0.0416657961905002593994140625f;
  p = p * r + 0.1666666567325592041015625f;
  p = p * r + 0.5f;
  p = (p * z + r) + 1.0f;

  // p * 2^k as two exact power-of-two scalings (covers k = 128; only a denormal result
  // rounds, once, and is flushed).
  const int k1 = k >> 1;
  const float y = flush_impl((p * pow2_f(k1)) * pow2_f(k - k1));

  const uint32_t m_over = 0u - static_cast<uint32_t>(x > kExpHi);
  const uint32_t m_under = 0u - static_cast<uint32_t>(x < kExpLo);
  const uint32_t m_nan = 0u - static_cast<uint32_t>(x != x);
  uint32_t yb = (bits_of(y) & ~(m_over | m_under)) | (kExpMask & m_over);  // inf or +0
  yb = (yb & ~m_nan) | (bits_of(x) & m_nan);
  return float_of(yb);
}

inline float silu_impl(float x) {
  const float e = exp_impl(-x);
  const float d = 1.0f + e;
  return flush_impl(x / d);
}

constexpr float kScaleFloor = 0.00000999999974737875163555145263671875f;  // 1e-5f

// Shared body of quantize_activations / quantize_symmetric: returns the clamped max|x|.
float quantize_dynamic(const float* x, int n, int8_t* q) {
  float a = max_abs(x, n);
  a = a >= kScaleFloor ? a : kScaleFloor;
  const float s = 127.0f / a;
  for (int i = 0; i < n; ++i) q[i] = sat8(rne_impl(x[i] * s));
  return a;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Scalar primitives

float mul_sub(float a, float b, float c) {
  const float t = a * b;
  return t - c;
}

float rne(float x) { return rne_impl(x); }

float flush_denormal(float x) { return flush_impl(x); }

float exp_approx(float x) { return exp_impl(x); }

float recip(float x) { return flush_impl(1.0f / x); }

float rsqrt(float x) {
  if (x != x || x < 0.0f) return std::numeric_limits<float>::quiet_NaN();
  if ((bits_of(x) & kExpMask) == 0) return std::numeric_limits<float>::infinity();
  if (x == std::numeric_limits<float>::infinity()) return 0.0f;
  float y = float_of(0x5f375a86u - (bits_of(x) >> 1));
  for (int step = 0; step < 2; ++step) {  // relative error 1.75e-3 -> 4.6e-6 -> ~1e-7
    const float t = (x * y) * y;
    y = y * (1.5f - 0.5f * t);
  }
  // Last step in correction form: 1 - t and y * 0.5 are exact, so only the small
  // correction and the final add round (worst 1.22 ulp instead of 2.18, rsqrt(1) = 1).
  const float t = (x * y) * y;
  return y + (y * 0.5f) * (1.0f - t);
}

float silu(float x) { return silu_impl(x); }

// ---------------------------------------------------------------------------------------
// Vector steps

float sum_squares(const float* x, int n) {
  float lane[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) lane[j] += x[i + j] * x[i + j];
  }
  for (int j = 0; i < n; ++i, ++j) lane[j] += x[i] * x[i];
  float s[4];
  for (int j = 0; j < 4; ++j) s[j] = lane[j] + lane[j + 4];
  const float t0 = s[0] + s[2];
  const float t1 = s[1] + s[3];
  return t0 + t1;
}

void rmsnorm(const float* x, const float* w, int n, float eps, float* y) {
  if (n <= 0) return;
  const float mean = sum_squares(x, n) / static_cast<float>(n);
  const float r = rsqrt(mean + eps);
  for (int i = 0; i < n; ++i) y[i] = flush_impl((x[i] * r) * w[i]);
}

float max_abs(const float* x, int n) {
  // On the bits: for non-NaN floats, |x| orders like its bit pattern with the sign cleared
  // (a non-negative int32), so an integer max is the float max, exact and associative (any
  // order gives this value), and it vectorizes. NaN patterns count as 0.
  int32_t m = 0;
  for (int i = 0; i < n; ++i) {
    int32_t a = static_cast<int32_t>(bits_of(x[i]) & ~kSignBit);
    a = a > 0x7f800000 ? 0 : a;
    m = a > m ? a : m;
  }
  return float_of(static_cast<uint32_t>(m));
}

float quantize_activations(const float* x, int n, int8_t* q) { return quantize_dynamic(x, n, q); }

void dequantize(const int32_t* acc, int n, float w_scale, float a, float* y) {
  const float factor = (w_scale * a) / 127.0f;
  for (int i = 0; i < n; ++i) y[i] = flush_impl(static_cast<float>(acc[i]) * factor);
}

void quantize_fixed(const float* x, int n, float scale, int8_t* q) {
  const float inv = 1.0f / scale;
  for (int i = 0; i < n; ++i) q[i] = sat8(rne_impl(x[i] * inv));
}

float quantize_symmetric(const float* x, int n, int8_t* q) {
  return quantize_dynamic(x, n, q) / 127.0f;
}

void silu_gate(const float* gate, const float* up, int n, float* y) {
  for (int i = 0; i < n; ++i) y[i] = flush_impl(silu_impl(gate[i]) * up[i]);
}

void relu2_gate(const float* gate, const float* up, int n, float* y) {
  for (int i = 0; i < n; ++i) {
    const float r = gate[i] > 0.0f ? gate[i] : 0.0f;
    y[i] = flush_impl((r * r) * up[i]);
  }
}

void attention_finish(const int32_t* acc, uint32_t sum, float s_v, int n, float* o) {
  const float factor = s_v / static_cast<float>(sum);
  for (int i = 0; i < n; ++i) o[i] = flush_impl(static_cast<float>(acc[i]) * factor);
}

void online_normalize(const int32_t* acc, uint32_t sum, int n, int32_t* o) {
  const uint64_t r = (uint64_t(1) << 46) / uint64_t(sum);
  for (int i = 0; i < n; ++i) o[i] = int32_t((int64_t(acc[i]) * int64_t(r) + (int64_t(1) << 29)) >> 30);
}

void attention_finish_online(const int32_t* o_q, float s_v, int n, float* o) {
  const float factor = s_v * 0.0000152587890625f;  // 2^-16
  for (int i = 0; i < n; ++i) o[i] = flush_impl(static_cast<float>(o_q[i]) * factor);
}

void add_inplace(float* h, const float* d, int n) {
  for (int i = 0; i < n; ++i) h[i] = flush_impl(h[i] + d[i]);
}

// ---------------------------------------------------------------------------------------
// Attention unit parameters

AttnMultiplier attention_multiplier(float s_q, float s_k, int head_dim) {
  if (head_dim <= 0) {
    throw std::invalid_argument("attention_multiplier: head_dim must be > 0, got " +
                                std::to_string(head_dim));
  }
  const float c = head_dim == 96 ? kAttnScale96 : 16.0f * rsqrt(static_cast<float>(head_dim));
  const float v = (s_q * s_k) * c;
  if (!(v >= 0.0f)) {
    throw std::invalid_argument("attention_multiplier: s_q * s_k must be >= 0 (s_q " +
                                std::to_string(s_q) + ", s_k " + std::to_string(s_k) + ")");
  }
  constexpr float kLimit = 262144.0f;  // 2^18
  for (int shift = 24; shift >= 0; --shift) {
    const float pow2 = float_of(static_cast<uint32_t>(shift + 127) << 23);  // 2^shift
    const float m = rne_impl(v * pow2);
    if (m < kLimit) return {static_cast<uint32_t>(m), shift, 24 - shift, false};
  }
  return {262143u, 0, 24, true};
}

const std::array<uint16_t, 256>& exp_table() {
  // EXP[i] = round(32767 * exp(-i/16)), computed once with 60-digit decimal arithmetic
  // (round half to even; the closest entry to a tie is 0.0099 away). Constant data.
  static const std::array<uint16_t, 256> table = {
      32767, 30782, 28917, 27165, 25519, 23973, 22520, 21156, 19874, 18670, 17539, 16476,
      15478, 14540, 13659, 12832, 12054, 11324, 10638, 9993,  9388,  8819,  8285,  7783,
      7311,  6868,  6452,  6061,  5694,  5349,  5025,  4721,  4435,  4166,  3913,  3676,
      3454,  3244,  3048,  2863,  2690,  2527,  2374,  2230,  2095,  1968,  1849,  1737,
      1631,  1533,  1440,  1352,  1271,  1194,  1121,  1053,  989,   930,   873,   820,
      771,   724,   680,   639,   600,   564,   530,   498,   467,   439,   412,   387,
      364,   342,   321,   302,   283,   266,   250,   235,   221,   207,   195,   183,
      172,   162,   152,   143,   134,   126,   118,   111,   104,   98,    92,    86,
      81,    76,    72,    67,    63,    59,    56,    52,    49,    46,    43,    41,
      38,    36,    34,    32,    30,    28,    26,    25,    23,    22,    21,    19,
      18,    17,    16,    15,    14,    13,    12,    12,    11,    10,    10,    9,
      9,     8,     8,     7,     7,     6,     6,     6,     5,     5,     5,     4,
      4,     4,     4,     3,     3,     3,     3,     3,     2,     2,     2,     2,
      2,     2,     2,     2,     1,     1,     1,     1,     1,     1,     1,     1,
      1,     1,     1,     1,     1,     1,     1,     1,     1,     1,     0,     0,
      0,     0,     0,     0,     0,     0,     0,     0,     0,     0,     0,     0,
      0,     0,     0,     0,     0,     0,     0,     0,     0,     0,     0,     0,
      0,     0,     0,     0,     0,     0,     0,     0,     0,     0,     0,     0,
      0,     0,     0,     0,     0,     0,     0,     0,     0,     0,     0,     0,
      0,     0,     0,     0,     0,     0,     0,     0,     0,     0,     0,     0,
      0,     0,     0,     0,     0,     0,     0,     0,     0,     0,     0,     0,
      0,     0,     0,     0};
  return table;
}

// ---------------------------------------------------------------------------------------
// RoPE

RopeTable::RopeTable(int head_dim, float theta, int max_positions)
    : head_dim_(head_dim), max_positions_(max_positions) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    throw std::invalid_argument("RopeTable: head_dim must be even and > 0, got " +
                                std::to_string(head_dim));
  }
  if (!(theta > 0.0f) || theta == std::numeric_limits<float>::infinity()) {
    throw std::invalid_argument("RopeTable: theta must be finite and > 0, got " +
                                std::to_string(theta));
  }
  if (max_positions <= 0) {
    throw std::invalid_argument("RopeTable: max_positions must be > 0, got " +
                                std::to_string(max_positions));
  }
  const int half = head_dim / 2;
  const double log_theta = detail::log_d(static_cast<double>(theta));
  inv_freq_.resize(half);
  for (int i = 0; i < half; ++i) {
    const double e = static_cast<double>(2 * i) / static_cast<double>(head_dim);
    inv_freq_[i] = static_cast<float>(detail::exp_d(-(e * log_theta)));
  }
  const size_t cells = static_cast<size_t>(max_positions) * static_cast<size_t>(half);
  cos_.resize(cells);
  sin_.resize(cells);
  for (int pos = 0; pos < max_positions; ++pos) {
    float* c = cos_.data() + static_cast<size_t>(pos) * half;
    float* s = sin_.data() + static_cast<size_t>(pos) * half;
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(pos) * inv_freq_[i];
      c[i] = static_cast<float>(detail::cos_d(static_cast<double>(angle)));
      s[i] = static_cast<float>(detail::sin_d(static_cast<double>(angle)));
    }
  }
}

float RopeTable::inv_freq(int i) const {
  if (i < 0 || i >= head_dim_ / 2) {
    throw std::out_of_range("RopeTable::inv_freq: index " + std::to_string(i) +
                            " outside [0, " + std::to_string(head_dim_ / 2) + ")");
  }
  return inv_freq_[i];
}

const float* RopeTable::cos_row(int pos) const {
  if (pos < 0 || pos >= max_positions_) {
    throw std::out_of_range("RopeTable: position " + std::to_string(pos) + " outside [0, " +
                            std::to_string(max_positions_) + ")");
  }
  return cos_.data() + static_cast<size_t>(pos) * (head_dim_ / 2);
}

const float* RopeTable::sin_row(int pos) const {
  if (pos < 0 || pos >= max_positions_) {
    throw std::out_of_range("RopeTable: position " + std::to_string(pos) + " outside [0, " +
                            std::to_string(max_positions_) + ")");
  }
  return sin_.data() + static_cast<size_t>(pos) * (head_dim_ / 2);
}

void rope_apply(float* head_vec, int pos, const RopeTable& table) {
  const int h = table.head_dim() / 2;
  const float* c = table.cos_row(pos);
  const float* s = table.sin_row(pos);
  float* lo = head_vec;
  float* hi = head_vec + h;
  for (int i = 0; i < h; ++i) {
    const float a = lo[i];
    const float b = hi[i];
    lo[i] = flush_impl((a * c[i]) - (b * s[i]));
    hi[i] = flush_impl((b * c[i]) + (a * s[i]));
  }
}

void rope_apply_heads(float* x, int num_heads, int pos, const RopeTable& table) {
  const int d = table.head_dim();
  for (int head = 0; head < num_heads; ++head) rope_apply(x + static_cast<size_t>(head) * d, pos, table);
}

// ---------------------------------------------------------------------------------------
// Double-precision helpers

namespace detail {
namespace {

constexpr double kRoundMagicD = 6755399441055744.0;  // 1.5 * 2^52
constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 0x3fe62e42fee00000, 32 bits
constexpr double kLn2Lo = 1.90821492927058770002e-10;  // 0x3dea39ef35793c76
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kTrigLimit = 1125899906842624.0;  // 2^50: sin_d/cos_d return NaN beyond

// 2^k for -1022 <= k <= 1023, from the exponent bits.
inline double pow2_d(int k) { return double_of(static_cast<uint64_t>(k + 1023) << 52); }

// Horner's scheme, highest power first: ((c[0] x + c[1]) x + c[2]) ... + c[N-1], one
// rounding per product and per sum, in that order.
template <size_t N>
inline double horner(double x, const double (&c)[N]) {
  double p = c[0];
  for (size_t i = 1; i < N; ++i) p = p * x + c[i];
  return p;
}

// sin(r) and cos(r) for |r| <= pi/4 (+ a little), Taylor series.
inline double sin_kernel(double r) {
  constexpr double kC[] = {
      -8.2206352466243294955e-18,  // -1/19!
      2.8114572543455207632e-15,   // 1/17!
      -7.6471637318198164759e-13,  // -1/15!
      1.6059043836821614599e-10,   // 1/13!
      -2.5052108385441718775e-08,  // -1/11!
      2.7557319223985890653e-06,   // 1/9!
      -1.9841269841269841270e-04,  // -1/7!
      8.3333333333333333333e-03,   // 1/5!
      -1.6666666666666666667e-01,  // -1/3!
  };
  const double z = r * r;
  return r + (r * z) * horner(z, kC);
}

inline double cos_kernel(double r) {
  constexpr double kC[] = {
      4.1103176233121648585e-19,   // 1/20!
      -1.5619206968586226462e-16,  // -1/18!
      4.7794773323873852974e-14,   // 1/16!
      -1.1470745597729724714e-11,  // -1/14!
      2.0876756987868098979e-09,   // 1/12!
      -2.7557319223985890653e-07,  // -1/10!
      2.4801587301587301587e-05,   // 1/8!
      -1.3888888888888888889e-03,  // -1/6!
      4.1666666666666666667e-02,   // 1/4!
      -0.5,                        // -1/2!
  };
  const double z = r * r;
  return 1.0 + z * horner(z, kC);
}

// x = k*(pi/2) + r, |r| <= pi/4 (approximately); returns r, k in *k.
inline double reduce_pio2(double x, int64_t* k) {
  // Callers guarantee |x| < 2^50, so kd fits an int64_t and rne_d is valid.
  constexpr double kTwoOverPi = 6.36619772367581382433e-01;
  constexpr double kP1 = 1.57079632673412561417e+00;  // first 33 bits of pi/2
  constexpr double kP2 = 6.07710050630396597660e-11;  // next 33 bits
  constexpr double kP3 = 2.02226624871116645580e-21;  // next bits
  const double kd = rne_d(x * kTwoOverPi);
  *k = static_cast<int64_t>(kd);
  return ((x - kd * kP1) - kd * kP2) - kd * kP3;
}

}  // namespace

double rne_d(double x) { return (x + kRoundMagicD) - kRoundMagicD; }

double exp_d(double x) {
  if (x != x) return x;
  if (x > 709.782712893384) return kInf;
  if (x < -708.3964185322641) return 0.0;
  const double kd = rne_d(x * 1.4426950408889634);
  const double r = (x - kd * kLn2Hi) - kd * kLn2Lo;
  constexpr double kC[] = {
      1.6059043836821614599e-10,  // 1/13!
      2.0876756987868098979e-09,  // 1/12!
      2.5052108385441718775e-08,  // 1/11!
      2.7557319223985890653e-07,  // 1/10!
      2.7557319223985890653e-06,  // 1/9!
      2.4801587301587301587e-05,  // 1/8!
      1.9841269841269841270e-04,  // 1/7!
      1.3888888888888888889e-03,  // 1/6!
      8.3333333333333333333e-03,  // 1/5!
      4.1666666666666666667e-02,  // 1/4!
      1.6666666666666666667e-01,  // 1/3!
      0.5,                        // 1/2!
      1.0,                        // 1/1!
      1.0,                        // 1/0!
  };
  double p = horner(r, kC);
  int k = static_cast<int>(kd);
  if (k > 1023) {
    p = p + p;
    k = 1023;
  }
  return p * pow2_d(k);
}

double log_d(double x) {
  if (x != x || x < 0.0) return kNaN;
  if (x == 0.0) return -kInf;
  if (x == kInf) return kInf;
  int e = 0;
  if (x < 2.2250738585072014e-308) {  // denormal: scale into the normal range
    x = x * 18014398509481984.0;      // 2^54
    e = -54;
  }
  const uint64_t b = bits_of(x);
  e += static_cast<int>((b >> 52) & 0x7ff) - 1023;
  double m = double_of((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);  // [1, 2)
  if (m > 1.4142135623730951) {
    m = m * 0.5;
    e += 1;
  }
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double z = s * s;
  constexpr double kC[] = {1.0 / 23.0, 1.0 / 21.0, 1.0 / 19.0, 1.0 / 17.0, 1.0 / 15.0, 1.0 / 13.0,
                           1.0 / 11.0, 1.0 / 9.0,  1.0 / 7.0,  1.0 / 5.0,  1.0 / 3.0};
  const double p = horner(z, kC);
  const double R = z * p;
  const double s2 = s + s;
  const double lm = s2 + s2 * R;
  const double ed = static_cast<double>(e);
  return ed * kLn2Hi + (lm + ed * kLn2Lo);
}

double sin_d(double x) {
  if (!(x > -kTrigLimit && x < kTrigLimit)) return kNaN;
  int64_t k = 0;
  const double r = reduce_pio2(x, &k);
  switch (k & 3) {
    case 0: return sin_kernel(r);
    case 1: return cos_kernel(r);
    case 2: return -sin_kernel(r);
    default: return -cos_kernel(r);
  }
}

double cos_d(double x) {
  if (!(x > -kTrigLimit && x < kTrigLimit)) return kNaN;
  int64_t k = 0;
  const double r = reduce_pio2(x, &k);
  switch (k & 3) {
    case 0: return cos_kernel(r);
    case 1: return -sin_kernel(r);
    case 2: return -cos_kernel(r);
    default: return sin_kernel(r);
  }
}

}  // namespace detail
}  // namespace bitsim::num
