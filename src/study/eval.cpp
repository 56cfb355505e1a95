#include "study/eval.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "golden/board_reference.h"
#include "golden/float_reference.h"
#include "golden/loop_clones.h"
#include "hw/fast/fast_kernels.h"
#include "base/error.h"
#include "base/file_io.h"
#include "model/attention_stream.h"
#include "base/sha256.h"
#include "base/stop_signal.h"
#include "model/model_loader.h"
#include "model/packed_image.h"
#include "model/text_file.h"
#include "model/tokenizer.h"
#include "numerics/numerics.h"
#include "sim/board_config.h"
#include "sim/fast_matvec.h"
#include "sim/startup.h"
#include "sim/board_run.h"

namespace bitsim::study {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---- The INT8 lm_head of board-int8-head -------------------------------------------------

// embed_tokens quantized per row: w8[r] = quantize_symmetric(E[r]), scale[r] = max|E[r]| / 127.
struct Int8Head {
  int rows = 0, cols = 0;
  std::vector<int8_t> w;
  std::vector<float> scale;
};

Int8Head make_int8_head(const model::TernaryModel& m) {
  Int8Head h;
  h.rows = m.config.vocab_size;
  h.cols = m.config.hidden_size;
  h.w.resize(size_t(h.rows) * h.cols);
  h.scale.resize(size_t(h.rows));
  for (int r = 0; r < h.rows; ++r)
    h.scale[size_t(r)] = num::quantize_symmetric(m.embedding(r), h.cols, h.w.data() + size_t(r) * h.cols);
  return h;
}

// Plain loops, compiled for AVX-512, AVX2 and the baseline (golden/loop_clones.h).
BITSIM_GOLDEN_CLONES
void int8_matvec(const int8_t* w, int rows, int cols, const int8_t* x, int32_t* acc) {
  for (int r = 0; r < rows; ++r) {
    const int8_t* wr = w + size_t(r) * cols;
    int32_t s = 0;
    for (int j = 0; j < cols; ++j) s += int32_t(wr[j]) * int32_t(x[j]);
    acc[r] = s;
  }
}

// Logits of the INT8 head from the hidden state after the last layer, with the board's CPU
// steps: final RMSNorm, activation quantization, integer matmul, y_r = acc_r * (scale_r * a / 127).
std::vector<float> int8_head_logits(const model::TernaryModel& m, const Int8Head& head, const float* h) {
  const int H = m.config.hidden_size;
  std::vector<float> a(static_cast<size_t>(H), 0.0f);
  std::vector<int8_t> xq(static_cast<size_t>(H));
  num::rmsnorm(h, m.final_norm.data(), H, m.config.rms_norm_eps, a.data());
  const float s = num::quantize_activations(a.data(), H, xq.data());
  std::vector<int32_t> acc(static_cast<size_t>(head.rows));
  int8_matvec(head.w.data(), head.rows, head.cols, xq.data(), acc.data());
  std::vector<float> logits(static_cast<size_t>(head.rows));
  for (int r = 0; r < head.rows; ++r) num::dequantize(&acc[size_t(r)], 1, head.scale[size_t(r)], s, &logits[size_t(r)]);
  return logits;
}

enum Kind { kFloat, kFloatTernaryHead, kBoard, kBoardLegacy, kBoardDynamicKv, kBoardInt8Head, kBoardOnlineSoftmax, kBoardInt4Kv,
           kBoardInt4KvOutliers4, kBoardInt4KvOutliers8, kBoardKvq8, kBoardTip, kBoardTipLean, kKinds };

// The TIP rows' settings (docs/tip.md): every region at KVQ8 (the int8 reference at long
// context: an unlimited KVQ8 budget), the defaults, and a leaner setting.
model::TipSettings tip_row_settings(int kind) {
  if (kind == kBoardKvq8) return model::kTipAllKvq8;
  if (kind == kBoardTipLean) return model::kTipLean;
  return {};
}


}  // namespace

const std::vector<std::pair<std::string, std::string>>& eval_arithmetics() {
  static const std::vector<std::pair<std::string, std::string>> rows = {
      {"float", "float BitLinear, float softmax, tied float lm_head (the checkpoint's own semantics)"},
      {"float-ternary-head", "float, with the board's ternary lm_head"},
      {"board", "the board's arithmetic: multiplier m, fixed per-(layer, head) K/V scales, ternary lm_head; equal to the simulated board"},
      {"board-legacy-shift", "board, with the earlier attention unit's fixed >> 8 shift"},
      {"board-dynamic-kv", "board, with K/V scales from max|K|, max|V| over all positions of the window (looks at future keys)"},
      {"board-int8-head", "board, with an INT8 lm_head (per-row absmax) instead of the ternary one"},
      {"board-online-softmax", "board, with the online-softmax attention unit (attention.variant; docs/variants-attention.md)"},
      {"board-online-softmax-int4-kv", "board-online-softmax, with the INT4 KV cache (kv.format = int4; docs/variants-attention.md 8)"},
      {"board-online-softmax-int4-kv-4-outliers", "board-online-softmax-int4-kv, with 4 fp16 outlier lanes (kv.outlier_channels = 4)"},
      {"board-online-softmax-int4-kv-8-outliers", "board-online-softmax-int4-kv, with 8 fp16 outlier lanes (kv.outlier_channels = 8)"},
      {"board-online-softmax-kvq8", "board-online-softmax, TIP's KVQ8 rows at every position (K per channel, 192 B per position; the int8 reference up to 2,048 positions; docs/tip.md)"},
      {"board-online-softmax-tip", "board-online-softmax, TIP's precision tiers at their defaults (region 64, sink 64, recent 256, 3 KVQ8 and 8 KVQ4+4 regions; docs/tip.md)"},
      {"board-online-softmax-tip-lean", "board-online-softmax, TIP leaner (region 32, sink 32, recent 128, 2 KVQ8 and 8 KVQ4+4 regions; docs/tip.md)"},
  };
  return rows;
}

std::vector<std::pair<int, int>> eval_buckets(int window) {
  std::vector<std::pair<int, int>> out{{1, 256}};
  while (out.back().second < window) out.emplace_back(out.back().second + 1, 2 * out.back().second);
  return out;
}

namespace {

// The windows: inputs [BOS, w_0 .. w_{n-2}], targets [w_0 .. w_{n-1}].
struct Window {
  std::vector<int> input, target;
};

std::vector<Window> make_windows(const std::vector<int>& ids, int W, int bos) {
  std::vector<Window> windows((ids.size() + size_t(W) - 1) / size_t(W));
  for (size_t w = 0; w < windows.size(); ++w) {
    const size_t b = w * size_t(W), e = std::min(ids.size(), b + size_t(W));
    Window& win = windows[w];
    win.target.assign(ids.begin() + long(b), ids.begin() + long(e));
    win.input.push_back(bos);
    win.input.insert(win.input.end(), win.target.begin(), win.target.end() - 1);
  }
  return windows;
}

// The text, its tokens (cut to req.tokens) and the model's description, everything that can
// be refused checked before anything heavy runs.
struct Prepared {
  std::unique_ptr<model::TensorSource> source;
  std::unique_ptr<model::Tokenizer> tokenizer;
  model::ModelConfig config;
  std::vector<int> ids;
};

Prepared prepare(const EvalRequest& req, EvalResult& res) {
  if (req.tokens < 0) throw Error(fmt::format("tokens {}: must be 1 or more (0: the whole text)", req.tokens));
  if (req.board_positions < 0) throw Error(fmt::format("board positions {}: must be 0 or more", req.board_positions));
  res.text = req.text.string();
  Prepared p;
  p.source = model::open_model_source(req.model);
  p.config = p.source->config();
  const auto folder = model::model_folder(req.model);
  p.tokenizer = model::select_tokenizer(req.tokenizer, folder, p.config.vocab_size);
  res.model = p.source->describe();
  res.shape = p.config.shape_string();
  res.tokenizer = p.tokenizer->describe();
  // Only as much of the text as the tokens asked for take (model/text_file.h).
  model::EncodedText text = model::encode_text_file(*p.tokenizer, req.text, "text file", size_t(req.tokens));
  res.text_sha256 = text.sha256;
  res.text_bytes = int64_t(text.bytes);
  if (text.whole && text.bytes == 0) throw Error(fmt::format("text file {}: the file is empty", req.text.string()));
  p.ids = std::move(text.ids);
  res.text_tokens = int64_t(text.read_tokens);
  if (p.ids.empty()) throw Error(fmt::format("text file {}: encodes to no tokens", req.text.string()));
  if (req.tokens > int64_t(p.ids.size()))
    throw Error(fmt::format("tokens {}: the text {} has only {} tokens", req.tokens, req.text.string(), res.text_tokens));
  if (folder) res.model_sha256 = sha256_file(*folder / "model.safetensors", "checkpoint");
  res.scored_tokens = int64_t(p.ids.size());
  if (req.window < 0 || req.window > p.config.max_position_embeddings)
    throw Error(fmt::format("window {}: must be 1..{} (the model's max_position_embeddings{})", req.window,
                            p.config.max_position_embeddings, folder ? fmt::format(", {}", (*folder / "config.json").string()) : std::string()));
  res.window = req.window > 0 ? req.window : std::min(golden::kMaxContext, p.config.max_position_embeddings);
  res.windows = int((p.ids.size() + size_t(res.window) - 1) / size_t(res.window));
  const int first_window = int(std::min<size_t>(p.ids.size(), size_t(res.window)));
  // The board check and the comparison run the int8 units, which hold kMaxContext positions.
  const int first = std::min(first_window, golden::kMaxContext);
  if (req.compare_positions < 0 || req.compare_positions > first)
    throw Error(fmt::format("compare positions {}: must be 0..{} (the first window's positions, at most {})",
                            req.compare_positions, first, golden::kMaxContext));
  if (req.board_positions > first)
    throw Error(fmt::format("board positions {}: over the first window's {} positions (at most {})",
                            req.board_positions, first_window, golden::kMaxContext));
  // Fewer tokens than the first context bucket (positions 1 .. min(256, window)) give no
  // figure for even one bucket: refused.
  const int first_bucket = std::min(eval_buckets(res.window).front().second, res.window);
  if (int64_t(p.ids.size()) < first_bucket)
    throw Error(fmt::format("text file {}: {} tokens scored, fewer than the first context bucket's {} positions "
                            "(1-{}); score a longer text, or a smaller window",
                            req.text.string(), p.ids.size(), first_bucket, first_bucket));
  return p;
}

// log softmax(logits) in double into out[0 .. V-1]; returns the argmax (the first largest).
// -out[target] = lse - logits[target], the next token's NLL.
int log_softmax(const std::vector<float>& logits, double* out) {
  double mx = -INFINITY;
  size_t arg = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    if (double(logits[i]) > mx) mx = double(logits[i]), arg = i;
  double sum = 0.0;
  for (float l : logits) sum += std::exp(double(l) - mx);
  const double lse = mx + std::log(sum);
  for (size_t i = 0; i < logits.size(); ++i) out[i] = double(logits[i]) - lse;
  return int(arg);
}

// KL(P || Q) = sum_i p_i (log p_i - log q_i) from the two log-probability vectors.
double kl_of(const double* logp, const double* logq, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double p = std::exp(logp[i]);
    if (p > 0) s += p * (logp[i] - logq[i]);
  }
  return s;
}

// The positions each attention unit's KV cache holds.
int unit_positions(int kind) {
  return kind == kFloat || kind == kFloatTernaryHead ? std::numeric_limits<int>::max()
         : kind >= kBoardInt4Kv                      ? model::kAttentionInt4MaxT
                                                     : golden::kMaxContext;
}

// Scores the windows under every arithmetic, a chunk of windows at a time. Per chunk, first
// the float job of each window (its two heads' log-probabilities kept as the references of
// the KL and top-1 figures), then the other jobs: 1 dynamic KV (a calibration pass and a
// board pass), 2 board (+ the int8 head from its last hidden state), 3 legacy, 4
// online-softmax, 5 online-softmax with INT4 KV, 6 and 7 the same with 4 and 8 outlier lanes,
// 8-10 TIP (all KVQ8, the defaults, lean) (jobs whose unit holds fewer positions than the window are not run). Each (window, row,
// bucket)'s sums land in their own slot, and the slots are summed in window order: the
// result does not depend on the threads.
class Scorer {
 public:
  static constexpr int kJobs = 11;
  struct Acc {
    double nll = 0, kl_f = 0, kl_ft = 0;
    int64_t top1_f = 0, top1_ft = 0, n = 0;
  };
  Scorer(const model::TernaryModel& m, const model::KvScales& scales, const std::vector<Window>& windows,
         int window, int threads)
      : m_(m), scales_(scales), windows_(windows), window_(window), buckets_(eval_buckets(window)),
        threads_(threads), head8_(make_int8_head(m)),
        fast_(m, /*with_lm_head=*/true, 2), vocab_(size_t(m.config.vocab_size)), refs_(size_t(threads)),
        total_(windows.size(), std::array<double, kKinds>{}),
        acc_(windows.size() * kKinds * buckets_.size()) {
    for (int j = 1; j < kJobs; ++j)
      if (window_ <= unit_positions(job_kind(j))) jobs_.push_back(j);
  }
  static bool runs(int kind, int window) { return window <= unit_positions(kind); }

  void run() {
    // The references of a chunk: 2 heads x positions x vocab doubles, about 256 MB at most.
    const size_t per_window = 2 * size_t(window_) * vocab_ * sizeof(double);
    const size_t chunk = std::max<size_t>(1, (size_t(256) << 20) / per_window);
    for (size_t c0 = 0; c0 < windows_.size(); c0 += chunk) {
      const size_t c1 = std::min(windows_.size(), c0 + chunk);
      c0_ = c0;
      ref_.assign(c1 - c0, Ref{});
      parallel(c1 - c0, [&](Refs& r, size_t i) { score_float(r, c0 + i); });
      parallel((c1 - c0) * jobs_.size(),
               [&](Refs& r, size_t i) { score(r, c0 + i / jobs_.size(), jobs_[i % jobs_.size()]); });
    }
    ref_.clear();
  }
  double sum(int kind) const {
    double s = 0;
    for (const auto& w : total_) s += w[size_t(kind)];
    return s;
  }
  // The row's sums in bucket b, over the windows in order.
  Acc bucket(int kind, size_t b) const {
    Acc s;
    for (size_t w = 0; w < windows_.size(); ++w) {
      const Acc& a = acc_[(w * kKinds + size_t(kind)) * buckets_.size() + b];
      s.nll += a.nll, s.kl_f += a.kl_f, s.kl_ft += a.kl_ft;
      s.top1_f += a.top1_f, s.top1_ft += a.top1_ft, s.n += a.n;
    }
    return s;
  }
  const std::vector<std::pair<int, int>>& buckets() const { return buckets_; }

 private:
  struct Refs {  // one worker's references, built on first use
    std::optional<golden::FloatReference> fl;
    std::optional<golden::BoardReference> bd, lg, on, i4, i4o4, i4o8, tip[3];
    std::vector<double> logp;
  };
  struct Ref {  // a window's float and float-ternary-head log-probabilities and argmaxes
    std::vector<double> logp[2];
    std::vector<int> arg[2];
  };
  static int job_kind(int job) {
    static const int kinds[kJobs] = {kFloat, kBoardDynamicKv, kBoard, kBoardLegacy, kBoardOnlineSoftmax,
                                     kBoardInt4Kv, kBoardInt4KvOutliers4, kBoardInt4KvOutliers8,
                                     kBoardKvq8, kBoardTip, kBoardTipLean};
    return kinds[job];
  }
  template <typename F>
  void parallel(size_t items, const F& fn) {
    std::atomic<size_t> next{0};
    std::vector<std::exception_ptr> errors{size_t(threads_)};
    auto worker = [&](int tid) {
      try {
        for (size_t item = next.fetch_add(1); item < items; item = next.fetch_add(1)) fn(refs_[size_t(tid)], item);
      } catch (...) {
        errors[size_t(tid)] = std::current_exception();
        next = items;  // the others stop at their next item
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads_; ++t) pool.emplace_back(worker, t);
    worker(0);
    for (auto& t : pool) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }
  // Position p of window w under row `kind`, from its log-probabilities and argmax.
  void add(size_t w, int kind, size_t p, const double* logp, int arg) {
    check_stop();  // SIGINT / SIGTERM: every position of every row passes here (a long window too)
    const Ref& ref = ref_[w - c0_];
    const double nll = -logp[windows_[w].target[p]];
    total_[w][size_t(kind)] += nll;
    size_t b = 0;
    while (b + 1 < buckets_.size() && int(p) + 1 > buckets_[b].second) ++b;
    Acc& a = acc_[(w * kKinds + size_t(kind)) * buckets_.size() + b];
    a.nll += nll;
    a.kl_f += kl_of(&ref.logp[0][p * vocab_], logp, vocab_);
    a.kl_ft += kl_of(&ref.logp[1][p * vocab_], logp, vocab_);
    a.top1_f += arg == ref.arg[0][p];
    a.top1_ft += arg == ref.arg[1][p];
    ++a.n;
  }
  void add(Refs& refs, size_t w, int kind, size_t p, const std::vector<float>& logits) {
    refs.logp.resize(vocab_);
    const int arg = log_softmax(logits, refs.logp.data());
    add(w, kind, p, refs.logp.data(), arg);
  }
  golden::BoardReference& board_ref(std::optional<golden::BoardReference>& r, bool legacy,
                                    model::AttentionVariant variant = model::AttentionVariant::TwoPhase,
                                    model::KvFormat kv = model::KvFormat::Int8, int outliers = 0,
                                    const model::TipSettings& tip = {}) {
    if (!r) {
      golden::BoardReferenceOptions o{legacy, 1, variant, kv, outliers};
      o.tip = tip;
      if (kv != model::KvFormat::Int8) o.context = std::max(golden::kMaxContext, window_);
      r.emplace(m_, scales_, o);
      r->set_matvec(fast_.fn());
    }
    r->reset();
    return *r;
  }
  void score(Refs& refs, size_t w, int job) {
    const Window& win = windows_[w];
    if (job == 1) {
      golden::BoardReference dyn(m_, golden::calibrate_kv_scales(m_, win.input, fast_.fn()), golden::BoardReferenceOptions{false, 1});
      dyn.set_matvec(fast_.fn());
      plain(refs, dyn, w, kBoardDynamicKv);
    } else if (job == 2) {
      score_board(refs, board_ref(refs.bd, false), w);
    } else if (job == 3) {
      plain(refs, board_ref(refs.lg, true), w, kBoardLegacy);
    } else if (job == 4) {
      plain(refs, board_ref(refs.on, false, model::AttentionVariant::OnlineSoftmax), w, kBoardOnlineSoftmax);
    } else if (job == 5) {
      plain(refs, board_ref(refs.i4, false, model::AttentionVariant::OnlineSoftmax, model::KvFormat::Int4), w,
            kBoardInt4Kv);
    } else if (job == 6) {
      plain(refs, board_ref(refs.i4o4, false, model::AttentionVariant::OnlineSoftmax, model::KvFormat::Int4, 4), w,
            kBoardInt4KvOutliers4);
    } else if (job == 7) {
      plain(refs, board_ref(refs.i4o8, false, model::AttentionVariant::OnlineSoftmax, model::KvFormat::Int4, 8), w,
            kBoardInt4KvOutliers8);
    } else {
      const int kind = job_kind(job);
      plain(refs, board_ref(refs.tip[kind - kBoardKvq8], false, model::AttentionVariant::OnlineSoftmax, model::KvFormat::Tip, 0,
                            tip_row_settings(kind)),
            w, kind);
    }
  }
  void plain(Refs& refs, golden::BoardReference& ref, size_t w, int kind) {
    const Window& win = windows_[w];
    for (size_t p = 0; p < win.input.size(); ++p) add(refs, w, kind, p, ref.step(win.input[p]));
  }
  // One float pass gives both heads (they read the same final hidden state): the references.
  void score_float(Refs& refs, size_t w) {
    const Window& win = windows_[w];
    Ref& ref = ref_[w - c0_];
    for (int h = 0; h < 2; ++h) {
      ref.logp[h].resize(win.input.size() * vocab_);
      ref.arg[h].resize(win.input.size());
    }
    if (!refs.fl) refs.fl.emplace(m_, golden::FloatReferenceOptions{false});
    refs.fl->reset();
    for (size_t p = 0; p < win.input.size(); ++p) {
      ref.arg[0][p] = log_softmax(refs.fl->step(win.input[p]), &ref.logp[0][p * vocab_]);
      ref.arg[1][p] = log_softmax(refs.fl->last_logits(true), &ref.logp[1][p * vocab_]);
      add(w, kFloat, p, &ref.logp[0][p * vocab_], ref.arg[0][p]);
      add(w, kFloatTernaryHead, p, &ref.logp[1][p * vocab_], ref.arg[1][p]);
    }
  }
  // The board and, from its last hidden state, the INT8 head; window 0's first logits kept.
  void score_board(Refs& refs, golden::BoardReference& bd, size_t w) {
    const Window& win = windows_[w];
    std::vector<float> hidden(size_t(m_.config.hidden_size));
    const int last = m_.config.num_layers - 1;
    const model::Probe probe = [&](const model::StepProbe& sp) {
      if (sp.layer == last && sp.data && std::strcmp(sp.step, "residual") == 0)
        std::copy(sp.data, sp.data + sp.n, hidden.begin());
    };
    for (size_t p = 0; p < win.input.size(); ++p) {
      std::vector<float> logits = bd.step(win.input[p], probe);
      add(refs, w, kBoard, p, logits);
      add(refs, w, kBoardInt8Head, p, int8_head_logits(m_, head8_, hidden.data()));
    }
  }

  const model::TernaryModel& m_;
  const model::KvScales& scales_;
  const std::vector<Window>& windows_;
  const int window_;
  const std::vector<std::pair<int, int>> buckets_;
  int threads_;
  const Int8Head head8_;
  const sim::FastMatvec fast_;
  const size_t vocab_;
  std::vector<int> jobs_;  // the jobs after the float one that run at this window
  std::vector<Refs> refs_;  // per thread
  std::vector<Ref> ref_;    // per window of the current chunk
  size_t c0_ = 0;
  std::vector<std::array<double, kKinds>> total_;
  std::vector<Acc> acc_;  // [window][kind][bucket]
};

// The eval row whose arithmetic a board config runs, or "" when no row has it (an outlier
// count other than 4 or 8).
std::string row_of(const hw::AttentionUnitConfig& a) {
  if (a.kind() == model::AttentionVariant::TwoPhase) return "board";
  if (a.kv() == model::KvFormat::Int8) return "board-online-softmax";
  if (a.kv() == model::KvFormat::Tip) {
    const auto same = [&](const model::TipSettings& t) {
      return a.tip.region == t.region && a.tip.sink == t.sink && a.tip.recent == t.recent &&
             a.tip.kvq8_regions == t.kvq8_regions && a.tip.lane_regions == t.lane_regions && a.tip.lanes == t.lanes;
    };
    if (same(model::TipSettings{})) return "board-online-softmax-tip";
    if (same(model::kTipLean)) return "board-online-softmax-tip-lean";
    if (same(model::kTipAllKvq8)) return "board-online-softmax-kvq8";
    return "";
  }
  if (a.kv_outlier_channels == 0) return "board-online-softmax-int4-kv";
  if (a.kv_outlier_channels == 4 || a.kv_outlier_channels == 8)
    return fmt::format("board-online-softmax-int4-kv-{}-outliers", a.kv_outlier_channels);
  return "";
}

// The first positions of window 0 through the simulated board with the request's config,
// compared with the golden reference of that config's arithmetic (the row row_of names):
// the board's, or a variant's when the config selects one.
EvalBoardCheck board_check(const EvalRequest& req, const model::TernaryModel& m, const model::KvScales& scales,
                           const Window& first, int threads) {
  const std::vector<int> toks(first.input.begin(), first.input.begin() + req.board_positions);
  const sim::SimConfig cfg = sim::make_sim_config(req.params);
  const hw::AttentionUnitConfig& a = cfg.board.attention;
  golden::BoardReferenceOptions ro{false, threads, a.kind(), a.kv(), a.kv_outlier_channels};
  ro.tip = a.tip;
  golden::BoardReference ref(m, scales, ro);
  sim::SimulateOptions so;
  so.threads = threads;
  const auto outcomes = sim::simulate_tokens(cfg, m, scales, toks, so);
  EvalBoardCheck check;
  check.positions = req.board_positions;
  check.arithmetic = row_of(a);
  for (int p = 0; p < req.board_positions; ++p) {
    const auto& got = outcomes[size_t(p)].logits;
    const std::vector<float> want = ref.step(toks[size_t(p)]);
    if (got.size() != want.size() || std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) != 0) {
      check.first_mismatch = p;
      break;
    }
  }
  check.logits_equal = !check.first_mismatch;
  return check;
}

// The board rows' logits against FloatReference (ternary lm_head, as the board's) over the
// first `n` positions of window 0.
std::vector<EvalLogitCompare> compare_logits(const model::TernaryModel& m, const model::KvScales& scales,
                                             const Window& first, int n) {
  golden::FloatReference fl(m, golden::FloatReferenceOptions{true});
  std::vector<std::vector<float>> ref;
  for (int p = 0; p < n; ++p) ref.push_back(fl.step(first.input[size_t(p)]));
  struct Row {
    const char* name;
    golden::BoardReferenceOptions o;
  };
  const Row rows[] = {
      {"board", {}},
      {"board-legacy-shift", {.legacy_attention = true}},
      {"board-online-softmax", {.attention_variant = model::AttentionVariant::OnlineSoftmax}},
      {"board-online-softmax-int4-kv",
       {.attention_variant = model::AttentionVariant::OnlineSoftmax, .kv_format = model::KvFormat::Int4}},
      {"board-online-softmax-int4-kv-4-outliers",
       {.attention_variant = model::AttentionVariant::OnlineSoftmax, .kv_format = model::KvFormat::Int4,
        .kv_outlier_channels = 4}},
      {"board-online-softmax-int4-kv-8-outliers",
       {.attention_variant = model::AttentionVariant::OnlineSoftmax, .kv_format = model::KvFormat::Int4,
        .kv_outlier_channels = 8}},
  };
  const sim::FastMatvec fast(m, /*with_lm_head=*/true, 2);
  std::vector<EvalLogitCompare> out;
  for (const Row& r : rows) {
    golden::BoardReference bd(m, scales, r.o);
    bd.set_matvec(fast.fn());
    EvalLogitCompare c;
    c.arithmetic = r.name;
    c.positions = n;
    int agree = 0;
    for (int p = 0; p < n; ++p) {
      const std::vector<float> l = bd.step(first.input[size_t(p)]);
      const std::vector<float>& f = ref[size_t(p)];
      double diff = 0, scale = 0;
      for (size_t i = 0; i < l.size(); ++i) {
        diff = std::max(diff, std::fabs(double(l[i]) - double(f[i])));
        scale = std::max(scale, std::fabs(double(f[i])));
      }
      const double rel = scale > 0 ? diff / scale : diff;
      c.rel_mean += rel / n;
      c.rel_worst = std::max(c.rel_worst, rel);
      agree += std::max_element(l.begin(), l.end()) - l.begin() == std::max_element(f.begin(), f.end()) - f.begin();
    }
    c.top1 = double(agree) / n;
    out.push_back(c);
  }
  return out;
}

// The row of arithmetic k: its mean NLL over every scored token and its buckets.
EvalRow eval_row(const Scorer& scorer, int k, int64_t scored_tokens) {
  const auto& names = eval_arithmetics();
  EvalRow row;
  row.arithmetic = names[size_t(k)].first;
  row.meaning = names[size_t(k)].second;
  row.evidence = "simulated";
  row.tokens = scored_tokens;
  row.nll_mean = scorer.sum(k) / double(scored_tokens);
  row.ppl = std::exp(row.nll_mean);
  for (size_t b = 0; b < scorer.buckets().size(); ++b) {
    const Scorer::Acc a = scorer.bucket(k, b);
    if (a.n == 0) continue;
    EvalBucket bk;
    bk.from = scorer.buckets()[b].first;
    bk.to = scorer.buckets()[b].second;
    bk.tokens = a.n;
    bk.nll_mean = a.nll / double(a.n);
    bk.ppl = std::exp(bk.nll_mean);
    bk.kl_float = a.kl_f / double(a.n);
    bk.kl_float_ternary_head = a.kl_ft / double(a.n);
    bk.top1_float = double(a.top1_f) / double(a.n);
    bk.top1_float_ternary_head = double(a.top1_ft) / double(a.n);
    row.buckets.push_back(bk);
  }
  return row;
}

}  // namespace

EvalResult run_eval(const EvalRequest& req, const std::function<void(const std::string&)>& on_status) {
  const auto t_start = Clock::now();
  auto status = [&](const std::string& s) { if (on_status) on_status(s); };
  EvalResult res;
  const int threads = std::max(1, req.threads);
  Prepared pre = prepare(req, res);
  if (req.board_positions > 0) (void)sim::make_sim_config(req.params);  // a bad config is refused before the work

  status(fmt::format("loading {} ...", res.model));
  auto t0 = Clock::now();
  const std::unique_ptr<sim::CacheStore> store = sim::CacheStore::open(req.cache, req.cache_warning);
  const std::string identity = store ? sim::model_identity(*pre.source, store.get()) : std::string();
  const model::TernaryModel m = sim::load_model(*pre.source, identity, threads, store.get());
  pre.source.reset();
  const model::KvScales scales =
      sim::load_kv_scales(m, identity, golden::calibration_tokens(*pre.tokenizer, pre.config.bos_token_id), threads,
                     store.get());
  res.load_s = seconds_since(t0);

  const std::vector<Window> windows = make_windows(pre.ids, res.window, pre.config.bos_token_id);
  status(fmt::format("scoring {} tokens in {} windows of up to {} positions, {} arithmetics, {} threads ...",
                     res.scored_tokens, res.windows, res.window, kKinds, threads));
  Scorer scorer(m, scales, windows, res.window, threads);
  scorer.run();
  const auto& names = eval_arithmetics();
  for (int k = 0; k < kKinds; ++k) {
    if (Scorer::runs(k, res.window))
      res.rows.push_back(eval_row(scorer, k, res.scored_tokens));
    else
      res.rows_not_run.push_back(names[size_t(k)].first);
  }
  if (req.board_positions > 0) {
    status(fmt::format("running the first {} positions through the simulated board ...", req.board_positions));
    res.board = board_check(req, m, scales, windows[0], threads);
  }
  if (req.compare_positions > 0) {
    status(fmt::format("comparing the board rows' logits with FloatReference over {} positions ...",
                       req.compare_positions));
    res.compare = compare_logits(m, scales, windows[0], req.compare_positions);
  }
  res.wall_s = seconds_since(t_start);
  return res;
}

const Fields<EvalResult>& eval_header_fields() {
  using R = EvalResult;
  static const Fields<R> fields{{"model", &R::model},
                                {"model_sha256", &R::model_sha256},
                                {"shape", &R::shape},
                                {"tokenizer", &R::tokenizer},
                                {"text", &R::text},
                                {"text_sha256", &R::text_sha256},
                                {"text_bytes", &R::text_bytes},
                                {"text_tokens", &R::text_tokens},
                                {"window", &R::window},
                                {"windows", &R::windows},
                                {"load_s", &R::load_s},
                                {"wall_s", &R::wall_s}};
  return fields;
}

const Fields<EvalRow>& eval_row_fields() {
  using R = EvalRow;
  static const Fields<R> fields{{"arithmetic", &R::arithmetic}, {"evidence", &R::evidence}, {"ppl", &R::ppl},
                                {"tokens", &R::tokens},         {"nll_mean", &R::nll_mean}};
  return fields;
}

const Fields<EvalBucket>& eval_bucket_fields() {
  using B = EvalBucket;
  static const Fields<B> fields{{"from", &B::from},
                                {"to", &B::to},
                                {"tokens", &B::tokens},
                                {"ppl", &B::ppl},
                                {"nll_mean", &B::nll_mean},
                                {"kl_float", &B::kl_float},
                                {"kl_float_ternary_head", &B::kl_float_ternary_head},
                                {"top1_float", &B::top1_float},
                                {"top1_float_ternary_head", &B::top1_float_ternary_head}};
  return fields;
}

const Fields<EvalBoardCheck>& eval_board_check_fields() {
  using B = EvalBoardCheck;
  static const Fields<B> fields{{"positions", &B::positions},
                                {"fidelity", &B::fidelity},
                                {"arithmetic", &B::arithmetic},
                                {"logits_equal", &B::logits_equal},
                                {"first_mismatch", &B::first_mismatch}};
  return fields;
}

const Fields<EvalLogitCompare>& eval_compare_fields() {
  using C = EvalLogitCompare;
  static const Fields<C> fields{{"arithmetic", &C::arithmetic},   {"evidence", &C::evidence},
                                {"positions", &C::positions},     {"rel_error_mean", &C::rel_mean},
                                {"rel_error_worst", &C::rel_worst}, {"top1_agreement", &C::top1}};
  return fields;
}

nlohmann::json eval_json(const EvalResult& r) {
  nlohmann::json j = record_json(r, eval_header_fields());
  j["schema"] = "bitsim.eval/2";
  j["rows"] = records_json(r.rows, eval_row_fields());
  for (size_t i = 0; i < r.rows.size(); ++i) j["rows"][i]["buckets"] = records_json(r.rows[i].buckets, eval_bucket_fields());
  j["rows_not_run"] = r.rows_not_run;
  j["board_check"] = r.board ? record_json(*r.board, eval_board_check_fields()) : nlohmann::json(nullptr);
  j["logits_vs_float"] = records_json(r.compare, eval_compare_fields());
  return j;
}

}  // namespace bitsim::study
