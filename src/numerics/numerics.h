// bitsim numerics: the deterministic host arithmetic of the simulated board's CPU.
//
// Implements the numerics contract of CIRCUITS.md section 4: every CPU-side step of the
// token loop (RMSNorm, activation quantization, dequantization, RoPE, q/K/V quantization,
// attention finish, SiLU-gate, residual) is written here once, as an exact sequence of
// IEEE-754 binary32 operations. The comment next to each function IS the contract: a
// reader must be able to reproduce every result bit for bit from it.
//
// Rules that hold for every function below:
//  - Only +, -, *, / (correctly rounded, round-to-nearest-even), comparisons, integer
//    operations and bit casts. No libm (no exp/expf/rint/round/nearbyint/sqrt/pow/sin/
//    cos/log): their last bits differ between libms.
//  - No contraction: a*b+c is always two roundings (the project builds with
//    -ffp-contract=off; numerics.cpp refuses -ffast-math and requires FLT_EVAL_METHOD 0).
//  - "flush(v)" is flush_denormal(v): a denormal result becomes a zero of the same sign,
//    as ARMv7 NEON (always flush-to-zero) does. Intermediates are not flushed unless the
//    sequence says so. Inputs are expected to be normal or zero (outputs of this library
//    are); a denormal input is used as is (IEEE), not treated as zero (except by rsqrt).
//  - Integer -> float conversions (float)i are exact for |i| < 2^24, which covers every
//    use here (matmul and attention accumulators, T <= 512); beyond, they round to nearest
//    even.
//  - Float constants are written as literals whose decimal expansion is the exact value
//    of the float.
//  - The sum of squares uses 8 lanes in a fixed, documented order, so that the compiler
//    can vectorize it without changing the result; max|x| is an exact integer max, the
//    same in any order. Element-wise steps are written branch-free where needed so that
//    they vectorize too (vectorization never reorders float operations here).
//  - No global or hidden state. The only static data is the constant exponent ROM.
//
// Errors: functions take raw pointers and lengths and do not validate them (n <= 0 means
// nothing is done). RopeTable's constructor and attention_multiplier throw
// std::invalid_argument on invalid parameters; RopeTable rows throw std::out_of_range.

#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace bitsim::num {

// ---------------------------------------------------------------------------------------
// Scalar primitives
// ---------------------------------------------------------------------------------------

// a*b - c with two roundings: t = a*b (rounded), return t - c (rounded). Exists to prove
// that contraction is off (an FMA would round once); the tests compare it with std::fma.
float mul_sub(float a, float b, float c);

// Round half to even to an integer-valued float: the add-and-subtract trick of CIRCUITS 4,
// applied to |x| and sign-aware.
//   ax = |x| (sign bit cleared)
//   if !(ax < 8388608.0f)  (|x| >= 2^23, inf or NaN): return x unchanged (already an
//     integer; NaN propagates)
//   r = (ax + 8388608.0f) - 8388608.0f            (2^23: ax + 2^23 lies in [2^23, 2^24)
//                                                   where the float ulp is 1)
//   return r with the sign bit of x OR-ed in       (so rne(-0.3f) = -0.0f)
// For |x| < 2^22 this equals the board's signed form (x + 1.5*2^23) - 1.5*2^23 (both are
// exact round-half-even; only the sign of a zero result can differ). Using 2^23 on |x|
// also rounds 2^22 <= |x| < 2^23 correctly, so rne(x) equals std::nearbyint(x) under
// FE_TONEAREST bit for bit, for every float.
float rne(float x);

// ARMv7 NEON flush-to-zero: if the exponent field of x is 0 (x is denormal or zero),
// return a zero with the sign of x; otherwise x (normals, inf, NaN unchanged). Pure bit
// operation.
float flush_denormal(float x);

// The project's exp (one polynomial, Cephes expf coefficients), float only.
//   NaN -> NaN (the input); x > 88.72283172607421875f (the largest float whose e^x is
//   finite) -> +inf; x < -87.5f -> +0 (e^-87.5 < 2^-126 would be flushed anyway).
//   Otherwise:
//   t  = x * 1.44269502162933349609375f + 12582912.0f       (log2e as a float; 1.5*2^23)
//   k  = (int32_t)(bit_cast<uint32_t>(t) - 0x4b400000u)      (= rne(x*log2e) exactly,
//        in [-126, 128]; 0x4b400000 are the bits of 1.5*2^23, where the float ulp is 1)
//   kf = (float)k
//   r  = (x - kf * 0.693359375f) - kf * -0.000212194441701285541057586669921875f
//        (ln2 split Cody-Waite style: hi = 355/512 has 9 bits, so kf*hi and x - kf*hi
//         are exact; hi + lo = ln2 - 1.6e-12)
//   z  = r * r
//   p  = 0.000198756912141107022762298583984375f
//   p  = p * r + 0.00139819993637502193450927734375f
//   p  = p * r + 0.008333452045917510986328125f
//   p  = p * r + 0.0416657961905002593994140625f
//   p  = p * r + 0.1666666567325592041015625f
//   p  = p * r + 0.5f
//   p  = (p * z + r) + 1.0f                   (every * and + rounded, left to right)
//   y  = (p * 2^(k>>1)) * 2^(k - (k>>1))       (powers of two built from exponent bits;
//        exact scalings, so y is p * 2^k rounded once, and k = 128 needs no special case)
//   return flush(y)                            (results below 2^-126 become +0)
// exp_approx(0) == 1 exactly. Worst error over [-87, 88]: 0.98 ulp (docs/numerics.md).
// The code is branch-free (mask selects, integer clamp of k) so that loops over it
// vectorize; out-of-range x are computed with a clamped k and replaced by the masks.
float exp_approx(float x);

// 1/x: return flush(1.0f / x). One IEEE division, correctly rounded, hence identical on
// every IEEE host (recip(0) = inf of the sign of x).
float recip(float x);

// 1/sqrt(x) without libm, for x > 0:
//   x NaN or x < 0 -> NaN; x == 0 or denormal -> +inf (flush-to-zero input); x == +inf -> 0.
//   Otherwise:
//   y = bit_cast<float>(0x5f375a86u - (bit_cast<uint32_t>(x) >> 1))   (seed, rel err < 0.18%)
//   three Newton-Raphson steps, unfused:
//     two in the classic form:  t = (x * y) * y;  y = y * (1.5f - 0.5f * t)
//     the last in correction form:  t = (x * y) * y;  y = y + (y * 0.5f) * (1.0f - t)
//   return y
// (0.5f*t, y*0.5f and 1.0f - t are exact. The correction form of the last step brings the
// worst error from 2.18 to 1.22 ulp and makes rsqrt(4^k) exact. (x*y)*y rather than
// ((0.5f*x)*y)*y avoids a denormal 0.5f*x for x near 2^-126.) Since the seed and every step
// scale exactly, rsqrt(4x) = rsqrt(x)/2 bit for bit over the normal range.
float rsqrt(float x);

// SiLU: e = exp_approx(-x); d = 1.0f + e; return flush(x / d).
// One correctly rounded division rather than x * recip(d) (one rounding fewer).
// Large negative x: e = +inf, d = +inf, result -0.0f. silu(-inf) is NaN (inf/inf).
float silu(float x);

// ---------------------------------------------------------------------------------------
// Vector steps of the token loop
// ---------------------------------------------------------------------------------------

// Sum of x_i*x_i in the fixed 8-lane order used by rmsnorm:
//   lane[j] = 0.0f for j < 8; for i = 0..n-1 in increasing order: lane[i % 8] += x_i * x_i
//   (each product rounded, then the add rounded)
//   s_j = lane[j] + lane[j+4] (j < 4);  t_0 = s_0 + s_2;  t_1 = s_1 + s_3;  return t_0 + t_1
float sum_squares(const float* x, int n);

// RMSNorm (MODEL.md), n > 0:
//   sumsq = sum_squares(x, n)   (order above)
//   mean  = sumsq / (float)n
//   r     = rsqrt(mean + eps)
//   y_i   = flush((x_i * r) * w_i)
// y may alias x.
void rmsnorm(const float* x, const float* w, int n, float eps, float* y);

// max_i |x_i|, starting from +0. Computed as an integer max of the bit patterns with
// the sign cleared (for non-NaN floats the same order as |x|): exact and independent of
// the order. NaN elements are ignored (count as 0); n <= 0 gives 0.
float max_abs(const float* x, int n);

// Activation quantization (CIRCUITS 4, BitLinear activation_quant):
//   a   = max_abs(x, n); if !(a >= 1e-5f) a = 1e-5f    (1e-5f = 0.00000999999974737875163555145263671875)
//   s   = 127.0f / a
//   q_i = sat8(rne(x_i * s))
// where sat8(v) = -128 if v < -128, 127 if v > 127, 0 if v is NaN, else (int8_t)v.
// Returns a (the dequantization scale is a/127, applied in dequantize()).
float quantize_activations(const float* x, int n, int8_t* q);

// Matmul dequantization:
//   factor = (w_scale * a) / 127.0f      (computed once)
//   y_r    = flush((float)acc_r * factor)
void dequantize(const int32_t* acc, int n, float w_scale, float a, float* y);

// Fixed-scale int8 quantization (K and V with per-(layer, head) scales):
//   inv = 1.0f / scale;  q_i = sat8(rne(x_i * inv))
void quantize_fixed(const float* x, int n, float scale, int8_t* q);

// Dynamic symmetric quantization (q per head):
//   maxabs = max_abs(x, n); if !(maxabs >= 1e-5f) maxabs = 1e-5f
//   s = 127.0f / maxabs;  q_i = sat8(rne(x_i * s))
//   returns s_q = maxabs / 127.0f
float quantize_symmetric(const float* x, int n, int8_t* q);

// SwiGLU: y_i = flush(silu(gate_i) * up_i). y may alias gate or up.
void silu_gate(const float* gate, const float* up, int n, float* y);

// ReLU^2-gate (hidden_act relu2, HF ACT2FN["relu2"]: relu(x) squared):
//   r_i = gate_i > 0.0f ? gate_i : 0.0f   (NaN and -0.0f give +0.0f)
//   y_i = flush((r_i * r_i) * up_i)       (the square rounded, then the product rounded)
// y may alias gate or up.
void relu2_gate(const float* gate, const float* up, int n, float* y);

// The FFN's gate of a model's hidden_act: relu2_gate when `relu2`, else silu_gate.
inline void ffn_gate(bool relu2, const float* gate, const float* up, int n, float* y) {
  if (relu2) relu2_gate(gate, up, n, y);
  else silu_gate(gate, up, n, y);
}

// Attention finish (CIRCUITS 3), sum > 0:
//   factor = s_v / (float)sum;  o_d = flush((float)acc_d * factor), d < n
// ((float)sum is exact: sum <= 512 * 32767 < 2^24.)
void attention_finish(const int32_t* acc, uint32_t sum, float s_v, int n, float* o);

// Residual: h_i = flush(h_i + d_i).
void add_inplace(float* h, const float* d, int n);

// ---------------------------------------------------------------------------------------
// Attention unit parameters
// ---------------------------------------------------------------------------------------

// 16/sqrt(96) rounded to float: exactly 1.632993221282958984375 (0x1.a20bd8p+0).
inline constexpr float kAttnScale96 = 1.632993221282958984375f;

struct AttnMultiplier {
  uint32_t m;      // < 2^18
  int shift;       // S, 0..24
  int lowered;     // 24 - shift: how many times S had to be lowered
  bool saturated;  // even S = 0 did not fit: m = 2^18 - 1, shift = 0
};

// The attention multiplier m = round(2^S * 16 * s_q * s_k / sqrt(head_dim)):
//   c = kAttnScale96 if head_dim == 96, else 16.0f * rsqrt((float)head_dim)
//   v = (s_q * s_k) * c
//   for S = 24, 23, ..., 0:  m = rne(v * 2^S)   (2^S a float power of two: exact scaling)
//                            if m < 262144.0f (2^18): return {m, S, 24 - S, false}
//   return {262143, 0, 24, true}
// Throws std::invalid_argument if head_dim <= 0 or v is negative or NaN.
AttnMultiplier attention_multiplier(float s_q, float s_k, int head_dim);

// The attention unit's 256-entry exponent ROM (CIRCUITS 3): EXP[i] = round(32767 * e^(-i/16))
// (round half to even; no entry is within 0.0099 of a tie). A checked-in literal table,
// identical on every host; EXP[0] = 32767, non-increasing, EXP[178..255] = 0.
const std::array<uint16_t, 256>& exp_table();

// The attention unit's weight step (CIRCUITS 3, V phase), the one definition the golden
// reference, the clocked unit and the fast kernels' scalar paths call (the fast kernels'
// SIMD paths are tested equal to it over every input they can see):
//   diff = s_max - s_t (>= 0; |s_t| <= 96 * 128 * 128, so diff < 2^22)
//   z    = (diff * m) >> S          m < 2^18, S in 0..63, exact in 64 bits
//   legacy shift mode: z = diff >> 8 (m and S unused)
//   p    = EXP[min(z, 255)]
constexpr int kAttnLegacyShift = 8;
constexpr uint32_t kAttnExpLast = 255;  // the last EXP index
inline uint32_t attention_exp_index(uint32_t diff, uint32_t m, int shift, bool legacy) {
  const uint64_t z = legacy ? uint64_t(diff) >> kAttnLegacyShift : (uint64_t(diff) * m) >> shift;
  return z < kAttnExpLast ? uint32_t(z) : kAttnExpLast;
}
inline uint16_t attention_weight(uint32_t diff, uint32_t m, int shift, bool legacy) {
  return exp_table()[attention_exp_index(diff, m, shift, legacy)];
}

// ---- The online-softmax unit (docs/variants-attention.md, attention.variant) ----------
// The steps the golden reference, the clocked unit and the fast kernel share.

// The score difference as an exponent index with 8 fractional bits, diff >= 0 (< 2^23):
//   z8 = ((diff * m) << 8) >> S        exact in 64 bits
// z8 >> 8 is the board's index (diff * m) >> S; the low 8 bits are its dropped fraction.
inline uint64_t online_index8(uint32_t diff, uint32_t m, int shift) {
  return ((uint64_t(diff) * m) << 8) >> shift;
}

// The exponent table with linear interpolation between entries:
//   i = z8 >> 8, f = z8 & 255
//   i >= 255: EXP[255] (0);  else EXP[i] - ((EXP[i] - EXP[i+1]) * f + 128) >> 8
// At f = 0 it is the board's EXP[i].
inline uint16_t exp_interp(uint64_t z8) {
  const uint64_t i = z8 >> 8;
  if (i >= kAttnExpLast) return exp_table()[kAttnExpLast];
  const uint32_t f = uint32_t(z8 & 255u);
  const uint32_t a = exp_table()[i], b = exp_table()[i + 1];
  return uint16_t(a - (((a - b) * f + 128u) >> 8));
}

// The rescale of an accumulator (or the sum) by alpha when the running maximum grows:
//   (x * alpha + 2^14) >> 15      int64 product, arithmetic shift (round half up)
inline int64_t online_rescale(int64_t x, uint32_t alpha) { return (x * int64_t(alpha) + (int64_t(1) << 14)) >> 15; }

// The normalizer (the division on the PL) of one head, sum >= 1:
//   r = floor(2^46 / sum);  o_d = (acc_d * r + 2^29) >> 30     (Q15.16, int64 products)
// n outputs; acc values must satisfy |acc_d| < 2^31 (they do: the unit's int32 registers).
constexpr int kOnlineFracBits = 16;  // o_d is the weighted mean of V times 2^16
void online_normalize(const int32_t* acc, uint32_t sum, int n, int32_t* o);

// The CPU finish of the online unit's results (o_q in Q15.16):
//   factor = s_v * 0.0000152587890625f (2^-16);  o_d = flush((float)o_q_d * factor)
void attention_finish_online(const int32_t* o_q, float s_v, int n, float* o);

// ---------------------------------------------------------------------------------------
// RoPE
// ---------------------------------------------------------------------------------------

// cos/sin tables of the checkpoint's rotary embedding (rotate_half pairing: dimension i
// pairs with i + head_dim/2), built without libm:
//   L          = detail::log_d((double)theta)
//   inv_freq_i = (float) detail::exp_d(-(((double)(2*i) / (double)head_dim) * L)),  i < head_dim/2
//   angle      = (float)pos * inv_freq_i                        (one float multiply)
//   cos[pos][i] = (float) detail::cos_d((double)angle),  sin[pos][i] = (float) detail::sin_d((double)angle)
// The double helpers are accurate to a few double ulps, so the tables are the float
// roundings of cos/sin of the float angle (up to a double-rounding case, deterministic).
class RopeTable {
 public:
  // head_dim even and > 0, theta > 0 and finite, max_positions > 0; else
  // std::invalid_argument.
  RopeTable(int head_dim, float theta, int max_positions);

  int head_dim() const { return head_dim_; }
  int max_positions() const { return max_positions_; }
  float inv_freq(int i) const;  // i < head_dim/2; std::out_of_range otherwise
  // head_dim/2 entries each; std::out_of_range unless 0 <= pos < max_positions.
  const float* cos_row(int pos) const;
  const float* sin_row(int pos) const;

 private:
  int head_dim_;
  int max_positions_;
  std::vector<float> inv_freq_;
  std::vector<float> cos_;  // [max_positions][head_dim/2]
  std::vector<float> sin_;
};

// RoPE on one head vector of table.head_dim() floats, in place. With h = head_dim/2,
// c = cos_row(pos), s = sin_row(pos), a = x_i, b = x_{i+h} (both read before writing):
//   x_i     = flush((a * c_i) - (b * s_i))
//   x_{i+h} = flush((b * c_i) + (a * s_i))
// (two products, then one add/sub; no contraction). std::out_of_range for a bad pos.
void rope_apply(float* head_vec, int pos, const RopeTable& table);

// rope_apply on num_heads consecutive head vectors.
void rope_apply_heads(float* x, int num_heads, int pos, const RopeTable& table);

// ---------------------------------------------------------------------------------------
// Double-precision helpers of the table builders (own polynomials, no libm). Exposed so
// that the tests can compare them with libm. IEEE binary64 +,-,*,/ only.
// ---------------------------------------------------------------------------------------
namespace detail {

// Round half to even for |x| < 2^51: (x + 1.5*2^52) - 1.5*2^52. (No sign handling.)
double rne_d(double x);

// e^x: NaN -> NaN; x > 709.782712893384 -> +inf; x < -708.3964185322641 -> 0.
//   k = rne_d(x * 1.4426950408889634); r = (x - k*LN2_HI) - k*LN2_LO
//   (LN2_HI = 6.93147180369123816490e-01 has 32 significant bits, so k*LN2_HI is exact;
//    LN2_LO = 1.90821492927058770002e-10)
//   p = Horner of the Taylor series sum_{j=0..13} r^j / j!  (p = c13; p = p*r + c_j ...,
//       c_j the double nearest to 1/j!)
//   return p * 2^k (k == 1024: (p+p) * 2^1023)
double exp_d(double x);

// ln(x): NaN or x < 0 -> NaN; 0 -> -inf; +inf -> +inf. Denormals are scaled by 2^54 first.
//   x = m * 2^e with m in [1, 2) from the bits; if m > sqrt(2): m = m/2, e = e+1
//   f = m - 1 (exact); s = f / (2 + f); z = s*s
//   R = z * (1/3 + z*(1/5 + ... + z*(1/23)))        (Horner from 1/23 down; each
//       coefficient the double division 1.0/(2j+1))
//   lm = 2s + 2s*R
//   return e*LN2_HI + (lm + e*LN2_LO)
double log_d(double x);

// sin/cos: NaN, inf or |x| >= 2^50 -> NaN. Accurate for |x| < 2^20 (beyond, deterministic
// but the argument reduction loses accuracy).
//   k = rne_d(x * 6.36619772367581382433e-01); r = ((x - k*P1) - k*P2) - k*P3
//   (fdlibm's 33-bit pieces of pi/2: P1 = 1.57079632673412561417e+00,
//    P2 = 6.07710050630396597660e-11, P3 = 2.02226624871116645580e-21, so k*P1 and k*P2
//    are exact and x - k*P1 is exact)
//   z = r*r
//   sin r = r + (r*z)*S, S = Horner in z of -1/3!, 1/5!, ..., -1/19!   (S = c19; S = S*z + c17 ...)
//   cos r = 1 + z*C,     C = Horner in z of -1/2!, 1/4!, ..., 1/20!
//   quadrant k mod 4: sin_d = (sin r, cos r, -sin r, -cos r), cos_d = (cos r, -sin r, -cos r, sin r)
// (Series coefficients are the doubles nearest to 1/n!.)
double sin_d(double x);
double cos_d(double x);

}  // namespace detail

}  // namespace bitsim::num
