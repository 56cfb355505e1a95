#include "golden/board_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "base/error.h"
#include "golden/loop_clones.h"
#include "model/kv_format.h"
#include "base/stop_signal.h"

namespace bitsim::golden {

using model::TernaryMatrix;
using model::TernaryModel;

// ---- The circuits' integer arithmetic -------------------------------------------------

// The loop is plain C++, compiled for AVX-512, AVX2 and the baseline (golden/loop_clones.h):
// the integer sum (|t_j x_j| <= 128, n <= 4096: no overflow in any order) is the same in each.
BITSIM_GOLDEN_CLONES
void ternary_matvec(const TernaryMatrix& w, int row_begin, int row_end, const int8_t* x,
                    int32_t* acc) {
  const int n = w.cols;
  for (int r = row_begin; r < row_end; ++r) {
    const int8_t* t = w.row(r);
    int32_t s = 0;
    for (int j = 0; j < n; ++j) s += int32_t(t[j]) * int32_t(x[j]);  // t in {-1, 0, +1}
    acc[r - row_begin] = s;
  }
}

void prefill_matvec(const TernaryMatrix& w, int row_begin, int row_end, const int8_t* x, int vectors,
                    int32_t* acc) {
  const int n = w.cols, rows = row_end - row_begin;
  std::vector<int32_t> one(size_t(std::max(0, rows)));
  for (int p = 0; p < vectors; ++p) {  // one position at a time: the board's sums for its token
    ternary_matvec(w, row_begin, row_end, x + size_t(p) * size_t(n), one.data());
    for (int r = 0; r < rows; ++r) acc[size_t(r) * size_t(vectors) + size_t(p)] = one[size_t(r)];
  }
}

void ternary_matvec_per_call(const TernaryMatrix& w, int row_begin, int row_end, const int8_t* x, int L,
                             int32_t* acc) {
  const int n = w.cols;
  for (int r = row_begin; r < row_end; ++r) acc[r - row_begin] = 0;
  for (int first = 0; first < n; first += L) {     // one call per segment
    for (int r = row_begin; r < row_end; ++r) {
      const int8_t* t = w.row(r);
      int32_t partial = 0;                           // the engine's sum of one fixed row
      for (int j = first; j < first + L; ++j) partial += j < n ? int32_t(t[j]) * int32_t(x[j]) : 0;
      acc[r - row_begin] += partial;                 // the CPU's partial-sum addition
    }
  }
}

void attention_head(const int8_t* q, const int8_t* K, const int8_t* V, int T, int D,
                    const AttentionParams& p, int32_t* acc, uint32_t* sum) {
  // K phase: s_t = sum_d q_d * K_td (int32).
  std::vector<int32_t> s(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) {
    int32_t dot = 0;
    for (int d = 0; d < D; ++d) dot += int32_t(q[d]) * int32_t(K[t * D + d]);
    s[t] = dot;
  }
  const int32_t s_max = *std::max_element(s.begin(), s.end());
  // V phase: p_t from the one shared multiplier (or the legacy shift) and the ROM.
  uint32_t total = 0;
  for (int d = 0; d < D; ++d) acc[d] = 0;
  for (int t = 0; t < T; ++t) {
    const uint32_t diff = uint32_t(int64_t(s_max) - int64_t(s[t]));  // >= 0, < 2^22
    const uint32_t pt = num::attention_weight(diff, p.m, p.shift, p.legacy);
    total += pt;
    for (int d = 0; d < D; ++d) acc[d] += int32_t(pt) * int32_t(V[t * D + d]);
  }
  *sum = total;
}

// The online-softmax unit's running maximum (docs/variants-attention.md section 3) at row
// t with score s: p_t, the row's weight against the maximum, and alpha, the rescale of the
// accumulators when the maximum grows. M is updated.
namespace {
struct OnlineStep {
  uint32_t p = 0;
  bool grew = false;   // the maximum grew: rescale acc and sum by alpha first
  uint32_t alpha = 0;
};
OnlineStep online_max_step(int t, int32_t s, int32_t& M, const AttentionParams& p) {
  OnlineStep r{num::exp_table()[0], false, 0};
  if (t == 0) {
    M = s;
  } else if (s <= M) {
    r.p = num::exp_interp(num::online_index8(uint32_t(int64_t(M) - s), p.m, p.shift));
  } else {
    r.grew = true;
    r.alpha = num::exp_interp(num::online_index8(uint32_t(int64_t(s) - M), p.m, p.shift));
    M = s;
  }
  return r;
}
}  // namespace

void attention_head_online(const int8_t* q, const int8_t* K, const int8_t* V, int T, int D,
                           const AttentionParams& p, int32_t* o, uint32_t* sum) {
  if (p.legacy) throw Error("attention_head_online: the online-softmax unit has no legacy shift mode");
  // One pass: per row the score, the running maximum M, the weight p (and alpha, the
  // rescale of acc and sum, when M grows), then the V row.
  int64_t acc[model::kMaxHeadDim] = {};
  int64_t total = 0;
  int32_t M = 0;
  for (int t = 0; t < T; ++t) {
    int32_t s = 0;
    for (int d = 0; d < D; ++d) s += int32_t(q[d]) * int32_t(K[t * D + d]);
    const OnlineStep step = online_max_step(t, s, M, p);
    const uint32_t pt = step.p;
    if (step.grew) {
      for (int d = 0; d < D; ++d) acc[d] = num::online_rescale(acc[d], step.alpha);
      total = num::online_rescale(total, step.alpha);
    }
    for (int d = 0; d < D; ++d) acc[d] += int64_t(pt) * V[t * D + d];
    total += pt;
  }
  // The registers' widths (docs/variants-attention.md: the bounds).
  int32_t acc32[model::kMaxHeadDim];
  for (int d = 0; d < D; ++d) {
    if (acc[d] >= (int64_t(1) << 31) || acc[d] < -(int64_t(1) << 31))
      throw Error(fmt::format("attention_head_online: acc_{} = {} exceeds int32", d, acc[d]));
    acc32[d] = int32_t(acc[d]);
  }
  *sum = uint32_t(total);
  num::online_normalize(acc32, *sum, D, o);
}

void attention_head_int4(const int8_t* q, const uint8_t* bank_bytes, const uint8_t* K, const uint8_t* V, int T, int n,
                         int D, const AttentionParams& p, int32_t* o, uint32_t* sum) {
  if (p.legacy) throw Error("attention_head_int4: the online-softmax unit has no legacy shift mode");
  const model::KvStorage st = model::kv_storage(model::KvFormat::Int4, n, D);
  const size_t krow = st.k.total(), vrow = st.v.total();
  const model::KvInt4Bank bank = model::read_kv_bank(bank_bytes, n, D);
  int64_t acc[model::kMaxHeadDim] = {};
  int64_t total = 0;
  int32_t M = 0;
  for (int t = 0; t < T; ++t) {
    const uint8_t* kr = K + size_t(t) * krow;
    const uint8_t* vr = V + size_t(t) * vrow;
    // K in its fixed point (sk_d / 16): 16 times the nibble, or the outlier lane converted.
    int32_t k12[model::kMaxHeadDim];
    for (int d = 0; d < D; ++d) k12[d] = 16 * model::kv_nibble(kr, d);
    for (int j = 0; j < n; ++j) {
      uint16_t lane;
      std::memcpy(&lane, kr + model::kv_nibble_bytes(D) + 2 * j, 2);
      const int d = bank.outliers[size_t(j)];
      k12[d] = model::kv_outlier_fixed(lane, bank.sk[size_t(d)]);
    }
    int32_t s = 0;
    for (int d = 0; d < D; ++d) s += int32_t(q[d]) * k12[d];
    // The running maximum, p and alpha: section 3.
    const OnlineStep step = online_max_step(t, s, M, p);
    const uint32_t pt = step.p;
    if (step.grew) {
      for (int d = 0; d < D; ++d) acc[d] = model::kv_rescale(acc[d], step.alpha);
      total = num::online_rescale(total, step.alpha);
    }
    // V: the group's weight p * sv * 2^16 (exponent aligned), times the nibble.
    for (int g = 0; g < D / model::kKvVGroup; ++g) {
      uint16_t sv;
      std::memcpy(&sv, vr + model::kv_nibble_bytes(D) + 2 * g, 2);
      const int64_t w = model::kv_v_weight(pt, sv);
      for (int i = 0; i < model::kKvVGroup; ++i) {
        const int d = g * model::kKvVGroup + i;
        acc[d] += w * model::kv_nibble(vr, d);
      }
    }
    total += pt;
  }
  // The accumulators' width (docs/variants-attention.md 8.8: 62 bits signed for T <= 2048).
  for (int d = 0; d < D; ++d)
    if (acc[d] >= (int64_t(1) << 61) || acc[d] < -(int64_t(1) << 61))
      throw Error(fmt::format("attention_head_int4: acc_{} = {} exceeds 62 bits", d, acc[d]));
  *sum = uint32_t(total);
  model::kv_normalize(acc, *sum, D, o);
}

namespace {

// A TIP row's K in the bank's fixed point (sk_d / 16) into k12: the int8 value (KVQ8), 16
// times the nibble, or a lane (KVQ4 with lanes). Returns where the row's V starts.
const uint8_t* tip_k_row(const uint8_t* row, model::TipTier tier, const model::TipBank& bank, int32_t* k12) {
  const int D = bank.head_dim();
  if (tier == model::TipTier::Kvq8) {
    for (int d = 0; d < D; ++d) k12[d] = int8_t(row[d]);
    return row + D;  // V after K's D bytes
  }
  const int n = tier == model::TipTier::Kvq4Lanes ? int(bank.k.outliers.size()) : 0;
  const model::KvStorage st = model::kv_storage(model::KvFormat::Int4, n, D);
  for (int d = 0; d < D; ++d) k12[d] = 16 * model::kv_nibble(row, d);
  for (int j = 0; j < n; ++j) {
    uint16_t lane;
    std::memcpy(&lane, row + model::kv_nibble_bytes(D) + 2 * j, 2);
    const int d = bank.k.outliers[size_t(j)];
    k12[d] = model::kv_outlier_fixed(lane, bank.k.sk[size_t(d)]);
  }
  return row + st.k.total();
}

}  // namespace

void attention_head_tip(const int8_t* q, const model::TipBank& bank, const uint8_t* rows, size_t stride,
                        const model::TipTier* tiers, int region, int T, const AttentionParams& p, int32_t* o,
                        uint32_t* sum, std::vector<uint32_t>* masses) {
  const int D = bank.head_dim();
  if (p.legacy) throw Error("attention_head_tip: the online-softmax unit has no legacy shift mode");
  const int regions = (T + region - 1) / region;
  std::vector<int64_t> l_r(size_t(regions), 0);
  std::vector<int32_t> m_r(size_t(regions), 0);
  int64_t acc[model::kMaxHeadDim] = {};
  int64_t total = 0, l = 0;  // the sum, and the current region's part of it
  int32_t M = 0;
  for (int t = 0; t < T; ++t) {
    const model::TipTier tier = tiers[t / region];
    const uint8_t* row = rows + size_t(t) * stride;
    int32_t k12[model::kMaxHeadDim];
    const uint8_t* vr = tip_k_row(row, tier, bank, k12);
    int32_t s = 0;
    for (int d = 0; d < D; ++d) s += int32_t(q[d]) * k12[d];
    const OnlineStep step = online_max_step(t, s, M, p);
    const uint32_t pt = step.p;
    if (t % region == 0) l = 0;  // a region's first row
    if (step.grew) {
      for (int d = 0; d < D; ++d) acc[d] = model::kv_rescale(acc[d], step.alpha);
      total = num::online_rescale(total, step.alpha);
      l = num::online_rescale(l, step.alpha);
    }
    if (tier == model::TipTier::Kvq8) {
      const int64_t w = model::kv_v_weight(pt, bank.sv);  // one weight for the row
      for (int d = 0; d < D; ++d) acc[d] += w * int8_t(vr[d]);
    } else {
      for (int g = 0; g < D / model::kKvVGroup; ++g) {
        uint16_t sv;
        std::memcpy(&sv, vr + model::kv_nibble_bytes(D) + 2 * g, 2);
        const int64_t w = model::kv_v_weight(pt, sv);
        for (int i = 0; i < model::kKvVGroup; ++i) acc[g * model::kKvVGroup + i] += w * model::kv_nibble(vr, g * model::kKvVGroup + i);
      }
    }
    total += pt;
    l += pt;
    if (t % region == region - 1 || t == T - 1) {  // the region's last row: latch (l_r, m_r)
      l_r[size_t(t / region)] = l;
      m_r[size_t(t / region)] = M;
    }
  }
  for (int d = 0; d < D; ++d)
    if (acc[d] >= (int64_t(1) << 61) || acc[d] < -(int64_t(1) << 61))
      throw Error(fmt::format("attention_head_tip: acc_{} = {} exceeds 62 bits", d, acc[d]));
  *sum = uint32_t(total);
  model::kv_normalize(acc, *sum, D, o);
  // Each region's attention mass in UQ0.16: l_r e^(m_r - M) / total (docs/tip.md).
  masses->assign(size_t(regions), 0);
  const uint64_t rr = (uint64_t(1) << 46) / uint64_t(total);
  for (int r = 0; r < regions; ++r) {
    const uint64_t e = num::exp_interp(num::online_index8(uint32_t(int64_t(M) - m_r[size_t(r)]), p.m, p.shift));
    const unsigned __int128 a = (static_cast<unsigned __int128>(uint64_t(l_r[size_t(r)]) * e) * rr + (uint64_t(1) << 44)) >> 45;
    (*masses)[size_t(r)] = uint32_t(std::min<unsigned __int128>(a, 65535));
  }
}

// Rows in chunks over `threads` host threads (golden/shared_rows.h); each row's sum is the
// same plain loop.
void parallel_matvec(const TernaryMatrix& w, const int8_t* x, int32_t* acc, int threads) {
  SharedRows rows;
  rows.run(w.rows, threads, [&](int b, int e) { ternary_matvec(w, b, e, x, acc + b); });
}

// ---- Calibration ---------------------------------------------------------------------

const std::string& calibration_text() {
  static const std::string text =
      "A lighthouse keeper kept a notebook of the weather for forty years. Each morning he "
      "wrote the direction of the wind, the colour of the sea and the number of ships that "
      "passed before noon. When the notebook was found in a drawer after his retirement, a "
      "student counted the pages and noticed that storms had grown rarer but stronger. She "
      "wrote to the harbour office, which kept its own records, and the two accounts agreed "
      "on most days. Where they did not, the keeper had usually added a small drawing: a "
      "gull on the rail, a fishing boat with a torn sail, a child waving from the pier. The "
      "office put the notebook in its library, next to tide tables, charts of the coast and "
      "a shelf of letters from sailors who thanked the light for bringing them home.";
  return text;
}

std::vector<int> calibration_tokens(const model::Tokenizer& tok, int bos_token_id) {
  const std::vector<int> body = tok.encode(calibration_text());
  if (body.empty()) throw Error("calibration text encodes to no tokens");
  std::vector<int> ids{bos_token_id};
  for (size_t i = 0; ids.size() < size_t(kCalibrationTokens); ++i) ids.push_back(body[i % body.size()]);
  return ids;
}

// ---- The token loop shared by the board step and the calibration pass -----------------

namespace {

// attention(layer, pos, q, k, v, o): q, k, v are one position's float head vectors after
// RoPE, q [heads*96], k and v [kv_heads*96]; writes o [heads*96]. Query head h reads K/V head
// h / (heads / kv_heads) (grouped-query attention, HF repeat_kv).
using AttentionStep = std::function<void(int layer, int pos, const float* q, const float* k,
                                         const float* v, float* o)>;

void emit(const Probe& probe, int layer, const char* step, const float* data, int n, int position) {
  if (probe) probe(StepProbe{layer, step, data, nullptr, n, position});
}
void emit_int(const Probe& probe, int layer, const char* step, const int32_t* data, int n, int position) {
  if (probe) probe(StepProbe{layer, step, nullptr, data, n, position});
}

// y = BitLinear(x) as the board computes it, for n positions at once: quantized x rows
// (CPU), the integer matmul (engine, once per row of x), dequantize with the tensor's
// w_scale and the row's activation scale a[i] (CPU). xq holds n rows of w.cols values, y
// receives n rows of w.rows. Row i is position pos0 + i (for the probe).
struct Linear {
  const MatmulFn& matmul;
  const Probe& probe;
  int pos0;
  std::vector<int32_t> acc;
  void operator()(int layer, const char* name, const TernaryMatrix& w, int n, const int8_t* xq,
                  const float* a, float* y) {
    acc.resize(size_t(n) * size_t(w.rows));
    matmul(w, xq, n, acc.data());
    for (int i = 0; i < n; ++i) {
      const int32_t* row = acc.data() + size_t(i) * size_t(w.rows);
      emit_int(probe, layer, name, row, w.rows, pos0 + i);
      num::dequantize(row, w.rows, w.scale, a[i], y + size_t(i) * size_t(w.rows));
    }
  }
};

// The buffers and steps of the board's token loop over n consecutive positions pos0 ..
// pos0 + n - 1. Row i of each buffer belongs to position pos0 + i; `width` floats per row.
class PositionsPass {
 public:
  PositionsPass(const TernaryModel& m, const num::RopeTable& rope, int n, int pos0, const MatmulFn& matmul,
                const AttentionStep& attention, const Probe& probe)
      : m_(m), rope_(rope), n_(n), pos0_(pos0), H_(m.config.hidden_size), F_(m.config.intermediate_size),
        KV_(m.config.kv_dim()), attention_(attention), probe_(probe), linear_{matmul, probe, pos0, {}} {
    const size_t N = size_t(n), W = size_t(std::max(H_, F_));
    for (auto* buf : {&h_, &q_, &o_, &d_}) buf->resize(N * H_);
    for (auto* buf : {&k_, &v_}) buf->resize(N * KV_);  // num_kv_heads x 96 per position
    for (auto* buf : {&g_, &u_}) buf->resize(N * F_);
    a_.resize(N * W);
    xq_.resize(N * W);
    s_.resize(N);
  }

  void embed(const int* tokens) {
    for (int i = 0; i < n_; ++i) {
      std::copy(m_.embedding(tokens[i]), m_.embedding(tokens[i]) + H_, row(h_, i, H_));
      emit(probe_, -1, "embedding", row(h_, i, H_), H_, pos0_ + i);
    }
  }

  void layer(int l) {
    const model::LayerWeights& L = m_.layers[l];
    const int H = H_, F = F_, n = n_;
    // 1. input RMSNorm, quantize x.
    norm_quantize(h_, L.input_norm, H);
    // 2. q, k, v projections. 3. dequantize, RoPE on q and k (per head).
    linear_(l, "q_acc", L.q, n, xq_.data(), s_.data(), q_.data());
    linear_(l, "k_acc", L.k, n, xq_.data(), s_.data(), k_.data());
    linear_(l, "v_acc", L.v, n, xq_.data(), s_.data(), v_.data());
    for (int i = 0; i < n; ++i) rope_and_attention(l, i);
    // 5. inner_attn_ln RMSNorm, quantize. 6. o_proj, dequantize, residual.
    norm_quantize(o_, L.inner_attn_norm, H);
    linear_(l, "o_acc", L.o, n, xq_.data(), s_.data(), d_.data());
    for (int i = 0; i < n; ++i) num::add_inplace(row(h_, i, H), row(d_, i, H), H);
    // 6. post-attention RMSNorm, quantize. 7. gate and up.
    norm_quantize(h_, L.post_attn_norm, H);
    linear_(l, "gate_acc", L.gate, n, xq_.data(), s_.data(), g_.data());
    linear_(l, "up_acc", L.up, n, xq_.data(), s_.data(), u_.data());
    // 8. act(gate) * up (SiLU or ReLU^2: hidden_act), the FFN sub-norm (ffn_layernorm /
    // ffn_sub_norm) RMSNorm, quantize.
    const bool relu2 = m_.config.hidden_act == model::HiddenAct::Relu2;
    for (int i = 0; i < n; ++i) num::ffn_gate(relu2, row(g_, i, F), row(u_, i, F), F, row(g_, i, F));
    norm_quantize(g_, L.ffn_norm, F);
    // 9. down_proj, dequantize, residual.
    linear_(l, "down_acc", L.down, n, xq_.data(), s_.data(), d_.data());
    for (int i = 0; i < n; ++i) {
      num::add_inplace(row(h_, i, H), row(d_, i, H), H);
      emit(probe_, l, "residual", row(h_, i, H), H, pos0_ + i);
    }
  }

  // Final RMSNorm, quantize, ternary lm_head, dequantize: the logits of position pos0 + i.
  std::vector<float> logits(int i) {
    num::rmsnorm(row(h_, i, H_), m_.final_norm.data(), H_, m_.config.rms_norm_eps, a_.data());
    const float sl = num::quantize_activations(a_.data(), H_, xq_.data());
    std::vector<float> logits(size_t(m_.config.vocab_size));
    Linear head{linear_.matmul, probe_, pos0_ + i, {}};
    head(-1, "lm_head_acc", m_.lm_head, 1, xq_.data(), &sl, logits.data());
    emit(probe_, -1, "logits", logits.data(), m_.config.vocab_size, pos0_ + i);
    return logits;
  }

 private:
  template <class T>
  static T* row(std::vector<T>& buf, int i, int width) { return buf.data() + size_t(i) * size_t(width); }

  // RMSNorm of each position's row of `x` (width floats), then quantize it into xq.
  void norm_quantize(std::vector<float>& x, const std::vector<float>& weight, int width) {
    for (int i = 0; i < n_; ++i) {
      num::rmsnorm(row(x, i, width), weight.data(), width, m_.config.rms_norm_eps, row(a_, i, width));
      s_[size_t(i)] = num::quantize_activations(row(a_, i, width), width, row(xq_, i, width));
    }
  }

  // Position i of layer l: RoPE on its q (every query head) and k (every K/V head), then its
  // attention.
  void rope_and_attention(int l, int i) {
    const int H = H_, KV = KV_, D = m_.config.head_dim();
    for (int hd = 0; hd < m_.config.num_heads; ++hd) num::rope_apply(row(q_, i, H) + hd * D, pos0_ + i, rope_);
    for (int g = 0; g < m_.config.num_kv_heads; ++g) num::rope_apply(row(k_, i, KV) + g * D, pos0_ + i, rope_);
    emit(probe_, l, "q_rope", row(q_, i, H), H, pos0_ + i);
    emit(probe_, l, "k_rope", row(k_, i, KV), KV, pos0_ + i);
    emit(probe_, l, "v", row(v_, i, KV), KV, pos0_ + i);
    // 3-5. attention (quantize q/K/V, append to the cache, the unit, the CPU finish).
    attention_(l, pos0_ + i, row(q_, i, H), row(k_, i, KV), row(v_, i, KV), row(o_, i, H));
    emit(probe_, l, "attn_out", row(o_, i, H), H, pos0_ + i);
  }

  const TernaryModel& m_;
  const num::RopeTable& rope_;
  const int n_, pos0_, H_, F_, KV_;  // KV_: k and v rows per position (num_kv_heads x 96)
  const AttentionStep& attention_;
  const Probe& probe_;
  Linear linear_;
  std::vector<float> h_, a_, q_, k_, v_, o_, g_, u_, d_;
  std::vector<int8_t> xq_;
  std::vector<float> s_;  // each row's activation scale
};

// The board's token loop over n consecutive positions pos0 .. pos0 + n - 1 (tokens[i] at
// pos0 + i), run layer by layer: each step of layer l runs for every position, in position
// order, before the next step. A position's layer l reads only its own earlier steps and, in
// attention, the K and V of positions before it at layer l, which the attention step has
// received by then (position order). So every position gets exactly the arithmetic of
// running the positions one at a time; n = 1 is the board's token step, and a larger n only
// lets the matmuls of one step take the positions together (the calibration pass).
// Returns the logits of the positions pos0 + i for i in `logits_of` (ascending), one vector
// each (the calibration pass asks for none: it needs only K and V).
std::vector<std::vector<float>> forward_positions(const TernaryModel& m, const num::RopeTable& rope,
                                                  const int* tokens, int n, int pos0, const MatmulFn& matmul,
                                                  const AttentionStep& attention, const Probe& probe,
                                                  const std::vector<int>& logits_of) {
  const auto& c = m.config;
  for (int i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size)
      throw Error(fmt::format("token id {} is outside the vocabulary (0..{})", tokens[i], c.vocab_size - 1));
  PositionsPass pass(m, rope, n, pos0, matmul, attention, probe);
  pass.embed(tokens);
  for (int l = 0; l < c.num_layers; ++l) pass.layer(l);
  std::vector<std::vector<float>> out;
  for (int i : logits_of) out.push_back(pass.logits(i));
  return out;
}

// A matmul that runs `matvec` once per row of x.
MatmulFn matmul_of(const MatvecFn& matvec) {
  return [matvec](const TernaryMatrix& w, const int8_t* x, int count, int32_t* acc) {
    for (int i = 0; i < count; ++i) matvec(w, x + size_t(i) * size_t(w.cols), acc + size_t(i) * size_t(w.rows));
  };
}

// The model's head_dim is the attention unit's d (the board config's check, attention.head_dim,
// is sim's): here only that some unit can be built for it.
void check_model(const TernaryModel& m) {
  if (!model::head_dim_in_range(m.config.head_dim()))
    throw Error(fmt::format("model {}: head_dim {}, but an attention unit is built for a multiple of {} in [{}, {}]",
                            m.source, m.config.head_dim(), model::kHeadDimStep, model::kHeadDimStep,
                            model::kMaxHeadDim));
}

// *max = the largest of *max and |x_d| over one head's D values.
void track_max_abs(const float* x, int D, float* max) {
  for (int d = 0; d < D; ++d) *max = std::max(*max, std::fabs(x[d]));
}

// Float softmax attention of one head of D values over positions 0..T-1, with the project's
// exp: K and V hold the head's rows, `stride` floats apart; scores has room for T values.
//
// Every sum is taken in its own index order, as the plain loops write it: a score over d,
// an output value over t. The loops are only arranged so that the sums run side by side
// (the calibration pass spends most of its serial time here): the scores of kSide positions
// at once, each still summed over d in order, and the outputs position by position, each of
// the D sums still over t in order. The build keeps float operations as written
// (-ffp-contract=off, no fast-math), so every value is the one the plain nesting gives.
void float_attention_head(const float* q, const float* K, const float* V, int stride, int T, int D,
                          float* scores, float* o) {
  const float inv_sqrt_d = num::rsqrt(float(D));
  constexpr int kSide = 8;
  for (int t0 = 0; t0 < T; t0 += kSide) {
    const int n = std::min(kSide, T - t0);
    float dot[kSide] = {};
    for (int d = 0; d < D; ++d)
      for (int j = 0; j < n; ++j) dot[j] += q[d] * K[size_t(t0 + j) * stride + d];
    for (int j = 0; j < n; ++j) scores[t0 + j] = dot[j] * inv_sqrt_d;
  }
  float smax = -INFINITY;
  for (int t = 0; t < T; ++t) smax = std::max(smax, scores[t]);
  float total = 0.0f;
  for (int t = 0; t < T; ++t) {
    scores[t] = num::exp_approx(scores[t] - smax);
    total += scores[t];
  }
  const float inv_total = num::recip(total);
  for (int d = 0; d < D; ++d) o[d] = 0.0f;
  for (int t = 0; t < T; ++t) {
    const float* vt = V + size_t(t) * stride;
    for (int d = 0; d < D; ++d) o[d] += scores[t] * vt[d];
  }
  for (int d = 0; d < D; ++d) o[d] = o[d] * inv_total;
}

// Each (layer, head)'s scale: its largest |K| (|V|) over the pass mapped to 127.
KvScales scales_from_max(const std::vector<float>& kmax, const std::vector<float>& vmax) {
  KvScales scales;
  scales.k.resize(kmax.size());
  scales.v.resize(vmax.size());
  for (size_t i = 0; i < kmax.size(); ++i) {
    scales.k[i] = std::max(kmax[i], 1e-5f) / 127.0f;
    scales.v[i] = std::max(vmax[i], 1e-5f) / 127.0f;
  }
  return scales;
}

}  // namespace

KvScales calibrate_kv_scales(const TernaryModel& m, const std::vector<int>& tokens, int threads) {
  return calibrate_kv_scales(m, tokens, [threads](const TernaryMatrix& w, const int8_t* x, int32_t* acc) {
    parallel_matvec(w, x, acc, threads);
  });
}

KvScales calibrate_kv_scales(const TernaryModel& m, const std::vector<int>& tokens, const MatvecFn& matvec) {
  return calibrate_kv_scales_batched(m, tokens, matmul_of(matvec), 1);
}

KvScales calibrate_kv_scales_batched(const TernaryModel& m, const std::vector<int>& tokens, const MatmulFn& matmul,
                                     int batch) {
  check_model(m);
  const auto& c = m.config;
  const int heads = c.num_heads, kv_heads = c.num_kv_heads, KV = c.kv_dim(), D = c.head_dim();
  const size_t P = tokens.size();  // positions
  if (tokens.empty() || P > size_t(kMaxContext))
    throw Error(fmt::format("calibration needs 1..{} tokens, got {}", kMaxContext, P));
  if (batch < 1) throw Error(fmt::format("calibration batch {}: must be at least 1 position", batch));
  num::RopeTable rope(D, c.rope_theta, kMaxContext);
  // One scale per (layer, K/V head): the cache holds K/V heads.
  std::vector<float> kmax(size_t(c.num_layers) * kv_heads, 0.0f), vmax(kmax.size(), 0.0f);
  std::vector<float> kch(kmax.size() * D, 0.0f);  // per channel, for the INT4 bank
  // Float K/V cache [layer][pos][kv_heads * D].
  std::vector<float> kc(size_t(c.num_layers) * P * KV), vc(kc.size());
  std::vector<float> scores(P);
  const AttentionStep attention = [&](int l, int pos, const float* q, const float* k, const float* v, float* o) {
    const float* k_layer = kc.data() + size_t(l) * P * KV;
    const float* v_layer = vc.data() + size_t(l) * P * KV;
    std::copy(k, k + KV, kc.data() + (size_t(l) * P + pos) * KV);
    std::copy(v, v + KV, vc.data() + (size_t(l) * P + pos) * KV);
    for (int g = 0; g < kv_heads; ++g) {
      const int off = g * D;
      track_max_abs(k + off, D, &kmax[size_t(l) * kv_heads + g]);
      float* ch = &kch[(size_t(l) * kv_heads + g) * D];
      for (int d = 0; d < D; ++d) ch[d] = std::max(ch[d], std::fabs(k[off + d]));
      track_max_abs(v + off, D, &vmax[size_t(l) * kv_heads + g]);
    }
    for (int hd = 0; hd < heads; ++hd) {  // query head hd reads its group's K/V head
      const int kv_off = c.kv_head(hd) * D;
      float_attention_head(q + hd * D, k_layer + kv_off, v_layer + kv_off, KV, pos + 1, D, scores.data(),
                           o + hd * D);
    }
  };
  for (size_t pos = 0; pos < P; pos += size_t(batch)) {
    check_stop();  // SIGINT / SIGTERM: stop between batches of calibration tokens
    const int n = int(std::min(P - pos, size_t(batch)));
    forward_positions(m, rope, tokens.data() + pos, n, int(pos), matmul, attention, {}, /*logits_of=*/{});
  }
  KvScales scales = scales_from_max(kmax, vmax);
  scales.k_channel = std::move(kch);
  return scales;
}

// ---- BoardReference ------------------------------------------------------------------

BoardReference::BoardReference(const TernaryModel& model, KvScales scales,
                               BoardReferenceOptions options)
    : model_(model),
      scales_(std::move(scales)),
      options_(options),
      d_(model.config.head_dim()),
      rope_(d_, model.config.rope_theta, std::max(1, options.context)) {
  check_model(model_);
  const bool int4 = options_.kv_format != model::KvFormat::Int8;  // TIP reads through the INT4 unit
  if (options_.context < 1 || options_.context > model::attention_max_t(int4))
    throw Error(fmt::format("KV context {}: the {} unit takes 1..{} positions", options_.context,
                            int4 ? "INT4" : "attention", model::attention_max_t(int4)));
  const size_t C = size_t(options_.context);
  const size_t per_layer_head = C * d_;
  // The caches, banks and scales are per (layer, K/V head).
  const size_t want = size_t(model_.config.num_layers) * model_.config.num_kv_heads;
  const size_t n = want * per_layer_head;
  if (scales_.k.size() != want || scales_.v.size() != want)
    throw Error(fmt::format("KV scales: expected {} per kind (layers x K/V heads), got {} K and {} V",
                            want, scales_.k.size(), scales_.v.size()));
  if (options_.kv_format == model::KvFormat::Int4) {
    if (options_.attention_variant != model::AttentionVariant::OnlineSoftmax)
      throw Error("kv.format = int4 needs attention.variant = online-softmax");
    if (scales_.k_channel.size() != want * d_)
      throw Error(fmt::format("KV scales: kv.format = int4 needs {} per-channel K maxima, got {}", want * d_,
                              scales_.k_channel.size()));
    const model::KvStorage st = model::kv_storage(model::KvFormat::Int4, options_.kv_outlier_channels, d_);
    banks_.resize(want);
    bank_bytes_.assign(want * st.bank, 0);
    for (size_t i = 0; i < want; ++i) {
      banks_[i] = model::kv_int4_bank(&scales_.k_channel[i * d_], options_.kv_outlier_channels, d_);
      model::write_kv_bank(banks_[i], &bank_bytes_[i * st.bank]);
    }
    k4_cache_.assign(want * C * st.k.total(), 0);
    v4_cache_.assign(want * C * st.v.total(), 0);
  } else if (options_.kv_format == model::KvFormat::Tip) {
    if (options_.attention_variant != model::AttentionVariant::OnlineSoftmax)
      throw Error("kv.format = tip needs attention.variant = online-softmax");
    if (options_.kv_outlier_channels != 0)
      throw Error("kv.outlier_channels: with kv.format = tip the lanes are kv.tip.lanes");
    options_.tip.validate("kv.format = tip");
    if (scales_.k_channel.size() != want * d_)
      throw Error(fmt::format("KV scales: kv.format = tip needs {} per-channel K maxima, got {}", want * d_,
                              scales_.k_channel.size()));
    for (size_t i = 0; i < want; ++i) {
      tip_banks_.push_back(model::tip_bank(&scales_.k_channel[i * d_], scales_.v[i], options_.tip.lanes, d_));
      tip_regions_.emplace_back(options_.tip);
    }
    tip_rows_.assign(want * C * tip_slot(), 0);
  } else {
    if (options_.kv_outlier_channels != 0)
      throw Error("kv.outlier_channels: outlier lanes exist with kv.format = int4 only");
    // Zero pages from the kernel, backed as the positions are written.
    k_cache_ = model::HugeMemory(n, "golden K cache", model::HugeMemory::Pages::kOnDemand);
    v_cache_ = model::HugeMemory(n, "golden V cache", model::HugeMemory::Pages::kOnDemand);
  }
  if (options_.compact_trits) build_compact_trits();
}

// Every weight matrix in the 2-bit layout of golden/compact_trits.h, the matrices split over
// the threads, one matrix at a time each.
void BoardReference::build_compact_trits() {
  std::vector<const TernaryMatrix*> ws;
  for (const auto& L : model_.layers)
    for (const TernaryMatrix* w : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) ws.push_back(w);
  ws.push_back(&model_.lm_head);
  // A layout kept from an earlier run: every matrix's codes, one after another in ws's order.
  constexpr const char* kLayout = "golden-codes-v1";  // CompactTrits' layout (compact_trits.h)
  size_t total = 0;
  for (const TernaryMatrix* w : ws) total += CompactTrits::bytes_for(w->rows, w->cols);
  if (options_.derived) {
    if (auto blob = options_.derived->get(kLayout); blob && blob->bytes == total) {
      size_t at = 0;
      for (const TernaryMatrix* w : ws) {
        compact_.emplace(w, CompactTrits(w->rows, w->cols, blob->data + at, blob->keep));
        at += CompactTrits::bytes_for(w->rows, w->cols);
      }
      return;
    }
  }
  for (const TernaryMatrix* w : ws) compact_[w];  // the map's nodes first: the threads fill them
  // The matrices split over the threads, one matrix at a time each.
  std::vector<std::thread> pool;
  const int threads = std::max(1, options_.build_threads > 0 ? options_.build_threads : options_.threads);
  auto convert = [&](int part) {
    for (size_t i = size_t(part); i < ws.size(); i += size_t(threads)) compact_.at(ws[i]) = CompactTrits(*ws[i]);
  };
  for (int i = 1; i < threads; ++i) pool.emplace_back(convert, i);
  convert(0);
  for (auto& t : pool) t.join();
  if (options_.derived) {
    std::vector<model::ImagePart> parts;
    auto keep = std::make_shared<std::vector<std::shared_ptr<void>>>();
    for (const TernaryMatrix* w : ws) {
      parts.push_back({compact_.at(w).codes(), compact_.at(w).bytes()});
      keep->push_back(compact_.at(w).keep());
    }
    options_.derived->put(kLayout, parts, keep);
  }
}

const int8_t* BoardReference::k_rows(int layer, int head) const {
  return reinterpret_cast<const int8_t*>(k_cache_.data()) +
         (size_t(layer) * model_.config.num_kv_heads + head) * size_t(options_.context) * size_t(d_);
}
const int8_t* BoardReference::v_rows(int layer, int head) const {
  return reinterpret_cast<const int8_t*>(v_cache_.data()) +
         (size_t(layer) * model_.config.num_kv_heads + head) * size_t(options_.context) * size_t(d_);
}

const model::TipRegions& BoardReference::tip_regions(int layer, int head) const {
  return tip_regions_.at(size_t(layer) * model_.config.num_kv_heads + head);
}
const uint8_t* BoardReference::tip_row(int layer, int head, int t) const {
  const size_t lh = size_t(layer) * model_.config.num_kv_heads + head;
  return &tip_rows_.at((lh * size_t(options_.context) + size_t(t)) * tip_slot());
}

const uint8_t* BoardReference::int4_bank(int layer, int head) const {
  const size_t st = model::kv_storage(model::KvFormat::Int4, options_.kv_outlier_channels, d_).bank;
  return bank_bytes_.data() + (size_t(layer) * model_.config.num_kv_heads + head) * st;
}
const uint8_t* BoardReference::int4_k_rows(int layer, int head) const {
  const size_t st = model::kv_storage(model::KvFormat::Int4, options_.kv_outlier_channels, d_).k.total();
  return k4_cache_.data() + (size_t(layer) * model_.config.num_kv_heads + head) * size_t(options_.context) * st;
}
const uint8_t* BoardReference::int4_v_rows(int layer, int head) const {
  const size_t st = model::kv_storage(model::KvFormat::Int4, options_.kv_outlier_channels, d_).v.total();
  return v4_cache_.data() + (size_t(layer) * model_.config.num_kv_heads + head) * size_t(options_.context) * st;
}

void BoardReference::matmul(const TernaryMatrix& w, const int8_t* x, int count, int32_t* acc) const {
  const auto it = compact_.find(&w);
  if (matvec_fn_ || it == compact_.end()) {  // one vector at a time
    for (int i = 0; i < count; ++i) {
      const int8_t* xi = x + size_t(i) * size_t(w.cols);
      int32_t* ai = acc + size_t(i) * size_t(w.rows);
      if (matvec_fn_) matvec_fn_(w, xi, ai);
      else parallel_matvec(w, xi, ai, options_.threads);
    }
    return;
  }
  // Rows in chunks over the threads, and over any thread that lends itself meanwhile; each
  // row's codes read once for all `count` vectors.
  const CompactTrits& c = it->second;
  shared_rows_.run(c.rows(), options_.threads,
                   [&](int b, int e) { c.matmul(x, count, b, e, acc + b, size_t(w.rows)); });
}

// The INT4 KV codec (docs/variants-attention.md 8.2): the rows encoded as stored, K's channel
// scales folded into q, s_k = 1/16 in m; the unit's integer pipeline; the CPU finish with
// s_v = 1 (the V scales are in the rows). Each K/V head's row is encoded once; every query
// head of its group reads it (grouped-query attention).
void BoardReference::attention_int4(int l, int pos, const float* q, const float* k, const float* v, float* o) {
  const auto& c = model_.config;
  const int n = options_.kv_outlier_channels;
  const model::KvStorage st = model::kv_storage(model::KvFormat::Int4, n, d_);
  std::array<int8_t, model::kMaxHeadDim> qq{};
  std::array<int32_t, model::kMaxHeadDim> oq{};
  for (int g = 0; g < c.num_kv_heads; ++g) {
    const size_t lh = size_t(l) * c.num_kv_heads + g;
    const model::KvInt4Bank& bank = banks_[lh];
    uint8_t* K = &k4_cache_[lh * size_t(options_.context) * st.k.total()];
    uint8_t* V = &v4_cache_[lh * size_t(options_.context) * st.v.total()];
    model::encode_k_int4(k + g * d_, bank.sk.data(), bank.outliers.data(), n, d_, K + size_t(pos) * st.k.total());
    model::encode_v_int4(v + g * d_, d_, V + size_t(pos) * st.v.total());
    for (int hd = g * c.group(); hd < (g + 1) * c.group(); ++hd) {
      const AttentionParams p = per_channel_query(q + hd * d_, bank.sk.data(), qq.data());
      uint32_t sum = 0;
      attention_head_int4(qq.data(), &bank_bytes_[lh * st.bank], K, V, pos + 1, n, d_, p, oq.data(), &sum);
      num::attention_finish_online(oq.data(), 1.0f, d_, o + hd * d_);
    }
  }
}

// INT4 and TIP: q with K's channel scales sk_d folded in, quantized per head into qq; the
// header's m and S for K's fixed point sk_d / 16.
AttentionParams BoardReference::per_channel_query(const float* q, const uint16_t* sk, int8_t* qq) {
  std::array<float, model::kMaxHeadDim> qf{};
  for (int d = 0; d < d_; ++d) qf[size_t(d)] = q[d] * model::float_from_fp16(sk[size_t(d)]);
  const float sq = num::quantize_symmetric(qf.data(), d_, qq);
  const num::AttnMultiplier mul = num::attention_multiplier(sq, model::kKvInt4ScoreScale, d_);
  stats_.multiplier_lowered += mul.lowered > 0;
  stats_.multiplier_saturated += mul.saturated;
  return AttentionParams{mul.m, mul.shift, false};
}

// TIP (docs/tip.md), one K/V head's rows before position pos is read: the region leaving the
// recent window is placed and demoted rows re-encoded; the new row is written at KVQ8.
void BoardReference::tip_place_and_write(size_t lh, int pos, const float* k, const float* v) {
  const int R = options_.tip.region;
  const model::TipBank& bank = tip_banks_[lh];
  model::TipRegions& regions = tip_regions_[lh];
  uint8_t* rows = &tip_rows_[lh * size_t(options_.context) * tip_slot()];
  const int leaving = regions.leaving(pos);
  if (leaving >= 0)
    for (const model::TipRegions::Change& c : regions.place(leaving))
      for (int t = c.region * R; t < (c.region + 1) * R; ++t) {
        const std::vector<uint8_t> row = model::tip_demote(rows + size_t(t) * tip_slot(), c.from, c.to, bank);
        std::fill_n(rows + size_t(t) * tip_slot(), tip_slot(), uint8_t(0));
        std::copy(row.begin(), row.end(), rows + size_t(t) * tip_slot());
      }
  model::encode_kvq8(k, v, bank, rows + size_t(pos) * tip_slot());
}

// TIP: each K/V head's rows placed and written once; every query head of its group reads
// them at their region's tier, and its region masses go to the K/V head's counters (the
// group's query heads each count as one query of that K/V head).
void BoardReference::attention_tip(int l, int pos, const float* q, const float* k, const float* v, float* o) {
  const auto& c = model_.config;
  const int R = options_.tip.region;
  std::array<int8_t, model::kMaxHeadDim> qq{};
  std::array<int32_t, model::kMaxHeadDim> oq{};
  std::vector<uint32_t> masses;
  for (int g = 0; g < c.num_kv_heads; ++g) {
    const size_t lh = size_t(l) * c.num_kv_heads + g;
    tip_place_and_write(lh, pos, k + g * d_, v + g * d_);
    model::TipRegions& regions = tip_regions_[lh];
    std::vector<model::TipTier> tiers(size_t(pos / R + 1));
    for (size_t r = 0; r < tiers.size(); ++r) tiers[r] = regions.tier(int(r));
    const uint8_t* rows = &tip_rows_[lh * size_t(options_.context) * tip_slot()];
    for (int hd = g * c.group(); hd < (g + 1) * c.group(); ++hd) {
      const AttentionParams p = per_channel_query(q + hd * d_, tip_banks_[lh].k.sk.data(), qq.data());
      uint32_t sum = 0;
      attention_head_tip(qq.data(), tip_banks_[lh], rows, tip_slot(), tiers.data(), R, pos + 1, p, oq.data(), &sum,
                         &masses);
      regions.add_masses(masses);
      num::attention_finish_online(oq.data(), 1.0f, d_, o + hd * d_);
    }
  }
}

// The board's int8 rows (CIRCUITS.md 3, 5): each K/V head's K and V quantized with its fixed
// scales and appended once; then every query head of its group: q quantized per head
// (dynamic scale), the header's m and S, the unit over T = pos + 1 rows, the CPU finish.
void BoardReference::attention_int8(int l, int pos, const float* q, const float* k, const float* v, float* o) {
  const auto& c = model_.config;
  const int kv_heads = c.num_kv_heads;
  std::array<int8_t, model::kMaxHeadDim> qq{};
  std::array<int32_t, model::kMaxHeadDim> acc{};
  for (int g = 0; g < kv_heads; ++g) {
    const float sk = scales_.k_scale(l, g, kv_heads), sv = scales_.v_scale(l, g, kv_heads);
    int8_t* K = const_cast<int8_t*>(k_rows(l, g));
    int8_t* V = const_cast<int8_t*>(v_rows(l, g));
    num::quantize_fixed(k + g * d_, d_, sk, K + size_t(pos) * d_);
    num::quantize_fixed(v + g * d_, d_, sv, V + size_t(pos) * d_);
    for (int hd = g * c.group(); hd < (g + 1) * c.group(); ++hd) {
      const float sq = num::quantize_symmetric(q + hd * d_, d_, qq.data());
      const num::AttnMultiplier mul = num::attention_multiplier(sq, sk, d_);
      stats_.multiplier_lowered += mul.lowered > 0;
      stats_.multiplier_saturated += mul.saturated;
      const AttentionParams p{mul.m, mul.shift, options_.legacy_attention};
      uint32_t sum = 0;
      if (options_.attention_variant == model::AttentionVariant::OnlineSoftmax) {
        // The online-softmax unit divides on the PL; the CPU scales by s_v.
        attention_head_online(qq.data(), K, V, pos + 1, d_, p, acc.data(), &sum);
        num::attention_finish_online(acc.data(), sv, d_, o + hd * d_);
        continue;
      }
      attention_head(qq.data(), K, V, pos + 1, d_, p, acc.data(), &sum);
      num::attention_finish(acc.data(), sum, sv, d_, o + hd * d_);  // o_d = acc_d * (s_v / sum)
    }
  }
}

void BoardReference::reset() {
  pos_ = 0;
  for (auto& r : tip_regions_) r = model::TipRegions(options_.tip);
}

std::vector<float> BoardReference::step(int token, const Probe& probe) {
  return std::move(chunk({token}, false, probe).front());
}

std::vector<std::vector<float>> BoardReference::chunk(const std::vector<int>& tokens, bool all_logits,
                                                      const Probe& probe) {
  const int n = int(tokens.size());
  if (n < 1) throw Error("a chunk of no tokens");
  if (pos_ + n > options_.context)
    throw Error(fmt::format("context full: the board's KV cache holds {} positions", options_.context));
  stats_ = {};
  const MatmulFn mm = [this](const TernaryMatrix& w, const int8_t* x, int count, int32_t* acc) {
    matmul(w, x, count, acc);
  };
  // Position pos's attention at layer l: its K/V appended, then the unit over T = pos + 1
  // rows (the chunk's earlier positions' rows are in the cache by then: position order).
  const AttentionStep attention = [&](int l, int pos, const float* q, const float* k, const float* v, float* o) {
    if (options_.kv_format == model::KvFormat::Int4) return attention_int4(l, pos, q, k, v, o);
    if (options_.kv_format == model::KvFormat::Tip) return attention_tip(l, pos, q, k, v, o);
    attention_int8(l, pos, q, k, v, o);
  };
  std::vector<int> logits_of;
  for (int i = all_logits ? 0 : n - 1; i < n; ++i) logits_of.push_back(i);
  std::vector<std::vector<float>> logits =
      forward_positions(model_, rope_, tokens.data(), n, pos_, mm, attention, probe, logits_of);
  pos_ += n;
  std::vector<std::vector<float>> out(static_cast<size_t>(n));
  for (size_t i = 0; i < logits_of.size(); ++i) out[size_t(logits_of[i])] = std::move(logits[i]);
  return out;
}

}  // namespace bitsim::golden
