#include "cli/regress_command.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "base/error.h"
#include "base/file_io.h"
#include "cli/options.h"
#include "sim/board_config.h"
#include "study/regress.h"

namespace bitsim::cli {

namespace {

using Clock = std::chrono::steady_clock;
using Status = study::RegressOutcome::Status;

constexpr const char* kRegressHelp =
    "Runs every scenario of the suite (default configs/regress.toml) on the simulated board and compares its exact "
    "figures (per-token picoseconds, DMA calls, DDR bytes, a digest of every transfer's start and completion, a "
    "digest of every token's logits, the generated ids, sweep rows, validate's figures) with the baselines checked "
    "in beside the suite. Exit 0: nothing moved; 1: a figure moved, a baseline is missing or a scenario failed "
    "(the first figure that moved is printed with its old and new value); 2: bad input (any scenario of the suite, a damaged baseline: --update replaces it), checked before anything runs. --set / --config show what "
    "a change to the board would move; --update rewrites the baselines (shipped board only) and prints what moved.";

class Regress final : public Command {
 public:
  explicit Regress(CLI::App& app)
      : Command(app.add_subcommand("regress", "Run the regression suite and compare every figure with its baseline")) {
    sub_->footer(kRegressHelp);
    sub_->add_option("--suite", suite_, "Suite file (default: configs/regress.toml)");
    sub_->add_option("--only", only_, "Run only this scenario (repeatable)");
    sub_->add_option("--baselines", baselines_, "Baseline folder (default: the suite's `baselines`)");
    sub_->add_flag("--update", update_, "Rewrite the baselines with this run's figures and print what moved");
    sub_->add_option("--junit", junit_, "Write a JUnit XML report to FILE")->check(file_name());
    add_board_options(sub_, board_, "Board config TOML for every scenario (default: configs/pynq-z2.toml)",
                      "Override one config key in every scenario: KEY=VALUE (repeatable)");
    sub_->add_option("--show", show_, "Moved figures printed per scenario (default 3)")
        ->transform(integer_in(1, 1000000));
    sub_->add_flag("--quiet", quiet_, "No progress lines on stderr");
  }
  int run() override {
    const std::string file = suite_.empty() ? study::default_regress_suite_path() : suite_;
    if (file.empty()) throw Error("--suite: configs/regress.toml was not found beside the source tree; give --suite FILE");
    const bool board_changed = !board_.sets.empty() || !board_.config.empty();
    if (update_ && board_changed)
      throw Error("--update: the baselines are of the shipped board; drop --set / --config to update them");
    const sim::ParamSet base = board_params(board_);
    // Every scenario checked on this board, run or not (exit 2, FILE:LINE).
    study::RegressSuite suite = study::load_regress_suite(file, base);
    if (!baselines_.empty()) suite.baseline_dir = baselines_;
    const auto selected = select(suite);
    if (!junit_.empty())
      io::check_outputs({{"--junit", junit_}},
                        {{"--suite", file}, config_input(board_), {"baseline folder", suite.baseline_dir}});
    check_baselines(suite, selected);

    fmt::print("regress: {} scenario(s) of {}, baselines in {}{}\n", selected.size(), file,
               suite.baseline_dir.string(), board_changed ? " (board changed by --config/--set)" : "");
    const auto t0 = Clock::now();
    std::vector<study::RegressOutcome> outcomes;
    for (const study::RegressScenario* s : selected) outcomes.push_back(run_one(*s, suite, base));
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!junit_.empty()) io::write_file(junit_, study::regress_junit_xml(outcomes, wall), "--junit");

    int failed = 0;
    for (const auto& o : outcomes)
      if (o.status != Status::kPassed && o.status != Status::kUpdated) ++failed;
    fmt::print("{}: {} of {} scenario(s) as in their baselines{} ({:.1f} s); every figure is simulated\n",
               failed ? "FAILED" : update_ ? "updated" : "passed", outcomes.size() - size_t(failed), outcomes.size(),
               update_ ? " after the update" : "", wall);
    return failed ? 1 : 0;
  }

 private:
  std::vector<const study::RegressScenario*> select(const study::RegressSuite& suite) const {
    std::vector<const study::RegressScenario*> out;
    const std::set<std::string> only(only_.begin(), only_.end());
    std::set<std::string> wanted = only;
    for (const auto& s : suite.scenarios)
      if (only.empty() || wanted.erase(s.name)) out.push_back(&s);
    if (!wanted.empty()) {
      std::string names;
      for (const auto& s : suite.scenarios) names += (names.empty() ? "" : ", ") + s.name;
      throw Error(fmt::format("--only {}: no such scenario in {} (scenarios: {})", *wanted.begin(),
                              suite.file.string(), names));
    }
    return out;
  }

  // The baselines of the selected scenarios, before anything runs. Without --update each is
  // read now: a damaged one is bad input (exit 2, naming it), a missing one a failure of its
  // scenario (exit 1). With --update the folder must take every file (created if absent) and
  // a damaged baseline is replaced, said so.
  void check_baselines(const study::RegressSuite& suite, const std::vector<const study::RegressScenario*>& selected) {
    const auto& dir = suite.baseline_dir;
    std::error_code ec;
    const auto st = std::filesystem::status(dir, ec);
    if (std::filesystem::exists(st) && !std::filesystem::is_directory(st))
      throw Error(fmt::format("baseline folder {}: not a folder", dir.string()));
    if (update_) {
      std::filesystem::create_directories(dir, ec);
      if (ec) throw Error(fmt::format("--update: cannot create the baseline folder {} ({})", dir.string(), ec.message()));
    }
    for (const study::RegressScenario* s : selected) {
      const std::filesystem::path file = dir / (s->name + ".json");
      if (update_) io::check_output_file(file, "--update baseline");
      const auto fst = std::filesystem::symlink_status(file, ec);
      if (fst.type() == std::filesystem::file_type::not_found) continue;
      if (!std::filesystem::is_regular_file(file, ec))  // a FIFO, a folder, a device: never read nor written into
        throw Error(fmt::format("baseline {}: not a regular file; remove it", file.string()));
      try {
        baselines_read_[s->name] = study::read_regress_baseline(file);
      } catch (const Error& e) {
        if (!update_)
          throw Error(fmt::format("{} (`bitsim regress --update` replaces it with this build's figures)", e.what()));
        damaged_[s->name] = e.what();
      }
    }
  }

  study::RegressOutcome run_one(const study::RegressScenario& s, const study::RegressSuite& suite,
                              const sim::ParamSet& base) const {
    study::RegressOutcome o;
    o.scenario = s.name;
    o.kind = s.kind;
    if (!quiet_) fmt::print(stderr, "regress: running {} ({}) ...\n", s.name, s.kind);
    const auto t0 = Clock::now();
    const std::filesystem::path baseline = suite.baseline_dir / (s.name + ".json");
    try {
      const std::vector<study::RegressFigure> now = study::run_regress_scenario(s, base);
      o.figures = now.size();
      const auto old = baselines_read_.find(s.name);
      const bool have = old != baselines_read_.end();
      if (have) o.moved = study::compare_regress_figures(old->second, now);
      if (update_) {
        study::write_regress_baseline(baseline, s.name, now);
        o.status = Status::kUpdated;
      } else if (!have) {
        o.status = Status::kNoBaseline;
        o.error = baseline.string();
      } else {
        o.status = o.moved.empty() ? Status::kPassed : Status::kMoved;
      }
    } catch (const Error& e) {
      o.status = Status::kError;
      o.error = e.what();
    }
    o.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    report(o, baseline);
    return o;
  }

  void report(const study::RegressOutcome& o, const std::filesystem::path& baseline) const {
    fmt::print("  {:<22} {:<9} {:<12} {:>6} figures {:>7.1f} s\n", o.scenario, o.kind, study::regress_status_name(o.status),
               o.figures, o.wall_s);
    if (o.status == Status::kError) fmt::print("      error: {}\n", o.error);
    if (o.status == Status::kNoBaseline) fmt::print("      no baseline {} (run with --update to write it)\n", o.error);
    if (const auto d = damaged_.find(o.scenario); d != damaged_.end() && o.status == Status::kUpdated)
      fmt::print("      replaced a damaged baseline: {}\n", d->second);
    if (o.moved.empty()) return;
    fmt::print("      {} of {} figures {}{}\n", o.moved.size(), o.figures, update_ ? "moved against " : "moved",
               update_ ? baseline.string() : "");
    for (size_t i = 0; i < o.moved.size() && i < size_t(show_); ++i) {
      const auto& m = o.moved[i];
      fmt::print("      {}{}: {} -> {}{}{}\n", i == 0 ? "first: " : "       ", m.figure, m.before, m.after,
                 m.delta.empty() ? "" : " ", m.delta);
    }
    if (o.moved.size() > size_t(show_)) fmt::print("       ... and {} more (--show N)\n", o.moved.size() - size_t(show_));
  }

  BoardArgs board_;
  std::string suite_, baselines_, junit_;
  std::vector<std::string> only_;
  bool update_ = false, quiet_ = false;
  std::map<std::string, std::vector<study::RegressFigure>> baselines_read_;  // scenario -> its baseline, as read
  std::map<std::string, std::string> damaged_;                             // scenario -> why (--update replaces it)
  int show_ = 3;
};

}  // namespace

std::unique_ptr<Command> add_regress_command(CLI::App& app) { return std::make_unique<Regress>(app); }

}  // namespace bitsim::cli
