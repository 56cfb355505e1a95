#pragma once
// bitsim bench: how fast the simulator itself is on this host. Every figure is measured
// `repeat` times (3 by default) and reported as the median with its minimum and maximum:
//   as `bitsim run` processes (fork + exec of the bitsim executable, its own start-up cache
//   folder in a temporary directory, removed at the end):
//   - the time to the first token, cold (an empty start-up cache) and warm (the same model
//     and config seen before)
//   - a 1-token `bitsim run` as a process, second time (the whole process's wall)
//   - a whole warm `bitsim run --no-check` of run_tokens tokens, start-up included
//   - the peak resident memory of a memory_tokens-token `bitsim run --no-check`
//   in this process:
//   - simulated tokens per wall second, fast fidelity, --no-check, T = 1..N and 513-N..512
//   - the same with the golden check on every token (run_board, as `bitsim run` does it)
//   - cycle fidelity: simulated PL cycles per wall second; fast over cycle
//   - timing-only sweep points per wall second
//   - prefill: a prompt of prefill_prompt_tokens through the fast fidelity with the golden
//     check at P = prefill_tokens_per_pass against P = 1, wall time speed-up (and without
//     the check, in its text)
//   - approximate DDR3 reuse (ddr3.fast_reuse, docs/ddr3.md): a run under ddr.model = ddr3,
//     exact and approximate, its wall speed-up after the first token step and its worst
//     token time error against exact
//   - the energy accounting's share of a run's host time: each pass of the fast windows'
//     tokens priced as a run prices them (sim::token_energy, one call a token), its wall
//     over the pass's token-step wall (only = "energy": this figure alone)
// The values are measurements of the simulator on this host ("measured (this host)"); the
// tokens and PL cycles they count are simulated.
#include <filesystem>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "golden/board_reference.h"
#include "host/token_loop.h"
#include "hw/fast/fast_board.h"
#include "model/model_loader.h"
#include "sim/board_config.h"
#include "sim/params.h"
#include "study/record.h"

namespace bitsim::study {

// One `bitsim run` process of the process figures: the prompt "A", JSON out, no progress
// lines, the bench's board config, its own start-up cache folder.
struct BenchRunProcess {
  std::string model;
  int tokens = 1;
  int threads = 2;
  std::string cache_dir;
  bool check = true;  // the golden check on every token
  std::string prompt = "A";
  std::vector<std::string> sets;  // KEY=VALUE settings beyond the bench's board config
};

struct BenchOptions {
  std::string model = "synthetic:bitnet-large";
  int tokens = 32;           // tokens per timed window (fast: two windows, T from 1 and up to 512; checked run)
  int cycle_tokens = 1;      // tokens in cycle fidelity (at positions 0 ..)
  int memory_tokens = 512;   // steps of the `bitsim run --no-check` process that the peak memory follows
  int run_tokens = 64;       // generated tokens of the whole warm `bitsim run --no-check` process
  int repeat = 3;            // repetitions of every figure (median, min, max)
  bool quick = false;        // synthetic:tiny and few tokens (for the tests)
  int sweep_points = 8;      // timing-only sweep points run in this process for the points/s figure
  int prefill_prompt_tokens = 511;  // the prefill figure's prompt, BOS included (with the byte tokenizer)
  int prefill_tokens_per_pass = 8;  // its P, against P = 1
  int ddr3_tokens = 3;       // generated tokens of the approximate-DDR3-reuse runs (prompt "A")
  int threads = 2;           // host threads (loading, calibration, fast kernels, golden check)
  std::string only;          // "": every figure; "energy": the energy accounting's share alone
  sim::ParamSet params = sim::board_params();  // the board config
  // The command line of a `bitsim run` process (the executable and its arguments, with the
  // same board config); required. The CLI knows the flags.
  std::function<std::vector<std::string>(const BenchRunProcess&)> run_command;
  // The same run as a user types it, for the figures' texts: the command, the model if not
  // empty, the prompt, the tokens if not 0, the settings, no check if not checked; required.
  std::function<std::string(const BenchRunProcess&)> run_text;
};

struct BenchFigure {
  std::string name, unit, goal_text;
  double value = 0, goal = 0;  // value: the median of the samples
  double min = 0, max = 0;     // of the samples
  std::vector<double> samples; // one per repetition, in the order measured
  bool higher_is_better = true;
  bool met = false;          // value >= goal (higher is better) or value <= goal
  std::string how;           // how it was measured, with the raw numbers
  std::string evidence = "measured (this host)";
};

// Runs the measurements in order (the memory figure last: ru_maxrss is the process's peak).
// `status` receives progress lines (may be empty).
std::vector<BenchFigure> run_bench(const BenchOptions& options,
                                   std::function<void(const std::string&)> status = {});

// The effective options run_bench uses (quick mode applied, tokens clamped to the KV cache).
BenchOptions effective_bench_options(const BenchOptions& options);

// The table `bitsim bench` prints (Markdown: figure, median, min..max, evidence, goal,
// met/missed, how measured) and its JSON document {"schema": "bitsim.bench/2", ...}.
// `options` are the effective ones; `wall_s` is the whole bench's wall time.
std::string format_bench_value(const BenchFigure& figure);
// `load` is the host's load averages at the bench's start and end (beside every figure).
struct BenchLoad {
  std::vector<double> start, end;  // 1, 5 and 15 minutes (getloadavg); empty: unknown
};
std::vector<double> host_load_average();  // getloadavg's three, or empty where it fails
std::string bench_table(const std::vector<BenchFigure>& figures, const BenchOptions& options, double wall_s,
                        const BenchLoad& load = {});
std::string bench_json(const std::vector<BenchFigure>& figures, const BenchOptions& options, double wall_s,
                       const BenchLoad& load = {});
// bench --compare: each figure of this run against the same-named figure of a stored run
// (a bitsim.bench/2 document), and the stored figures this run does not have.
inline constexpr double kBenchWorseLimit = 0.25;  // a figure more than 25% worse is marked
struct BenchStoredFigure {
  std::string name, unit;
  double value = 0;
  bool higher_is_better = true;
};
struct BenchStored {
  std::string source;  // the file
  std::vector<BenchStoredFigure> figures;
  std::vector<double> load_start;  // its load average at the start, if recorded
};
// Reads a stored bench document; bitsim::Error naming the file and the field at fault.
BenchStored parse_bench_json(const std::string& text, const std::string& source);
BenchStored read_bench_json(const std::filesystem::path& file);
struct BenchComparison {
  std::string name, unit, stored_unit;
  std::optional<double> now, stored;  // absent: the figure is not in that run
  bool comparable = false;  // in both runs, in the same unit
  // How much worse this run is in the figure's own direction (0.30: 30% worse; negative:
  // better): stored/now - 1 for a figure where higher is better, now/stored - 1 otherwise.
  double worse_by = 0;
  bool worse = false;  // worse_by > kBenchWorseLimit
};
std::vector<BenchComparison> compare_bench(const std::vector<BenchFigure>& now, const BenchStored& stored);
std::string bench_comparison_table(const std::vector<BenchComparison>& rows, const BenchStored& stored);

// The fields of a figure and of the options in that document (docs/json-schemas.md).
const Fields<BenchFigure>& bench_figure_fields();
const Fields<BenchOptions>& bench_option_fields();

// ---- Building blocks (also used by bench/run_bench.cpp) ------------------------------

// One token step and its host wall time.
struct TimedToken {
  int position = 0;
  host::TokenTiming timing;
  double wall_s = 0;
};

// A fast-fidelity board kept between steps (the decoded-weights cache and the timing cache
// stay warm), functional (the engines compute), no golden check. Mirrors simulate_tokens.
class FastTokenRunner {
 public:
  FastTokenRunner(const sim::SimConfig& config, const model::TernaryModel& model, const model::KvScales& scales,
                  int threads);
  ~FastTokenRunner();
  // One token at `position` (0..511): the KV cache is taken as holding `position` rows.
  TimedToken step(int token, int position);
  double setup_s() const;    // board, weights image into the simulated DDR, DMA init
  hw::FastBoardStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Cycle fidelity (the clocked SystemC board): `tokens` from position 0, each token's wall
// time measured inside the PS thread (SystemC elaboration and the weights image excluded).
std::vector<TimedToken> cycle_tokens_timed(const sim::SimConfig& config, const model::TernaryModel& model,
                                           const model::KvScales& scales, const std::vector<int>& tokens);

// n token ids: the calibration sequence (BOS and the calibration text), repeated.
std::vector<int> bench_token_ids(const std::vector<int>& calibration, int n);

// A child process run to its end: its exit code (128 + N if killed by signal N), wall time
// from spawn to exit, peak resident memory (wait4's ru_maxrss) and what it wrote. A SIGINT
// or SIGTERM to bitsim while it runs stops the child and reaps it, then throws Stopped.
struct ProcessRun {
  int exit_code = -1;
  double wall_s = 0, maxrss_bytes = 0;
  std::string out, err;
};
ProcessRun run_process(const std::vector<std::string>& argv, const std::filesystem::path& scratch_dir);

}  // namespace bitsim::study
