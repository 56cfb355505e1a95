// The bitsim command: subcommands make-model, inspect, run. Bad arguments and bad input
// exit with code 2 and a message that names the thing at fault.
#include "cli/commands.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bitsim/version.h"
#include "model/error.h"
#include "model/model_loader.h"
#include "model/packed_image.h"
#include "model/synthetic.h"
#include "sim/golden_run.h"

namespace bitsim::cli {

namespace {

constexpr double kBoardImageMiB = 141.3;  // BOARD.md: packed ternary weights on the board

struct MakeModelArgs {
  std::string shape = "tiny";
  uint64_t seed = 1;
  std::string out;
};

struct InspectArgs {
  std::string model = "synthetic:bitnet-large";
  bool json = false;
};

struct RunArgs {
  sim::RunRequest req;
  std::string tokenizer;
  bool json = false;
  bool quiet = false;
};

int cmd_make_model(const MakeModelArgs& a) {
  const auto shape = model::parse_shape(a.shape);
  model::write_synthetic_checkpoint(shape, a.seed, a.out);
  fmt::print("wrote synthetic {} checkpoint (seed {}) to {}\n", a.shape, a.seed, a.out);
  fmt::print("  config.json, model.safetensors (F32 latent weights, MODEL.md tensor names), TOKENIZER.md\n");
  fmt::print("  the weights are random: text generated with them is noise\n");
  return 0;
}

int cmd_inspect(const InspectArgs& a) {
  auto src = model::open_model_source(a.model);
  const auto& c = src->config();
  const auto t0 = std::chrono::steady_clock::now();
  const model::TernaryModel m = model::load_ternary_model(*src, 2);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto img = model::packed_image_size(c.hidden_size, c.intermediate_size, c.num_layers, c.vocab_size);
  const double mib = double(img.total_bytes) / (1024.0 * 1024.0);
  const double zf = m.zero_fraction();
  if (a.json) {
    nlohmann::json j{{"schema", "bitsim.inspect/1"},
                     {"model", m.source},
                     {"config", c.to_json()},
                     {"parameters", m.parameter_count()},
                     {"zero_fraction", zf},
                     {"lm_head_zero_fraction", model::zero_fraction(m.lm_head)},
                     {"packed_image_bytes", img.total_bytes},
                     {"packed_image_layer_bytes", img.layer_bytes},
                     {"packed_image_lm_head_bytes", img.lm_head_bytes},
                     {"board_packed_image_mib", kBoardImageMiB},
                     {"load_s", load_s}};
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return 0;
  }
  fmt::print("model       {}\n", m.source);
  fmt::print("shape       {}\n", c.shape_string());
  fmt::print("parameters  {} (latent, embedding tied to lm_head)\n", m.parameter_count());
  fmt::print("zero trits  {:.2f}% of the ternary layers, {:.2f}% of the ternarized lm_head\n",
             100.0 * zf, 100.0 * model::zero_fraction(m.lm_head));
  fmt::print("packed image (CIRCUITS.md 2: 5 trits per byte, rows padded to 8-byte beats)\n");
  const uint64_t all_layers = img.layer_bytes * uint64_t(c.num_layers);
  fmt::print("  per layer {:>12} bytes  {:8.2f} MiB\n", img.layer_bytes, img.layer_bytes / 1048576.0);
  fmt::print("  {:2} layers {:>11} bytes  {:8.2f} MiB\n", c.num_layers, all_layers, all_layers / 1048576.0);
  fmt::print("  lm_head   {:>12} bytes  {:8.2f} MiB\n", img.lm_head_bytes, img.lm_head_bytes / 1048576.0);
  fmt::print("  total     {:>12} bytes  {:8.2f} MiB  [simulated]\n", img.total_bytes, mib);
  fmt::print("  board     {:>12}        {:8.2f} MiB  [board]  (bitnet-large; docs/packed-image.md explains the difference)\n",
             "", kBoardImageMiB);
  fmt::print("loaded and ternarized in {:.2f} s (this host)\n", load_s);
  return 0;
}

int cmd_run(RunArgs& a) {
  if (!a.tokenizer.empty()) a.req.tokenizer = a.tokenizer;
  const bool tty = !a.json && ::isatty(STDOUT_FILENO);
  sim::RunCallbacks cb;
  if (!a.quiet)
    cb.on_status = [](const std::string& s) { fmt::print(stderr, "{}\n", s); };
  bool started_text = false;
  if (!a.json) {
    cb.on_step = [&](const sim::StepRecord& r, const std::string& text) {
      if (!r.generated) return;
      if (!started_text) {
        fmt::print("\n--- generated text ---\n");
        started_text = true;
      }
      fmt::print("{}", text);
      std::fflush(stdout);
    };
  }
  if (!a.json && !a.quiet)
    fmt::print(stderr, "bitsim run: GOLDEN REFERENCE ONLY: this version runs the prompt through "
                       "the board's arithmetic (BoardReference); the simulated board does not "
                       "exist yet, so no board timing is reported\n");
  const sim::RunResult r = sim::run_golden(a.req, cb);
  (void)tty;

  if (a.json) {
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& s : r.steps)
      steps.push_back({{"index", s.index}, {"context", s.context}, {"token_id", s.token_id},
                       {"text", s.text}, {"generated", s.generated}, {"wall_ms", s.wall_ms}});
    nlohmann::json j{{"schema", "bitsim.run/0"},
                     {"fidelity", "golden"},
                     {"note", "golden reference only; the simulated board is not built yet"},
                     {"model", r.model},
                     {"tokenizer", r.tokenizer},
                     {"prompt_tokens", r.prompt_tokens},
                     {"text", r.generated_text},
                     {"tokens", steps},
                     {"summary", {{"steps", r.steps.size()}, {"load_s", r.load_s},
                                  {"calibration_s", r.calibration_s}, {"wall_s", r.wall_s},
                                  {"stopped_at_capacity", r.stopped_at_capacity}}}};
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return 0;
  }
  fmt::print("\n--- end of text ---\n\n");
  if (r.synthetic_tokenizer)
    fmt::print("note: {} has random synthetic weights, so its text is noise; ids outside the "
               "byte range print as <id>\n", r.model);
  fmt::print("model {} ({}), tokenizer {}\n", r.model, r.shape, r.tokenizer);
  fmt::print("{:>5} {:>4} {:>7} {:>4} {:>12}  {}\n", "step", "T", "token", "gen", "host ms", "text");
  for (const auto& s : r.steps) {
    std::string shown = s.text;
    for (char& ch : shown) if (ch == '\n') ch = ' ';
    fmt::print("{:>5} {:>4} {:>7} {:>4} {:>12.1f}  {}\n", s.index, s.context, s.token_id,
               s.generated ? "yes" : "", s.wall_ms, shown);
  }
  double sum_ms = 0;
  for (const auto& s : r.steps) sum_ms += s.wall_ms;
  fmt::print("\nsummary: {} steps ({} prompt incl. BOS) through the golden reference\n",
             r.steps.size(), r.prompt_tokens);
  fmt::print("  host wall time: load {:.2f} s, K/V calibration {:.2f} s, {:.1f} ms per step, "
             "{:.2f} s in all [measured on this host, not a board figure]\n",
             r.load_s, r.calibration_s, r.steps.empty() ? 0.0 : sum_ms / r.steps.size(), r.wall_s);
  if (r.stopped_at_capacity)
    fmt::print("  stopped at the board's KV capacity of {} positions\n", golden::kMaxContext);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bitsim: a cycle-accurate simulator of a ternary/INT8 FPGA LLM accelerator "
               "(PYNQ-Z2) running bitnet_b1_58-large"};
  app.set_version_flag("--version", std::string("bitsim ") + kVersion);
  app.require_subcommand(1);

  MakeModelArgs mk;
  auto* make = app.add_subcommand("make-model", "Write a synthetic checkpoint in the real file layout");
  make->add_option("--shape", mk.shape, "Model shape: bitnet-large or tiny")
      ->check(CLI::IsMember({"bitnet-large", "tiny"}))->capture_default_str();
  make->add_option("--seed", mk.seed, "Seed of the weight generator")->capture_default_str();
  make->add_option("--out", mk.out, "Output folder (created if missing)")->required();

  InspectArgs ins;
  auto* inspect = app.add_subcommand("inspect", "Print a model's shape, parameters, zero fraction and packed image size");
  inspect->add_option("--model", ins.model, "synthetic:SHAPE[:SEED] or a checkpoint folder")->capture_default_str();
  inspect->add_flag("--json", ins.json, "Write one JSON document to stdout");

  RunArgs run;
  auto* runc = app.add_subcommand("run", "Run a prompt token by token (this version: through the golden reference)");
  runc->add_option("--prompt", run.req.prompt, "The prompt text")->required();
  runc->add_option("--model", run.req.model, "synthetic:SHAPE[:SEED] or a checkpoint folder")->capture_default_str();
  runc->add_option("--tokens", run.req.tokens, "Tokens to generate")->check(CLI::Range(0, 511))->capture_default_str();
  runc->add_option("--tokenizer", run.tokenizer, "A SentencePiece tokenizer.model overriding the model's");
  runc->add_option("--seed", run.req.sampler.seed, "Seed of the sampler (with --temperature)")->capture_default_str();
  runc->add_option("--temperature", run.req.sampler.temperature, "Sampling temperature; 0 is greedy")
      ->check(CLI::Range(0.0, 100.0))->capture_default_str();
  runc->add_option("--top-k", run.req.sampler.top_k, "Sample among the k most likely tokens; 0 is all")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  runc->add_option("--threads", run.req.threads, "Host threads for the reference's matmuls")
      ->check(CLI::Range(1, 64))->capture_default_str();
  runc->add_flag("--stop-at-capacity", run.req.stop_at_capacity, "Stop at 512 positions instead of refusing the run");
  runc->add_flag("--legacy-attention", run.req.legacy_attention, "The earlier unit's fixed >> 8 shift instead of the multiplier");
  runc->add_flag("--json", run.json, "Write one JSON document to stdout");
  runc->add_flag("--quiet", run.quiet, "No progress lines on stderr");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    if (*make) return cmd_make_model(mk);
    if (*inspect) return cmd_inspect(ins);
    if (*runc) return cmd_run(run);
  } catch (const bitsim::Error& e) {
    fmt::print(stderr, "bitsim: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "bitsim: internal error: {}\n", e.what());
    return 1;
  }
  return 2;
}

}  // namespace bitsim::cli
