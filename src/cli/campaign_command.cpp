#include "cli/campaign_command.h"

#include <cstdlib>

#include <fmt/format.h>

#include "model/error.h"
#include "sim/campaign.h"
#include "sim/provenance.h"

namespace bitsim::cli {

namespace {

// Exit code of `bitsim sweep merge` when points are missing or failed and --partial was not given.
constexpr int kIncompleteExit = 4;

}  // namespace

void add_campaign_options(CLI::App* sub, CampaignCli& c) {
  sub->add_option("--out", c.out, "Campaign directory: one result file per point (with --shard, or a Slurm array task's shard)");
  sub->add_option("--shard", c.shard, "K/N: run shard K (0 <= K < N) of the grid's points (default: from SLURM_ARRAY_TASK_ID and the array's size, else 0/1)");
  sub->add_flag("--resume", c.resume, "Keep the valid results already in --out, redo missing, failed and corrupt ones");
  sub->add_flag("--allow-mixed", c.allow_mixed, "Run although --out holds the campaign with another base config");
}

void add_merge_subcommand(CLI::App* sweep, MergeCli& m) {
  m.sub = sweep->add_subcommand("merge", "Merge a campaign directory's point results into one table; names every missing or failed point and refuses an incomplete merge without --partial (exit 4)");
  m.sub->add_option("dir", m.dir, "Campaign directory (written by `bitsim sweep ... --out DIR`)")->required();
  m.sub->add_option("--csv", m.csv, "Write the merged table as CSV to FILE (the columns of `bitsim sweep --csv`)");
  m.sub->add_option("--json", m.json, "Write a bitsim.sweep/1 document with a \"campaign\" object to FILE");
  m.sub->add_flag("--partial", m.partial, "Write what is there although points are missing (marked PARTIAL)");
  m.sub->add_flag("--allow-mixed", m.allow_mixed, "Merge rows from different bitsim builds or base configs");
}

bool campaign_requested(const CampaignCli& c) { return !c.out.empty() || !c.shard.empty() || c.resume; }

int run_campaign(const sim::ParamSet& base, const sim::SweepOptions& o, const CampaignCli& c,
                 const SweepCommandLine& line, bool quiet) {
  if (c.out.empty()) throw Error("--shard/--resume: give the campaign directory with --out DIR");
  if (!line.csv.empty() || !line.json.empty())
    throw Error("--csv/--json: a campaign shard writes its points into --out; `bitsim sweep merge DIR --csv F` "
                "writes the table");
  sim::CampaignOptions opt;
  opt.dir = c.out;
  opt.resume = c.resume;
  opt.allow_mixed = c.allow_mixed;
  std::string from = "--shard";
  if (!c.shard.empty()) {
    opt.shard = sim::parse_shard(c.shard);
  } else if (auto s = sim::shard_from_slurm([](const char* n) { return std::getenv(n); })) {
    opt.shard = *s;
    from = "the Slurm array task";
  } else {
    from = "the whole grid";
  }
  std::function<void(const std::string&)> status;
  if (!quiet) status = [](const std::string& s) { fmt::print(stderr, "{}\n", s); };
  const sim::ShardReport r = sim::run_shard(base, o, opt, status);
  fmt::print("shard {}/{} ({}): {} of the grid's {} points; {} already done (kept), {} run, {} failed -> {}\n",
             opt.shard.index, opt.shard.count, from, r.shard_points, r.grid_points, r.skipped, r.ran, r.failed.size(),
             c.out);
  if (!r.base_check.empty()) fmt::print("base config checked functionally: {}\n", r.base_check);
  for (const auto& w : r.warnings) fmt::print("warning: {}\n", w);
  for (const auto& f : r.failed) fmt::print("failed: {}\n", f);
  fmt::print("wall time {:.1f} s ({} job(s)); every figure simulated\n", r.wall_s, o.jobs);
  if (!r.failed.empty()) {
    fmt::print(stderr, "bitsim: error: {} point(s) of shard {}/{} failed (their errors are in their result files; "
               "--resume redoes them)\n", r.failed.size(), opt.shard.index, opt.shard.count);
    return 2;
  }
  return 0;
}

int run_merge(const MergeCli& a) {
  const sim::MergeResult m = sim::merge_campaign(a.dir);
  fmt::print("campaign {}: {} of {} points completed (campaign.json: bitsim {}, commit {}, base config {})\n", a.dir,
             m.result.points.size(), m.total, m.version, m.commit, m.base_config_hash);
  for (const auto& p : m.missing) {
    if (p.error.empty()) fmt::print("missing: {} (no result file {})\n", p.point, p.file);
    else fmt::print("failed: {}: {}\n", p.point, p.error);
  }
  for (const auto& x : m.mixed) fmt::print("mixed: {}\n", x);
  if (!m.mixed.empty() && !a.allow_mixed)
    throw Error(fmt::format("sweep merge {}: refusing to merge rows of different bitsim builds or base configs "
                            "(--allow-mixed merges them)", a.dir));
  const bool outputs = !a.csv.empty() || !a.json.empty();
  if (!m.complete() && !a.partial) {
    fmt::print(stderr, "bitsim: error: sweep merge {}: {} of {} points missing or failed; nothing written "
               "(--partial writes the {} completed points, marked PARTIAL)\n", a.dir, m.missing.size(), m.total,
               m.result.points.size());
    return kIncompleteExit;
  }
  if (!a.csv.empty()) sim::write_file_atomically(a.csv, sim::merge_csv(m));
  if (!a.json.empty()) sim::write_file_atomically(a.json, sim::merge_json(m).dump(2) + "\n");
  if (m.complete())
    fmt::print("complete: all {} points{}\n", m.total, outputs ? "; merged" : "");
  else
    fmt::print("PARTIAL: {} of {} points ({} missing or failed){}\n", m.result.points.size(), m.total,
               m.missing.size(), outputs ? "; written marked PARTIAL" : "");
  if (!a.csv.empty()) fmt::print("wrote {}\n", a.csv);
  if (!a.json.empty()) fmt::print("wrote {}\n", a.json);
  return 0;
}

}  // namespace bitsim::cli
