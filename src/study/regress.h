#pragma once
// `bitsim regress`: a suite of scenarios (configs/regress.toml), each run on the simulated
// board and reduced to an ordered list of exact figures (per-token cycle counts in
// picoseconds, DMA calls, DDR bytes, a digest of every transfer's start and completion, a
// digest of every token's logits, the generated ids, sweep rows, validate's simulated
// figures), compared figure by figure with a baseline checked into the repository. The
// first figure that moved is reported with its old and new value; docs/regress.md.
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/params.h"

namespace bitsim::study {

// One exact figure: an integer or a text (reals are written as text with 17 digits so
// that the comparison is exact and the baseline reads back bit for bit).
struct RegressFigure {
  std::string name;
  nlohmann::json value;
  bool operator==(const RegressFigure&) const = default;
};

struct RegressScenario {
  std::string name;                 // also the baseline's file name (NAME.json)
  std::string kind;                 // run | timing | sweep | validate
  std::string model = "synthetic:tiny";  // run; timing: its shape when given (else bitnet-large)
  std::string fidelity = "fast";    // run: fast | cycle
  std::string prompt = "The capital of France is";  // run
  int tokens = 4;                   // run: generated tokens; timing, sweep: tokens per point
  int context = 1;                  // timing, sweep: context T of the first token
  std::vector<std::string> grid;    // sweep: KEY=V1,V2,... axes
  std::vector<std::string> sets;    // KEY=VALUE applied to this scenario's config
  std::string origin;               // "FILE:LINE" of the scenario's table (empty: not from a file)
  std::map<std::string, std::string> field_origin;  // field -> "FILE:LINE" of its value
};

struct RegressSuite {
  std::filesystem::path file;           // the suite file
  std::filesystem::path baseline_dir;   // its `baselines` folder, relative to the file
  std::vector<RegressScenario> scenarios;
};

// configs/regress.toml beside the source tree; empty when not found.
std::string default_regress_suite_path();

// Reads a suite file and checks every scenario, run or not, as it would run on `base` (its
// `set` keys and values, its `grid` axes, its model, tokenizer and prompt against the KV
// capacity, the board config): a bitsim::Error names FILE:LINE, the scenario and the field.
RegressSuite load_regress_suite(const std::filesystem::path& file);
RegressSuite load_regress_suite(const std::filesystem::path& file, const sim::ParamSet& base);
// One scenario's check (as load_regress_suite does for each); the error begins with the
// field's FILE:LINE when the scenario came from a file.
void check_regress_scenario(const RegressScenario& s, const sim::ParamSet& base);

// Runs one scenario on `base` (the board config after --config / --set) and returns its
// figures in a fixed order.
std::vector<RegressFigure> run_regress_scenario(const RegressScenario& s, const sim::ParamSet& base);

// A figure whose value differs, or that exists on one side only (then `before` or `after`
// is "(none)").
struct RegressMove {
  std::string figure, before, after;
  std::string delta;                // "+432 (+0.035%)" for integers and reals, else empty
};
// Every difference between a baseline and a run, in the baseline's order (figures only in
// the run follow).
std::vector<RegressMove> compare_regress_figures(const std::vector<RegressFigure>& baseline,
                                                 const std::vector<RegressFigure>& now);

// The baseline file (schema bitsim.regress-baseline/1): {"schema", "scenario", "figures":
// [[name, value], ...]}, one figure per line.
std::string regress_baseline_text(const std::string& scenario, const std::vector<RegressFigure>& figures);
std::vector<RegressFigure> read_regress_baseline(const std::filesystem::path& file);
// Written to a temporary file beside it, then renamed; a failed write is a bitsim::Error.
void write_regress_baseline(const std::filesystem::path& file, const std::string& scenario,
                            const std::vector<RegressFigure>& figures);

struct RegressOutcome {
  std::string scenario, kind;
  enum class Status { kPassed, kMoved, kNoBaseline, kError, kUpdated } status = Status::kPassed;
  size_t figures = 0;
  std::vector<RegressMove> moved;
  std::string error;                // kError: what went wrong; kNoBaseline: the missing file
  double wall_s = 0;
};
const char* regress_status_name(RegressOutcome::Status s);

// JUnit XML (one testsuite "bitsim regress", a testcase per scenario, a <failure> for each
// moved, missing-baseline or failed scenario).
std::string regress_junit_xml(const std::vector<RegressOutcome>& outcomes, double wall_s);

}  // namespace bitsim::study
