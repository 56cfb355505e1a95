#include "cli/sweep_command.h"

#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "base/file_io.h"
#include "base/stop_signal.h"
#include "cli/options.h"
#include "cli/sweep_campaign.h"
#include "model/attention_stream.h"
#include "model/synthetic.h"
#include "study/sweep.h"

namespace bitsim::cli {

namespace {

// Progress on stderr: a bar on a terminal, one line per point in a log, none when quiet.
std::function<void(int, int)> progress_printer(bool tty, bool quiet) {
  if (tty)
    return [](int done, int total) {
      const int w = 30, k = total ? done * w / total : w;
      fmt::print(stderr, "\r[{}{}] {}/{} points", std::string(size_t(k), '#'), std::string(size_t(w - k), ' '), done,
                 total);
      if (done == total) fmt::print(stderr, "\n");
    };
  if (quiet) return {};
  return [](int done, int total) {  // a log (CI, a file): one line per point done
    if (done > 0) fmt::print(stderr, "sweep: {} of {} points done\n", done, total);
  };
}

class Sweep final : public Command {
 public:
  explicit Sweep(CLI::App& app)
      : Command(app.add_subcommand("sweep", "Simulate a grid of board configs (timing-only at a context T) to CSV/JSON, "
                                            "after one functional check of the base config")) {
    sub_->add_option("--grid", grid_, "KEY=V1,V2,... over any config key (or clock_mhz); repeatable: the grid is the product");
    sub_->add_option("--tokens", opt_.tokens, "Timing-only tokens per point")->transform(integer_in(1, 64))->capture_default_str();
    sub_->add_option("--context", opt_.context, "Context T of the first token (past 512: kv.format = int4)")
        ->transform(integer_in(1, model::kAttentionInt4MaxT))
        ->capture_default_str();
    sub_->add_option("--prompt-tokens", opt_.prompt_tokens,
                     "Also time a prompt of N tokens per point in chunks of prefill.tokens_per_pass: ttft_ms, "
                     "prefill_tok_s (docs/prefill.md)")
        ->transform(integer_in(0, model::kAttentionInt4MaxT));
    sub_->add_option("--jobs", opt_.jobs, "Worker processes")->transform(integer_in(1, 64))->capture_default_str();
    sub_->add_option("--csv", csv_, "Write the table as CSV to FILE")->check(file_name());
    sub_->add_option("--json", json_, "Write a bitsim.sweep/1 document to FILE")->check(file_name());
    sub_->add_option("--check-model", opt_.check_model, "Model of the base config's functional check (empty: skip)")
        ->capture_default_str();
    sub_->add_option("--shape", opt_.shape,
                     "Model shape the points time, timing-only (a synthetic shape: " +
                         fmt::format("{}", fmt::join(model::shape_names(), ", ")) + ")")
        ->check(CLI::IsMember(model::shape_names()))
        ->capture_default_str();
    add_board_options(sub_, board_, "Board config TOML (default: configs/pynq-z2.toml)",
                      "Override one base config key: KEY=VALUE (repeatable)");
    sub_->add_flag("--quiet", quiet_, "No progress on stderr");
    add_campaign_options(sub_, campaign_);
    add_merge_subcommand(sub_, merge_);
  }

  int run() override {
    if (merge_.sub->parsed()) return run_merge(merge_);
    // The outputs are checked before the work, so that no result is lost at the end.
    std::vector<io::NamedPath> outputs;
    if (!csv_.empty()) outputs.push_back({"--csv", csv_});
    if (!json_.empty()) outputs.push_back({"--json", json_});
    if (!campaign_.slurm_script.empty()) outputs.push_back({"--slurm-script", campaign_.slurm_script});
    io::check_outputs(outputs, {config_input(board_)});
    const sim::ParamSet base = board_params(board_);
    if (grid_.empty()) throw Error("sweep: the grid is empty (give --grid KEY=V1,V2,...; see `bitsim config --dump`)");
    for (const auto& g : grid_) opt_.grid.push_back(study::parse_axis(base, g, "--grid"));
    study::check_grid_axes(opt_.grid, "--grid");
    if (campaign_requested(campaign_))
      return run_campaign(base, opt_, campaign_, {board_.config, board_.sets, grid_, csv_, json_}, quiet_);
    const bool tty = ::isatty(STDERR_FILENO) && !quiet_;
    const study::SweepResult r = study::run_sweep(base, opt_, progress_printer(tty, quiet_), status_printer(quiet_));
    const std::string csv = study::sweep_csv(r);
    if (!csv_.empty()) io::write_file(csv_, csv, "--csv");
    if (!json_.empty()) io::write_file(json_, study::sweep_json(r, opt_).dump(2) + "\n", "--json");
    if (r.stopped_by) return report_stopped(r, csv, tty);
    if (!r.failed.empty()) return report_failed(r, csv, tty);
    fmt::print("sweep: {} points, {} shape, timing-only (fast fidelity) at context T={}, {} tokens each; "
               "every figure simulated\n", r.points.size(), opt_.shape, opt_.context, opt_.tokens);
    if (!r.base_check.empty()) fmt::print("base config checked functionally: {}\n", r.base_check);
    for (const auto& k : r.skipped) fmt::print("skipped (not a valid combination): {}\n", k);
    fmt::print("\n{}", csv);
    fmt::print("\nwall time {:.1f} s ({} job(s))\n", r.wall_s, opt_.jobs);
    return 0;
  }

 private:
  // A sweep stopped by SIGINT / SIGTERM: what was done, marked partial; 128 + the signal.
  int report_stopped(const study::SweepResult& r, const std::string& csv, bool tty) const {
    if (tty) fmt::print(stderr, "\n");
    fmt::print(stderr, "bitsim: sweep stopped by {}: {} of {} points done{}, marked partial\n",
               signal_name(r.stopped_by), r.points_done(), r.points.size(),
               csv_.empty() && json_.empty()
                   ? " (below)"
                   : fmt::format(" (written to {}{}{})", csv_, !csv_.empty() && !json_.empty() ? " and " : "", json_));
    fmt::print("{}", csv);
    return Stopped(r.stopped_by, "").exit_code();
  }

  // Points that failed when measured: the table of the others, marked partial, and each
  // failed point named with its reason on stderr; exit 2 (bad input: the point's config).
  int report_failed(const study::SweepResult& r, const std::string& csv, bool tty) const {
    if (tty) fmt::print(stderr, "\n");
    fmt::print(stderr, "bitsim: sweep: {} of {} points failed; the {} done are{}, marked partial:\n", r.failed.size(),
               r.points.size(), r.points_done(),
               csv_.empty() && json_.empty()
                   ? " below"
                   : fmt::format(" written to {}{}{}", csv_, !csv_.empty() && !json_.empty() ? " and " : "", json_));
    for (const std::string& f : r.failed) fmt::print(stderr, "  point {}\n", f);
    fmt::print("{}", csv);
    return 2;
  }

  BoardArgs board_;
  std::vector<std::string> grid_;
  study::SweepOptions opt_;
  std::string csv_, json_;
  bool quiet_ = false;
  CampaignCli campaign_;  // --out, --shard, --resume, ... (cli/sweep_campaign.h)
  MergeCli merge_;        // `bitsim sweep merge DIR`
};

}  // namespace

std::unique_ptr<Command> add_sweep_command(CLI::App& app) { return std::make_unique<Sweep>(app); }

}  // namespace bitsim::cli
