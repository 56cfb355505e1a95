#pragma once
// Fast functional kernels for the simulator's "fast" fidelity: the matmul engine's and the
// attention unit's arithmetic (CIRCUITS.md 2 and 3), bit-identical to the plain loops of
// golden::ternary_matvec and golden::attention_head, as fast as the host allows.
//
// Cached weight form (DecodedRows): packed rows are decoded once into 2-bit codes,
// code = t + 1 in {0, 1, 2}, 2 bits per weight. A row is ceil(n/256) blocks of 64 bytes;
// byte i of block b holds the codes of elements 256b + 64k + i at bits 2k..2k+1 (k = 0..3),
// so a block expands into four 64-element vectors with one shift and one AND each. Elements
// past n have code 1 (weight 0). The kernels compute sum_j code_j * x_j with unsigned x
// signed byte products (VNNI vpdpbusd / pmaddubsw: no saturation, |pair| <= 512) into exact
// int32 accumulators and subtract sum_j x_j: acc = sum (t+1) x - sum x = sum t x.
// bitnet-large (728M weights) takes 182 MB in this form, in a model::HugeMemory (2 MB pages:
// matvec streams the whole matrix, it is memory-bandwidth bound).
//
// Kernels are chosen at run time (never a global -march): AVX-512 (F, BW, VL, VNNI), AVX2,
// or portable C++ (plain x86-64 / SSE2 or any other host). Kernel::Auto picks the best the
// CPU supports; tests pass an explicit kernel to check every path the host can run.
//
// Threads: matvec splits rows over threads. Starting threads per call costs ~20-50 us, so a
// token loop should own a Workers pool (persistent helper threads, no global state) and pass
// it; matvec(x, acc, int threads) starts and joins threads - 1 helpers per call.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>

#include "model/kv_format.h"
#include "model/kv_tip.h"
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/huge_memory.h"

namespace bitsim::hw::fast {

enum class Kernel {
  Auto,      // the best supported below
  Portable,  // plain C++ (whatever the compiler makes of it for x86-64 / SSE2)
  Avx2,      // AVX2
  Avx512,    // AVX-512 F + BW + VL + VNNI
};
const char* kernel_name(Kernel k);
// True if this CPU can run kernel k (Auto and Portable: always).
bool kernel_supported(Kernel k);
// Auto -> the best supported kernel; any other value is returned unchanged (unchecked).
Kernel resolve_kernel(Kernel k);

// A small persistent thread pool the caller owns: threads() - 1 helper threads that sleep
// (after a short spin) between jobs. run(tasks, fn) calls fn(task) exactly once for every
// task in [0, tasks); the calling thread takes part, tasks are claimed one at a time by
// whichever thread is free (so a helper the OS does not schedule promptly delays nothing:
// the caller does its share), and run() returns when all are done. One run() at a time (not
// reentrant, not for concurrent callers).
class Workers {
 public:
  explicit Workers(int threads = 2);  // threads >= 1 (values < 1 mean 1)
  ~Workers();
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;
  int threads() const { return int(helpers_.size()) + 1; }
  void run(int tasks, const std::function<void(int task)>& fn);  // tasks <= 65535

 private:
  void helper_main();
  bool work_on(uint32_t generation);  // claims and runs tasks of that job; false if none left
  std::vector<std::thread> helpers_;
  // The claim word: generation << 32 | task count << 16 | next task, so that the three are
  // read together (a job has at most kMaxTasks tasks).
  static constexpr int kMaxTasks = 0xFFFF;
  static constexpr uint64_t claim_word(uint32_t generation, int tasks, int next) {
    return uint64_t(generation) << 32 | uint64_t(tasks) << 16 | uint64_t(next);
  }
  static constexpr uint32_t claim_generation(uint64_t c) { return uint32_t(c >> 32); }
  static constexpr int claim_tasks(uint64_t c) { return int((c >> 16) & 0xFFFF); }
  static constexpr int claim_next(uint64_t c) { return int(c & 0xFFFF); }
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> claim_{0};
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> done_{0};
  std::atomic<bool> stop_{false};
};

// Packed rows (CIRCUITS.md 2 layout: each row ceil(n/5) bytes + zero padding to a multiple
// of 8) decoded once into the 2-bit cached form described above.
class DecodedRows {
 public:
  DecodedRows() = default;
  DecodedRows(DecodedRows&&) noexcept = default;
  DecodedRows& operator=(DecodedRows&&) noexcept = default;

  // Decodes `rows` rows of length n (1..4096) from `packed` (row stride
  // model::packed_row_bytes(n)). Returns false and sets *bad_row (if non-null) to the first
  // row with a data byte >= 243 (the engine's "invalid trit" error) - the object is then
  // unusable (rows() == 0). Padding digits and padding bytes are not checked, as in the
  // engine. Throws bitsim::Error for rows < 0 or n outside 1..4096. `threads` > 1 splits
  // the decoding over that many threads (the result does not depend on it).
  bool decode(const uint8_t* packed, int rows, int n, int* bad_row, int threads = 1);
  // Rows decoded before and held elsewhere (bytes_for(rows, n) bytes at `data`, kept alive by
  // `keep`): the decoded form read back from the start-up cache (model/derived_store.h).
  static DecodedRows view(int rows, int n, const uint8_t* data, std::shared_ptr<void> keep);
  static size_t bytes_for(int rows, int n);  // rows * row_stride() of rows of length n

  int rows() const { return rows_; }
  int n() const { return n_; }
  size_t bytes() const;  // memory held
  size_t row_stride() const { return stride_; }  // bytes per decoded row (64 * blocks)
  const uint8_t* data() const { return view_ ? view_ : data_.data(); }  // rows() * row_stride() bytes

  // acc[r] = sum_j t_rj * x_j for r in [0, rows()): exact, equal to golden::ternary_matvec.
  // x holds n() values. Rows are split over `threads` threads started for this call.
  void matvec(const int8_t* x, int32_t* acc, int threads = 2, Kernel kernel = Kernel::Auto) const;
  // The same with the caller's persistent pool (rows split over workers.threads()).
  void matvec(const int8_t* x, int32_t* acc, Workers& workers, Kernel kernel = Kernel::Auto) const;
  // `count` matvecs with this matrix: acc[i * rows() + r] = sum_j t_rj * x[i * n() + j] for
  // i < count, each equal to matvec(x + i * n()). The rows are split over `workers` in
  // blocks of 64, and each block runs every x while its weights sit in the core's cache,
  // so the weights are read from memory once for all count vectors.
  void matmul(const int8_t* x, int count, int32_t* acc, Workers& workers, Kernel kernel = Kernel::Auto) const;
  // Rows [row_begin, row_end) only, on the calling thread; acc[r - row_begin].
  void matvec_rows(const int8_t* x, int row_begin, int row_end, int32_t* acc,
                   Kernel kernel = Kernel::Auto) const;

 private:
  model::HugeMemory data_;  // the decoded rows (bytes(): its size)
  std::shared_ptr<void> keep_;      // or a view: the mapping that holds them
  const uint8_t* view_ = nullptr;
  size_t stride_ = 0;
  int rows_ = 0, n_ = 0;
};

// The same arithmetic directly from packed bytes (no cache), for one-off streams: rows are
// decoded in small chunks into a local buffer and run through the same kernel. A data byte
// >= 243 counts as five zero trits (model::trit_decode_table()); the caller checks validity.
void matvec_packed(const uint8_t* packed, int rows, int n, const int8_t* x, int32_t* acc,
                   Kernel kernel = Kernel::Auto);

// The attention unit's arithmetic for one head (CIRCUITS.md 3), equal to
// golden::attention_head bit for bit: q[d], K and V [T][d] int8 (row-major), T in 1..4096,
// d the head dimension (a multiple of 8 in 8..256), m < 2^18, shift S in 0..63, legacy = the
// fixed >> 8. acc[d] and *sum receive the result words. At d = 96 (the board's) the K phase
// dot products and the V accumulation are vectorized (AVX2, AVX-512); any other d runs the
// portable loops (tests/hw/fast_kernels_test.cpp proves both equal to the golden reference).
void attention_head(const int8_t* q, const int8_t* K, const int8_t* V, int T, int d, uint32_t m,
                    int shift, bool legacy, int32_t* acc, uint32_t* sum,
                    Kernel kernel = Kernel::Auto);

// The online-softmax unit's arithmetic for one head (docs/variants-attention.md section 3),
// equal to golden::attention_head_online bit for bit: K row t at K + t * row_stride, V row t
// at V + t * row_stride (the unit's interleaved stream: K = q + d, V = K + d, stride 2 d),
// T in 1..4096, d the head dimension, S in 0..63. o[d] receives the normalized outputs
// (Q15.16), *sum the sum.
void attention_head_online(const int8_t* q, const int8_t* K, const int8_t* V, int T, int d, size_t row_stride,
                           uint32_t m, int shift, int32_t* o, uint32_t* sum);

// The online-softmax unit reading INT4 KV rows (docs/variants-attention.md 8.3), equal to
// golden::attention_head_int4 bit for bit: `rows` the head's interleaved rows as streamed
// (K_t of kv_storage(Int4, n, d).k.total() bytes, then V_t's), `bank` the head's bank
// (model::read_kv_bank; d = bank.head_dim()), T in 1..4096. o[d] (Q15.16) and *sum as the
// unit returns them.
void attention_head_int4(const int8_t* q, const model::KvInt4Bank& bank, const uint8_t* rows, int T, uint32_t m,
                         int shift, int32_t* o, uint32_t* sum);

// The online-softmax unit reading TIP rows (docs/tip.md), equal to golden::attention_head_tip
// bit for bit: `rows` the head's interleaved rows as streamed, each at the tier of its region
// (tiers[t >> region_log2]: K then V at model::tip_k_bytes / tip_row_bytes), `bank` the head's
// TIP bank (model::read_tip_bank; d = bank.head_dim()), T in 1..4096. o[d] (Q15.16), *sum, and masses[r] for the
// ceil(T / R) regions (UQ0.16) as the unit returns them.
void attention_head_tip(const int8_t* q, const model::TipBank& bank, const model::TipTier* tiers, int region_log2,
                        const uint8_t* rows, int T, uint32_t m, int shift, int32_t* o, uint32_t* sum,
                        uint32_t* masses);

// The weight step alone, as attention_head runs it between its K and V phases: p[t] =
// num::attention_weight(s_max - s[t], m, shift, legacy) for t < T, s_max = max s; returns the
// sum of the p[t]. The portable path calls num::attention_weight; the SIMD paths compute the
// same integers in vector lanes (tests/hw/fast_kernels_test.cpp proves them equal over every
// score difference a head can produce). Throws bitsim::Error for T outside 1..4096 or shift
// outside 0..63.
uint32_t attention_weights(const int32_t* s, int T, uint32_t m, int shift, bool legacy, uint16_t* p,
                           Kernel kernel = Kernel::Auto);

}  // namespace bitsim::hw::fast
