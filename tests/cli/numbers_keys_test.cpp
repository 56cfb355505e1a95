// Numbers and keys (docs/errors.md): every number a user gives, on every command's numeric
// option, in the text options that hold numbers and in the environment, is read by the one
// parser (base/parse_number.h: decimal only, the whole text, the range); a key set twice in
// one file (board TOML, MMIO program, regress suite, any JSON input) and keys that contradict
// each other are errors naming both, exit 2.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "study/regress.h"
#include "support/run_argv.h"
#include "support/temp_dir.h"

namespace bitsim {
namespace {

namespace fs = std::filesystem;
using bitsim::testing::Outcome;
using bitsim::testing::run_argv;

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

struct Folder : test::MadeTempDir {
  fs::path scratch = path / ".scratch";
  Folder() { fs::create_directories(scratch); }
  Outcome bitsim(std::vector<std::string> args, const std::vector<std::string>& env = {}) const {
    args.insert(args.begin(), BITSIM_BINARY);
    return run_argv(args, path, scratch, env);
  }
};

// The subcommands as `bitsim ... --help` lists them, nested ones ("sweep merge") included.
std::vector<std::vector<std::string>> subcommands(const Folder& f, const std::vector<std::string>& parent = {}) {
  std::vector<std::string> args = parent;
  args.push_back("--help");
  const Outcome r = f.bitsim(args);
  std::vector<std::vector<std::string>> out;
  std::istringstream in(r.out);
  bool listing = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "Subcommands:") {
      listing = true;
      continue;
    }
    if (!listing) continue;
    std::smatch m;
    if (!std::regex_match(line, m, std::regex(R"(  ([a-z][a-z-]*)\s.*)"))) {
      if (!line.empty() && line[0] != ' ') listing = false;
      continue;
    }
    std::vector<std::string> sub = parent;
    sub.push_back(m[1]);
    out.push_back(sub);
    const auto nested = subcommands(f, sub);
    out.insert(out.end(), nested.begin(), nested.end());
  }
  return out;
}

struct NumericOption {
  std::vector<std::string> command;
  std::string flag, type;  // type: INT, UINT or FLOAT (CLI11's name of the option's type)
};

std::vector<NumericOption> numeric_options(const Folder& f) {
  std::vector<NumericOption> out;
  for (const auto& cmd : subcommands(f)) {
    std::vector<std::string> args = cmd;
    args.push_back("--help");
    std::istringstream in(f.bitsim(args).out);
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (std::regex_search(line, m, std::regex(R"(^\s+(?:-\w,)?(--[a-z0-9-]+) (INT|UINT|FLOAT|DOUBLE|NUMBER)\b)")))
        out.push_back({cmd, m[1], m[2]});
    }
  }
  return out;
}

std::string joined(const std::vector<std::string>& w) {
  std::string s;
  for (const auto& x : w) s += (s.empty() ? "" : " ") + x;
  return s;
}

TEST(Numbers, EveryNumericOptionOfEveryCommandReadsDecimalOnly) {
  Folder f;
  const auto options = numeric_options(f);
  std::set<std::string> seen;
  for (const auto& o : options) seen.insert(joined(o.command) + " " + o.flag);
  // The discovery works: the options of the issue's examples among them.
  EXPECT_GE(options.size(), 25u);
  for (const char* must : {"sweep --shards", "sweep --max-running", "run --cache-max-gb", "cache info --cache-max-gb",
                           "regress --show", "run --seed", "sweep --tokens"})
    EXPECT_TRUE(seen.count(must)) << must << " not found among the numeric options";

  // Texts that another reader (CLI11's own conversion, strtod, stol, TOML) would take as a
  // number, or as another number.
  const std::vector<std::string> any = {"0x10", "0X10", "0b1",  "0o7",  "1_0", "+1", "1 ", " 1", "1a",
                                        "",     "inf",  "nan", "-nan", "1e999", "\xef\xbc\x91", "0x1p3", "1,5"};
  const std::vector<std::string> integers = {"1e1", "1.0", "1.5", "010e0"};
  const std::vector<std::string> unsigned_ = {"-0", "-1", "18446744073709551616"};
  int cases = 0;
  for (const auto& o : options) {
    std::vector<std::string> bad = any;
    if (o.type == "INT" || o.type == "UINT") bad.insert(bad.end(), integers.begin(), integers.end());
    if (o.type == "UINT") bad.insert(bad.end(), unsigned_.begin(), unsigned_.end());
    for (const auto& v : bad) {
      std::vector<std::string> args = o.command;
      args.push_back(o.flag);
      args.push_back(v);
      const Outcome r = f.bitsim(args);
      SCOPED_TRACE("bitsim " + joined(o.command) + " " + o.flag + " '" + v + "'");
      EXPECT_EQ(r.code, 2) << r.out << r.err;
      EXPECT_NE(r.err.find(o.flag), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
      ++cases;
    }
  }
  EXPECT_GE(cases, 25 * 17);
  // The decimal forms are taken: `--shards 16` writes a script of 16 tasks.
  const Outcome ok = f.bitsim({"sweep", "--grid", "clock_mhz=100", "--tokens", "1", "--context", "1", "--check-model",
                               "", "--out", "c", "--slurm-script", "s.sh", "--shards", "16", "--quiet"});
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(read(f.path / "s.sh").find("\n#SBATCH --array=0-15%4\n"), std::string::npos);
}

TEST(Numbers, NumbersInTextOptionsAndTheEnvironmentReadDecimalOnly) {
  Folder f;
  int cases = 0;
  // --shard K/N: each half a decimal shard number.
  for (const std::string shard : {"-0/2", "0x1/2", "+0/2", " 0/2", "0/2 ", "0/0x2", "0/+2", "0/2e0", "1/1", "0/1/2",
                                  "0/100001", "-1/2", "0.0/2"}) {
    const Outcome r = f.bitsim({"sweep", "--grid", "clock_mhz=100", "--tokens", "1", "--context", "1",
                                "--check-model", "", "--out", "c", "--shard", shard});
    EXPECT_EQ(r.code, 2) << shard << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("--shard '" + shard + "'"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(f.path / "c" / "points")) << shard;
    ++cases;
  }
  // A Slurm array task's variables.
  for (const std::string id : {"-0", "0x1", "+1", " 1", "1e0"}) {
    const Outcome r = f.bitsim({"sweep", "--grid", "clock_mhz=100", "--tokens", "1", "--context", "1",
                                "--check-model", "", "--out", "c"},
                               {"SLURM_ARRAY_TASK_ID=" + id, "SLURM_ARRAY_TASK_COUNT=2"});
    EXPECT_EQ(r.code, 2) << id << ": " << r.err;
    EXPECT_NE(r.err.find("SLURM_ARRAY_TASK_ID"), std::string::npos) << r.err;
    ++cases;
  }
  // BITSIM_CACHE_MAX_GB, as cache.max_gb for every command that opens the cache.
  for (const std::string gb : {"0x10", "16 ", " 16", "inf", "nan", "0", "-1", "-0", "1e999", "1e7", "16GB", "1_6"}) {
    const Outcome r = f.bitsim({"cache", "info", "--cache-dir", (f.path / "cache").string()},
                               {"BITSIM_CACHE_MAX_GB=" + gb});
    EXPECT_EQ(r.code, 2) << gb << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("BITSIM_CACHE_MAX_GB"), std::string::npos) << r.err;
    ++cases;
  }
  const Outcome ok = f.bitsim({"cache", "info", "--cache-dir", (f.path / "cache").string()},
                              {"BITSIM_CACHE_MAX_GB=16.5"});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("of at most 16.500 GB"), std::string::npos) << ok.out;
  // --set and --grid values, --vcd-window, synthetic:SHAPE:SEED.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"config", "--set", "clock.mhz=0x64"},
           {"config", "--set", "dma.length_bits=0x17"},
           {"config", "--set", "clock.mhz=1e2x"},
           {"sweep", "--grid", "clock_mhz=100,0x7d", "--check-model", ""},
           {"sweep", "--grid", "dma.length_bits=20,+23", "--check-model", ""},
           {"run", "--prompt", "x", "--fidelity", "cycle", "--vcd", "v.vcd", "--vcd-window", "0x0:100"},
           {"run", "--prompt", "x", "--model", "synthetic:tiny:0x1"},
       }) {
    const Outcome r = f.bitsim(args);
    EXPECT_EQ(r.code, 2) << joined(args) << ": " << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
    ++cases;
  }
  EXPECT_EQ(cases, 13 + 5 + 12 + 7);
}

TEST(Keys, AKeySetTwiceInOneBoardConfigIsAnErrorNamingBoth) {
  Folder f;
  struct Case {
    std::string toml;
    std::vector<std::string> expect;  // in the message
  };
  const std::vector<Case> cases = {
      // The issue's example: a quoted dotted key at the top and the key of a table.
      {"\"clock.mhz\" = 100\n[clock]\nmhz = 125\n", {"'clock.mhz' is set twice", "F:1", "F:3"}},
      {"[clock]\nmhz = 125\n[\"clock\"]\n", {"F:"}},  // TOML: a table defined twice
      {"clock = { mhz = 100 }\n\"clock.mhz\" = 125\n", {"'clock.mhz' is set twice", "F:1", "F:2"}},
      {"[driver]\n\"c.reg_access_ns\" = 1.0\n[driver.c]\nreg_access_ns = 2.0\n",
       {"'driver.c.reg_access_ns' is set twice", "F:2", "F:4"}},
      {"[cpu]\n\"ns_per_element.embed\" = 1.0\n\n[cpu.ns_per_element]\nembed = 2.0\n",
       {"'cpu.ns_per_element.embed' is set twice", "F:2", "F:5"}},
      {"[clock]\nmhz = 100\nmhz = 125\n", {"F:3"}},                       // TOML itself
      {"[clock]\nmhz = 100\n[clock]\nmhz = 125\n", {"F:3"}},              // TOML itself
      {"clock.mhz = 100\n[clock]\nmhz = 125\n", {"F:"}},                  // TOML itself (dotted keys define [clock])
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const fs::path file = f.path / ("dup" + std::to_string(i) + ".toml");
    write(file, cases[i].toml);
    const Outcome r = f.bitsim({"config", "--config", file.string()});
    SCOPED_TRACE(cases[i].toml);
    EXPECT_EQ(r.code, 2) << r.out;
    for (std::string e : cases[i].expect) {
      if (const auto at = e.find("F:"); at != std::string::npos) e.replace(at, 1, file.string());
      EXPECT_NE(r.err.find(e), std::string::npos) << "missing '" << e << "' in: " << r.err;
    }
  }
  // The shipped configs set each key once.
  for (const auto& e : fs::directory_iterator(fs::path(BITSIM_SOURCE_DIR) / "configs"))
    if (e.path().extension() == ".toml" && e.path().filename() != "regress.toml") {
      const Outcome r = f.bitsim({"config", "--config", e.path().string()});
      EXPECT_EQ(r.code, 0) << e.path() << ": " << r.err;
    }
}

TEST(Keys, AKeySetTwiceInAProgramASuiteOrAJsonFileIsAnErrorNamingIt) {
  Folder f;
  // An MMIO program's C lines.
  write(f.path / "p.mmio", "bitsim-mmio 1\nC clock.mhz 100\nC dma.length_bits 23\nC clock.mhz 125\n");
  Outcome r = f.bitsim({"replay", "p.mmio"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("p.mmio:4: config key 'clock.mhz' is set twice, here and at line 2"), std::string::npos)
      << r.err;

  // A regress suite's `set` and `grid` (clock_mhz is clock.mhz).
  write(f.path / "s1.toml", "[[scenario]]\nname = \"a\"\nkind = \"timing\"\nset = [\"clock.mhz=100\", "
                            "\"dma.length_bits=23\", \"clock.mhz=125\"]\n");
  r = f.bitsim({"regress", "--suite", "s1.toml"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("field 'set' sets the key 'clock.mhz' twice: entry 1 ('clock.mhz=100') and entry 3 "
                       "('clock.mhz=125')"),
            std::string::npos)
      << r.err;
  write(f.path / "s2.toml", "[[scenario]]\nname = \"a\"\nkind = \"sweep\"\ngrid = [\"clock_mhz=100\", "
                            "\"clock.mhz=125,150\"]\n");
  r = f.bitsim({"regress", "--suite", "s2.toml"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("field 'grid' sets the key 'clock.mhz' twice"), std::string::npos) << r.err;

  // config.json and a safetensors header.
  ASSERT_EQ(f.bitsim({"make-model", "--shape", "tiny", "--out", "m"}).code, 0);
  std::string cfg = read(f.path / "m" / "config.json");
  cfg.insert(cfg.find('{') + 1, "\n  \"hidden_size\": 4096,");
  write(f.path / "m" / "config.json", cfg);
  r = f.bitsim({"inspect", "--model", "m"});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("config.json: the key \"hidden_size\" appears twice in one object (the top level)"),
            std::string::npos)
      << r.err;
  ASSERT_EQ(f.bitsim({"make-model", "--shape", "tiny", "--out", "m2"}).code, 0);
  {
    const std::string st = read(f.path / "m2" / "model.safetensors");
    uint64_t n = 0;
    std::memcpy(&n, st.data(), 8);
    const std::string data = st.substr(8 + n);
    std::string header = st.substr(8, n);
    // The first tensor's entry once more, ahead of the others: a name given twice.
    const size_t name_at = header.find("\"model.embed_tokens.weight\"");
    ASSERT_NE(name_at, std::string::npos);
    const size_t entry_end = header.find('}', name_at) + 1;
    header.insert(1, header.substr(name_at, entry_end - name_at) + ",");
    header.append((8 - header.size() % 8) % 8, ' ');
    n = header.size();
    const std::string out = std::string(reinterpret_cast<const char*>(&n), 8) + header + data;
    write(f.path / "m2" / "model.safetensors", out);
  }
  r = f.bitsim({"inspect", "--model", "m2"});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("model.safetensors: header: the key \"model.embed_tokens.weight\" appears twice"),
            std::string::npos)
      << r.err;

  // A campaign's campaign.json and a point's file.
  r = f.bitsim({"sweep", "--grid", "clock_mhz=100", "--tokens", "1", "--context", "1", "--check-model", "", "--out",
                "c", "--shard", "0/1", "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string point_file;
  for (const auto& e : fs::directory_iterator(f.path / "c" / "points")) point_file = e.path().string();
  std::string point = read(point_file);
  point.insert(point.find('{') + 1, "\n \"status\": \"failed\",");
  write(point_file, point);
  r = f.bitsim({"sweep", "merge", "c"});
  EXPECT_EQ(r.code, 4) << r.out << r.err;  // a point missing or failed: nothing merged
  EXPECT_NE(r.out.find("the key \"status\" appears twice in one object"), std::string::npos) << r.out;
  std::string campaign = read(f.path / "c" / "campaign.json");
  campaign.insert(campaign.find('{') + 1, "\n \"context\": 2,");
  write(f.path / "c" / "campaign.json", campaign);
  r = f.bitsim({"sweep", "merge", "c"});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("campaign.json: the key \"context\" appears twice in one object (the top level)"),
            std::string::npos)
      << r.err;

  // A regress baseline.
  write(f.path / "b.json", "{\"schema\": \"bitsim.regress-baseline/1\", \"scenario\": \"x\", \"figures\": [], "
                           "\"figures\": [[\"a\", 1]]}");
  try {
    (void)study::read_regress_baseline(f.path / "b.json");
    ADD_FAILURE() << "a baseline with \"figures\" twice was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the key \"figures\" appears twice"), std::string::npos) << e.what();
  }
}

TEST(Keys, KeysThatContradictEachOtherAreErrorsNamingBoth) {
  Folder f;
  struct Case {
    std::vector<std::string> sets;
    std::string first, second;  // the two keys the message must name
  };
  const std::vector<Case> cases = {
      {{"timing.pass_mhz=150"}, "timing.pass_mhz", "timing.fail_mhz"},  // the issue's example
      {{"timing.pass_mhz=142.86"}, "timing.pass_mhz", "timing.fail_mhz"},
      {{"timing.fail_mhz=100"}, "timing.pass_mhz", "timing.fail_mhz"},
      {{"cma.base=402653184"}, "cma.base", "cma.mib"},  // 384 MiB + 192 MiB past the 512 MiB DDR
      {{"cma.mib=512", "cma.base=4096"}, "cma.base", "cma.mib"},
      {{"ddr.size_mib=256"}, "cma.mib", "ddr.size_mib"},  // 128 MiB below + 192 MiB past a 256 MiB DDR
      {{"dma.mm2s_fifo_beats=8"}, "dma.mm2s_fifo_beats", "dma.max_burst_beats"},
      {{"dma.max_burst_beats=128"}, "dma.mm2s_fifo_beats", "dma.max_burst_beats"},
      {{"kv.outlier_channels=4"}, "kv.outlier_channels", "kv.format"},
      {{"kv.format=int4"}, "kv.format", "attention.variant"},
      {{"attention.variant=online-softmax", "matmul.format=per-call"}, "attention.variant", "matmul.format"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(joined(c.sets));
    // Through --set on a sweep, which builds every module's config.
    std::vector<std::string> args = {"sweep", "--grid", "clock_mhz=100", "--tokens", "1", "--context", "1",
                                     "--check-model", ""};
    for (const auto& s : c.sets) args.insert(args.end(), {"--set", s});
    Outcome r = f.bitsim(args);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.err.find(c.first), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.second), std::string::npos) << r.err;
    // And through a config file read by `bitsim config`, for the rules between the keys
    // that no module holds together.
    if (c.first.rfind("timing.", 0) == 0 || c.first.rfind("cma.", 0) == 0) {
      std::string toml;
      for (const auto& s : c.sets) toml += "\"" + s.substr(0, s.find('=')) + "\" = " + s.substr(s.find('=') + 1) + "\n";
      write(f.path / "c.toml", toml);
      r = f.bitsim({"config", "--config", "c.toml"});
      EXPECT_EQ(r.code, 2) << r.out;
      EXPECT_NE(r.err.find(c.first), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(c.second), std::string::npos) << r.err;
    }
  }
  // A grid whose every value contradicts the base: refused with both keys named.
  Outcome r = f.bitsim({"sweep", "--grid", "timing.pass_mhz=150,200", "--tokens", "1", "--context", "1",
                        "--check-model", ""});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("timing.fail_mhz"), std::string::npos) << r.err;
  // The shipped relation holds: 125 passes, 142.86 fails.
  r = f.bitsim({"sweep", "--grid", "clock_mhz=100,150", "--tokens", "1", "--context", "1", "--check-model", ""});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("met (board)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fails timing (board)"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace bitsim
