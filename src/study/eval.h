#pragma once
// Perplexity of a text under the arithmetics of the model, the board and its variants
// (`bitsim eval`). Teacher forcing: the text is encoded in one piece (no BOS), cut into
// consecutive windows of W tokens (W = --window, by default min(512, max_position_embeddings)),
// and each window
// is scored as [BOS, w_0 .. w_{W-2}] -> [w_0 .. w_{W-1}]: every text token is predicted
// once, from the tokens of its own window before it. nll = logsumexp(logits) - logit[target]
// in double; ppl = exp(mean nll).
//
// The rows (every one is `simulated`: golden references on this host, no board measurement):
//   float               FloatReference: float BitLinear, float softmax, tied float lm_head
//                       (the checkpoint's own semantics)
//   float-ternary-head  the same with the board's ternary lm_head
//   board               BoardReference: the board's arithmetic (integer matmul, the attention
//                       unit with the multiplier m, K/V scales fixed per (layer, head) from the
//                       144-token calibration text, ternary lm_head); equal bit for bit to the
//                       simulated board
//   board-legacy-shift  the board with the earlier attention unit's fixed >> 8
//   board-dynamic-kv    the board with K/V scales from max|K|, max|V| over all positions of
//                       the window being scored (the earlier scheme, which looks at future
//                       keys), taken from a float-attention pass over that window
//   board-int8-head     the board with an INT8 lm_head (embed_tokens quantized per row by
//                       absmax to int8) instead of the ternary one
//   board-online-softmax  the board with the online-softmax attention unit
//                       (attention.variant = online-softmax, docs/variants-attention.md)
//   board-online-softmax-int4-kv  the same with the INT4 KV cache (kv.format = int4,
//                       docs/variants-attention.md 8)
//   board-online-softmax-int4-kv-4-outliers, -8-outliers  the same with 4 and 8 fp16
//                       outlier lanes (kv.outlier_channels)
// A row whose attention unit holds fewer positions than W is not run (the int8 units hold
// 512, the INT4 one 2,048): EvalResult::rows_not_run names it.
//
// By context: every row also reports, per bucket of positions in the window (1-256, 257-512,
// 513-1,024, 1,025-2,048, then doubling; only buckets that start within W and hold scored
// tokens), its perplexity, the mean KL divergence KL(P_ref || P_row) of its next-token
// distribution from the `float` row's and from `float-ternary-head`'s (nats, in double), and
// the fraction of positions whose argmax equals theirs.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/board_config.h"
#include "sim/cache_store.h"
#include "sim/params.h"
#include "study/record.h"

namespace bitsim::study {

struct EvalRequest {
  std::string model;                                // a checkpoint folder or synthetic:SHAPE[:SEED]
  std::filesystem::path text;                       // UTF-8 text file
  std::optional<std::filesystem::path> tokenizer;   // overrides the model folder's
  int64_t tokens = 0;                               // score the first N tokens of the text; 0: all
  int board_positions = 0;                          // also run the first N positions on the simulated board
  int compare_positions = 0;                        // compare the board rows' logits with FloatReference's
                                                    // over the first N positions (0: no comparison)
  int window = 0;                                   // positions per window; 0: min(512, max_position_embeddings)
  int threads = 2;                                  // host threads (results do not depend on it)
  sim::ParamSet params = sim::board_params();                 // board config of the board check
  sim::CacheSettings cache;                              // the start-up cache (off by default here)
  sim::CacheWarn cache_warning;                          // where its warnings go
};

// One context bucket of a row: the positions from..to (1-based, in the window).
struct EvalBucket {
  int from = 0, to = 0;
  int64_t tokens = 0;
  double ppl = 0, nll_mean = 0;
  double kl_float = 0, kl_float_ternary_head = 0;   // mean KL(P_ref || P_row), nats
  double top1_float = 0, top1_float_ternary_head = 0;  // fraction of equal argmax
};

struct EvalRow {
  std::string arithmetic;   // float, float-ternary-head, board, ...
  std::string evidence;     // "simulated"
  std::string meaning;      // one line: what the row computes
  double ppl = 0, nll_mean = 0;
  int64_t tokens = 0;       // tokens scored
  std::vector<EvalBucket> buckets;  // by context, in order of position
};

struct EvalBoardCheck {
  int positions = 0;        // positions run through the simulated board
  std::string fidelity = "fast";
  std::string arithmetic;   // the row whose arithmetic the config runs (board, board-online-softmax, ...)
  bool logits_equal = false;  // every position's logits equal that arithmetic's golden reference's, bit for bit
  std::optional<int> first_mismatch;  // the first position whose logits differ; empty if none
};

// One board arithmetic's logits against FloatReference with the same (ternary) lm_head over
// the first positions of window 0. Per position: rel = max_i |l_i - f_i| / max_i |f_i|.
struct EvalLogitCompare {
  std::string arithmetic;   // board, board-legacy-shift, board-online-softmax, ...
  int positions = 0;
  double rel_mean = 0, rel_worst = 0;  // mean and largest per-position relative error
  double top1 = 0;          // fraction of positions whose argmax equals the reference's
  std::string evidence = "simulated";
};

struct EvalResult {
  std::string model, tokenizer, shape, text;
  std::optional<std::string> model_sha256;  // of model.safetensors; empty for a synthetic model
  std::string text_sha256;    // of the bytes read (text_bytes)
  int64_t text_bytes = 0;     // bytes read: the whole file, or the start that `tokens` needed
  int64_t text_tokens = 0;    // tokens of those bytes (the whole text's when it was read whole)
  int64_t scored_tokens = 0;
  int window = 0;             // positions per window
  int windows = 0;
  std::vector<EvalRow> rows;
  std::vector<std::string> rows_not_run;  // rows whose unit holds fewer positions than the window
  std::optional<EvalBoardCheck> board;
  std::vector<EvalLogitCompare> compare;  // with compare_positions > 0
  double load_s = 0, wall_s = 0;
};

// The context buckets that start within a window of `window` positions: 1-256, 257-512,
// 513-1,024, 1,025-2,048, ... (the last one reaching past the window is kept whole).
std::vector<std::pair<int, int>> eval_buckets(int window);

// The row names in order, and what each means.
const std::vector<std::pair<std::string, std::string>>& eval_arithmetics();

// Throws bitsim::Error naming the file or request field at fault (missing, not a regular
// file, empty text, tokens over the text's length, board positions over the first window).
EvalResult run_eval(const EvalRequest& request,
                    const std::function<void(const std::string&)>& on_status = {});

// The fields the document's header, a row, the board check and a logit comparison write
// (JSON keys; docs/json-schemas.md).
const Fields<EvalResult>& eval_header_fields();
const Fields<EvalRow>& eval_row_fields();
const Fields<EvalBucket>& eval_bucket_fields();
const Fields<EvalBoardCheck>& eval_board_check_fields();
const Fields<EvalLogitCompare>& eval_compare_fields();
// The bitsim.eval/2 document (docs/json-schemas.md).
nlohmann::json eval_json(const EvalResult& result);

}  // namespace bitsim::study
