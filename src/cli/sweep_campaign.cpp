#include "cli/sweep_campaign.h"

#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "bitsim/version.h"

#include "base/error.h"
#include "base/file_io.h"
#include "base/stop_signal.h"
#include "cli/options.h"
#include "cli/script_quote.h"
#include "study/campaign.h"
#include "study/provenance.h"

namespace bitsim::cli {

namespace {

// Exit code of `bitsim sweep merge` when points are missing or failed and --partial was not given.
constexpr int kIncompleteExit = 4;

// The Slurm script's margins over the measured point: memory x1.5 + 256 MiB, time x2 + 2 min.
constexpr double kMemFactor = 1.5, kMemExtraMiB = 256, kTimeFactor = 2.0, kTimeExtraS = 120;

std::string absolute(const std::string& p) { return std::filesystem::absolute(p).lexically_normal().string(); }

std::string self_exe() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("bitsim") : p.string();
}

// The Slurm array's sizes: points per shard, and what one task costs, measured here.
struct SlurmPlan {
  size_t points = 0;
  int largest = 0, smallest = 0;  // points of the largest and the smallest shard
  double check_s = 0, point_s = 0, peak_mib = 0;
  int mem_mib = 0, time_min = 0;
};

void check_slurm_request(const CampaignCli& c) {
  if (c.out.empty()) throw Error("--slurm-script: give the campaign directory with --out DIR");
  if (!c.shard.empty() || c.resume) throw Error("--slurm-script: --shard and --resume belong to the array's tasks");
  if (c.shards < 1 || c.shards > 10000) throw Error(fmt::format("--shards {}: must be in 1..10000", c.shards));
  if (c.max_running < 1) throw Error(fmt::format("--max-running {}: must be at least 1", c.max_running));
}

// The strings of the script, each as given and as it lands (absolute paths carry the working
// directory): refused with a control character, the campaign folder also with a backslash
// (it is a Slurm filename pattern).
struct ScriptStrings {
  std::string out, script, config, exe;
};

ScriptStrings checked_script_strings(const study::SweepOptions& o, const CampaignCli& c, const SweepCommandLine& line) {
  using script::refuse_control_chars;
  refuse_control_chars(c.out, "--out");
  refuse_control_chars(c.slurm_script, "--slurm-script");
  refuse_control_chars(c.partition, "--partition");
  refuse_control_chars(line.config, "--config");
  refuse_control_chars(o.check_model, "--check-model");
  for (const auto& s : line.sets) refuse_control_chars(s, "--set");
  for (const auto& g : line.grid) refuse_control_chars(g, "--grid");
  (void)script::slurm_pattern(c.out, "--out");
  ScriptStrings s{absolute(c.out), absolute(c.slurm_script), line.config.empty() ? "" : absolute(line.config),
                  self_exe()};
  refuse_control_chars(s.out, "--out");
  refuse_control_chars(s.script, "--slurm-script");
  refuse_control_chars(s.config, "--config");
  refuse_control_chars(s.exe, "the bitsim executable's path");
  (void)script::slurm_pattern(s.out, "--out");
  return s;
}

// What one task costs: the base check and one point, measured in this process; the largest
// shard's points.
SlurmPlan plan_slurm_array(const sim::ParamSet& base, const study::SweepOptions& o, int shards, bool quiet) {
  SlurmPlan plan;
  study::SweepResult grid;
  const auto configs = study::sweep_configs(base, o, grid);
  plan.points = configs.size();
  std::vector<int> per_shard(size_t(shards), 0);
  for (size_t i = 0; i < configs.size(); ++i)
    ++per_shard[size_t(study::shard_of(study::point_key(grid.keys, configs[i]), shards))];
  plan.largest = *std::max_element(per_shard.begin(), per_shard.end());
  plan.smallest = *std::min_element(per_shard.begin(), per_shard.end());

  const auto status = status_printer(quiet);
  if (!o.check_model.empty()) {
    if (status) status(fmt::format("measuring the base config's functional check on {} ...", o.check_model));
    const auto t0 = std::chrono::steady_clock::now();
    (void)study::check_sweep_base(base, o.check_model);
    plan.check_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (status) status(fmt::format("measuring one point ({}) ...", grid.points.empty() ? "" : grid.points[0].values[0]));
  const study::SweepPoint one = study::measure_sweep_point(configs[0], o);
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  plan.point_s = one.prov.wall_s;
  plan.peak_mib = std::max(double(ru.ru_maxrss) / 1024.0, one.prov.peak_rss_mib);
  plan.mem_mib = int(std::ceil(plan.peak_mib * kMemFactor + kMemExtraMiB));
  const double task_s = plan.check_s + plan.point_s * plan.largest;
  plan.time_min = std::max(1, int(std::ceil((task_s * kTimeFactor + kTimeExtraS) / 60.0)));
  return plan;
}

// The task's command line: the sweep as given, its shard from the array.
std::string slurm_task_command(const study::SweepOptions& o, const CampaignCli& c, const SweepCommandLine& line,
                               const ScriptStrings& s) {
  using script::sh_word;
  std::string cmd = "\"$BITSIM\" sweep";
  for (const auto& g : line.grid) cmd += " --grid " + sh_word(g);
  cmd += fmt::format(" --tokens {} --context {} --shape {} --check-model {}", o.tokens, o.context, sh_word(o.shape),
                     sh_word(o.check_model));
  if (o.prompt_tokens > 0) cmd += fmt::format(" --prompt-tokens {}", o.prompt_tokens);
  if (!s.config.empty()) cmd += " --config " + sh_word(s.config);
  for (const auto& set : line.sets) cmd += " --set " + sh_word(set);
  if (c.allow_mixed) cmd += " --allow-mixed";
  cmd += " --out \"$OUT\" --resume --quiet --jobs 1";
  return cmd;
}

// The sbatch script: the array of shards, and (run with bash) the merge after every task.
// Every string from the command line or the environment is quoted for where it lands
// (cli/script_quote.h): shell words, #SBATCH words, Slurm filename patterns, comments.
std::string slurm_script_text(const SlurmPlan& plan, const CampaignCli& c, const ScriptStrings& s,
                              const std::string& cmd) {
  using script::sh_word;
  const std::string logs = script::slurm_pattern(s.out, "--out") + "/logs";  // % as %%
  const std::string partition = c.partition.empty() ? "" : "#SBATCH --partition=" + script::sbatch_word(c.partition) + "\n";
  const std::string partition_opt = c.partition.empty() ? "" : " --partition=" + sh_word(c.partition);
  return fmt::format(
      "#!/bin/bash\n"
      "# A bitsim sweep campaign as a Slurm job array, written by `bitsim sweep --slurm-script`\n"
      "# (bitsim {version}, commit {commit}): {points} points in {shards} shards (largest {largest}\n"
      "# points), at most {cap} tasks at once, results in OUT (below).\n"
      "#\n"
      "#   bash {script}\n"
      "#       submits the array, then the merge as a job that runs once every task succeeded\n"
      "#       (--dependency=afterok): OUT/merged.csv, OUT/merged.json\n"
      "#   sbatch {script}\n"
      "#       submits the array only; merge with: bitsim sweep merge {outq} --csv F\n"
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
      "#SBATCH --output={output}\n"
      "{partition}"
      "set -euo pipefail\n"
      "BITSIM={bitsim}\n"
      "OUT={outq}\n"
      "LOGS=\"${{OUT//'%'/%%}}/logs\"  # as a Slurm filename pattern: % as %%\n"
      "q() {{ printf \"'%s'\" \"${{1//\\'/\\'\\\\\\'\\'}}\"; }}  # one word for /bin/sh, which runs sbatch --wrap\n"
      "MERGE=\"$(q \"$BITSIM\") sweep merge $(q \"$OUT\") --csv $(q \"$OUT/merged.csv\") --json $(q \"$OUT/merged.json\")\"\n"
      "if [ -z \"${{SLURM_ARRAY_TASK_ID:-}}\" ]; then\n"
      "  mkdir -p \"$OUT/logs\"\n"
      "  array=$(sbatch --parsable \"$0\")\n"
      "  array=${{array%%;*}}\n"
      "  merge=$(sbatch --parsable --job-name=bitsim-merge --dependency=afterok:\"$array\" --kill-on-invalid-dep=yes \\\n"
      "    --ntasks=1 --cpus-per-task=1 --mem={mem}M --time=10{partition_opt} --output=\"$LOGS/merge.out\" \\\n"
      "    --wrap \"$MERGE\")\n"
      "  merge=${{merge%%;*}}\n"
      "  echo \"array job $array ({shards} tasks), merge job $merge (after every task succeeded)\"\n"
      "  exit 0\n"
      "fi\n"
      "# An array task: its shard from SLURM_ARRAY_TASK_ID and the array's size; --resume keeps\n"
      "# what an earlier run of this task finished.\n"
      "exec {cmd}\n",
      fmt::arg("version", kVersion), fmt::arg("commit", kGitCommit), fmt::arg("points", plan.points),
      fmt::arg("shards", c.shards), fmt::arg("largest", plan.largest), fmt::arg("cap", c.max_running),
      fmt::arg("script", sh_word(s.script)), fmt::arg("host", script::comment_text(study::host_name())),
      fmt::arg("check", plan.check_s), fmt::arg("point", plan.point_s), fmt::arg("peak", plan.peak_mib),
      fmt::arg("mf", kMemFactor), fmt::arg("me", kMemExtraMiB), fmt::arg("tf", kTimeFactor),
      fmt::arg("te", kTimeExtraS), fmt::arg("last", c.shards - 1), fmt::arg("mem", plan.mem_mib),
      fmt::arg("time", plan.time_min), fmt::arg("output", script::sbatch_word(logs + "/shard-%a.out")),
      fmt::arg("partition", partition), fmt::arg("bitsim", sh_word(s.exe)), fmt::arg("outq", sh_word(s.out)),
      fmt::arg("partition_opt", partition_opt),
      fmt::arg("cmd", cmd));
}

// `bitsim sweep --slurm-script FILE`: one point measured here, then the script.
int write_slurm_script(const sim::ParamSet& base, const study::SweepOptions& o, const CampaignCli& c,
                       const SweepCommandLine& line, bool quiet) {
  check_slurm_request(c);
  const ScriptStrings s = checked_script_strings(o, c, line);
  study::check_sweep_options(o);
  // Outputs checked before the work: the directory for the tasks' logs and the script's.
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(s.out) / "logs", ec);
  if (ec) throw Error(fmt::format("--out {}: cannot create {}/logs ({})", c.out, s.out, ec.message()));
  io::check_output_file(s.script, "--slurm-script");

  const SlurmPlan plan = plan_slurm_array(base, o, c.shards, quiet);
  io::write_file(s.script, slurm_script_text(plan, c, s, slurm_task_command(o, c, line, s)), "--slurm-script");
  ::chmod(s.script.c_str(), 0755);
  fmt::print("wrote {}: {} points in {} array tasks ({} to {} points each, at most {} at once), --mem={}M --time={} "
             "(one point {:.2f} s, base check {:.2f} s, peak {:.0f} MiB, measured here under load)\n",
             s.script, plan.points, c.shards, plan.smallest, plan.largest, c.max_running, plan.mem_mib, plan.time_min,
             plan.point_s, plan.check_s, plan.peak_mib);
  fmt::print("submit: bash {}   (the array, then the merge after every task: {}/merged.csv)\n", script::sh_word(s.script),
             s.out);
  return 0;
}

// The shard to run: --shard K/N, else the Slurm array task's, else the whole grid; and
// where it came from.
std::pair<study::Shard, std::string> shard_to_run(const CampaignCli& c) {
  if (!c.shard.empty()) return {study::parse_shard(c.shard, "--shard"), "--shard"};
  std::optional<study::Shard> s;
  try {
    s = study::shard_from_slurm([](const char* n) { return std::getenv(n); });
  } catch (const Error& e) {
    throw Error(fmt::format("{}; give --shard K/N", e.what()));
  }
  if (s) return {*s, "the Slurm array task"};
  return {study::Shard{}, "the whole grid"};
}

// run_shard, its refusals naming the flag that lifts them.
study::ShardReport run_shard_naming_flags(const sim::ParamSet& base, const study::SweepOptions& o,
                                        const study::CampaignOptions& opt, bool quiet) {
  using Lifted = study::CampaignRefused::LiftedBy;
  try {
    return study::run_shard(base, o, opt, status_printer(quiet));
  } catch (const Stopped& s) {
    // Interrupted, not failed: no file for the points stopped, the finished ones kept.
    throw Stopped(s.signal(), fmt::format("{}: campaign {} interrupted; its finished points are kept and "
                                          "`--resume` completes it", s.what(), opt.dir));
  } catch (const study::CampaignRefused& e) {
    if (e.lifted_by == Lifted::kResume)
      throw Error(fmt::format("{}; --resume keeps the valid ones and redoes the rest", e.what()));
    throw Error(fmt::format("{}; --allow-mixed runs anyway", e.what()));
  }
}

}  // namespace

void add_campaign_options(CLI::App* sub, CampaignCli& c) {
  sub->add_option("--out", c.out, "Campaign directory: one result file per point (with --shard, or a Slurm array task's shard)");
  sub->add_option("--shard", c.shard, "K/N: run shard K (0 <= K < N) of the grid's points (default: from SLURM_ARRAY_TASK_ID and the array's size, else 0/1)");
  sub->add_flag("--resume", c.resume, "Keep the valid results already in --out, redo missing, failed and corrupt ones");
  sub->add_flag("--allow-mixed", c.allow_mixed, "Run although --out holds the campaign with another base config");
  sub->add_option("--slurm-script", c.slurm_script, "Write an sbatch script for a Slurm job array over --out (one task per shard, the merge as a dependent job) after measuring one point; runs nothing else");
  sub->add_option("--shards", c.shards, "Array tasks of --slurm-script")
      ->transform(integer_in(1, 10000))
      ->capture_default_str();
  sub->add_option("--max-running", c.max_running, "At most this many array tasks at once (the array's %)")
      ->transform(integer_in(1, 10000))
      ->capture_default_str();
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

int run_campaign(const sim::ParamSet& base, const study::SweepOptions& o, const CampaignCli& c,
                 const SweepCommandLine& line, bool quiet) {
  if (!c.slurm_script.empty()) return write_slurm_script(base, o, c, line, quiet);
  if (c.out.empty()) throw Error("--shard/--resume: give the campaign directory with --out DIR");
  if (!line.csv.empty() || !line.json.empty())
    throw Error("--csv/--json: a campaign shard writes its points into --out; `bitsim sweep merge DIR --csv F` "
                "writes the table");
  study::CampaignOptions opt;
  opt.dir = c.out;
  opt.resume = c.resume;
  opt.allow_mixed = c.allow_mixed;
  const auto [shard, from] = shard_to_run(c);
  opt.shard = shard;
  const study::ShardReport r = run_shard_naming_flags(base, o, opt, quiet);
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

namespace {

// The campaign directory read; its errors say that `sweep merge` found them.
study::MergeResult merge_naming_command(const std::string& dir) {
  try {
    return study::merge_campaign(dir);
  } catch (const Error& e) {
    throw Error(fmt::format("sweep merge: {}", e.what()));
  }
}

}  // namespace

int run_merge(const MergeCli& a) {
  // The outputs before the merge: neither replaces a file of the campaign it reads.
  std::vector<io::NamedPath> files;
  if (!a.csv.empty()) files.push_back({"--csv", a.csv});
  if (!a.json.empty()) files.push_back({"--json", a.json});
  const std::filesystem::path dir(a.dir);
  io::check_outputs(files, {{"campaign file", dir / "campaign.json"}, {"campaign points folder", dir / "points"}});
  const study::MergeResult m = merge_naming_command(a.dir);
  fmt::print("campaign {}: {} of {} points completed (campaign.json: bitsim {}, commit {}, base config {})\n", a.dir,
             m.result.points.size(), m.total, m.version, m.commit, m.base_config_hash);
  for (const auto& p : m.missing) {
    if (p.error.empty()) fmt::print("missing: {} (no result file {})\n", p.point, p.file);
    else fmt::print("{}: {}: {}\n", p.corrupt ? "corrupt" : "failed", p.point, p.error);
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
  if (!a.csv.empty()) io::write_file(a.csv, study::merge_csv(m), "--csv");
  if (!a.json.empty()) io::write_file(a.json, study::merge_json(m).dump(2) + "\n", "--json");
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
