#include "cli/campaign_command.h"

#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "bitsim/version.h"

#include "base/error.h"
#include "base/file_io.h"
#include "study/campaign.h"
#include "study/provenance.h"

namespace bitsim::cli {

namespace {

// Exit code of `bitsim sweep merge` when points are missing or failed and --partial was not given.
constexpr int kIncompleteExit = 4;

// The Slurm script's margins over the measured point: memory x1.5 + 256 MiB, time x2 + 2 min.
constexpr double kMemFactor = 1.5, kMemExtraMiB = 256, kTimeFactor = 2.0, kTimeExtraS = 120;

// One word for a POSIX shell: single-quoted, ' as '\''.
std::string sh_quote(const std::string& w) {
  std::string q = "'";
  for (char ch : w) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

std::string absolute(const std::string& p) { return std::filesystem::absolute(p).lexically_normal().string(); }

std::string self_exe() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("bitsim") : p.string();
}

// `bitsim sweep --slurm-script FILE`: one point measured here, then the script.
int write_slurm_script(const sim::ParamSet& base, const sim::SweepOptions& o, const CampaignCli& c,
                       const SweepCommandLine& line, bool quiet) {
  if (c.out.empty()) throw Error("--slurm-script: give the campaign directory with --out DIR");
  if (!c.shard.empty() || c.resume) throw Error("--slurm-script: --shard and --resume belong to the array's tasks");
  if (c.shards < 1 || c.shards > 10000) throw Error(fmt::format("--shards {}: must be in 1..10000", c.shards));
  if (c.max_running < 1) throw Error(fmt::format("--max-running {}: must be at least 1", c.max_running));
  sim::check_sweep_options(o);
  const std::string out = absolute(c.out), script = absolute(c.slurm_script);
  // Outputs checked before the work: the directory for the tasks' logs and the script's.
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(out) / "logs", ec);
  if (ec) throw Error(fmt::format("--out {}: cannot create {}/logs ({})", c.out, out, ec.message()));
  io::check_output_file(script, "--slurm-script");

  sim::SweepResult grid;
  const auto configs = sim::sweep_configs(base, o, grid);
  std::vector<int> per_shard(size_t(c.shards), 0);
  for (size_t i = 0; i < configs.size(); ++i)
    ++per_shard[size_t(sim::shard_of(sim::point_key(grid.keys, configs[i]), c.shards))];
  const int largest = *std::max_element(per_shard.begin(), per_shard.end());
  const int smallest = *std::min_element(per_shard.begin(), per_shard.end());

  // What one task costs: the base check and one point, measured in this process.
  std::function<void(const std::string&)> status;
  if (!quiet) status = [](const std::string& s) { fmt::print(stderr, "{}\n", s); };
  double check_s = 0;
  if (!o.check_model.empty()) {
    if (status) status(fmt::format("measuring the base config's functional check on {} ...", o.check_model));
    const auto t0 = std::chrono::steady_clock::now();
    (void)sim::check_sweep_base(base, o.check_model);
    check_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (status) status(fmt::format("measuring one point ({}) ...", grid.points.empty() ? "" : grid.points[0].values[0]));
  const sim::SweepPoint one = sim::measure_sweep_point(configs[0], o);
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  const double process_peak_mib = std::max(double(ru.ru_maxrss) / 1024.0, one.prov.peak_rss_mib);
  const int mem_mib = int(std::ceil(process_peak_mib * kMemFactor + kMemExtraMiB));
  const double task_s = check_s + one.prov.wall_s * largest;
  const int time_min = std::max(1, int(std::ceil((task_s * kTimeFactor + kTimeExtraS) / 60.0)));

  // The task's command line: the sweep as given, its shard from the array.
  std::string cmd = "\"$BITSIM\" sweep";
  for (const auto& g : line.grid) cmd += " --grid " + sh_quote(g);
  cmd += fmt::format(" --tokens {} --context {} --check-model {}", o.tokens, o.context, sh_quote(o.check_model));
  if (!line.config.empty()) cmd += " --config " + sh_quote(absolute(line.config));
  for (const auto& s : line.sets) cmd += " --set " + sh_quote(s);
  if (c.allow_mixed) cmd += " --allow-mixed";
  cmd += " --out \"$OUT\" --resume --quiet --jobs 1";
  const std::string partition = c.partition.empty() ? "" : "#SBATCH --partition=" + c.partition + "\n";
  const std::string partition_opt = c.partition.empty() ? "" : " --partition=" + sh_quote(c.partition);

  std::string text = fmt::format(
      "#!/bin/bash\n"
      "# A bitsim sweep campaign as a Slurm job array, written by `bitsim sweep --slurm-script`\n"
      "# (bitsim {version}, commit {commit}): {points} points in {shards} shards (largest {largest}\n"
      "# points), at most {cap} tasks at once, results in {out}.\n"
      "#\n"
      "#   bash {script}      submits the array, then the merge as a job that runs once every\n"
      "#                       task succeeded (--dependency=afterok): {out}/merged.csv, .json\n"
      "#   sbatch {script}    submits the array only; merge with `bitsim sweep merge {out} --csv F`\n"
      "#\n"
      "# Measured on {host} (under whatever load it had): the base check {check:.2f} s, one point\n"
      "# {point:.2f} s wall, peak resident memory {peak:.0f} MiB. --mem = peak x {mf} + {me:.0f} MiB;\n"
      "# --time = (check + {largest} points) x {tf} + {te:.0f} s, in minutes.\n"
      "#SBATCH --job-name=bitsim-sweep\n"
      "#SBATCH --array=0-{last}%{cap}\n"
      "#SBATCH --ntasks=1\n"
      "#SBATCH --cpus-per-task=1\n"
      "#SBATCH --mem={mem}M\n"
      "#SBATCH --time={time}\n"
      "#SBATCH --output={out}/logs/shard-%a.out\n"
      "{partition}"
      "set -euo pipefail\n"
      "BITSIM={bitsim}\n"
      "OUT={outq}\n"
      "if [ -z \"${{SLURM_ARRAY_TASK_ID:-}}\" ]; then\n"
      "  mkdir -p \"$OUT/logs\"\n"
      "  array=$(sbatch --parsable \"$0\")\n"
      "  array=${{array%%;*}}\n"
      "  merge=$(sbatch --parsable --job-name=bitsim-merge --dependency=afterok:\"$array\" --kill-on-invalid-dep=yes \\\n"
      "    --ntasks=1 --cpus-per-task=1 --mem={mem}M --time=10{partition_opt} --output=\"$OUT/logs/merge.out\" \\\n"
      "    --wrap \"$(printf '%q ' \"$BITSIM\" sweep merge \"$OUT\" --csv \"$OUT/merged.csv\" --json \"$OUT/merged.json\")\")\n"
      "  merge=${{merge%%;*}}\n"
      "  echo \"array job $array ({shards} tasks), merge job $merge (after every task succeeded)\"\n"
      "  exit 0\n"
      "fi\n"
      "# An array task: its shard from SLURM_ARRAY_TASK_ID and the array's size; --resume keeps\n"
      "# what an earlier run of this task finished.\n"
      "exec {cmd}\n",
      fmt::arg("version", kVersion), fmt::arg("commit", kGitCommit), fmt::arg("points", configs.size()),
      fmt::arg("shards", c.shards), fmt::arg("largest", largest), fmt::arg("cap", c.max_running),
      fmt::arg("out", out), fmt::arg("script", script), fmt::arg("host", sim::host_name()),
      fmt::arg("check", check_s), fmt::arg("point", one.prov.wall_s), fmt::arg("peak", process_peak_mib),
      fmt::arg("mf", kMemFactor), fmt::arg("me", kMemExtraMiB), fmt::arg("tf", kTimeFactor),
      fmt::arg("te", kTimeExtraS), fmt::arg("last", c.shards - 1), fmt::arg("mem", mem_mib),
      fmt::arg("time", time_min), fmt::arg("partition", partition), fmt::arg("bitsim", sh_quote(self_exe())),
      fmt::arg("outq", sh_quote(out)), fmt::arg("partition_opt", partition_opt),
      fmt::arg("cmd", cmd));
  io::write_file(script, text, "--slurm-script");
  ::chmod(script.c_str(), 0755);
  fmt::print("wrote {}: {} points in {} array tasks ({} to {} points each, at most {} at once), --mem={}M --time={} "
             "(one point {:.2f} s, base check {:.2f} s, peak {:.0f} MiB, measured here under load)\n",
             script, configs.size(), c.shards, smallest, largest, c.max_running, mem_mib, time_min, one.prov.wall_s,
             check_s, process_peak_mib);
  fmt::print("submit: bash {}   (the array, then the merge after every task: {}/merged.csv)\n", script, out);
  return 0;
}

}  // namespace

void add_campaign_options(CLI::App* sub, CampaignCli& c) {
  sub->add_option("--out", c.out, "Campaign directory: one result file per point (with --shard, or a Slurm array task's shard)");
  sub->add_option("--shard", c.shard, "K/N: run shard K (0 <= K < N) of the grid's points (default: from SLURM_ARRAY_TASK_ID and the array's size, else 0/1)");
  sub->add_flag("--resume", c.resume, "Keep the valid results already in --out, redo missing, failed and corrupt ones");
  sub->add_flag("--allow-mixed", c.allow_mixed, "Run although --out holds the campaign with another base config");
  sub->add_option("--slurm-script", c.slurm_script, "Write an sbatch script for a Slurm job array over --out (one task per shard, the merge as a dependent job) after measuring one point; runs nothing else");
  sub->add_option("--shards", c.shards, "Array tasks of --slurm-script")->capture_default_str();
  sub->add_option("--max-running", c.max_running, "At most this many array tasks at once (the array's %)")->capture_default_str();
  sub->add_option("--partition", c.partition, "Slurm partition of the --slurm-script jobs (default: the cluster's)");
}

void add_merge_subcommand(CLI::App* sweep, MergeCli& m) {
  m.sub = sweep->add_subcommand("merge", "Merge a campaign directory's point results into one table; names every missing or failed point and refuses an incomplete merge without --partial (exit 4)");
  m.sub->add_option("dir", m.dir, "Campaign directory (written by `bitsim sweep ... --out DIR`)")->required();
  m.sub->add_option("--csv", m.csv, "Write the merged table as CSV to FILE (the columns of `bitsim sweep --csv`)");
  m.sub->add_option("--json", m.json, "Write a bitsim.sweep/1 document with a \"campaign\" object to FILE");
  m.sub->add_flag("--partial", m.partial, "Write what is there although points are missing (marked PARTIAL)");
  m.sub->add_flag("--allow-mixed", m.allow_mixed, "Merge rows from different bitsim builds or base configs");
}

bool campaign_requested(const CampaignCli& c) {
  return !c.out.empty() || !c.shard.empty() || c.resume || !c.slurm_script.empty();
}

int run_campaign(const sim::ParamSet& base, const sim::SweepOptions& o, const CampaignCli& c,
                 const SweepCommandLine& line, bool quiet) {
  if (!c.slurm_script.empty()) return write_slurm_script(base, o, c, line, quiet);
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
  if (!a.csv.empty()) io::write_file(a.csv, sim::merge_csv(m), "--csv");
  if (!a.json.empty()) io::write_file(a.json, sim::merge_json(m).dump(2) + "\n", "--json");
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
