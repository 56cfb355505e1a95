#include "cli/bench_command.h"

#include <chrono>
#include <algorithm>
#include <filesystem>
#include <optional>
#include <functional>

#include <fmt/format.h>

#include "base/error.h"
#include "base/file_io.h"

namespace bitsim::cli {

std::vector<std::string> bench_run_command(const std::string& exe, const BoardArgs& board,
                                           const study::BenchRunProcess& p) {
  std::vector<std::string> argv{exe,         "run",    "--model",   p.model,
                                "--prompt",  p.prompt, "--tokens",  std::to_string(p.tokens),
                                "--json",    "--quiet", "--threads", std::to_string(p.threads),
                                "--cache-dir", p.cache_dir};
  if (!p.check) argv.push_back("--no-check");
  if (!board.config.empty()) argv.insert(argv.end(), {"--config", std::filesystem::absolute(board.config).string()});
  for (const auto& kv : board.sets) argv.insert(argv.end(), {"--set", kv});
  for (const auto& kv : p.sets) argv.insert(argv.end(), {"--set", kv});
  return argv;
}

std::string bench_run_text(const study::BenchRunProcess& p) {
  std::string s = "bitsim run";
  if (!p.model.empty()) s += " --model " + p.model;
  if (!p.prompt.empty()) s += " --prompt " + p.prompt;
  if (p.tokens != 0) s += " --tokens " + std::to_string(p.tokens);
  for (const auto& kv : p.sets) s += " --set " + kv;
  if (!p.check) s += " --no-check";
  return s;
}

namespace {

class Bench final : public Command {
 public:
  explicit Bench(CLI::App& app)
      : Command(app.add_subcommand(
            "bench",
            "Measure the simulator on this host, each figure the median of --repeat runs with its min and max: time "
            "to the first token cold and warm, a 1-token and a whole run as processes, peak memory, simulated tok/s "
            "per wall second at small and large T with and without the golden check, cycle fidelity's PL cycles per "
            "second, fast/cycle speed-up, sweep points per second")) {
    add_token_options();
    sub_->add_option("--threads", opt_.threads, "Host threads")->transform(integer_in(1, 64))->capture_default_str();
    sub_->add_option("--sweep-points", opt_.sweep_points,
                     "Timing-only sweep points run in one process for the points/s figure")
        ->transform(integer_in(1, 10000))->capture_default_str();
    sub_->add_option("--prefill-prompt-tokens", opt_.prefill_prompt_tokens,
                     "Prompt tokens (BOS included) of the prefill figure")
        ->transform(integer_in(2, 511))->capture_default_str();
    sub_->add_option("--prefill-p", opt_.prefill_tokens_per_pass,
                     "prefill.tokens_per_pass of the prefill figure, against P = 1")
        ->transform(integer_in(2, 64))->capture_default_str();
    sub_->add_option("--ddr3-tokens", opt_.ddr3_tokens,
                     "Generated tokens of the approximate DDR3 reuse figures (exact and approximate runs under "
                     "ddr.model = ddr3)")
        ->transform(integer_in(1, 64))->capture_default_str();
    add_board_options(sub_, board_, "Board config TOML (default: configs/pynq-z2.toml)",
                      "Override one config key: KEY=VALUE (repeatable)");
    sub_->add_option("--only", opt_.only,
                     "Measure one figure alone: energy (the energy accounting's share of a run's host time)")
        ->check(CLI::IsMember({"energy"}));
    sub_->add_flag("--quick", opt_.quick, "synthetic:tiny and few tokens (a smoke test, not the figures)");
    sub_->add_option("--json", json_file_, "Also write a bitsim.bench/2 JSON document to FILE")->check(file_name());
    sub_->add_option("--compare", compare_file_,
                     "A stored bitsim.bench/2 JSON (bench --json): print each figure against it and mark any "
                     "figure more than 25% worse (exit 3 if one is)");
    sub_->add_flag("--quiet", quiet_, "No progress lines on stderr");
  }

  int run() override {
    if (!json_file_.empty()) {
      std::vector<io::NamedPath> inputs{config_input(board_)};
      if (opt_.model.rfind("synthetic:", 0) != 0) inputs.push_back({"--model", opt_.model});
      if (!compare_file_.empty()) inputs.push_back({"--compare", compare_file_});
      io::check_outputs({{"--json", json_file_}}, inputs);
    }
    std::optional<study::BenchStored> stored;  // read before the work: a bad file fails at once
    if (!compare_file_.empty()) stored = study::read_bench_json(compare_file_);
    opt_.params = board_params(board_);
    // The process figures run this same executable with the same board config.
    std::error_code ec;
    const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec) throw Error("bench: cannot find this bitsim executable (/proc/self/exe): " + ec.message());
    opt_.run_command = [exe, board = board_](const study::BenchRunProcess& p) { return bench_run_command(exe, board, p); };
    opt_.run_text = bench_run_text;
    const study::BenchOptions eff = study::effective_bench_options(opt_);
    study::BenchLoad load;
    load.start = study::host_load_average();
    const auto t0 = std::chrono::steady_clock::now();
    std::function<void(const std::string&)> status;
    if (!quiet_)
      status = [t0](const std::string& s) {
        fmt::print(stderr, "[{:7.1f} s] {}\n",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), s);
      };
    const auto figs = study::run_bench(eff, status);
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    load.end = study::host_load_average();
    if (!json_file_.empty()) io::write_file(json_file_, study::bench_json(figs, eff, wall_s, load) + "\n", "--json");
    fmt::print("{}", study::bench_table(figs, eff, wall_s, load));
    if (!stored) return 0;
    const auto rows = study::compare_bench(figs, *stored);
    fmt::print("{}", study::bench_comparison_table(rows, *stored));
    return std::any_of(rows.begin(), rows.end(), [](const auto& r) { return r.worse; }) ? 3 : 0;
  }

 private:
  void add_token_options() {
    sub_->add_option("--model", opt_.model, "synthetic:SHAPE[:SEED] or a checkpoint folder")->capture_default_str();
    sub_->add_option("--tokens", opt_.tokens, "Tokens per timed window (fast: T from 1 and up to 512; checked run)")
        ->transform(integer_in(2, 256))->capture_default_str();
    sub_->add_option("--cycle-tokens", opt_.cycle_tokens, "Tokens in cycle fidelity")
        ->transform(integer_in(1, 256))->capture_default_str();
    sub_->add_option("--memory-tokens", opt_.memory_tokens,
                     "Steps of the `bitsim run --no-check` process that the peak memory follows")
        ->transform(integer_in(3, 512))->capture_default_str();
    sub_->add_option("--run-tokens", opt_.run_tokens, "Generated tokens of the whole warm `bitsim run --no-check` process")
        ->transform(integer_in(1, 510))->capture_default_str();
    sub_->add_option("--repeat", opt_.repeat, "Repetitions of every figure (median, min, max)")
        ->transform(integer_in(1, 20))->capture_default_str();
  }

  study::BenchOptions opt_;
  BoardArgs board_;
  std::string json_file_;
  std::string compare_file_;
  bool quiet_ = false;
};

}  // namespace

std::unique_ptr<Command> add_bench_command(CLI::App& app) { return std::make_unique<Bench>(app); }

}  // namespace bitsim::cli
