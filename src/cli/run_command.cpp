#include "cli/run_command.h"

#include <unistd.h>

#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/parse_number.h"
#include "cli/options.h"
#include "model/attention_stream.h"
#include "sim/board_run.h"
#include "study/board_figures.h"
#include "study/calibrate.h"
#include "study/run_record.h"

namespace bitsim::cli {

namespace {

using nlohmann::json;

// The bitsim.run/1 document (docs/json-schemas.md).
json run_json(const sim::BoardRunResult& r) {
  json cfg(r.config);
  return json{{"schema", "bitsim.run/1"},
              {"fidelity", sim::fidelity_name(r.fidelity)},
              {"model", r.model},
              {"tokenizer", r.tokenizer},
              {"prompt_tokens", r.prompt_tokens},
              {"text", r.generated_text},
              {"config", cfg},
              {"evidence", sim::timing_evidence(r.approximate)},
              {"approximate", r.approximate},
              {"tokens", study::records_json(r.tokens, study::run_token_fields())},
              {"summary", study::run_summary_json(r)}};
}

// The per-token table.
void print_token_table(const sim::BoardRunResult& r) {
  fmt::print("\nmodel {} ({}), tokenizer {}; fidelity {}, every figure below is simulated unless labelled{}\n",
             r.model, r.shape, r.tokenizer, sim::fidelity_name(r.fidelity),
             r.approximate ? "; every time and energy is APPROXIMATE (ddr3.fast_reuse = approximate: records reused "
                             "across the DDR3 state, docs/ddr3.md)"
                           : "");
  fmt::print("{:>5} {:>4} {:>8} {:<7} {:>9} {:>9} {:>9} {:>9} {:>6} {:>10} {:>6} {:>6}  {:<7} {:>8}  {:<6} {}\n",
             "token", "T", "id", "phase", "matmul ms", "attn ms", "cpu ms", "total ms", "tok/s", "DMA calls", "MB rd",
             "GB/s", "% wall", "mJ", "logits", "logits digest");
  for (const auto& t : r.tokens)
    fmt::print("{:>5} {:>4} {:>8} {:<7} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>6.2f} {:>10} {:>6.1f} {:>6.3f}  {:<7.1f} "
               "{:>8.3f}  {:<6} {}\n",
               t.index, t.context, t.token_id, t.phase, t.matmul_ms, t.attention_ms, t.cpu_ms, t.total_ms,
               t.total_ms > 0 ? 1e3 / t.total_ms : 0.0, t.dma_calls, t.bytes_read / 1e6, t.read_gb_s,
               100.0 * t.read_gb_s / r.wall_gb_s, t.energy_mj,
               t.logits_equal ? (*t.logits_equal ? "equal" : "DIFFER") : "-", t.logits_digest_hex.value_or("-"));
  bool shared = false;
  for (const auto& t : r.tokens) shared |= t.chunk_tokens > 1;
  if (shared)
    fmt::print("(prefill chunks of up to {} tokens: each prompt token shows its share of its chunk's figures; "
               "'-' logits: the lm_head skipped for that position)\n", r.tokens_per_pass);
}

// The layer walker's lines of the summary (host.walker = pl).
void print_walker(const sim::BoardRunResult& r) {
  using W = host::WalkerResources;
  double walker_ms = 0;
  for (const auto& t : r.tokens) walker_ms += t.walker_ms;
  fmt::print("  layer walker (PL)     {:.3f} ms per token of operator steps (inside total; cpu ms is the host's "
             "share)  [simulated]\n", r.tokens.empty() ? 0.0 : walker_ms / double(r.tokens.size()));
  fmt::print("  walker resources      {} DSP, {} LUT, {} BRAM36 (device 220 DSP, 53,200 LUT, 140 BRAM36; board "
             "today {:.0f}% LUT, {} DSP in the attention unit)  [simulated]\n",
             r.walker->dsp, r.walker->lut, r.walker->bram36, 100 * W::kBoardLutShare, W::kBoardDsp);
  for (const auto& row : r.walker->rows)
    fmt::print("    {:<20} {:>5} el/cycle {:>4} DSP {:>6} LUT {:>3} BRAM36\n", row.name,
               row.lanes > 0 ? fmt::format("{:g}", row.lanes) : std::string("-"), row.dsp, row.lut, row.bram36);
  // Beside the board's 34% of the LUTs and the configured attention unit (17 DSP on the board).
  const int dsp = r.walker->dsp + r.attention.dsp;
  // The configured attention unit takes the place of the board's, whose LUTs are inside
  // the 34%.
  const int board_unit_lut = hw::attention_resources(hw::AttentionUnitConfig{}).lut;
  const double lut = W::kBoardLutShare * W::kDeviceLut - board_unit_lut + r.walker->lut + r.attention.lut;
  fmt::print("    with the board      {} DSP ({:.0f}%), {:.0f} LUT ({:.0f}%)  [simulated]\n", dsp,
             100.0 * dsp / W::kDeviceDsp, lut, 100.0 * lut / W::kDeviceLut);
}

// The summary's lines after the token rates: resources, call costs, the check, wall times.
void print_costs_and_check(const sim::BoardRunResult& r) {
  fmt::print("  attention unit        {} DSP48E1, {} BRAM36{} (model; device 220 DSP, 140 BRAM36)  [simulated]\n",
             r.attention.dsp, r.attention.bram36,
             r.attention.lut_complete ? fmt::format(", {} LUT", r.attention.lut)
                                      : fmt::format(", {} LUT in the modelled rows", r.attention.lut));
  const sim::FixedCostShare fixed = sim::fixed_cost_share(r);
  fmt::print("  driver calls          {:.1f} per token, fixed call cost {:.3f} ms per token = {:.1f}% of token "
             "time  [{}]\n",
             fixed.calls_per_token, fixed.fixed_ms_per_token, 100.0 * fixed.share, sim::timing_evidence(r.approximate));
  const int checked = study::run_summary(r).logits_checked;
  int skipped = 0;
  for (const auto& t : r.tokens) skipped += !t.has_logits;
  const std::string without =
      skipped ? fmt::format(" ({} prompt positions without logits: their lm_head skipped)", skipped) : std::string();
  fmt::print("  logits vs golden      {}\n",
             !r.checked ? std::string("not checked (--no-check)")
                        : (r.mismatch.empty() ? fmt::format("{} of {} tokens bit-identical{}", checked, checked, without)
                                              : "MISMATCH: " + r.mismatch));
  double wall_tok = 0;
  for (const auto& t : r.tokens) wall_tok += t.wall_ms;
  fmt::print("  host wall time        load {:.2f} s{}, K/V calibration {:.2f} s{}, {:.1f} ms per token, {:.2f} s in all "
             "(this machine, not a board figure)\n",
             r.load_s, r.model_cached ? " (start-up cache)" : "", r.calibration_s,
             r.scales_cached ? " (start-up cache)" : "", r.tokens.empty() ? 0.0 : wall_tok / r.tokens.size(), r.wall_s);
  if (r.stopped_at_capacity)
    fmt::print("  stopped at the board's KV capacity of {} positions ({})\n", r.kv_capacity,
               r.kv_capacity < r.kv_capacity_cap ? "what its KV format fits in the CMA"
                                                 : "the unit's T range or the model's positions");
  if (r.fidelity != sim::Fidelity::kCycle)
    fmt::print("  fast fidelity         {} DMA batches, {} timed from the cache ({} shapes from the start-up "
               "cache), {} run once on the clocked board ({:.2f} s)\n", r.fast.batches, r.fast.cache_hits,
               r.timing_entries_cached, r.fast.oracle_runs, r.fast.oracle_wall_s);
  if (r.fast.replays_accepted + r.fast.replays_rejected > 0)
    fmt::print("  checked reuse         {} records replayed by the memory model and reused, {} rejected (docs/hw-timing.md)\n",
               r.fast.replays_accepted, r.fast.replays_rejected);
}

// The per-token table and the summary of a run.
void print_run(const sim::BoardRunResult& r) {
  print_token_table(r);
  const study::RunSummary s = study::run_summary(r);
  fmt::print("\nsummary\n");
  fmt::print("  tokens                {} ({} prompt incl. BOS)\n", r.tokens.size(), r.prompt_tokens);
  const char* tag = sim::timing_evidence(r.approximate);  // the timed figures' label
  fmt::print("  median token          {:.3f} ms, {:.2f} tok/s  [{}]\n", s.median_total_ms, s.tok_s, tag);
  fmt::print("  time to first token   {:.3f} ms (first DMA start to the last prompt position's logits), {:.2f} "
             "prompt tok/s  [{}]\n", s.ttft_ms, s.prefill_tok_s, tag);
  if (s.tpot_ms) fmt::print("  time per output token {:.3f} ms (median decode token)  [{}]\n", *s.tpot_ms, tag);
  else fmt::print("  time per output token none (no token was decoded)\n");
  fmt::print("  request               {:.3f} ms end to end  [{}]\n", s.request_ms, tag);
  fmt::print("  prefill               P = {} tokens per weight pass: {} on the Zynq-7020 ({} BRAM36, {} LUT, {} DSP "
             "with the board's; model)  [simulated]\n", s.tokens_per_pass, s.prefill_fit,
             r.prefill.total_bram36(), r.prefill.total_lut(), r.prefill.total_dsp());
  fmt::print("  energy per token      {:.2f} mJ (DRAM {:.2f}, PL {:.2f}, PS {:.2f}), {:.3f} W average, {:.2f} tok/J  "
             "[{}; docs/energy.md]\n",
             s.energy_mj_per_token, s.dram_mj_per_token, s.pl_mj_per_token, s.ps_mj_per_token, s.avg_power_w,
             s.tokens_per_j, s.energy_evidence);
  fmt::print("  request energy        the prompt {:.4f} J ({:.2f} mJ per prompt token), {:.2f} mJ per output token  "
             "[{}]\n", s.prompt_j, s.prompt_mj_per_token, s.decode_mj_per_token, tag);
  namespace B = study::board_figures;
  fmt::print("  the real board        {} ms at T=64, {} ms at T=512 ({} tok/s)  [board]\n", B::kEndToEndT64.total_ms,
             B::kEndToEndT512.total_ms, B::kEndToEndT512.tok_s);
  if (r.walker) print_walker(r);
  print_costs_and_check(r);
}

class Run final : public Command {
 public:
  explicit Run(CLI::App& app)
      : Command(app.add_subcommand("run", "Run a prompt token by token on the simulated board, checking every token's "
                                          "logits against the golden reference")) {
    add_prompt_options();
    add_board_options(sub_, board_, "Board config TOML (default: configs/pynq-z2.toml)",
                      "Override one config key: KEY=VALUE (repeatable; see `bitsim config --dump`)");
    sub_->add_option("--fidelity", fidelity_,
                     "fast (default): whole buffers, the clocked model's cycle counts; cycle: every module clocked, "
                     "beat by beat")
        ->check(CLI::IsMember({"cycle", "fast"}))
        ->capture_default_str();
    sub_->add_flag("--no-check", no_check_, "Do not compare the logits with the golden reference");
    sub_->add_flag("--timing-only", timing_only_,
                   "Fast fidelity, engines skip the arithmetic (same cycle counts; implies --no-check; the text is "
                   "meaningless)");
    add_sampler_options();
    add_output_options();
    add_cache_options(sub_, cache_);
  }

  int run() override {
    prepare();
    const sim::BoardRunResult r = sim::run_board(std::move(req_), callbacks());
    if (!quiet_ && tty_ && !json_) fmt::print(stderr, "\n");
    if (json_) {
      fmt::print("{}\n", run_json(r).dump(2, ' ', false, json::error_handler_t::replace));
    } else {
      if (started_text_) fmt::print("\n--- end of text ---\n");
      if (r.synthetic_tokenizer)
        fmt::print("note: {} has random synthetic weights, so its text is noise; ids outside the "
                   "byte range print as <id>\n", r.model);
      print_run(r);
    }
    if (!r.mismatch.empty()) {
      fmt::print(stderr, "bitsim: logits mismatch: {}\n", r.mismatch);
      return 3;
    }
    return 0;
  }

 private:
  void add_prompt_options() {
    auto& run = req_.run;
    sub_->add_option("--prompt", run.prompt, "The prompt text")->required();
    sub_->add_option("--model", run.model, "synthetic:SHAPE[:SEED] or a checkpoint folder")->capture_default_str();
    sub_->add_option("--tokens", run.tokens, "Tokens to generate (the KV capacity bounds the prompt and these)")
        ->transform(integer_in(0, model::kAttentionInt4MaxT - 1))
        ->capture_default_str();
    sub_->add_option("--tokenizer", tokenizer_, "A SentencePiece tokenizer.model or a Hugging Face tokenizer.json (byte-level BPE) overriding the model's");
  }

  void add_sampler_options() {
    auto& run = req_.run;
    sub_->add_option("--seed", run.sampler.seed, "Seed of the sampler (with --temperature)")
        ->transform(unsigned_in(0, std::numeric_limits<uint64_t>::max()))->capture_default_str();
    sub_->add_option("--temperature", run.sampler.temperature, "Sampling temperature; 0 is greedy")
        ->transform(real_in(0.0, 100.0))->capture_default_str();
    sub_->add_option("--top-k", run.sampler.top_k, "Sample among the k most likely tokens; 0 is all")
        ->transform(integer_in(0, std::numeric_limits<int>::max()))->capture_default_str();
    sub_->add_option("--threads", run.threads, "Host threads for loading and the golden check")
        ->transform(integer_in(1, 64))->capture_default_str();
    sub_->add_flag("--stop-at-capacity", run.stop_at_capacity,
                   "Stop at the KV capacity (512 positions; with kv.format = int4 up to 2048, what fits the CMA) "
                   "instead of refusing the run");
    sub_->add_flag("--legacy-attention", run.legacy_attention,
                   "The earlier unit's fixed >> 8 shift instead of the multiplier");
  }

  void add_output_options() {
    sub_->add_flag("--json", json_, "Write one bitsim.run/1 JSON document to stdout (docs/json-schemas.md)");
    sub_->add_flag("--quiet", quiet_, "No progress lines on stderr");
    sub_->add_option("--vcd", req_.vcd_file, "Cycle fidelity: write a VCD of the clocked signals (stream "
                                             "valid/ready/last, DMA and engine state) to FILE")->check(file_name());
    sub_->add_option("--dram-trace", req_.dram_trace_file,
                     "Cycle fidelity: write every request the memory accepts (cycle, port, R/W, address, bytes), one "
                     "line each, to FILE (docs/ddr3.md)")->check(file_name());
    sub_->add_option("--dram-commands", req_.dram_commands_file,
                     "Cycle fidelity, ddr.model = ddr3: write every DRAM command the controller issues, in "
                     "DRAMPower's command-trace form (cycle,command,bank), to FILE (docs/energy.md)")
        ->check(file_name());
    sub_->add_option("--vcd-window", vcd_window_, "START:END in PL cycles traced into the VCD (default 0:20000)");
    sub_->add_option("--layers-csv", req_.layers_csv_file,
                     "Write one CSV row per (token, layer, step) to FILE: simulated begin and time, the busy unit, "
                     "DMA calls, bytes read (docs/json-schemas.md)")->check(file_name());
    sub_->add_option("--trace", req_.trace_file,
                     "Write a Chrome trace (trace event JSON, opens in Perfetto) of the run to FILE: CPU steps, "
                     "driver calls, engine lanes and DMA channels")->check(file_name());
    sub_->add_option("--record-mmio", req_.record_mmio_file,
                     "Write the host program's register accesses and DDR loads and stores, with their simulated "
                     "times, to FILE (docs/mmio-record.md; `bitsim replay` runs it)")->check(file_name());
  }

  // The flags into the request: the config, the fidelity, the VCD window, the cache.
  void prepare() {
    if (!tokenizer_.empty()) req_.run.tokenizer = tokenizer_;
    req_.params = board_params(board_);
    req_.config_file = config_input(board_).path.string();
    req_.fidelity = parse_fidelity(fidelity_, timing_only_);
    req_.check = !no_check_ && !timing_only_;
    if (!req_.vcd_file.empty() && req_.fidelity != sim::Fidelity::kCycle)
      throw Error("--vcd: the clocked signals exist in --fidelity cycle only");
    if (!req_.dram_trace_file.empty() && req_.fidelity != sim::Fidelity::kCycle)
      throw Error("--dram-trace: the memory's requests are traced in --fidelity cycle only");
    if (!req_.dram_commands_file.empty() && req_.fidelity != sim::Fidelity::kCycle)
      throw Error("--dram-commands: the DRAM's commands are traced in --fidelity cycle only");
    if (!vcd_window_.empty()) parse_vcd_window();
    req_.run.cache = cache_settings(cache_);
  }

  void parse_vcd_window() {
    const auto colon = vcd_window_.find(':');
    if (colon == std::string::npos)
      throw Error(fmt::format("--vcd-window '{}': expected START:END in PL cycles with END > START", vcd_window_));
    const std::string what = fmt::format("--vcd-window '{}'", vcd_window_);
    const uint64_t b = parse_unsigned(vcd_window_.substr(0, colon), what + ": START");
    const uint64_t e = parse_unsigned(vcd_window_.substr(colon + 1), what + ": END");
    if (e <= b) throw Error(fmt::format("{}: END must be after START", what));
    req_.vcd_start = b;
    req_.vcd_end = e;
  }

  // Progress on stderr; the generated text on stdout as it comes.
  sim::BoardRunCallbacks callbacks() {
    sim::BoardRunCallbacks cb;
    cb.on_warning = print_warning;
    cb.on_status = status_printer(quiet_);
    tty_ = ::isatty(STDERR_FILENO);
    cb.on_token = [this](const sim::TokenRecord& t, const std::string& text) {
      if (!quiet_ && tty_ && !json_)
        fmt::print(stderr, "\r  token {:3}  T={:3}  {:7.2f} ms simulated  {:7.1f} ms wall  {}   ", t.index, t.context,
                   t.total_ms, t.wall_ms,
                   t.logits_equal ? (*t.logits_equal ? "logits equal" : "LOGITS DIFFER") : "unchecked");
      if (json_ || !t.generated) return;
      if (!started_text_) {
        fmt::print("--- generated text ---\n");
        started_text_ = true;
      }
      fmt::print("{}", text);
      std::fflush(stdout);
    };
    return cb;
  }

  sim::BoardRunRequest req_{sim::RunRequest{}, sim::board_params()};
  BoardArgs board_;
  std::string fidelity_ = "fast";
  bool timing_only_ = false;
  std::string vcd_window_;
  std::string tokenizer_;
  bool no_check_ = false, json_ = false, quiet_ = false;
  CacheArgs cache_;
  bool tty_ = false, started_text_ = false;
};

}  // namespace

std::unique_ptr<Command> add_run_command(CLI::App& app) { return std::make_unique<Run>(app); }

}  // namespace bitsim::cli
