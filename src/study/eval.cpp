#include "study/eval.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "golden/board_reference.h"
#include "golden/float_reference.h"
#include "hw/fast_kernels.h"
#include "base/error.h"
#include "base/file_io.h"
#include "base/sha256.h"
#include "model/model_loader.h"
#include "model/packed_image.h"
#include "model/text_file.h"
#include "model/tokenizer.h"
#include "numerics/numerics.h"
#include "sim/board_config.h"
#include "sim/fast_matvec.h"
#include "sim/startup.h"
#include "sim/board_run.h"

namespace bitsim::sim {

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

__attribute__((target_clones("avx2", "default")))
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

// -log softmax(logits)[target], in double.
double nll_of(const std::vector<float>& logits, int target) {
  double mx = -INFINITY;
  for (float l : logits) mx = std::max(mx, double(l));
  double sum = 0.0;
  for (float l : logits) sum += std::exp(double(l) - mx);
  return mx + std::log(sum) - double(logits[size_t(target)]);
}

enum Kind { kFloat, kFloatTernaryHead, kBoard, kBoardLegacy, kBoardDynamicKv, kBoardInt8Head, kBoardOnlineSoftmax, kBoardInt4Kv,
           kBoardInt4KvOutliers4, kBoardInt4KvOutliers8, kKinds };


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
  };
  return rows;
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
  res.window = std::min(golden::kMaxContext, p.config.max_position_embeddings);
  res.windows = int((p.ids.size() + size_t(res.window) - 1) / size_t(res.window));
  const int first_window = int(std::min<size_t>(p.ids.size(), size_t(res.window)));
  if (req.compare_positions < 0 || req.compare_positions > first_window)
    throw Error(fmt::format("compare positions {}: must be 0..{} (the first window's positions)",
                            req.compare_positions, first_window));
  if (req.board_positions > first_window)
    throw Error(fmt::format("board positions {}: over the first window's {} positions", req.board_positions,
                            first_window));
  return p;
}

// Scores the windows under every arithmetic. Work items: (window, job); job 0 float (+ the
// ternary head from its last hidden state), 1 dynamic KV (the longest job: a calibration pass
// and a board pass), 2 board (+ the int8 head from its last hidden state), 3 legacy, 4
// online-softmax, 5 online-softmax with INT4 KV, 6 and 7 the same with 4 and 8 outlier
// lanes. Each item's NLL sum lands in its own slot, and the slots are summed in window order: the result
// does not depend on the threads.
class Scorer {
 public:
  static constexpr int kJobs = 8;
  Scorer(const model::TernaryModel& m, const golden::KvScales& scales, const std::vector<Window>& windows)
      : m_(m), scales_(scales), windows_(windows), head8_(make_int8_head(m)),
        fast_(m, /*with_lm_head=*/true, 2), nll_(windows.size(), std::array<double, kKinds>{}) {}

  void run(int threads) {
    std::vector<std::exception_ptr> errors{size_t(threads)};
    auto worker = [&](int tid) {
      try {
        Refs refs;
        for (size_t item = next_.fetch_add(1); item < windows_.size() * kJobs; item = next_.fetch_add(1))
          score(refs, item / kJobs, int(item % kJobs));
      } catch (...) {
        errors[size_t(tid)] = std::current_exception();
        next_ = windows_.size() * kJobs;  // the others stop at their next item
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
    worker(0);
    for (auto& t : pool) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }
  double sum(int kind) const {
    double s = 0;
    for (const auto& w : nll_) s += w[size_t(kind)];
    return s;
  }

 private:
  struct Refs {  // one worker's references, built on first use
    std::optional<golden::FloatReference> fl;
    std::optional<golden::BoardReference> bd, lg, on, i4, i4o4, i4o8;
  };
  golden::BoardReference& board_ref(std::optional<golden::BoardReference>& r, bool legacy,
                                    model::AttentionVariant variant = model::AttentionVariant::TwoPhase,
                                    model::KvFormat kv = model::KvFormat::Int8, int outliers = 0) {
    if (!r) {
      r.emplace(m_, scales_, golden::BoardReferenceOptions{legacy, 1, variant, kv, outliers});
      r->set_matvec(fast_.fn());
    }
    r->reset();
    return *r;
  }
  void score(Refs& refs, size_t w, int job) {
    const Window& win = windows_[w];
    auto& out = nll_[w];
    if (job == 0) {
      score_float(refs, win, out);
    } else if (job == 1) {
      golden::BoardReference dyn(m_, golden::calibrate_kv_scales(m_, win.input, fast_.fn()), golden::BoardReferenceOptions{false, 1});
      dyn.set_matvec(fast_.fn());
      out[kBoardDynamicKv] = plain_nll(dyn, win);
    } else if (job == 2) {
      score_board(board_ref(refs.bd, false), win, w == 0, out);
    } else if (job == 3) {
      out[kBoardLegacy] = plain_nll(board_ref(refs.lg, true), win);
    } else if (job == 4) {
      out[kBoardOnlineSoftmax] = plain_nll(board_ref(refs.on, false, model::AttentionVariant::OnlineSoftmax), win);
    } else if (job == 5) {
      out[kBoardInt4Kv] = plain_nll(
          board_ref(refs.i4, false, model::AttentionVariant::OnlineSoftmax, model::KvFormat::Int4), win);
    } else if (job == 6) {
      out[kBoardInt4KvOutliers4] = plain_nll(
          board_ref(refs.i4o4, false, model::AttentionVariant::OnlineSoftmax, model::KvFormat::Int4, 4), win);
    } else {
      out[kBoardInt4KvOutliers8] = plain_nll(
          board_ref(refs.i4o8, false, model::AttentionVariant::OnlineSoftmax, model::KvFormat::Int4, 8), win);
    }
  }
  static double plain_nll(golden::BoardReference& ref, const Window& win) {
    double s = 0;
    for (size_t p = 0; p < win.input.size(); ++p) s += nll_of(ref.step(win.input[p]), win.target[p]);
    return s;
  }
  // One float pass gives both heads (they read the same final hidden state).
  void score_float(Refs& refs, const Window& win, std::array<double, kKinds>& out) {
    if (!refs.fl) refs.fl.emplace(m_, golden::FloatReferenceOptions{false});
    refs.fl->reset();
    double s = 0, st = 0;
    for (size_t p = 0; p < win.input.size(); ++p) {
      s += nll_of(refs.fl->step(win.input[p]), win.target[p]);
      st += nll_of(refs.fl->last_logits(true), win.target[p]);
    }
    out[kFloat] = s;
    out[kFloatTernaryHead] = st;
  }
  // The board and, from its last hidden state, the INT8 head; window 0's first logits kept.
  void score_board(golden::BoardReference& bd, const Window& win, bool first, std::array<double, kKinds>& out) {
    std::vector<float> hidden(size_t(m_.config.hidden_size));
    const int last = m_.config.num_layers - 1;
    const golden::Probe probe = [&](const golden::StepProbe& sp) {
      if (sp.layer == last && sp.data && std::strcmp(sp.step, "residual") == 0)
        std::copy(sp.data, sp.data + sp.n, hidden.begin());
    };
    double s = 0, s8 = 0;
    for (size_t p = 0; p < win.input.size(); ++p) {
      std::vector<float> logits = bd.step(win.input[p], probe);
      s += nll_of(logits, win.target[p]);
      s8 += nll_of(int8_head_logits(m_, head8_, hidden.data()), win.target[p]);
    }
    out[kBoard] = s;
    out[kBoardInt8Head] = s8;
  }

  const model::TernaryModel& m_;
  const golden::KvScales& scales_;
  const std::vector<Window>& windows_;
  const Int8Head head8_;
  const FastMatvec fast_;
  std::vector<std::array<double, kKinds>> nll_;
  std::atomic<size_t> next_{0};
};

// The eval row whose arithmetic a board config runs, or "" when no row has it (an outlier
// count other than 4 or 8).
std::string row_of(const hw::AttentionUnitConfig& a) {
  if (a.kind() == model::AttentionVariant::TwoPhase) return "board";
  if (a.kv() == model::KvFormat::Int8) return "board-online-softmax";
  if (a.kv_outlier_channels == 0) return "board-online-softmax-int4-kv";
  if (a.kv_outlier_channels == 4 || a.kv_outlier_channels == 8)
    return fmt::format("board-online-softmax-int4-kv-{}-outliers", a.kv_outlier_channels);
  return "";
}

// The first positions of window 0 through the simulated board with the request's config,
// compared with the golden reference of that config's arithmetic (the row row_of names):
// the board's, or a variant's when the config selects one.
EvalBoardCheck board_check(const EvalRequest& req, const model::TernaryModel& m, const golden::KvScales& scales,
                           const Window& first, int threads) {
  const std::vector<int> toks(first.input.begin(), first.input.begin() + req.board_positions);
  const SimConfig cfg = make_sim_config(req.params);
  const hw::AttentionUnitConfig& a = cfg.board.attention;
  golden::BoardReference ref(m, scales, golden::BoardReferenceOptions{false, threads, a.kind(), a.kv(), a.kv_outlier_channels});
  SimulateOptions so;
  so.threads = threads;
  const auto outcomes = simulate_tokens(cfg, m, scales, toks, so);
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
std::vector<EvalLogitCompare> compare_logits(const model::TernaryModel& m, const golden::KvScales& scales,
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
  const FastMatvec fast(m, /*with_lm_head=*/true, 2);
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

}  // namespace

EvalResult run_eval(const EvalRequest& req, const std::function<void(const std::string&)>& on_status) {
  const auto t_start = Clock::now();
  auto status = [&](const std::string& s) { if (on_status) on_status(s); };
  EvalResult res;
  const int threads = std::max(1, req.threads);
  Prepared pre = prepare(req, res);
  if (req.board_positions > 0) (void)make_sim_config(req.params);  // a bad config is refused before the work

  status(fmt::format("loading {} ...", res.model));
  auto t0 = Clock::now();
  const std::unique_ptr<CacheStore> store = CacheStore::open(req.cache, req.cache_warning);
  const std::string identity = store ? model_identity(*pre.source, store.get()) : std::string();
  const model::TernaryModel m = load_model(*pre.source, identity, threads, store.get());
  pre.source.reset();
  const golden::KvScales scales =
      load_kv_scales(m, identity, golden::calibration_tokens(*pre.tokenizer, pre.config.bos_token_id), threads,
                     store.get());
  res.load_s = seconds_since(t0);

  const std::vector<Window> windows = make_windows(pre.ids, res.window, pre.config.bos_token_id);
  status(fmt::format("scoring {} tokens in {} windows of up to {} positions, {} arithmetics, {} threads ...",
                     res.scored_tokens, res.windows, res.window, kKinds, threads));
  Scorer scorer(m, scales, windows);
  scorer.run(threads);
  const auto& names = eval_arithmetics();
  for (int k = 0; k < kKinds; ++k) {
    EvalRow row;
    row.arithmetic = names[size_t(k)].first;
    row.meaning = names[size_t(k)].second;
    row.evidence = "simulated";
    row.tokens = res.scored_tokens;
    row.nll_mean = scorer.sum(k) / double(res.scored_tokens);
    row.ppl = std::exp(row.nll_mean);
    res.rows.push_back(row);
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
  j["schema"] = "bitsim.eval/1";
  j["rows"] = records_json(r.rows, eval_row_fields());
  j["board_check"] = r.board ? record_json(*r.board, eval_board_check_fields()) : nlohmann::json(nullptr);
  j["logits_vs_float"] = records_json(r.compare, eval_compare_fields());
  return j;
}

}  // namespace bitsim::sim
