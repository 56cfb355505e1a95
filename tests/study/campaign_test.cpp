// Campaigns: shards of a sweep into a directory, resume, merge with its completeness and
// provenance checks (study/campaign.h), through the library and through the bitsim command.
#include "study/campaign.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <tuple>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "sim/board_config.h"
#include "support/run_bitsim.h"
#include "support/temp_dir.h"

namespace bitsim::study {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

namespace fs = std::filesystem;
using bitsim::testing::run_bitsim;

// A fresh directory for one test, removed at the end.
// A folder for the test, created at once (tests/support/temp_dir.h names and removes it).
struct TempDir : ::bitsim::test::TempDir {
  TempDir() { std::filesystem::create_directories(path); }
};

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The CSV without its provenance columns (the last provenance_columns().size() fields).
std::string without_provenance(const std::string& csv) {
  std::istringstream in(csv);
  std::string line, out;
  const size_t n = provenance_columns().size();
  while (std::getline(in, line)) {
    for (size_t k = 0; k < n; ++k) line.erase(line.rfind(','));
    out += line + "\n";
  }
  return out;
}

SweepOptions grid_options(const sim::ParamSet& base, std::vector<std::string> axes, int tokens = 1) {
  SweepOptions o;
  for (const auto& a : axes) o.grid.push_back(parse_axis(base, a));
  o.tokens = tokens;
  o.context = 32;
  o.check_model.clear();
  return o;
}

std::map<std::string, ino_t> inodes(const fs::path& dir) {
  std::map<std::string, ino_t> m;
  for (const auto& e : fs::directory_iterator(dir / "points")) {
    if (e.path().filename().string().front() == '.') continue;  // temporary files
    struct stat st {};
    ::stat(e.path().c_str(), &st);
    m[e.path().filename().string()] = st.st_ino;
  }
  return m;
}

TEST(Campaign, ShardsFromTheCommandLineAndFromASlurmArray) {
  EXPECT_EQ(parse_shard("3/8").index, 3);
  EXPECT_EQ(parse_shard("3/8").count, 8);
  EXPECT_EQ(parse_shard("0/1").count, 1);
  EXPECT_THAT([] { parse_shard("8/8"); }, ThrowsMessage<Error>(HasSubstr("0 <= K < N")));
  EXPECT_THAT([] { parse_shard("1/0"); }, ThrowsMessage<Error>(HasSubstr("0 <= K < N")));
  EXPECT_THAT([] { parse_shard("3"); }, ThrowsMessage<Error>(HasSubstr("K/N")));
  EXPECT_THAT([] { parse_shard("a/8"); }, ThrowsMessage<Error>(HasSubstr("'a'")));

  std::map<std::string, std::string> env;
  auto get = [&](const char* n) -> const char* {
    const auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_FALSE(shard_from_slurm(get).has_value());  // not an array task
  env = {{"SLURM_ARRAY_TASK_ID", "5"}, {"SLURM_ARRAY_TASK_COUNT", "8"}, {"SLURM_ARRAY_TASK_MIN", "0"},
         {"SLURM_ARRAY_TASK_MAX", "7"}};
  auto s = shard_from_slurm(get);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->index, 5);
  EXPECT_EQ(s->count, 8);
  env = {{"SLURM_ARRAY_TASK_ID", "12"}, {"SLURM_ARRAY_TASK_MIN", "10"}, {"SLURM_ARRAY_TASK_MAX", "13"}};
  s = shard_from_slurm(get);  // 10-13 without COUNT: four shards, task 12 is shard 2
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->index, 2);
  EXPECT_EQ(s->count, 4);
  env = {{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_COUNT", "3"}, {"SLURM_ARRAY_TASK_MIN", "0"},
         {"SLURM_ARRAY_TASK_MAX", "6"}};  // --array=0-6:3: not every index
  EXPECT_THAT([&] { shard_from_slurm(get); }, ThrowsMessage<Error>(HasSubstr("every index")));
  env = {{"SLURM_ARRAY_TASK_ID", "2"}};
  EXPECT_THAT([&] { shard_from_slurm(get); }, ThrowsMessage<Error>(HasSubstr("shard count is unknown")));
}

TEST(Campaign, APointHasOneKeyAndLandsInExactlyOneShard) {
  const sim::ParamSet base = sim::board_params();
  sim::ParamSet a = base, b = base;
  a.set("clock.mhz=125");
  a.set("dma.length_bits=23");
  b.set("dma.length_bits=23");
  b.set("clock.mhz=125.0");
  // The same point whatever the order of the axes or the spelling of a value.
  EXPECT_EQ(point_key({"clock.mhz", "dma.length_bits"}, a), point_key({"dma.length_bits", "clock.mhz"}, b));
  EXPECT_EQ(point_key({"clock.mhz", "dma.length_bits"}, a), "clock.mhz=125\ndma.length_bits=23\n");
  b.set("clock.mhz=100");
  EXPECT_NE(point_key({"clock.mhz"}, a), point_key({"clock.mhz"}, b));

  // A 64-point grid into 8 shards: every point in exactly one, every shard used.
  const SweepOptions o = grid_options(base, {"clock_mhz=50,75,100,125,150,175,200,250",
                                             "dma.length_bits=16,18,20,22,23,24,25,26"});
  SweepResult res;
  const auto configs = sweep_configs(base, o, res);
  ASSERT_EQ(configs.size(), 64u);
  std::vector<int> per_shard(8);
  std::set<std::string> keys;
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string k = point_key(res.keys, configs[i]);
    keys.insert(k);
    const int s = shard_of(k, 8);
    ASSERT_GE(s, 0);
    ASSERT_LT(s, 8);
    EXPECT_EQ(shard_of(k, 8), s);
    ++per_shard[size_t(s)];
  }
  EXPECT_EQ(keys.size(), 64u);
  for (int n : per_shard) EXPECT_GT(n, 0);
}

TEST(Campaign, EightShardsMergeIntoTheRowsOfOneLocalRun) {
  const sim::ParamSet base = sim::board_params();
  const SweepOptions o = grid_options(base, {"clock_mhz=100,125,142.86,200", "dma.length_bits=16,23"});
  TempDir dir;
  CampaignOptions c;
  c.dir = dir.path.string();
  int ran = 0;
  for (int k = 0; k < 8; ++k) {
    c.shard = {k, 8};
    const ShardReport r = run_shard(base, o, c);
    EXPECT_EQ(r.grid_points, 8);
    EXPECT_TRUE(r.failed.empty());
    ran += r.ran;
    if (k == 6) {
      // Seven of eight shards: the merge names exactly the last shard's points as missing.
      const MergeResult m = merge_campaign(c.dir);
      EXPECT_FALSE(m.complete());
      EXPECT_EQ(int(m.result.points.size()) + int(m.missing.size()), 8);
      for (const auto& p : m.missing) {
        EXPECT_TRUE(p.error.empty()) << p.error;
        sim::ParamSet q = base;
        const auto eq = p.point.find(' ');
        q.set(p.point.substr(0, eq));
        q.set(p.point.substr(eq + 1));
        EXPECT_EQ(shard_of(point_key({"clock.mhz", "dma.length_bits"}, q), 8), 7) << p.point;
      }
      EXPECT_EQ(merge_csv(m).rfind("# PARTIAL: ", 0), 0u);
      EXPECT_TRUE(merge_json(m)["campaign"]["partial"].get<bool>());
    }
  }
  EXPECT_EQ(ran, 8);
  const MergeResult m = merge_campaign(c.dir);
  ASSERT_TRUE(m.complete());
  EXPECT_TRUE(m.mixed.empty());
  SweepOptions local = o;
  local.jobs = 1;
  const SweepResult one = run_sweep(base, local);
  EXPECT_EQ(without_provenance(merge_csv(m)), without_provenance(sweep_csv(one)));
  ASSERT_EQ(m.result.points.size(), one.points.size());
  for (size_t i = 0; i < one.points.size(); ++i) {
    EXPECT_EQ(m.result.points[i].values, one.points[i].values);
    EXPECT_EQ(m.result.points[i].total_ms, one.points[i].total_ms);  // exact: the files keep every bit
    EXPECT_EQ(m.result.points[i].prov.config_hash, one.points[i].prov.config_hash);
    EXPECT_EQ(m.result.points[i].prov.model_hash, one.points[i].prov.model_hash);
    EXPECT_EQ(m.result.points[i].prov.fidelity, "timing-only");
    EXPECT_GT(m.result.points[i].prov.peak_rss_mib, 0.0);
  }
  EXPECT_FALSE(merge_json(m)["campaign"]["partial"].get<bool>());
  // Point files hold the point's whole config.
  const auto j = nlohmann::json::parse(read(dir.path / "points" / fs::directory_iterator(dir.path / "points")->path().filename()));
  EXPECT_EQ(j["config"].size(), base.keys().size());
}

TEST(Campaign, ResumeKeepsValidResultsAndRedoesMissingFailedAndCorruptOnes) {
  const sim::ParamSet base = sim::board_params();
  SweepOptions o = grid_options(base, {"clock_mhz=100,125", "dma.length_bits=20,23"});
  o.jobs = 2;
  TempDir dir;
  CampaignOptions c;
  c.dir = dir.path.string();
  const ShardReport first = run_shard(base, o, c);
  EXPECT_EQ(first.ran, 4);
  const auto before = inodes(dir.path);
  ASSERT_EQ(before.size(), 4u);
  auto it = before.begin();
  const std::string gone = it->first, truncated = (++it)->first, failed = (++it)->first;
  fs::remove(dir.path / "points" / gone);
  {
    const std::string text = read(dir.path / "points" / truncated);
    std::ofstream(dir.path / "points" / truncated, std::ios::trunc) << text.substr(0, text.size() / 2);
  }
  {
    auto j = nlohmann::json::parse(read(dir.path / "points" / failed));
    j["status"] = "failed";
    j["error"] = "killed for memory";
    j.erase("result");
    std::ofstream(dir.path / "points" / failed, std::ios::trunc) << j.dump();
  }
  // The merge names all three, with the failure's own message and the corrupt file.
  const MergeResult m = merge_campaign(c.dir);
  ASSERT_EQ(m.missing.size(), 3u);
  std::string all;
  for (const auto& p : m.missing) all += p.file + ": " + p.error + "\n";
  EXPECT_NE(all.find("killed for memory"), std::string::npos) << all;
  EXPECT_NE(all.find("corrupt or truncated"), std::string::npos) << all;
  EXPECT_NE(all.find(gone + ": \n"), std::string::npos) << all;  // no file, no error: missing

  // Without resume the shard refuses to overwrite its points' results; resume lifts that.
  try {
    run_shard(base, o, c);
    ADD_FAILURE() << "results overwritten without resume";
  } catch (const CampaignRefused& e) {
    EXPECT_EQ(e.lifted_by, CampaignRefused::LiftedBy::kResume);
    EXPECT_NE(std::string(e.what()).find("holds results of"), std::string::npos) << e.what();
  }
  c.resume = true;
  const ShardReport again = run_shard(base, o, c);
  EXPECT_EQ(again.skipped, 1);
  EXPECT_EQ(again.ran, 3);
  std::string warnings;
  for (const auto& w : again.warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("corrupt or truncated"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("killed for memory"), std::string::npos) << warnings;
  const auto after = inodes(dir.path);
  ASSERT_EQ(after.size(), 4u);
  for (const auto& [name, ino] : before)
    if (name != gone && name != truncated && name != failed) {
      EXPECT_EQ(after.at(name), ino) << name << " was rewritten";
    }
  EXPECT_TRUE(merge_campaign(c.dir).complete());
  // Nothing left to do: a resume runs nothing.
  EXPECT_EQ(run_shard(base, o, c).ran, 0);
}

TEST(Campaign, ADirectoryHoldsOneCampaign) {
  const sim::ParamSet base = sim::board_params();
  const SweepOptions o = grid_options(base, {"clock_mhz=100,125"});
  TempDir dir;
  CampaignOptions c;
  c.dir = dir.path.string();
  c.shard = {0, 2};
  run_shard(base, o, c);
  c.shard = {1, 2};
  const SweepOptions other = grid_options(base, {"clock_mhz=100,150"});
  EXPECT_THAT([&] { run_shard(base, other, c); }, ThrowsMessage<Error>(HasSubstr("another campaign")));
  // Another model shape (sweep --shape) is another campaign, named.
  SweepOptions gqa = o;
  gqa.shape = "bitnet-large-gqa4";
  EXPECT_THAT([&] { run_shard(base, gqa, c); },
              ThrowsMessage<Error>(HasSubstr("shape: \"bitnet-large\" there, \"bitnet-large-gqa4\" here")));
  sim::ParamSet base2 = base;
  base2.set("ddr.wall_gb_s=1.5");
  try {
    run_shard(base2, o, c);
    ADD_FAILURE() << "another base config accepted without allow_mixed";
  } catch (const CampaignRefused& e) {
    EXPECT_EQ(e.lifted_by, CampaignRefused::LiftedBy::kAllowMixed);
    EXPECT_NE(std::string(e.what()).find("ddr.wall_gb_s"), std::string::npos) << e.what();
  }
  // With --allow-mixed it runs, and the merge then finds rows of another base config.
  c.allow_mixed = true;
  run_shard(base2, o, c);
  const MergeResult m = merge_campaign(c.dir);
  EXPECT_TRUE(m.complete());
  ASSERT_EQ(m.mixed.size(), 1u);
  EXPECT_NE(m.mixed[0].find("base config(s) (campaign.json: " + config_hash(base) + ")"), std::string::npos) << m.mixed[0];
  EXPECT_NE(m.mixed[0].find(config_hash(base2) + ": "), std::string::npos) << m.mixed[0];
  EXPECT_THAT([] { merge_campaign("/nonexistent/campaign"); }, ThrowsMessage<Error>(HasSubstr("campaign.json")));
}

TEST(CampaignCli, MergeRefusesAnIncompleteOrMixedCampaignUnlessTold) {
  TempDir dir;
  const std::string d = dir.path.string();
  const std::string grid = " --grid clock_mhz=100,125,200 --tokens 1 --context 32 --check-model '' --quiet";
  auto r = run_bitsim("sweep" + grid + " --out " + d + "/c --shard 0/2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("shard 0/2 (--shard)"), std::string::npos) << r.out;
  // Incomplete: exit 4, every missing point named, nothing written.
  r = run_bitsim("sweep merge " + d + "/c --csv " + d + "/m.csv --json " + d + "/m.json");
  EXPECT_EQ(r.code, 4) << r.out << r.err;
  EXPECT_NE(r.out.find("missing: clock.mhz="), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("--partial"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.path / "m.csv"));
  EXPECT_FALSE(fs::exists(dir.path / "m.json"));
  // --partial: written, and it says so in the file and the summary.
  r = run_bitsim("sweep merge " + d + "/c --partial --csv " + d + "/m.csv --json " + d + "/m.json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("PARTIAL"), std::string::npos) << r.out;
  EXPECT_EQ(read(dir.path / "m.csv").rfind("# PARTIAL: ", 0), 0u);
  auto j = nlohmann::json::parse(read(dir.path / "m.json"));
  EXPECT_TRUE(j["campaign"]["partial"].get<bool>());
  EXPECT_EQ(j["campaign"]["total"].get<int>(), 3);
  EXPECT_EQ(j["campaign"]["missing"].size() + j["points"].size(), 3u);
  // The other shard through a Slurm array task's environment.
  ::setenv("SLURM_ARRAY_TASK_ID", "1", 1);
  ::setenv("SLURM_ARRAY_TASK_COUNT", "2", 1);
  r = run_bitsim("sweep" + grid + " --out " + d + "/c");
  ::unsetenv("SLURM_ARRAY_TASK_ID");
  ::unsetenv("SLURM_ARRAY_TASK_COUNT");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("shard 1/2 (the Slurm array task)"), std::string::npos) << r.out;
  r = run_bitsim("sweep merge " + d + "/c --csv " + d + "/m.csv --json " + d + "/m.json");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("complete: all 3 points"), std::string::npos) << r.out;
  const std::string merged = read(dir.path / "m.csv");
  auto plain = run_bitsim("sweep" + grid + " --csv " + d + "/plain.csv");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(without_provenance(merged), without_provenance(read(dir.path / "plain.csv")));
  EXPECT_EQ(merged.rfind("clock.mhz,tok_s,", 0), 0u);
  // A row from another bitsim build: refused without --allow-mixed.
  const auto first = fs::directory_iterator(dir.path / "c" / "points")->path();
  j = nlohmann::json::parse(read(first));
  j["result"]["provenance"]["bitsim_version"] = "0.0.1";
  std::ofstream(first, std::ios::trunc) << j.dump();
  r = run_bitsim("sweep merge " + d + "/c --csv " + d + "/m2.csv");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("bitsim 0.0.1"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("--allow-mixed"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.path / "m2.csv"));
  r = run_bitsim("sweep merge " + d + "/c --allow-mixed --csv " + d + "/m2.csv");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(read(dir.path / "m2.csv").find(",0.0.1,"), std::string::npos);
  // Bad input: exit 2 naming the thing at fault.
  r = run_bitsim("sweep merge " + d + "/nothing --csv " + d + "/x.csv");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("campaign.json"), std::string::npos) << r.err;
  r = run_bitsim("sweep" + grid + " --out " + d + "/c --shard 2/2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--shard '2/2'"), std::string::npos) << r.err;
  // Refusals name the flag that lifts them.
  r = run_bitsim("sweep" + grid + " --out " + d + "/c --shard 0/1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("holds results of"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--resume keeps the valid ones"), std::string::npos) << r.err;
  r = run_bitsim("sweep" + grid + " --out " + d + "/c --shard 0/1 --resume --set ddr.wall_gb_s=1.5");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("ddr.wall_gb_s"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--allow-mixed runs anyway"), std::string::npos) << r.err;
}

TEST(CampaignCli, TheSlurmScriptRunsEachArrayTaskAsItsShard) {
  TempDir dir;
  const std::string d = dir.path.string();
  auto r = run_bitsim("sweep --grid clock_mhz=100,125,200 --tokens 1 --context 32 --check-model '' --quiet --out " + d +
                      "/c --slurm-script " + d + "/run.sh --shards 2 --max-running 1");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string script = read(dir.path / "run.sh");
  EXPECT_NE(script.find("\n#SBATCH --array=0-1%1\n"), std::string::npos) << script;
  EXPECT_NE(script.find("--dependency=afterok:"), std::string::npos) << script;
  EXPECT_NE(script.find(" sweep merge "), std::string::npos) << script;
  // --mem covers the measured peak with its margin (peak x 1.5 + 256 MiB); a point's peak is a
  // few tens of MiB (the shape model's embeddings are zero pages mapped on demand), and the
  // script says what it measured.
  const auto mem_at = script.find("\n#SBATCH --mem=");
  ASSERT_NE(mem_at, std::string::npos);
  const auto peak_at = script.find("peak resident memory ");
  ASSERT_NE(peak_at, std::string::npos) << script;
  const int peak = std::stoi(script.substr(peak_at + 21));
  EXPECT_GT(peak, 4);
  EXPECT_GE(std::stoi(script.substr(mem_at + 15)), int(peak * 1.5) + 256);
  EXPECT_NE(script.find("\n#SBATCH --time="), std::string::npos);
  EXPECT_TRUE(fs::is_directory(dir.path / "c" / "logs"));  // Slurm does not create the --output folder
  // The script as two array tasks (without Slurm: the environment a task would have).
  for (int k = 0; k < 2; ++k) {
    const std::string cmd = "SLURM_ARRAY_TASK_ID=" + std::to_string(k) + " SLURM_ARRAY_TASK_COUNT=2 bash " + d +
                            "/run.sh > " + d + "/task" + std::to_string(k) + ".out 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << read(dir.path / ("task" + std::to_string(k) + ".out"));
    EXPECT_NE(read(dir.path / ("task" + std::to_string(k) + ".out")).find("shard " + std::to_string(k) + "/2 (the Slurm array task)"),
              std::string::npos);
  }
  r = run_bitsim("sweep merge " + d + "/c");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("complete: all 3 points"), std::string::npos) << r.out;
  r = run_bitsim("sweep --grid clock_mhz=100 --slurm-script " + d + "/x.sh");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
}

TEST(CampaignCli, AShardKilledHalfwayResumesWithoutRedoingDonePoints) {
  TempDir dir;
  const fs::path out = dir.path / "c";
  const std::string args = "sweep --grid clock_mhz=90,100,110,125 --grid dma.length_bits=20,23 --tokens 1 --context 32 "
                           "--quiet --jobs 1 --out " + out.string();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + std::string(BITSIM_BINARY) + " " + args + " >/dev/null 2>&1").c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Kill it once two points are done (whatever the speed of this machine).
  bool exited = false;
  for (int i = 0; i < 6000; ++i) {
    if (fs::exists(out / "points") && inodes(out).size() >= 2) break;
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(exited) << "the shard ended before it could be killed";
  ::kill(pid, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
  const auto done = inodes(out);
  ASSERT_GE(done.size(), 2u);
  auto r = run_bitsim("sweep merge " + out.string());
  EXPECT_EQ(r.code, 4) << r.out;  // never reported complete
  r = run_bitsim(args + " --resume");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(std::to_string(done.size()) + " already done (kept), " + std::to_string(8 - done.size()) + " run"),
            std::string::npos)
      << r.out;
  const auto after = inodes(out);
  EXPECT_EQ(after.size(), 8u);
  for (const auto& [name, ino] : done) EXPECT_EQ(after.at(name), ino) << name << " was redone";
  r = run_bitsim("sweep merge " + out.string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("complete: all 8 points"), std::string::npos) << r.out;
}


// Campaign files are evidence (docs/campaigns.md): a copy of a finished campaign, edited by
// `edit`, then merged.
struct EditedCampaign {
  TempDir dir;
  fs::path c;
  EditedCampaign(const fs::path& done, const std::function<void(const fs::path&)>& edit) : c(dir.path / "c") {
    fs::copy(done, c, fs::copy_options::recursive);
    edit(c);
  }
};

nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(read(p)); }
void write_json(const fs::path& p, const nlohmann::json& j) { std::ofstream(p, std::ios::binary) << j.dump(1); }

// A finished 2 x 2 campaign, run once for the tests below.
const fs::path& finished_campaign() {
  static TempDir dir;
  static const fs::path c = [] {
    const sim::ParamSet base = sim::board_params();
    CampaignOptions opt;
    opt.dir = (dir.path / "c").string();
    run_shard(base, grid_options(base, {"clock_mhz=100,125", "dma.length_bits=23,26"}), opt);
    return dir.path / "c";
  }();
  return c;
}

// The point file of grid point `index` in campaign directory c.
fs::path point_file(const fs::path& c, int index) {
  return c / read_json(c / "campaign.json")["points"][size_t(index)]["file"].get<std::string>();
}

TEST(Campaign, MergeChecksCampaignJsonPointsAgainstTheProductOfItsAxes) {
  const fs::path& done = finished_campaign();
  ASSERT_TRUE(merge_campaign(done.string()).complete());
  using Edit = std::function<void(nlohmann::json&)>;
  const std::vector<std::pair<std::string, Edit>> cases = {
      {"cut short", [](nlohmann::json& d) { d["points"].erase(d["points"].begin() + 2, d["points"].end()); }},
      {"cut to none", [](nlohmann::json& d) { d["points"] = nlohmann::json::array(); }},
      {"a point twice", [](nlohmann::json& d) { d["points"][3] = d["points"][2]; }},
      {"a point added twice", [](nlohmann::json& d) { d["points"].push_back(d["points"][0]); }},
      {"relabelled values", [](nlohmann::json& d) { d["points"][1]["values"] = {"125", "23"}; }},
      {"relabelled index", [](nlohmann::json& d) { d["points"][1]["index"] = 3; }},
      {"two swapped", [](nlohmann::json& d) { std::swap(d["points"][0], d["points"][1]); }},
      {"an axis grown", [](nlohmann::json& d) { d["axes"][0]["values"] = {"100", "125", "150"}; }},
      {"an axis value twice", [](nlohmann::json& d) { d["axes"][0]["values"] = {"100", "100"}; }},
      {"an axis dropped", [](nlohmann::json& d) { d["axes"].erase(1); }},
      {"the base config edited", [](nlohmann::json& d) { d["base_config"]["clock.mhz"] = "50"; }},
      {"a base config key unknown", [](nlohmann::json& d) { d["base_config"]["no.such_key"] = "1"; }},
      {"tokens out of range", [](nlohmann::json& d) { d["tokens"] = 0; }},
  };
  for (const auto& [what, edit] : cases) {
    EditedCampaign e(done, [&](const fs::path& c) {
      auto d = read_json(c / "campaign.json");
      edit(d);
      write_json(c / "campaign.json", d);
    });
    EXPECT_THAT([&] { merge_campaign(e.c.string()); }, ThrowsMessage<Error>(HasSubstr("campaign.json: corrupt")))
        << what;
  }
}

TEST(Campaign, MergeChecksEachPointFilesConfigAndFigures) {
  const fs::path& done = finished_campaign();
  using Edit = std::function<void(nlohmann::json&)>;
  const std::vector<std::tuple<std::string, Edit, std::string>> cases = {
      {"negative tok/s", [](nlohmann::json& j) { j["result"]["tok_s"] = -1.0; }, "\"tok_s\" is -1"},
      {"negative part", [](nlohmann::json& j) { j["result"]["cpu_ms"] = -0.5; }, "\"cpu_ms\" is -0.5"},
      {"negative read rate", [](nlohmann::json& j) { j["result"]["read_gb_s"] = -2.0; }, "\"read_gb_s\""},
      {"negative wall", [](nlohmann::json& j) { j["result"]["provenance"]["point_wall_s"] = -1.0; }, "provenance.point_wall_s"},
      {"zero total", [](nlohmann::json& j) { j["result"]["total_ms"] = 0.0; }, "a measured token takes time"},
      {"a part past the total",
       [](nlohmann::json& j) { j["result"]["matmul_ms"] = j["result"]["total_ms"].get<double>() * 2; },
       "more than the token's total_ms"},
      {"the walker past the total",
       [](nlohmann::json& j) { j["result"]["walker_ms"] = j["result"]["total_ms"].get<double>() + 1; },
       "\"walker_ms\""},
      {"a swept key changed", [](nlohmann::json& j) { j["config"]["clock.mhz"] = "150"; }, "config key clock.mhz"},
      {"a base key changed", [](nlohmann::json& j) { j["config"]["dma.max_burst_beats"] = "8"; },
       "config key dma.max_burst_beats"},
      {"a key added", [](nlohmann::json& j) { j["config"]["no.such_key"] = "1"; }, "config key no.such_key"},
      {"a key dropped", [](nlohmann::json& j) { j["config"].erase("ddr.wall_gb_s"); }, "config key ddr.wall_gb_s"},
      {"no config", [](nlohmann::json& j) { j.erase("config"); }, "no \"config\""},
      {"another config hash", [](nlohmann::json& j) { j["result"]["provenance"]["config_hash"] = "0000000000000000"; },
       "provenance.config_hash"},
      {"another point's key", [](nlohmann::json& j) { j["key"] = "clock.mhz=125\ndma.length_bits=23\n"; },
       "holds another point"},
      {"a prompt figure in a campaign that times none", [](nlohmann::json& j) { j["result"]["ttft_ms"] = 10.0; },
       "holds \"ttft_ms\" or \"prefill_tok_s\", but the campaign times no prompt"},
  };
  for (const auto& [what, edit, message] : cases) {
    EditedCampaign e(done, [&](const fs::path& c) {
      auto j = read_json(point_file(c, 0));
      edit(j);
      write_json(point_file(c, 0), j);
    });
    const MergeResult m = merge_campaign(e.c.string());
    ASSERT_EQ(m.missing.size(), 1u) << what;
    EXPECT_TRUE(m.missing[0].corrupt) << what;
    EXPECT_THAT(m.missing[0].error, HasSubstr(message)) << what;
    EXPECT_EQ(m.result.points.size(), 3u) << what;
  }
  // A campaign that times a prompt (campaign.json prompt_tokens): every point needs its
  // ttft_ms and prefill_tok_s, and these points have none.
  {
    EditedCampaign e(done, [&](const fs::path& c) {
      auto d = read_json(c / "campaign.json");
      d["prompt_tokens"] = 4;
      write_json(c / "campaign.json", d);
    });
    const MergeResult m = merge_campaign(e.c.string());
    ASSERT_EQ(m.missing.size(), 4u);
    for (const auto& x : m.missing) {
      EXPECT_TRUE(x.corrupt);
      EXPECT_THAT(x.error, HasSubstr("no \"ttft_ms\" and \"prefill_tok_s\", but the campaign times a 4-token prompt"));
    }
  }
  // A FIFO or a folder in a point file's place is named, never waited on.
  for (const bool fifo : {true, false}) {
    EditedCampaign e(done, [&](const fs::path& c) {
      fs::remove(point_file(c, 1));
      if (fifo) ASSERT_EQ(::mkfifo(point_file(c, 1).c_str(), 0644), 0);
      else fs::create_directory(point_file(c, 1));
    });
    const MergeResult m = merge_campaign(e.c.string());
    ASSERT_EQ(m.missing.size(), 1u);
    EXPECT_TRUE(m.missing[0].corrupt);
    EXPECT_THAT(m.missing[0].error, HasSubstr("not a regular file"));
  }
}

TEST(Campaign, AxesInAnotherOrderOrSpellingAreTheSameCampaign) {
  const sim::ParamSet base = sim::board_params();
  TempDir dir;
  CampaignOptions c;
  c.dir = dir.path.string();
  c.shard = {0, 2};
  run_shard(base, grid_options(base, {"clock_mhz=100,125", "dma.length_bits=23,26"}), c);
  c.shard = {1, 2};
  EXPECT_NO_THROW(run_shard(base, grid_options(base, {"dma.length_bits=26,23", "clock_mhz=125.0,100"}), c));
  const MergeResult m = merge_campaign(c.dir);
  EXPECT_TRUE(m.complete()) << (m.missing.empty() ? "" : m.missing[0].error);
  EXPECT_EQ(m.result.points.size(), 4u);
  // Another grid is still another campaign.
  EXPECT_THAT([&] { run_shard(base, grid_options(base, {"dma.length_bits=26,23", "clock_mhz=125,150"}), c); },
              ThrowsMessage<Error>(HasSubstr("another campaign")));
}

TEST(CampaignCli, MergeReportsCorruptFilesWithTheirExitCodes) {
  const fs::path& done = finished_campaign();
  EditedCampaign bad_point(done, [](const fs::path& c) {
    auto j = read_json(point_file(c, 2));
    j["result"]["tok_s"] = -3.0;
    write_json(point_file(c, 2), j);
  });
  auto r = run_bitsim("sweep merge " + bad_point.c.string());
  EXPECT_EQ(r.code, 4) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("corrupt: clock.mhz=125 dma.length_bits=23: "));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("complete:")));
  EditedCampaign cut(done, [](const fs::path& c) {
    auto d = read_json(c / "campaign.json");
    d["points"].erase(d["points"].begin() + 1, d["points"].end());
    write_json(c / "campaign.json", d);
  });
  r = run_bitsim("sweep merge " + cut.c.string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("campaign.json: corrupt: \"points\" lists 1 point(s), the product of its axes holds 4"));
}

}  // namespace
}  // namespace bitsim::study
