#pragma once
// BoardReference: one token step of bitnet on the board, with the board's arithmetic and
// no hardware. Plain loops, written to be checked line by line against CIRCUITS.md:
//   - section 2: the matmul engine's integer ternary x int8 dot products (ternary_matvec)
//   - section 3: the attention unit's integer pipeline, including the legacy shift mode
//     (attention_head)
//   - section 4: every CPU step through the numerics library (bitsim::num)
//   - section 5: the token loop: what runs where, KV cache with fixed per-(layer, head)
//     scales from a 144-token calibration pass over a fixed text that is not the prompt,
//     the ternary lm_head.
// The simulated board must produce the same logits bit for bit.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "golden/compact_trits.h"
#include "golden/shared_rows.h"
#include "model/derived_store.h"
#include "model/kv_scales.h"
#include "model/attention_stream.h"
#include "model/board_shape.h"
#include "model/kv_format.h"
#include "model/kv_tip.h"
#include "model/model_loader.h"
#include "model/tokenizer.h"
#include "numerics/numerics.h"

namespace bitsim::golden {

constexpr int kMaxContext = model::kKvPositions;   // the board's KV area per (layer, head)
constexpr int kCalibrationTokens = 144;

// ---- The circuits' integer arithmetic -------------------------------------------------

// Matmul engine (CIRCUITS.md 2): acc_r = sum_j t_rj * x_j for rows [row_begin, row_end).
void ternary_matvec(const model::TernaryMatrix& w, int row_begin, int row_end, const int8_t* x,
                    int32_t* acc);

// The prefill engine's group (docs/prefill.md 1-2): V activation vectors (x: V rows of
// w.cols values) against rows [row_begin, row_end), results row-major as the engine returns
// them: acc[(r - row_begin) * V + p] = sum_j t_rj * x[p * w.cols + j]. Plain loops, one
// position at a time: each is ternary_matvec for that position's vector.
void prefill_matvec(const model::TernaryMatrix& w, int row_begin, int row_end, const int8_t* x, int vectors,
                    int32_t* acc);

// The per-call format (docs/variants-host.md), and a row longer than the engine's 4096 in the
// header format with L = model::segment_trits(n) (docs/packed-image.md, "Rows longer than the
// engine's"): the engine sums one fixed-length segment of L elements per call (elements past
// n count 0) and the CPU adds the ceil(n/L) partial sums in segment order. Plain loops; equal
// to ternary_matvec because int32 addition of these bounded sums is exact (|acc| <= n * 128).
void ternary_matvec_per_call(const model::TernaryMatrix& w, int row_begin, int row_end, const int8_t* x, int L,
                             int32_t* acc);

// Attention unit (CIRCUITS.md 3), one head: q[D], K and V [T][D] int8, T in 1..512, D the
// head dimension the unit is built for (attention.head_dim; the board's 96). acc[D] and sum
// receive the result words.
struct AttentionParams {
  uint32_t m = 0;       // multiplier, < 2^18
  int shift = 24;       // S, 0..63
  bool legacy = false;  // legacy shift mode: z_t = (s_max - s_t) >> 8
};
void attention_head(const int8_t* q, const int8_t* K, const int8_t* V, int T, int D,
                    const AttentionParams& p, int32_t* acc, uint32_t* sum);

// The online-softmax unit (docs/variants-attention.md section 3), one head: the same
// inputs (K and V as separate [T][D] arrays: the arithmetic does not depend on the stream's
// row order). o[D] receives the normalized outputs (Q15.16), *sum the final sum. m, shift
// as above; p.legacy must be false.
void attention_head_online(const int8_t* q, const int8_t* K, const int8_t* V, int T, int D,
                           const AttentionParams& p, int32_t* o, uint32_t* sum);

// The online-softmax unit reading the INT4 KV codec (docs/variants-attention.md 8.3), one
// head: q[D] int8 (K's channel scales already folded in), the (layer, head)'s bank bytes,
// K rows [T][kv_storage(Int4, n, D).k.total()] and V rows [T][kv_storage(Int4, 0, D).v.total()]
// (56 at D = 96) as stored, n outlier lanes, D a multiple of 32. o[D] receives the normalized
// outputs (Q15.16 in V's float units), *sum the final sum. p.legacy must be false.
void attention_head_int4(const int8_t* q, const uint8_t* bank, const uint8_t* K, const uint8_t* V, int T, int n,
                         int D, const AttentionParams& p, int32_t* o, uint32_t* sum);

// The online-softmax unit reading TIP's tiers (docs/tip.md), one head: q[D] as for INT4,
// the (layer, head)'s bank (D = bank.head_dim()), T rows of `stride` bytes each holding the row of its region's
// tier (K then V at the tier's sizes), tiers[] per region of `region` positions. o[D] and
// *sum as for INT4; masses[r] receives each region's attention mass in UQ0.16.
void attention_head_tip(const int8_t* q, const model::TipBank& bank, const uint8_t* rows, size_t stride,
                        const model::TipTier* tiers, int region, int T, const AttentionParams& p, int32_t* o,
                        uint32_t* sum, std::vector<uint32_t>* masses);

// The matmul engine's arithmetic over all rows of w, rows split over host threads.
void parallel_matvec(const model::TernaryMatrix& w, const int8_t* x, int32_t* acc, int threads);

// ---- KV scales and calibration -------------------------------------------------------

// KvScales: model/kv_scales.h (the token loop uses them too).
using model::KvScales;

// The fixed calibration text (English prose written for bitsim, not an evaluation text).
const std::string& calibration_text();
// BOS followed by the first 143 tokens of the calibration text (repeated if too short).
std::vector<int> calibration_tokens(const model::Tokenizer& tok, int bos_token_id);

// The calibration pass: the board's token loop over `tokens` with float K/V and a float
// softmax attention (no KV quantization: the scales do not exist yet); records max|K| and
// max|V| per (layer, head); s = max(max|.|, 1e-5) / 127.
// `threads` splits the matmul rows (the result does not depend on it).
KvScales calibrate_kv_scales(const model::TernaryModel& m, const std::vector<int>& tokens, int threads = 1);

// ---- Observing intermediate tensors (to locate a divergence) --------------------------

// StepProbe and Probe: model/kv_scales.h (the token loop takes them too).
using model::Probe;
using model::StepProbe;

// ---- The token step ------------------------------------------------------------------

// acc[r] = sum_j t_rj * x_j over all rows of w: the matmul engine's arithmetic.
using MatvecFn = std::function<void(const model::TernaryMatrix& w, const int8_t* x, int32_t* acc)>;

// The calibration pass with another matmul kernel, proven equal to ternary_matvec (integer
// sums: equal sums give the same scales bit for bit), e.g. the fast fidelity's decoded
// kernels (sim/fast_matvec.h). The overload above is this with the plain loop.
KvScales calibrate_kv_scales(const model::TernaryModel& m, const std::vector<int>& tokens, const MatvecFn& matvec);

// acc[i * w.rows + r] = sum_j t_rj * x[i * w.cols + j] for i < count: `count` matvecs with
// one matrix (x: count rows of w.cols values, acc: count rows of w.rows sums).
using MatmulFn = std::function<void(const model::TernaryMatrix& w, const int8_t* x, int count, int32_t* acc)>;

// The calibration pass with `batch` positions at a time: the token loop runs layer by layer
// over a batch, so one matmul call takes all of its positions (a kernel can then reuse each
// weight row for every position). Each position's arithmetic is that of the one-at-a-time
// pass, so the scales do not depend on `batch` (Calibration.ScalesDoNotDependOnTheBatch).
// The overloads above are this with batch 1.
KvScales calibrate_kv_scales_batched(const model::TernaryModel& m, const std::vector<int>& tokens,
                                     const MatmulFn& matmul, int batch);

struct BoardReferenceOptions {
  bool legacy_attention = false;  // the earlier unit's fixed >> 8 instead of the multiplier
  int threads = 1;                // matmul rows split over threads (results do not depend on it)
  // attention.variant: the board's two-phase unit (CPU finish) or the online-softmax unit
  // (normalized on the PL, attention_head_online + num::attention_finish_online).
  model::AttentionVariant attention_variant = model::AttentionVariant::TwoPhase;
  // kv.format / kv.outlier_channels: the board's int8 rows, or the INT4 codec (online-softmax
  // only; docs/variants-attention.md 8), or TIP's tiers (online-softmax only; docs/tip.md).
  model::KvFormat kv_format = model::KvFormat::Int8;
  int kv_outlier_channels = 0;
  // The matmuls read the weights in the 2-bit layout of golden/compact_trits.h (built once,
  // at construction; a quarter of the int8 trits' bytes per token) instead of the int8
  // trits. The sums are the same (CompactTrits' test against ternary_matvec).
  bool compact_trits = true;
  int build_threads = 0;  // threads of the one-time compact layout build (0: `threads`)
  // Where the compact layout is kept between runs (the start-up cache; null: built each
  // time). The codes read back are the ones built (model/derived_store.h).
  model::DerivedStore* derived = nullptr;
  // Positions the KV caches hold (the run's context limit): 1..kMaxContext, or with
  // kv.format = int4 1..model::kAttentionInt4MaxT (docs/variants-attention.md 8.8).
  int context = kMaxContext;
  model::TipSettings tip{};  // kv.format = tip: the kv.tip.* settings
};

struct TokenStats {
  int multiplier_lowered = 0;     // heads whose S had to be lowered for m to fit 18 bits
  int multiplier_saturated = 0;
};

class BoardReference {
 public:
  BoardReference(const model::TernaryModel& model, KvScales scales,
                 BoardReferenceOptions options = {});

  // Runs token `token` at position `pos` (must equal the number of positions already in
  // the KV cache), appends its K and V, and returns the logits [vocab].
  std::vector<float> step(int token, const Probe& probe = {});
  // A prefill chunk (docs/prefill.md 2, 6): tokens[i] at position position() + i, run layer
  // by layer over the chunk so that each matmul reads its weights once for all positions;
  // each position's arithmetic is exactly step()'s (position order within each step, so a
  // position's attention sees the chunk's earlier K/V). Returns each position's logits: the
  // last position's always, the others' only with `all_logits` (empty vectors otherwise).
  // The probe sees every position's tensors, each with its `position`.
  std::vector<std::vector<float>> chunk(const std::vector<int>& tokens, bool all_logits, const Probe& probe = {});

  int position() const { return pos_; }
  // Back to an empty context (TIP's region tables too: nothing carries over).
  void reset();
  // Replaces the plain-loop matvec with a kernel proven equal to ternary_matvec (integer
  // sums: equal means bit-identical logits), e.g. hw::fast::DecodedRows. Empty: the loop.
  void set_matvec(MatvecFn fn) { matvec_fn_ = std::move(fn); }
  // The compact-layout matvecs' rows (golden/shared_rows.h): a thread whose own work is done
  // takes rows of a step running on another thread with help(), between open() and close().
  SharedRows& shared_rows() const { return shared_rows_; }
  const KvScales& scales() const { return scales_; }
  const TokenStats& last_stats() const { return stats_; }
  const model::TernaryModel& model() const { return model_; }
  // KV cache rows as the board stores them (CIRCUITS.md 5): [layer][K/V head][512][d] int8,
  // d the model's head_dim (the unit's attention.head_dim).
  // Every accessor below takes a K/V head (0..num_kv_heads-1; the query head under plain
  // multi-head attention).
  const int8_t* k_rows(int layer, int head) const;
  const int8_t* v_rows(int layer, int head) const;
  // kv.format = int4: a (layer, head)'s bank bytes and its stored K and V rows
  // ([512][k.total()], [512][v.total()]).
  const uint8_t* int4_bank(int layer, int head) const;
  const uint8_t* int4_k_rows(int layer, int head) const;
  const uint8_t* int4_v_rows(int layer, int head) const;
  // kv.format = tip: a (layer, head)'s region table and the stored row of position t (its
  // region's tier's bytes, K then V, at the start of a 2 d-byte slot).
  const model::TipRegions& tip_regions(int layer, int head) const;
  const uint8_t* tip_row(int layer, int head, int t) const;

 private:
  void build_compact_trits();
  // `count` matvecs with w (x: count rows of w.cols, acc: count rows of w.rows).
  void matmul(const model::TernaryMatrix& w, const int8_t* x, int count, int32_t* acc) const;
  // One position's attention at a layer in each KV format: q [heads*d], k and v
  // [kv_heads*d]; query head h reads K/V head h / group() (grouped-query attention).
  void attention_int8(int layer, int pos, const float* q, const float* k, const float* v, float* o);
  void attention_int4(int layer, int pos, const float* q, const float* k, const float* v, float* o);
  void attention_tip(int layer, int pos, const float* q, const float* k, const float* v, float* o);
  AttentionParams per_channel_query(const float* q, const uint16_t* sk, int8_t* qq);
  void tip_place_and_write(size_t layer_kv_head, int pos, const float* k, const float* v);
  size_t tip_slot() const { return 2 * size_t(d_); }  // a position's row at its tier, in the largest tier's bytes
  const model::TernaryModel& model_;
  std::unordered_map<const model::TernaryMatrix*, CompactTrits> compact_;  // with options.compact_trits
  KvScales scales_;
  BoardReferenceOptions options_;
  MatvecFn matvec_fn_;
  mutable SharedRows shared_rows_;
  int d_;  // the head dimension: the model's head_dim, the unit's attention.head_dim
  num::RopeTable rope_;
  model::HugeMemory k_cache_, v_cache_;  // int8 [layer][K/V head][context][d]
  std::vector<model::KvInt4Bank> banks_;           // int4: per (layer, head)
  std::vector<uint8_t> bank_bytes_, k4_cache_, v4_cache_;
  std::vector<model::TipBank> tip_banks_;           // tip: per (layer, head)
  std::vector<model::TipRegions> tip_regions_;
  std::vector<uint8_t> tip_rows_;                   // tip: [layer][head][context][tip_slot()]
  int pos_ = 0;
  TokenStats stats_;
};

}  // namespace bitsim::golden
