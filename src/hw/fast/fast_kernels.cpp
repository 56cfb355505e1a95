#include "hw/fast/fast_kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
// GCC 12 reports _mm256_undefined_si256() (inside the 512 -> 256 extracts) as "(may be) used
// uninitialized"; a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#define BITSIM_FAST_X86 1
#else
#define BITSIM_FAST_X86 0
#endif

#include "base/error.h"
#include "model/packed_image.h"
#include "numerics/numerics.h"

namespace bitsim::hw::fast {
namespace {

constexpr int kBlockElems = 256;  // elements per 64-byte block of the cached form
constexpr int kBlockBytes = 64;
// The head dimension the AVX2 / AVX-512 attention kernels are written for (their registers
// hold a row of 96): the board's. A unit built for another d runs the portable loops.
constexpr int kSimdHeadDim = model::kBoardHeadDim;

int blocks_for(int n) { return (n + kBlockElems - 1) / kBlockElems; }

// ---- CPU features -----------------------------------------------------------------------

bool cpu_has_avx2() {
#if BITSIM_FAST_X86
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if BITSIM_FAST_X86
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

// ---- Decoding packed bytes into the 2-bit form ----------------------------------------

// Byte -> its five codes t_i + 1 in bytes 0..4 (bytes 5..7 = 1, i.e. weight 0). Invalid
// bytes (243..255) decode to five zero weights, as model::trit_decode_table().
struct CodeTable {
  uint64_t codes[256];
};
const CodeTable& code_table() {
  static const CodeTable table = [] {
    CodeTable t{};
    const model::TritDecodeTable& tab = model::trit_decode_table();
    for (int b = 0; b < 256; ++b) {
      uint64_t v = 0;
      for (int i = 0; i < 8; ++i) {
        const int code = (i < 5 && tab.valid[b]) ? tab.trits[b][i] + 1 : 1;
        v |= uint64_t(code) << (8 * i);
      }
      t.codes[b] = v;
    }
    return t;
  }();
  return table;
}

// One packed row into one decoded row (stride = blocks * 64 bytes). `codes` is scratch of
// at least blocks * 256 + 8 bytes. Returns false if a data byte is >= 243 (the row is
// still written, invalid bytes as zero weights).
bool decode_row(const uint8_t* packed, int n, int blocks, uint8_t* codes, uint8_t* out) {
  const CodeTable& tab = code_table();
  const int nbytes = (n + model::kTritsPerByte - 1) / model::kTritsPerByte;
  unsigned bad = 0;
  for (int k = 0; k < nbytes; ++k) {
    const uint8_t b = packed[k];
    bad |= unsigned(b >= 243);
    std::memcpy(codes + 5 * k, &tab.codes[b], 8);
  }
  // Digits past n (padding digits of the last byte) and the elements up to the block end
  // have weight 0: the engine sums over j < n only.
  std::memset(codes + n, 1, size_t(blocks) * kBlockElems - size_t(n));
  for (int b = 0; b < blocks; ++b) {
    const uint8_t* c = codes + size_t(b) * kBlockElems;
    uint8_t* o = out + size_t(b) * kBlockBytes;
    for (int i = 0; i < kBlockBytes; ++i)
      o[i] = uint8_t(c[i] | (c[64 + i] << 2) | (c[128 + i] << 4) | (c[192 + i] << 6));
  }
  return bad == 0;
}

// ---- Matvec kernels ---------------------------------------------------------------------
// All take: w = first decoded row, stride bytes per row, blocks per row, rows, xp = x
// zero-padded to blocks * 256 (64-byte aligned), sumx = sum of x, acc[rows].

// Plain C++ shaped for auto-vectorization (SSE2 on plain x86-64): x widened once to int16,
// per row 64 int16 lane sums. Exact: a lane adds four products |code * x| <= 256 per block,
// at most 16 blocks: |lane| <= 16384.
void matvec_portable(const uint8_t* w, size_t stride, int blocks, int rows, const int8_t* xp,
                     int32_t sumx, int32_t* acc) {
  alignas(64) int16_t x16[model::kMaxRowLength];
  for (int j = 0; j < blocks * kBlockElems; ++j) x16[j] = xp[j];
  for (int r = 0; r < rows; ++r) {
    const uint8_t* wr = w + size_t(r) * stride;
    alignas(64) int16_t a[kBlockBytes] = {};
    for (int b = 0; b < blocks; ++b) {
      const uint8_t* wb = wr + size_t(b) * kBlockBytes;
      const int16_t* xb = x16 + size_t(b) * kBlockElems;
      for (int i = 0; i < kBlockBytes; ++i) {
        const int16_t v = wb[i];
        a[i] = int16_t(a[i] + (v & 3) * xb[i] + ((v >> 2) & 3) * xb[64 + i] +
                       ((v >> 4) & 3) * xb[128 + i] + ((v >> 6) & 3) * xb[192 + i]);
      }
    }
    int32_t s = 0;
    for (int i = 0; i < kBlockBytes; ++i) s += a[i];
    acc[r] = s - sumx;
  }
}

#if BITSIM_FAST_X86

// Software prefetch distance, in rows (rows are contiguous, so this is 8 * stride bytes
// ahead in the weight stream: 3 KiB for n = 1536). The hardware prefetchers alone leave the
// kernel at about half the host's read bandwidth; with this it runs close to it. Prefetches
// past the end of the matrix are harmless (they never fault).
constexpr size_t kPrefetchRows = 8;

// The sum of a vector's eight int32 lanes.
__attribute__((target("avx2"))) inline int32_t hsum8(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// 32 bytes of a block's codes (code plane k at bits 2k+1..2k) times the plane's 32 x values:
// codes in {0,1,2} (unsigned) x int8, each 16-bit pair sum |.| <= 512, the sum of the four
// planes <= 2048: no saturation. Returns the products summed to eight int32 lanes.
__attribute__((target("avx2"))) inline __m256i plane_products(__m256i c0, __m256i c1, __m256i c2, __m256i c3,
                                                              __m256i x0, __m256i x1, __m256i x2, __m256i x3) {
  const __m256i s16 = _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(c0, x0), _mm256_maddubs_epi16(c1, x1)),
                                       _mm256_add_epi16(_mm256_maddubs_epi16(c2, x2), _mm256_maddubs_epi16(c3, x3)));
  return _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
}

template <int R>
__attribute__((target("avx2"))) inline void avx2_rows(const uint8_t* w, size_t stride,
                                                      int blocks, const int8_t* xp,
                                                      int32_t sumx, int32_t* acc) {
  const __m256i m3 = _mm256_set1_epi8(3);
  __m256i a[R];
  for (int r = 0; r < R; ++r) a[r] = _mm256_setzero_si256();
  for (int b = 0; b < blocks; ++b) {
    const int8_t* xb = xp + size_t(b) * kBlockElems;
    for (int h = 0; h < 2; ++h) {
      const __m256i x0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(xb + 32 * h));
      const __m256i x1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(xb + 64 + 32 * h));
      const __m256i x2 = _mm256_load_si256(reinterpret_cast<const __m256i*>(xb + 128 + 32 * h));
      const __m256i x3 = _mm256_load_si256(reinterpret_cast<const __m256i*>(xb + 192 + 32 * h));
      for (int r = 0; r < R; ++r) {
        const uint8_t* wb = w + r * stride + size_t(b) * kBlockBytes;
        if (h == 0) _mm_prefetch(reinterpret_cast<const char*>(wb + kPrefetchRows * stride), _MM_HINT_T0);
        const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(wb + 32 * h));
        a[r] = _mm256_add_epi32(a[r], plane_products(_mm256_and_si256(v, m3),
                                                     _mm256_and_si256(_mm256_srli_epi16(v, 2), m3),
                                                     _mm256_and_si256(_mm256_srli_epi16(v, 4), m3),
                                                     _mm256_and_si256(_mm256_srli_epi16(v, 6), m3), x0, x1, x2, x3));
      }
    }
  }
  for (int r = 0; r < R; ++r) acc[r] = hsum8(a[r]) - sumx;
}

__attribute__((target("avx2"))) void matvec_avx2(const uint8_t* w, size_t stride, int blocks,
                                                 int rows, const int8_t* xp, int32_t sumx,
                                                 int32_t* acc) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) avx2_rows<4>(w + r * stride, stride, blocks, xp, sumx, acc + r);
  for (; r < rows; ++r) avx2_rows<1>(w + r * stride, stride, blocks, xp, sumx, acc + r);
}

// One row against V vectors (V <= 4), each block's four code planes split once for all of
// them: a prompt chunk's vectors (DecodedRows::matmul). Per vector the same plane_products
// as avx2_rows, so each result equals matvec's.
template <int V>
__attribute__((target("avx2"))) inline void avx2_row_vectors(const uint8_t* wr, size_t stride, int blocks,
                                                             const int8_t* const* xp, const int32_t* sumx,
                                                             int32_t* const* acc, int r) {
  const __m256i m3 = _mm256_set1_epi8(3);
  __m256i a[V];
  for (int i = 0; i < V; ++i) a[i] = _mm256_setzero_si256();
  for (int b = 0; b < blocks; ++b) {
    const uint8_t* wb = wr + size_t(b) * kBlockBytes;
    _mm_prefetch(reinterpret_cast<const char*>(wb + kPrefetchRows * stride), _MM_HINT_T0);
    for (int h = 0; h < 2; ++h) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(wb + 32 * h));
      const __m256i c0 = _mm256_and_si256(v, m3);
      const __m256i c1 = _mm256_and_si256(_mm256_srli_epi16(v, 2), m3);
      const __m256i c2 = _mm256_and_si256(_mm256_srli_epi16(v, 4), m3);
      const __m256i c3 = _mm256_and_si256(_mm256_srli_epi16(v, 6), m3);
      for (int i = 0; i < V; ++i) {
        const __m256i* xb = reinterpret_cast<const __m256i*>(xp[i] + size_t(b) * kBlockElems + 32 * h);
        a[i] = _mm256_add_epi32(a[i], plane_products(c0, c1, c2, c3, _mm256_load_si256(xb), _mm256_load_si256(xb + 2),
                                                     _mm256_load_si256(xb + 4), _mm256_load_si256(xb + 6)));
      }
    }
  }
  for (int i = 0; i < V; ++i) acc[i][r] = hsum8(a[i]) - sumx[i];
}

// `count` vectors against rows [0, rows): acc[i][r] for vector i, four vectors per pass.
__attribute__((target("avx2"))) void matmul_avx2(const uint8_t* w, size_t stride, int blocks, int rows,
                                                 const int8_t* const* xp, const int32_t* sumx, int count,
                                                 int32_t* const* acc) {
  for (int r = 0; r < rows; ++r) {
    const uint8_t* wr = w + size_t(r) * stride;
    int i = 0;
    for (; i + 4 <= count; i += 4) avx2_row_vectors<4>(wr, stride, blocks, xp + i, sumx + i, acc + i, r);
    switch (count - i) {
      case 3: avx2_row_vectors<3>(wr, stride, blocks, xp + i, sumx + i, acc + i, r); break;
      case 2: avx2_row_vectors<2>(wr, stride, blocks, xp + i, sumx + i, acc + i, r); break;
      case 1: avx2_row_vectors<1>(wr, stride, blocks, xp + i, sumx + i, acc + i, r); break;
      default: break;
    }
  }
}

#define BITSIM_AVX512 "avx2,avx512f,avx512bw,avx512vl,avx512vnni"

// No shifts in the inner loop (512-bit shifts and vpdpbusd compete for port 0 on current
// Intel cores): plane k is masked in place, (w & (3 << 2k)) = code * 4^k <= 128, and has its
// own accumulator; every lane of accumulator k is a multiple of 4^k, so the exact sum is
// a0 + (a1 >> 2) + (a2 >> 4) + (a3 >> 6). No overflow: a lane of a3 adds at most 64
// products (4 per block, 16 blocks) of |128 * x| <= 2^14, |lane| <= 2^20.
template <int R>
__attribute__((target(BITSIM_AVX512))) inline void avx512_rows(const uint8_t* w, size_t stride,
                                                               int blocks, const int8_t* xp,
                                                               int32_t sumx, int32_t* acc) {
  const __m512i m0 = _mm512_set1_epi8(0x03), m1 = _mm512_set1_epi8(0x0C);
  const __m512i m2 = _mm512_set1_epi8(0x30), m3 = _mm512_set1_epi8(char(0xC0));
  __m512i a0[R], a1[R], a2[R], a3[R];
  for (int r = 0; r < R; ++r) a0[r] = a1[r] = a2[r] = a3[r] = _mm512_setzero_si512();
  for (int b = 0; b < blocks; ++b) {
    const int8_t* xb = xp + size_t(b) * kBlockElems;
    const __m512i x0 = _mm512_load_si512(xb);
    const __m512i x1 = _mm512_load_si512(xb + 64);
    const __m512i x2 = _mm512_load_si512(xb + 128);
    const __m512i x3 = _mm512_load_si512(xb + 192);
    for (int r = 0; r < R; ++r) {
      const uint8_t* wb = w + r * stride + size_t(b) * kBlockBytes;
      _mm_prefetch(reinterpret_cast<const char*>(wb + kPrefetchRows * stride), _MM_HINT_T0);
      const __m512i v = _mm512_load_si512(wb);
      // vpdpbusd: (code * 4^k) (unsigned) x int8, four products per int32 lane, exact.
      a0[r] = _mm512_dpbusd_epi32(a0[r], _mm512_and_si512(v, m0), x0);
      a1[r] = _mm512_dpbusd_epi32(a1[r], _mm512_and_si512(v, m1), x1);
      a2[r] = _mm512_dpbusd_epi32(a2[r], _mm512_and_si512(v, m2), x2);
      a3[r] = _mm512_dpbusd_epi32(a3[r], _mm512_and_si512(v, m3), x3);
    }
  }
  for (int r = 0; r < R; ++r) {
    const __m512i s = _mm512_add_epi32(
        _mm512_add_epi32(a0[r], _mm512_srai_epi32(a1[r], 2)),
        _mm512_add_epi32(_mm512_srai_epi32(a2[r], 4), _mm512_srai_epi32(a3[r], 6)));
    acc[r] = _mm512_reduce_add_epi32(s) - sumx;
  }
}

__attribute__((target(BITSIM_AVX512))) void matvec_avx512(const uint8_t* w, size_t stride,
                                                          int blocks, int rows, const int8_t* xp,
                                                          int32_t sumx, int32_t* acc) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) avx512_rows<4>(w + r * stride, stride, blocks, xp, sumx, acc + r);
  for (; r < rows; ++r) avx512_rows<1>(w + r * stride, stride, blocks, xp, sumx, acc + r);
}

#endif  // BITSIM_FAST_X86

using MatvecFn = void (*)(const uint8_t*, size_t, int, int, const int8_t*, int32_t, int32_t*);

MatvecFn matvec_fn(Kernel k) {
  switch (resolve_kernel(k)) {
#if BITSIM_FAST_X86
    case Kernel::Avx512: return matvec_avx512;
    case Kernel::Avx2: return matvec_avx2;
#endif
    default: return matvec_portable;
  }
}

void check_kernel(Kernel k) {
  if (!kernel_supported(k))
    throw Error(fmt::format("fast kernel {} is not supported by this CPU", kernel_name(k)));
}

// x zero-padded to whole blocks, 64-byte aligned, and its sum.
struct PaddedX {
  alignas(64) int8_t v[model::kMaxRowLength];
  int32_t sum = 0;
  PaddedX(const int8_t* x, int n, int blocks) {
    std::memcpy(v, x, size_t(n));
    std::memset(v + n, 0, size_t(blocks) * kBlockElems - size_t(n));
    for (int j = 0; j < n; ++j) sum += x[j];
  }
};

// Rows [0, rows) split in `parts` ranges; boundaries on multiples of 4 rows.
void part_range(int rows, int part, int parts, int* begin, int* end) {
  const int groups = (rows + 3) / 4;
  const int per = groups / parts, extra = groups % parts;
  const int g0 = part * per + std::min(part, extra);
  const int g1 = g0 + per + (part < extra ? 1 : 0);
  *begin = std::min(rows, 4 * g0);
  *end = std::min(rows, 4 * g1);
}

// ---- Attention --------------------------------------------------------------------------

// p_t from s_t (the V phase's multiplier / legacy shift and the EXP ROM) for t in [t0, T);
// returns the sum of those p_t. |s_t| <= 96 * 128 * 128, so s_max - s_t < 2^22 and
// (s_max - s_t) * m < 2^40.
uint32_t weights_range(const int32_t* s, int t0, int T, int32_t s_max, uint32_t m, int shift,
                       bool legacy, uint16_t* p) {
  uint32_t total = 0;
  for (int t = t0; t < T; ++t) {
    const uint16_t pt = num::attention_weight(uint32_t(int64_t(s_max) - int64_t(s[t])), m, shift, legacy);
    p[t] = pt;
    total += pt;
  }
  return total;
}

uint32_t weights_portable(const int32_t* s, int T, uint32_t m, int shift, bool legacy,
                          uint16_t* p) {
  int32_t s_max = s[0];
  for (int t = 1; t < T; ++t) s_max = std::max(s_max, s[t]);
  return weights_range(s, 0, T, s_max, m, shift, legacy, p);
}

// The EXP ROM widened to 32 bits, for gathers.
const uint32_t* exp_table32() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (int i = 0; i < 256; ++i) t[size_t(i)] = num::exp_table()[size_t(i)];
    return t;
  }();
  return table.data();
}

// Any head dimension D (the SIMD paths: D = kSimdHeadDim only).
void attention_portable(const int8_t* q, const int8_t* K, const int8_t* V, int T, int D, int32_t* s,
                        uint16_t* p, uint32_t m, int shift, bool legacy, int32_t* acc,
                        uint32_t* sum) {
  for (int t = 0; t < T; ++t) {
    const int8_t* k = K + size_t(t) * size_t(D);
    int32_t dot = 0;
    for (int d = 0; d < D; ++d) dot += int16_t(q[d]) * int16_t(k[d]);
    s[t] = dot;
  }
  *sum = weights_portable(s, T, m, shift, legacy, p);
  int32_t a[model::kMaxHeadDim] = {};
  for (int t = 0; t < T; ++t) {
    const int8_t* v = V + size_t(t) * size_t(D);
    const int32_t pt = p[t];
    for (int d = 0; d < D; ++d) a[d] += pt * v[d];
  }
  std::memcpy(acc, a, size_t(D) * sizeof(int32_t));
}

#if BITSIM_FAST_X86

// The K phase pulls the V rows it will need into the cache alongside (8 rows = 12 lines).
inline void prefetch_rows(const int8_t* v) {
  for (int i = 0; i < 8 * kSimdHeadDim; i += 64) _mm_prefetch(reinterpret_cast<const char*>(v + i), _MM_HINT_T0);
}

// Eight vectors of 8 int32 -> one vector of their eight lane sums (row order kept).
__attribute__((target("avx2"))) inline __m256i hsum8x8(const __m256i r[8]) {
  const __m256i h01 = _mm256_hadd_epi32(r[0], r[1]);
  const __m256i h23 = _mm256_hadd_epi32(r[2], r[3]);
  const __m256i h45 = _mm256_hadd_epi32(r[4], r[5]);
  const __m256i h67 = _mm256_hadd_epi32(r[6], r[7]);
  const __m256i h0123 = _mm256_hadd_epi32(h01, h23);  // lane L: rows 0..3, half L
  const __m256i h4567 = _mm256_hadd_epi32(h45, h67);
  const __m256i lo = _mm256_permute2x128_si256(h0123, h4567, 0x20);
  const __m256i hi = _mm256_permute2x128_si256(h0123, h4567, 0x31);
  return _mm256_add_epi32(lo, hi);
}

// weights_portable with AVX2: z in 64-bit lanes (even / odd dwords), clamped at 255,
// p_t gathered from the widened ROM; the tail (< 8) in scalar code.
__attribute__((target("avx2"))) uint32_t weights_avx2(const int32_t* s, int T, uint32_t m,
                                                      int shift, bool legacy, uint16_t* p) {
  int t = 0;
  __m256i vmax = _mm256_set1_epi32(INT32_MIN);
  for (; t + 8 <= T; t += 8)
    vmax = _mm256_max_epi32(vmax, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + t)));
  __m128i m4 = _mm_max_epi32(_mm256_castsi256_si128(vmax), _mm256_extracti128_si256(vmax, 1));
  m4 = _mm_max_epi32(m4, _mm_shuffle_epi32(m4, 0x4E));
  m4 = _mm_max_epi32(m4, _mm_shuffle_epi32(m4, 0xB1));
  int32_t s_max = _mm_cvtsi128_si32(m4);
  for (; t < T; ++t) s_max = std::max(s_max, s[t]);

  const uint32_t* table = exp_table32();
  const __m256i vsmax = _mm256_set1_epi32(s_max), M = _mm256_set1_epi64x(m);
  const __m256i c255 = _mm256_set1_epi64x(255), c255d = _mm256_set1_epi32(255);
  const __m128i cnt = _mm_cvtsi32_si128(shift);
  __m256i total = _mm256_setzero_si256();
  for (t = 0; t + 8 <= T; t += 8) {
    const __m256i diff =
        _mm256_sub_epi32(vsmax, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + t)));
    __m256i z;
    if (legacy) {
      z = _mm256_min_epu32(_mm256_srli_epi32(diff, 8), c255d);
    } else {
      __m256i ev = _mm256_srl_epi64(_mm256_mul_epu32(diff, M), cnt);
      __m256i od = _mm256_srl_epi64(_mm256_mul_epu32(_mm256_srli_epi64(diff, 32), M), cnt);
      ev = _mm256_blendv_epi8(ev, c255, _mm256_cmpgt_epi64(ev, c255));
      od = _mm256_blendv_epi8(od, c255, _mm256_cmpgt_epi64(od, c255));
      z = _mm256_or_si256(ev, _mm256_slli_epi64(od, 32));
    }
    const __m256i pv = _mm256_i32gather_epi32(reinterpret_cast<const int*>(table), z, 4);
    total = _mm256_add_epi32(total, pv);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(pv, pv), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + t), _mm256_castsi256_si128(packed));
  }
  return uint32_t(hsum8(total)) + weights_range(s, t, T, s_max, m, shift, legacy, p);
}

// V phase, AVX2: rows in pairs; bytes of V_t and V_t+1 interleaved and widened to int16
// pairs, pmaddwd with (p_t, p_t+1): p_t <= 32767 fits int16, each pair sum is exact int32.
__attribute__((target("avx2"))) void v_phase_avx2(const int8_t* V, int T, const uint16_t* p,
                                                  int32_t* acc) {
  __m256i a[12];
  for (auto& x : a) x = _mm256_setzero_si256();
  for (int t = 0; t < T; t += 2) {
    const int8_t* v0 = V + size_t(t) * kSimdHeadDim;
    const int8_t* v1 = t + 1 < T ? v0 + kSimdHeadDim : v0;  // p[T] = 0
    const uint32_t pp = uint32_t(p[t]) | uint32_t(p[t + 1]) << 16;
    const __m256i P = _mm256_set1_epi32(int32_t(pp));
    for (int c = 0; c < 6; ++c) {
      const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(v0 + 16 * c));
      const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(v1 + 16 * c));
      const __m256i lo = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x0, x1));
      const __m256i hi = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(x0, x1));
      a[2 * c] = _mm256_add_epi32(a[2 * c], _mm256_madd_epi16(lo, P));
      a[2 * c + 1] = _mm256_add_epi32(a[2 * c + 1], _mm256_madd_epi16(hi, P));
    }
  }
  for (int i = 0; i < 12; ++i) _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + 8 * i), a[i]);
}

__attribute__((target("avx2"))) void attention_avx2(const int8_t* q, const int8_t* K,
                                                    const int8_t* V, int T, int32_t* s,
                                                    uint16_t* p, uint32_t m, int shift,
                                                    bool legacy, int32_t* acc, uint32_t* sum) {
  // K phase: int8 widened to int16, pmaddwd, eight rows reduced together.
  __m256i q16[6];
  for (int c = 0; c < 6; ++c)
    q16[c] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16 * c)));
  auto row = [&](const int8_t* k) __attribute__((target("avx2"))) {
    __m256i r = _mm256_madd_epi16(
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k))), q16[0]);
    for (int c = 1; c < 6; ++c)
      r = _mm256_add_epi32(
          r, _mm256_madd_epi16(
                 _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + 16 * c))),
                 q16[c]));
    return r;
  };
  int t = 0;
  for (; t + 8 <= T; t += 8) {
    __m256i r[8];
    prefetch_rows(V + size_t(t) * kSimdHeadDim);
    for (int i = 0; i < 8; ++i) r[i] = row(K + size_t(t + i) * kSimdHeadDim);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + t), hsum8x8(r));
  }
  for (; t < T; ++t) s[t] = hsum8(row(K + size_t(t) * kSimdHeadDim));
  *sum = weights_avx2(s, T, m, shift, legacy, p);
  p[T] = 0;  // the V phase reads p in pairs
  v_phase_avx2(V, T, p, acc);
}

// weights_portable with AVX-512: 16 lanes, masked tail, z in 64-bit lanes (even / odd
// dwords), clamped at 255, p_t gathered from the widened ROM.
__attribute__((target(BITSIM_AVX512))) uint32_t weights_avx512(const int32_t* s, int T,
                                                               uint32_t m, int shift,
                                                               bool legacy, uint16_t* p) {
  const auto tail_mask = [T](int t) -> __mmask16 {
    return T - t >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (T - t)) - 1);
  };
  __m512i vmax = _mm512_set1_epi32(INT32_MIN);
  for (int t = 0; t < T; t += 16)
    vmax = _mm512_max_epi32(vmax, _mm512_mask_loadu_epi32(vmax, tail_mask(t), s + t));
  const int32_t s_max = _mm512_reduce_max_epi32(vmax);

  const uint32_t* table = exp_table32();
  const __m512i vsmax = _mm512_set1_epi32(s_max), M = _mm512_set1_epi64(m);
  const __m512i c255 = _mm512_set1_epi64(255), c255d = _mm512_set1_epi32(255);
  const __m128i cnt = _mm_cvtsi32_si128(shift);
  __m512i total = _mm512_setzero_si512();
  for (int t = 0; t < T; t += 16) {
    const __mmask16 k = tail_mask(t);
    const __m512i diff = _mm512_sub_epi32(vsmax, _mm512_mask_loadu_epi32(vsmax, k, s + t));
    __m512i z;
    if (legacy) {
      z = _mm512_min_epu32(_mm512_srli_epi32(diff, 8), c255d);
    } else {
      const __m512i ev = _mm512_min_epu64(_mm512_srl_epi64(_mm512_mul_epu32(diff, M), cnt), c255);
      const __m512i od = _mm512_min_epu64(
          _mm512_srl_epi64(_mm512_mul_epu32(_mm512_srli_epi64(diff, 32), M), cnt), c255);
      z = _mm512_or_si512(ev, _mm512_slli_epi64(od, 32));
    }
    const __m512i pv = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, z, table, 4);
    total = _mm512_add_epi32(total, pv);
    _mm512_mask_cvtepi32_storeu_epi16(p + t, k, pv);
  }
  return uint32_t(_mm512_reduce_add_epi32(total));
}

__attribute__((target(BITSIM_AVX512))) void attention_avx512(const int8_t* q, const int8_t* K,
                                                             const int8_t* V, int T, int32_t* s,
                                                             uint16_t* p, uint32_t m, int shift,
                                                             bool legacy, int32_t* acc,
                                                             uint32_t* sum) {
  // K phase: vpdpbusd needs one unsigned operand: (K_td + 128) as unsigned bytes
  // (K ^ 0x80) times q_d, then s_t = that - 128 * sum_d q_d.
  const __m512i q0 = _mm512_loadu_si512(q);
  const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64));
  const __m512i f512 = _mm512_set1_epi8(char(0x80));
  const __m256i f256 = _mm256_set1_epi8(char(0x80));
  int32_t qsum = 0;
  for (int d = 0; d < kSimdHeadDim; ++d) qsum += q[d];
  const __m256i bias = _mm256_set1_epi32(128 * qsum);
  auto row = [&](const int8_t* k) __attribute__((target(BITSIM_AVX512))) {
    const __m512i z = _mm512_dpbusd_epi32(
        _mm512_setzero_si512(), _mm512_xor_si512(_mm512_loadu_si512(k), f512), q0);
    const __m256i y = _mm256_dpbusd_epi32(
        _mm256_setzero_si256(),
        _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 64)), f256), q1);
    return _mm256_add_epi32(
        _mm256_add_epi32(_mm512_castsi512_si256(z), _mm512_extracti64x4_epi64(z, 1)), y);
  };
  int t = 0;
  for (; t + 8 <= T; t += 8) {
    __m256i r[8];
    prefetch_rows(V + size_t(t) * kSimdHeadDim);
    for (int i = 0; i < 8; ++i) r[i] = row(K + size_t(t + i) * kSimdHeadDim);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + t), _mm256_sub_epi32(hsum8x8(r), bias));
  }
  for (; t < T; ++t) s[t] = hsum8(row(K + size_t(t) * kSimdHeadDim)) - 128 * qsum;
  *sum = weights_avx512(s, T, m, shift, legacy, p);
  p[T] = 0;  // the V phase reads p in pairs

  // V phase: rows in pairs, 32 dims per step: bytes of V_t and V_t+1 interleaved (in 128-bit
  // lanes: dims 0-7 / 16-23 and 8-15 / 24-31), widened to int16 pairs, vpdpwssd with
  // (p_t, p_t+1).
  __m512i lo[3], hi[3];
  for (int c = 0; c < 3; ++c) lo[c] = hi[c] = _mm512_setzero_si512();
  for (t = 0; t < T; t += 2) {
    const int8_t* v0 = V + size_t(t) * kSimdHeadDim;
    const int8_t* v1 = t + 1 < T ? v0 + kSimdHeadDim : v0;  // p[T] = 0
    const uint32_t pp = uint32_t(p[t]) | uint32_t(p[t + 1]) << 16;
    const __m512i P = _mm512_set1_epi32(int32_t(pp));
    for (int c = 0; c < 3; ++c) {
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v0 + 32 * c));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v1 + 32 * c));
      lo[c] = _mm512_dpwssd_epi32(lo[c], _mm512_cvtepi8_epi16(_mm256_unpacklo_epi8(x0, x1)), P);
      hi[c] = _mm512_dpwssd_epi32(hi[c], _mm512_cvtepi8_epi16(_mm256_unpackhi_epi8(x0, x1)), P);
    }
  }
  for (int c = 0; c < 3; ++c) {
    int32_t* o = acc + 32 * c;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), _mm512_castsi512_si256(lo[c]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 8), _mm512_castsi512_si256(hi[c]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 16), _mm512_extracti64x4_epi64(lo[c], 1));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 24), _mm512_extracti64x4_epi64(hi[c], 1));
  }
}

#endif  // BITSIM_FAST_X86

}  // namespace

// ---- Kernel choice ----------------------------------------------------------------------

const char* kernel_name(Kernel k) {
  switch (k) {
    case Kernel::Auto: return "auto";
    case Kernel::Portable: return "portable";
    case Kernel::Avx2: return "avx2";
    case Kernel::Avx512: return "avx512";
  }
  return "?";
}

bool kernel_supported(Kernel k) {
  switch (k) {
    case Kernel::Auto:
    case Kernel::Portable: return true;
    case Kernel::Avx2: return cpu_has_avx2();
    case Kernel::Avx512: return cpu_has_avx512();
  }
  return false;
}

Kernel resolve_kernel(Kernel k) {
  if (k != Kernel::Auto) return k;
  if (cpu_has_avx512()) return Kernel::Avx512;
  if (cpu_has_avx2()) return Kernel::Avx2;
  return Kernel::Portable;
}

// ---- Workers ----------------------------------------------------------------------------

namespace {
inline void cpu_relax() {
#if BITSIM_FAST_X86
  _mm_pause();
#endif
}
// Spin on `a` while it equals `old` for up to ~spin_us, then sleep in a futex wait.
template <typename T>
void wait_while_equal(const std::atomic<T>& a, T old, int spin_us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
  for (int i = 0;; ++i) {
    if (a.load(std::memory_order_acquire) != old) return;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) break;
  }
  while (a.load(std::memory_order_acquire) == old) a.wait(old, std::memory_order_acquire);
}
// Helpers stay awake this long for the next job (a token's matvecs follow each other
// within microseconds); the caller spins this long for a helper's last task before it
// sleeps (and so leaves its core to that helper on a busy host).
constexpr int kHelperSpinUs = 200;
constexpr int kCallerSpinUs = 50;
}  // namespace

Workers::Workers(int threads) {
  threads = std::max(1, threads);
  helpers_.reserve(size_t(threads - 1));
  for (int i = 1; i < threads; ++i) helpers_.emplace_back([this] { helper_main(); });
}

Workers::~Workers() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : helpers_) t.join();
}

bool Workers::work_on(uint32_t generation) {
  bool any = false;
  for (;;) {
    // One load gives the job's generation, its task count and the next task together: a
    // stale helper (woken for an earlier job) that read the earlier word can only fail its
    // compare-exchange, never claim a task of a later job under the earlier count.
    uint64_t c = claim_.load(std::memory_order_acquire);
    const int tasks = claim_tasks(c);
    if (claim_generation(c) != generation || claim_next(c) >= tasks) return any;
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) continue;
    // job_ of this generation stays valid until done_ reaches its task count.
    (*job_)(claim_next(c));
    any = true;
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == tasks) done_.notify_all();
  }
}

void Workers::helper_main() {
  uint32_t seen = 0;
  for (;;) {
    wait_while_equal(generation_, seen, kHelperSpinUs);
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    work_on(seen);
  }
}

void Workers::run(int tasks, const std::function<void(int)>& fn) {
  if (tasks <= 0) return;
  if (helpers_.empty() || tasks == 1) {
    for (int t = 0; t < tasks; ++t) fn(t);
    return;
  }
  if (tasks > kMaxTasks)
    throw Error(fmt::format("Workers::run: {} tasks is more than {} a job", tasks, kMaxTasks));
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  job_ = &fn;
  done_.store(0, std::memory_order_relaxed);
  claim_.store(claim_word(gen, tasks, 0), std::memory_order_release);
  generation_.store(gen, std::memory_order_release);
  generation_.notify_all();
  work_on(gen);
  for (int d; (d = done_.load(std::memory_order_acquire)) != tasks;)
    wait_while_equal(done_, d, kCallerSpinUs);
}

// ---- DecodedRows ------------------------------------------------------------------------


bool DecodedRows::decode(const uint8_t* packed, int rows, int n, int* bad_row, int threads) {
  if (rows < 0) throw Error(fmt::format("DecodedRows::decode: rows = {} < 0", rows));
  if (n < 1 || n > model::kMaxRowLength)
    throw Error(fmt::format("DecodedRows::decode: row length n = {} outside 1..{}", n,
                            model::kMaxRowLength));
  const int blocks = blocks_for(n);
  const size_t stride = size_t(blocks) * kBlockBytes;
  const size_t need = std::max<size_t>(stride * size_t(rows), kBlockBytes);
  keep_.reset();
  view_ = nullptr;
  if (data_.size() < need) {
    data_ = model::HugeMemory();
    rows_ = 0;
    data_ = model::HugeMemory(need, "DecodedRows::decode");
  }
  const size_t in_stride = model::packed_row_bytes(n);
  threads = std::clamp(threads, 1, std::max(1, rows / 64));
  std::vector<int> first_bad(size_t(threads), -1);
  auto work = [&](int part) {
    std::vector<uint8_t> codes(size_t(blocks) * kBlockElems + 8);
    const int r0 = int(int64_t(rows) * part / threads), r1 = int(int64_t(rows) * (part + 1) / threads);
    for (int r = r0; r < r1; ++r)
      if (!decode_row(packed + size_t(r) * in_stride, n, blocks, codes.data(),
                      data_.data() + size_t(r) * stride)) {
        first_bad[size_t(part)] = r;
        return;
      }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(work, i);
  work(0);
  for (auto& t : pool) t.join();
  for (int b : first_bad)
    if (b >= 0) {
      if (bad_row) *bad_row = b;
      rows_ = n_ = 0;
      stride_ = 0;
      return false;
    }
  rows_ = rows;
  n_ = n;
  stride_ = stride;
  return true;
}

size_t DecodedRows::bytes() const { return view_ ? size_t(rows_) * stride_ : data_.size(); }

size_t DecodedRows::bytes_for(int rows, int n) { return size_t(rows) * size_t(blocks_for(n)) * kBlockBytes; }

DecodedRows DecodedRows::view(int rows, int n, const uint8_t* data, std::shared_ptr<void> keep) {
  if (rows < 1 || n < 1 || n > model::kMaxRowLength)
    throw Error(fmt::format("DecodedRows::view: {} rows of length {}", rows, n));
  DecodedRows d;
  d.keep_ = std::move(keep);
  d.view_ = data;
  d.rows_ = rows;
  d.n_ = n;
  d.stride_ = size_t(blocks_for(n)) * kBlockBytes;
  return d;
}

void DecodedRows::matvec_rows(const int8_t* x, int row_begin, int row_end, int32_t* acc,
                              Kernel kernel) const {
  check_kernel(kernel);
  if (row_begin < 0 || row_end > rows_ || row_begin > row_end)
    throw Error(fmt::format("DecodedRows::matvec_rows: rows [{}, {}) outside [0, {})", row_begin,
                            row_end, rows_));
  if (row_begin == row_end) return;
  const int blocks = blocks_for(n_);
  const PaddedX xp(x, n_, blocks);
  matvec_fn(kernel)(data() + size_t(row_begin) * stride_, stride_, blocks,
                    row_end - row_begin, xp.v, xp.sum, acc);
}

void DecodedRows::matvec(const int8_t* x, int32_t* acc, int threads, Kernel kernel) const {
  check_kernel(kernel);
  threads = std::clamp(threads, 1, std::max(1, rows_ / 64));
  if (threads == 1) return matvec_rows(x, 0, rows_, acc, kernel);
  const int blocks = blocks_for(n_);
  const PaddedX xp(x, n_, blocks);
  const MatvecFn fn = matvec_fn(kernel);
  auto work = [&](int part) {
    int b, e;
    part_range(rows_, part, threads, &b, &e);
    if (b < e) fn(data() + size_t(b) * stride_, stride_, blocks, e - b, xp.v, xp.sum, acc + b);
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(work, i);
  work(0);
  for (auto& t : pool) t.join();
}

void DecodedRows::matvec(const int8_t* x, int32_t* acc, Workers& workers, Kernel kernel) const {
  check_kernel(kernel);
  if (workers.threads() == 1 || rows_ < 128) return matvec_rows(x, 0, rows_, acc, kernel);
  const int blocks = blocks_for(n_);
  const PaddedX xp(x, n_, blocks);
  const MatvecFn fn = matvec_fn(kernel);
  // Tasks of >= 64 rows (>= 24 KiB of weights), up to 8 per thread.
  const int tasks = std::clamp(rows_ / 64, 1, 8 * workers.threads());
  workers.run(tasks, [&](int task) {
    int b, e;
    part_range(rows_, task, tasks, &b, &e);
    if (b < e) fn(data() + size_t(b) * stride_, stride_, blocks, e - b, xp.v, xp.sum, acc + b);
  });
}

void DecodedRows::matmul(const int8_t* x, int count, int32_t* acc, Workers& workers, Kernel kernel) const {
  check_kernel(kernel);
  if (count < 0) throw Error(fmt::format("DecodedRows::matmul: {} vectors", count));
  if (count == 0 || rows_ == 0) return;
  const int blocks = blocks_for(n_);
  std::vector<PaddedX> xs;
  xs.reserve(size_t(count));
  for (int i = 0; i < count; ++i) xs.emplace_back(x + size_t(i) * size_t(n_), n_, blocks);
  const MatvecFn fn = matvec_fn(kernel);
  constexpr int kRowsPerTask = 64;
  const int tasks = (rows_ + kRowsPerTask - 1) / kRowsPerTask;
#if BITSIM_FAST_X86
  // Several vectors under the AVX2 kernel: each row's code planes split once for four vectors.
  if (count > 1 && resolve_kernel(kernel) == Kernel::Avx2) {
    std::vector<const int8_t*> xp(static_cast<size_t>(count));
    std::vector<int32_t> sums(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) xp[size_t(i)] = xs[size_t(i)].v, sums[size_t(i)] = xs[size_t(i)].sum;
    workers.run(tasks, [&](int task) {
      const int b = task * kRowsPerTask, e = std::min(rows_, b + kRowsPerTask);
      std::vector<int32_t*> out(static_cast<size_t>(count));
      for (int i = 0; i < count; ++i) out[size_t(i)] = acc + size_t(i) * size_t(rows_) + size_t(b);
      matmul_avx2(data() + size_t(b) * stride_, stride_, blocks, e - b, xp.data(), sums.data(), count, out.data());
    });
    return;
  }
#endif
  workers.run(tasks, [&](int task) {
    const int b = task * kRowsPerTask, e = std::min(rows_, b + kRowsPerTask);
    for (int i = 0; i < count; ++i)
      fn(data() + size_t(b) * stride_, stride_, blocks, e - b, xs[size_t(i)].v, xs[size_t(i)].sum,
         acc + size_t(i) * size_t(rows_) + size_t(b));
  });
}

// ---- matvec_packed ----------------------------------------------------------------------

void matvec_packed(const uint8_t* packed, int rows, int n, const int8_t* x, int32_t* acc,
                   Kernel kernel) {
  check_kernel(kernel);
  if (rows < 0 || n < 1 || n > model::kMaxRowLength)
    throw Error(fmt::format("matvec_packed: rows = {}, n = {} (n must be 1..{})", rows, n,
                            model::kMaxRowLength));
  if (rows == 0) return;
  const int blocks = blocks_for(n);
  const size_t stride = size_t(blocks) * kBlockBytes;
  const size_t in_stride = model::packed_row_bytes(n);
  const PaddedX xp(x, n, blocks);
  const MatvecFn fn = matvec_fn(kernel);
  constexpr int kChunk = 32;  // rows decoded at a time (<= 128 KiB of codes)
  struct alignas(64) Buf {
    uint8_t b[kChunk * (model::kMaxRowLength / kBlockElems) * kBlockBytes];
  };
  auto buf = std::make_unique<Buf>();
  std::vector<uint8_t> codes(size_t(blocks) * kBlockElems + 8);
  for (int r0 = 0; r0 < rows; r0 += kChunk) {
    const int cnt = std::min(kChunk, rows - r0);
    for (int i = 0; i < cnt; ++i)
      decode_row(packed + size_t(r0 + i) * in_stride, n, blocks, codes.data(), buf->b + size_t(i) * stride);
    fn(buf->b, stride, blocks, cnt, xp.v, xp.sum, acc + r0);
  }
}

// ---- attention_head ---------------------------------------------------------------------

void attention_head(const int8_t* q, const int8_t* K, const int8_t* V, int T, int d, uint32_t m,
                    int shift, bool legacy, int32_t* acc, uint32_t* sum, Kernel kernel) {
  check_kernel(kernel);
  if (T < 1 || T > 4096)
    throw Error(fmt::format("attention_head: T = {} outside 1..4096", T));
  if (shift < 0 || shift > 63)
    throw Error(fmt::format("attention_head: shift S = {} outside 0..63", shift));
  if (!model::head_dim_in_range(d))
    throw Error(fmt::format("attention_head: head dimension d = {} not a multiple of {} in {}..{}", d,
                            model::kHeadDimStep, model::kHeadDimStep, model::kMaxHeadDim));
  alignas(64) int32_t s[4096];
  alignas(64) uint16_t p[4096 + 16];
  const Kernel k = d == kSimdHeadDim ? resolve_kernel(kernel) : Kernel::Portable;  // SIMD: d = 96 only
  switch (k) {
#if BITSIM_FAST_X86
    case Kernel::Avx512: return attention_avx512(q, K, V, T, s, p, m, shift, legacy, acc, sum);
    case Kernel::Avx2: return attention_avx2(q, K, V, T, s, p, m, shift, legacy, acc, sum);
#endif
    default: return attention_portable(q, K, V, T, d, s, p, m, shift, legacy, acc, sum);
  }
}

void attention_head_online(const int8_t* q, const int8_t* K, const int8_t* V, int T, int D, size_t row_stride,
                           uint32_t m, int shift, int32_t* o, uint32_t* sum) {
  if (T < 1 || T > 4096) throw Error(fmt::format("attention_head_online: T = {} outside 1..4096", T));
  if (shift < 0 || shift > 63)
    throw Error(fmt::format("attention_head_online: shift S = {} outside 0..63", shift));
  // The scores first (independent dot products), then the one sequential pass of weights,
  // rescales (only when the maximum grows) and V rows, in int32 registers as the unit.
  alignas(64) int32_t s[4096];
  for (int t = 0; t < T; ++t) {
    const int8_t* k = K + size_t(t) * row_stride;
    int32_t dot = 0;
    for (int d = 0; d < D; ++d) dot += int16_t(q[d]) * int16_t(k[d]);
    s[t] = dot;
  }
  alignas(64) int32_t acc[model::kMaxHeadDim] = {};
  uint32_t total = 0;
  int32_t M = s[0];
  for (int t = 0; t < T; ++t) {
    int32_t pt = num::exp_table()[0];
    if (s[t] <= M) {
      if (t > 0) pt = num::exp_interp(num::online_index8(uint32_t(int64_t(M) - s[t]), m, shift));
    } else {
      const uint32_t alpha = num::exp_interp(num::online_index8(uint32_t(int64_t(s[t]) - M), m, shift));
      for (int d = 0; d < D; ++d) acc[d] = int32_t(num::online_rescale(acc[d], alpha));
      total = uint32_t(num::online_rescale(total, alpha));
      M = s[t];
    }
    const int8_t* v = V + size_t(t) * row_stride;
    for (int d = 0; d < D; ++d) acc[d] += pt * v[d];
    total += uint32_t(pt);
  }
  *sum = total;
  num::online_normalize(acc, total, D, o);
}

namespace {

// A byte's two nibbles as signed values.
const std::array<std::array<int8_t, 2>, 256>& nibble_table() {
  static const auto unpack = [] {
    std::array<std::array<int8_t, 2>, 256> u{};
    for (int b = 0; b < 256; ++b) u[size_t(b)] = {int8_t((b & 0xF) >= 8 ? (b & 0xF) - 16 : (b & 0xF)),
                                                  int8_t((b >> 4) >= 8 ? (b >> 4) - 16 : (b >> 4))};
    return u;
  }();
  return unpack;
}

// The INT4 rows' scores s[t] = q . k_t in the unit's fixed point (16 q_d per nibble channel;
// outlier channels score through their lanes only).
void int4_scores(const int8_t* q, const model::KvInt4Bank& bank, const uint8_t* rows, int T, size_t stride,
                 int32_t* s) {
  const auto& unpack = nibble_table();
  const int n = int(bank.outliers.size()), D = bank.head_dim();
  int32_t q16[model::kMaxHeadDim];
  for (int d = 0; d < D; ++d) q16[d] = int32_t(q[d]) << model::kKvFixedShift;
  for (int d : bank.outliers) q16[d] = 0;
  for (int t = 0; t < T; ++t) {
    const uint8_t* k = rows + size_t(t) * stride;
    int32_t dot = 0;
    for (int i = 0; i < D / 2; ++i) {
      const auto& u = unpack[k[i]];
      dot += q16[2 * i] * u[0] + q16[2 * i + 1] * u[1];
    }
    for (int j = 0; j < n; ++j) {
      uint16_t h;
      std::memcpy(&h, k + model::kv_nibble_bytes(D) + 2 * j, 2);
      const int d = bank.outliers[size_t(j)];
      dot += int32_t(q[d]) * model::kv_outlier_fixed(h, bank.sk[size_t(d)]);
    }
    s[t] = dot;
  }
}

}  // namespace

void attention_head_int4(const int8_t* q, const model::KvInt4Bank& bank, const uint8_t* rows, int T, uint32_t m,
                         int shift, int32_t* o, uint32_t* sum) {
  if (T < 1 || T > 4096) throw Error(fmt::format("attention_head_int4: T = {} outside 1..4096", T));
  if (shift < 0 || shift > 63) throw Error(fmt::format("attention_head_int4: shift S = {} outside 0..63", shift));
  const int n = int(bank.outliers.size()), D = bank.head_dim();
  const model::KvStorage st = model::kv_storage(model::KvFormat::Int4, n, D);
  const size_t krow = st.k.total(), stride = st.per_position();
  const auto& unpack = nibble_table();
  alignas(64) int32_t s[4096];
  int4_scores(q, bank, rows, T, stride, s);
  alignas(64) int64_t acc[model::kMaxHeadDim] = {};
  uint32_t total = 0;
  int32_t M = s[0];
  for (int t = 0; t < T; ++t) {
    uint32_t pt = num::exp_table()[0];
    if (s[t] <= M) {
      if (t > 0) pt = num::exp_interp(num::online_index8(uint32_t(int64_t(M) - s[t]), m, shift));
    } else {
      const uint32_t alpha = num::exp_interp(num::online_index8(uint32_t(int64_t(s[t]) - M), m, shift));
      for (int d = 0; d < D; ++d) acc[d] = model::kv_rescale(acc[d], alpha);
      total = uint32_t(num::online_rescale(total, alpha));
      M = s[t];
    }
    const uint8_t* v = rows + size_t(t) * stride + krow;
    for (int g = 0; g < D / model::kKvVGroup; ++g) {
      uint16_t sv;
      std::memcpy(&sv, v + model::kv_nibble_bytes(D) + 2 * g, 2);
      const int64_t w = model::kv_v_weight(pt, sv);
      int64_t* a = acc + g * model::kKvVGroup;
      const uint8_t* vb = v + g * model::kKvVGroup / 2;
      for (int i = 0; i < model::kKvVGroup / 2; ++i) {
        const auto& u = unpack[vb[i]];
        a[2 * i] += w * u[0];
        a[2 * i + 1] += w * u[1];
      }
    }
    total += pt;
  }
  *sum = total;
  model::kv_normalize(acc, total, D, o);
}

void attention_head_tip(const int8_t* q, const model::TipBank& bank, const model::TipTier* tiers, int region_log2,
                        const uint8_t* rows, int T, uint32_t m, int shift, int32_t* o, uint32_t* sum,
                        uint32_t* masses) {
  if (T < 1 || T > 4096) throw Error(fmt::format("attention_head_tip: T = {} outside 1..4096", T));
  if (shift < 0 || shift > 63) throw Error(fmt::format("attention_head_tip: shift S = {} outside 0..63", shift));
  const int lanes = int(bank.k.outliers.size()), R = 1 << region_log2, D = bank.head_dim();
  alignas(64) int64_t acc[model::kMaxHeadDim] = {};
  uint32_t total = 0, l = 0;  // the sum, and the current region's part of it
  uint32_t l_r[model::kTipMaxRegions * 2] = {};
  int32_t m_r[model::kTipMaxRegions * 2] = {};
  int32_t M = 0;
  const uint8_t* row = rows;
  for (int t = 0; t < T; ++t) {
    const model::TipTier tier = tiers[t >> region_log2];
    int32_t k12[model::kMaxHeadDim];
    model::tip_k12(row, tier, bank.k, k12);
    int32_t s = 0;
    for (int d = 0; d < D; ++d) s += int32_t(q[d]) * k12[d];
    uint32_t pt = num::exp_table()[0];
    if (t % R == 0) l = 0;
    if (t == 0) {
      M = s;
    } else if (s <= M) {
      pt = num::exp_interp(num::online_index8(uint32_t(int64_t(M) - s), m, shift));
    } else {
      const uint32_t alpha = num::exp_interp(num::online_index8(uint32_t(int64_t(s) - M), m, shift));
      for (int d = 0; d < D; ++d) acc[d] = model::kv_rescale(acc[d], alpha);
      total = uint32_t(num::online_rescale(total, alpha));
      l = uint32_t(num::online_rescale(l, alpha));
      M = s;
    }
    model::tip_accumulate_v(row + model::tip_k_bytes(tier, lanes, D), tier, bank.sv, pt, D, acc);
    total += pt;
    l += pt;
    if (t % R == R - 1 || t == T - 1) {
      l_r[t >> region_log2] = l;
      m_r[t >> region_log2] = M;
    }
    row += model::tip_row_bytes(tier, lanes, D);
  }
  *sum = total;
  model::kv_normalize(acc, total, D, o);
  for (int r = 0; r < model::tip_regions(T, region_log2); ++r)
    masses[r] = model::tip_region_mass(l_r[r], m_r[r], M, total, m, shift);
}

uint32_t attention_weights(const int32_t* s, int T, uint32_t m, int shift, bool legacy, uint16_t* p,
                           Kernel kernel) {
  check_kernel(kernel);
  if (T < 1 || T > 4096) throw Error(fmt::format("attention_weights: T = {} outside 1..4096", T));
  if (shift < 0 || shift > 63) throw Error(fmt::format("attention_weights: shift S = {} outside 0..63", shift));
  switch (resolve_kernel(kernel)) {
#if BITSIM_FAST_X86
    case Kernel::Avx512: return weights_avx512(s, T, m, shift, legacy, p);
    case Kernel::Avx2: return weights_avx2(s, T, m, shift, legacy, p);
#endif
    default: return weights_portable(s, T, m, shift, legacy, p);
  }
}

}  // namespace bitsim::hw::fast
