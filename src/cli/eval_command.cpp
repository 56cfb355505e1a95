#include "cli/eval_command.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <limits>

#include "cli/options.h"
#include "base/error.h"
#include "sim/board_config.h"
#include "study/eval.h"

namespace bitsim::cli {

namespace {

constexpr const char* kEvalHelp =
    "Perplexity of a text (teacher forcing, windows of --window positions, by default "
    "min(512, max_position_embeddings)) under thirteen arithmetics, each `simulated` (golden references on this host), "
    "in all and per context bucket (positions 1-256, 257-512, 513-1024, 1025-2048 of the window) with the mean KL "
    "divergence from the float rows' next-token distributions and top-1 agreement with them; a row whose unit "
    "holds fewer positions than the window (int8 units: 512, INT4 and TIP: 2048) is not run:\n"
    "  float               float BitLinear, float softmax, tied float lm_head (the checkpoint's semantics)\n"
    "  float-ternary-head  float with the board's ternary lm_head\n"
    "  board               the board's arithmetic (multiplier m, fixed K/V scales, ternary lm_head), bit-equal to the simulated board\n"
    "  board-legacy-shift  board with the earlier attention unit's fixed >> 8\n"
    "  board-dynamic-kv    board with K/V scales from the max over all positions of the window (looks at future keys)\n"
    "  board-int8-head     board with an INT8 lm_head (per-row absmax) instead of the ternary one\n"
    "  board-online-softmax  board with the online-softmax attention unit (docs/variants-attention.md)\n"
    "  board-online-softmax-int4-kv  the same with the INT4 KV cache (kv.format = int4; docs/variants-attention.md 8)\n"
    "  board-online-softmax-int4-kv-4-outliers  the same with 4 fp16 outlier lanes (kv.outlier_channels = 4)\n"
    "  board-online-softmax-int4-kv-8-outliers  the same with 8 fp16 outlier lanes (kv.outlier_channels = 8)\n"
    "  board-online-softmax-kvq8  TIP's KVQ8 rows at every position (the int8 reference up to 2,048 positions; docs/tip.md)\n"
    "  board-online-softmax-tip  TIP's precision tiers at their defaults (docs/tip.md)\n"
    "  board-online-softmax-tip-lean  TIP with a leaner setting (region 32, sink 32, recent 128, 2 KVQ8 regions)";

// The perplexities, the board check and the comparison as a table.
void print_eval(const study::EvalResult& r) {
  fmt::print("model      {} ({})\n", r.model, r.shape);
  if (r.model_sha256) fmt::print("           model.safetensors sha256 {}\n", *r.model_sha256);
  fmt::print("tokenizer  {}\n", r.tokenizer);
  fmt::print("text       {} ({} bytes read, sha256 {}), {} tokens\n", r.text, r.text_bytes, r.text_sha256,
             r.text_tokens);
  fmt::print("scored     {} tokens in {} windows of up to {} positions (BOS + the window's tokens)\n\n",
             r.scored_tokens, r.windows, r.window);
  fmt::print("{:<39} {:>10} {:>10} {:>8}  {}\n", "arithmetic", "ppl", "nll_mean", "tokens", "evidence");
  for (const auto& row : r.rows)
    fmt::print("{:<39} {:>10.4f} {:>10.6f} {:>8}  {}\n", row.arithmetic, row.ppl, row.nll_mean, row.tokens, row.evidence);
  if (r.board) {
    if (r.board->logits_equal)
      fmt::print("\nsimulated board: the first {} positions ran on the board (fast fidelity); their logits "
                 "were equal to the {} arithmetic's golden reference's, bit for bit\n",
                 r.board->positions, r.board->arithmetic.empty() ? "config's" : r.board->arithmetic);
    else
      fmt::print("\nsimulated board: the logits of position {} differ from the {} arithmetic's golden reference's "
                 "(of {} positions run)\n",
                 r.board->first_mismatch.value_or(-1), r.board->arithmetic.empty() ? "config's" : r.board->arithmetic,
                 r.board->positions);
  }
  if (!r.rows_not_run.empty()) {
    std::string names;
    for (const auto& n : r.rows_not_run) names += fmt::format("{}{}", names.empty() ? "" : ", ", n);
    fmt::print("not run (their units hold fewer than {} positions): {}\n", r.window, names);
  }
  fmt::print("\nby context (positions in the window); KL(float || row) and KL(float-ternary-head || row) in nats, "
             "top-1 agreement with each\n");
  fmt::print("{:<39} {:>11} {:>7} {:>10} {:>10} {:>10} {:>7} {:>7}\n", "arithmetic", "positions", "tokens", "ppl",
             "kl_float", "kl_f_th", "top1_f", "top1_th");
  for (const auto& row : r.rows)
    for (const auto& b : row.buckets)
      fmt::print("{:<39} {:>11} {:>7} {:>10.4f} {:>10.6f} {:>10.6f} {:>7.4f} {:>7.4f}\n", row.arithmetic,
                 fmt::format("{}-{}", b.from, b.to), b.tokens, b.ppl, b.kl_float, b.kl_float_ternary_head,
                 b.top1_float, b.top1_float_ternary_head);
  if (!r.compare.empty()) {
    fmt::print("\nlogits against FloatReference (ternary lm_head), first {} positions of window 0:\n",
               r.compare[0].positions);
    fmt::print("{:<39} {:>14} {:>14} {:>8}  {}\n", "arithmetic", "rel_err_mean", "rel_err_worst", "top1", "evidence");
    for (const auto& c : r.compare)
      fmt::print("{:<39} {:>14.6f} {:>14.6f} {:>8.4f}  simulated\n", c.arithmetic, c.rel_mean, c.rel_worst, c.top1);
  }
  fmt::print("\nwall {:.1f} s (load and calibration {:.1f} s)\n", r.wall_s, r.load_s);
}

class Eval final : public Command {
 public:
  explicit Eval(CLI::App& app)
      : Command(app.add_subcommand("eval", "Perplexity of a text under the model's, the board's and the variants' "
                                           "arithmetics")) {
    sub_->footer(kEvalHelp);
    sub_->add_option("--model", req_.model, "A checkpoint folder or synthetic:SHAPE[:SEED]")->required();
    sub_->add_option("--text", req_.text, "The text to score (UTF-8 file)")->required();
    sub_->add_option("--tokens", req_.tokens, "Score the first N tokens of the text (default: all)")
        ->transform(integer_in(1, std::numeric_limits<int>::max()));
    sub_->add_option("--board", req_.board_positions,
                     "Also run the first N positions through the simulated board (fast fidelity) and check "
                     "that their logits equal the golden reference of the config's arithmetic (the board row's, or a variant row's)")
        ->transform(integer_in(1, std::numeric_limits<int>::max()));
    sub_->add_option("--compare", req_.compare_positions,
                     "Compare the board rows' logits with FloatReference's (ternary lm_head) over the first N "
                     "positions: mean and worst relative error, top-1 agreement")
        ->transform(integer_in(1, std::numeric_limits<int>::max()));
    sub_->add_option("--window", req_.window,
                     "Positions per window, 1..max_position_embeddings (default: min(512, max_position_embeddings))")
        ->transform(integer_in(1, std::numeric_limits<int>::max()));
    sub_->add_option("--tokenizer", tokenizer_, "A SentencePiece tokenizer.model or a Hugging Face tokenizer.json (byte-level BPE) overriding the model's");
    sub_->add_option("--threads", req_.threads, "Host threads (the results do not depend on it)")
        ->transform(integer_in(1, 64))->capture_default_str();
    sub_->add_option("--config", config_, "Board config TOML for --board (default: configs/pynq-z2.toml)");
    sub_->add_flag("--json", json_, "Write one bitsim.eval/2 JSON document to stdout (docs/json-schemas.md)");
    sub_->add_flag("--quiet", quiet_, "No progress lines on stderr");
    add_cache_options(sub_, cache_);
  }
  int run() override {
    check_counts();
    if (!tokenizer_.empty()) req_.tokenizer = tokenizer_;
    const std::string file = config_.empty() ? sim::default_config_path() : config_;
    if (!file.empty()) req_.params.load_toml(file);
    req_.cache = cache_settings(cache_);
    req_.cache_warning = print_warning;
    const study::EvalResult r = study::run_eval(req_, status_printer(quiet_));
    if (json_)
      fmt::print("{}\n", study::eval_json(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    else
      print_eval(r);
    return r.board && !r.board->logits_equal ? 3 : 0;
  }

 private:
  void check_counts() const {
    if (sub_->count("--tokens") && req_.tokens < 1)
      throw Error(fmt::format("--tokens {}: must be 1 or more", req_.tokens));
    if (sub_->count("--compare") && req_.compare_positions < 1)
      throw Error(fmt::format("--compare {}: must be 1 or more", req_.compare_positions));
    if (sub_->count("--board") && req_.board_positions < 1)
      throw Error(fmt::format("--board {}: must be 1 or more", req_.board_positions));
  }

  CacheArgs cache_;
  study::EvalRequest req_;
  std::string tokenizer_, config_;
  bool json_ = false, quiet_ = false;
};

}  // namespace

std::unique_ptr<Command> add_eval_command(CLI::App& app) { return std::make_unique<Eval>(app); }

}  // namespace bitsim::cli
