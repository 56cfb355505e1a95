// Bad input as a new user gives it (issue: crashes, hangs, lost data, silently wrong
// answers, unclear messages), each through the real bitsim command: a clear message naming
// the thing at fault and exit 2, never a crash, a hang, a lost result or a wrong answer.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/safetensors.h"
#include "support/edit_byte.h"
#include "support/run_bitsim.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

using Result = bitsim::testing::CommandResult;
Result bitsim(const std::string& args) { return bitsim::testing::run_bitsim(args); }

// A folder for the test, created at once (tests/support/temp_dir.h names and removes it).
struct TempDir : ::bitsim::test::TempDir {
  TempDir() { std::filesystem::create_directories(path); }
};

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Exit 2 and every needle in stderr.
void expect_refused(const Result& r, const std::vector<std::string>& needles) {
  EXPECT_EQ(r.code, 2) << r.err;
  for (const auto& n : needles) EXPECT_TRUE(has(r.err, n)) << "'" << n << "' not in: " << r.err;
  EXPECT_FALSE(has(r.err, "internal error")) << r.err;
}

const std::string kTiny = "run --model synthetic:tiny --prompt hi --quiet ";

// ---- crashes ------------------------------------------------------------------------------

TEST(BadInput, VcdIntoAMissingFolderIsRefusedBeforeTheRun) {
  const Result r = bitsim(kTiny + "--tokens 2 --fidelity cycle --vcd /nonexistent/v.vcd");
  expect_refused(r, {"vcd file /nonexistent/v.vcd", "/nonexistent does not exist"});
}

// attention.drain runs over its whole documented range, in both fidelities with the same
// times; one past it is refused in run and in sweep.
// Outputs: an empty name is refused, not taken as "no output"; two outputs naming one file and
// an output that would replace one of the command's inputs are refused before the run.
TEST(BadInput, EmptySharedOrInputOutputsAreRefusedBeforeTheRun) {
  TempDir d;
  for (const std::string flag : {"--trace", "--layers-csv", "--record-mmio"})
    expect_refused(bitsim(kTiny + "--tokens 1 " + flag + " ''"), {flag, "an empty file name"});
  const std::string x = (d.path / "x").string();
  expect_refused(bitsim(kTiny + "--tokens 1 --trace " + x + " --layers-csv " + x),
                 {"trace file " + x, "layers CSV file " + x, "name one file"});
  EXPECT_FALSE(fs::exists(d.path / "x"));
  const fs::path model = d.path / "m";
  ASSERT_EQ(bitsim("make-model --shape tiny --out " + model.string()).code, 0);
  const std::string before = slurp(model / "config.json");
  expect_refused(bitsim("run --model " + model.string() + " --prompt hi --quiet --tokens 1 --record-mmio " +
                        (model / "config.json").string()),
                 {"mmio record file", "model folder"});
  EXPECT_EQ(slurp(model / "config.json"), before);
  expect_refused(bitsim("sweep --grid clock.mhz=100,125 --tokens 1 --context 1 --csv ''"), {"--csv", "an empty file name"});
}

TEST(BadInput, AttentionDrainRunsOverItsRangeAndIsRefusedPastIt) {
  const Result fast = bitsim(kTiny + "--tokens 1 --no-check --json --set attention.drain=1024");
  const Result cycle = bitsim(kTiny + "--tokens 1 --no-check --json --fidelity cycle --set attention.drain=1024");
  ASSERT_EQ(fast.code, 0) << fast.err;
  ASSERT_EQ(cycle.code, 0) << cycle.err;
  const auto jf = nlohmann::json::parse(fast.out), jc = nlohmann::json::parse(cycle.out);
  ASSERT_EQ(jf["tokens"].size(), jc["tokens"].size());
  for (size_t i = 0; i < jf["tokens"].size(); ++i)
    EXPECT_EQ(jf["tokens"][i]["total_ms"], jc["tokens"][i]["total_ms"]);
  expect_refused(bitsim(kTiny + "--tokens 1 --set attention.drain=1025"), {"attention.drain", "1025", "1024"});
  expect_refused(bitsim("sweep --quiet --check-model '' --tokens 1 --grid attention.drain=4,1025"),
                 {"--grid attention.drain", "1025", "out of range"});
}

TEST(BadInput, AbsurdLayerCountIsRefusedNamingTheField) {
  TempDir d;
  ASSERT_EQ(bitsim("make-model --shape tiny --out " + d.path.string() + "/m").code, 0);
  auto j = nlohmann::json::parse(slurp(d.path / "m" / "config.json"));
  for (long long layers : {2147483647LL, 1000000LL}) {
    j["num_hidden_layers"] = layers;
    std::ofstream(d.path / "m" / "config.json") << j.dump();
    expect_refused(bitsim("inspect --model " + (d.path / "m").string()),
                   {"config.json", "num_hidden_layers", std::to_string(layers) + " layers", "4 GiB"});
  }
}

TEST(BadInput, SymlinkLoopAsModelIsAClearError) {
  TempDir d;
  fs::create_symlink(d.path / "a", d.path / "b");
  fs::create_symlink(d.path / "b", d.path / "a");
  expect_refused(bitsim("inspect --model " + (d.path / "a").string()), {(d.path / "a").string(), "symlink loop"});
}

TEST(BadInput, JsonToAFullStdoutIsAnError) {
  const Result r = bitsim(kTiny + "--tokens 1 --no-check --json >/dev/full");
  expect_refused(r, {"standard output: write failed"});
}

// ---- hangs --------------------------------------------------------------------------------

// Free register accesses: a status poll still moves simulated time, so the run ends, with
// the same times in both fidelities.
TEST(BadInput, ZeroRegisterAccessTimeRunsInBothFidelities) {
  const std::string args = kTiny + "--tokens 1 --no-check --json --set driver.c.reg_access_ns=0";
  const Result fast = bitsim(args), cycle = bitsim(args + " --fidelity cycle");
  ASSERT_EQ(fast.code, 0) << fast.err;
  ASSERT_EQ(cycle.code, 0) << cycle.err;
  const auto jf = nlohmann::json::parse(fast.out), jc = nlohmann::json::parse(cycle.out);
  for (size_t i = 0; i < jf["tokens"].size(); ++i) {
    EXPECT_EQ(jf["tokens"][i]["total_ms"], jc["tokens"][i]["total_ms"]);
    EXPECT_GT(jf["tokens"][i]["total_ms"].get<double>(), 0.0);
  }
}

// A data FIFO smaller than one burst never moves a burst: refused in both fidelities and in
// sweep, naming the FIFO's key and dma.max_burst_beats.
TEST(BadInput, DmaFifoSmallerThanABurstIsRefusedNamingBothKeys) {
  for (const char* fidelity : {"fast", "cycle"})
    expect_refused(bitsim(kTiny + "--tokens 1 --fidelity " + std::string(fidelity) + " --set dma.s2mm_fifo_beats=15"),
                   {"dma.s2mm_fifo_beats", "dma.max_burst_beats = 16"});
  expect_refused(bitsim("sweep --quiet --check-model '' --tokens 1 --grid dma.s2mm_fifo_beats=1,64"),
                 {"dma.s2mm_fifo_beats", "dma.max_burst_beats"});
  // Raising the burst past the FIFOs blames the FIFO that no longer holds one, and says what to do.
  expect_refused(bitsim(kTiny + "--tokens 1 --set dma.max_burst_beats=128"),
                 {"dma.mm2s_fifo_beats' = 64", "dma.max_burst_beats = 128", "give dma.mm2s_fifo_beats >= 128"});
}

TEST(BadInput, FifosAsInputsAreRefusedNotWaitedOn) {
  TempDir d;
  const fs::path fifo = d.path / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_refused(bitsim("config --config " + fifo.string()), {"config file " + fifo.string(), "FIFO"});
  ASSERT_EQ(bitsim("make-model --shape tiny --out " + (d.path / "m").string()).code, 0);
  for (const char* name : {"config.json", "model.safetensors"}) {
    const fs::path f = d.path / "m" / name;
    fs::rename(f, d.path / "saved");
    ASSERT_EQ(::mkfifo(f.c_str(), 0600), 0);
    expect_refused(bitsim("inspect --model " + (d.path / "m").string()), {f.string(), "FIFO"});
    fs::remove(f);
    fs::rename(d.path / "saved", f);
  }
  expect_refused(bitsim(kTiny + "--tokens 1 --tokenizer " + fifo.string()), {"tokenizer file " + fifo.string(), "FIFO"});
}

// ---- data lost ----------------------------------------------------------------------------

TEST(BadInput, SweepOutputInAMissingFolderIsRefusedBeforeTheWork) {
  for (const char* opt : {"--csv", "--json"}) {
    const Result r = bitsim("sweep --tokens 1 --grid clock_mhz=100,125 " + std::string(opt) + " /nonexistent/x");
    expect_refused(r, {std::string(opt) + " /nonexistent/x", "does not exist"});
    EXPECT_FALSE(has(r.err, "checking the base config")) << r.err;  // nothing ran
  }
}

TEST(BadInput, WritesToAFullDeviceAreErrors) {
  const std::string sweep = "sweep --quiet --check-model '' --tokens 1 --grid clock_mhz=100 ";
  expect_refused(bitsim(sweep + "--csv /dev/full"), {"--csv /dev/full: write failed"});
  expect_refused(bitsim(sweep + "--json /dev/full"), {"--json /dev/full: write failed"});
  expect_refused(bitsim(kTiny + "--tokens 1 --fidelity cycle --vcd /dev/full"), {"vcd file /dev/full: write failed"});
  expect_refused(bitsim(kTiny + "--tokens 1 --no-check --trace /dev/full"), {"trace file /dev/full: write failed"});
}

// Two runs writing one trace at once: each writes its own temporary file and renames it,
// so the file is always one whole JSON document.
TEST(BadInput, ConcurrentTraceWritersLeaveValidJson) {
  TempDir d;
  const fs::path trace = d.path / "t.json";
  std::vector<pid_t> pids;
  for (int i = 0; i < 3; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::string cmd = std::string(BITSIM_BINARY) + " " + kTiny + "--tokens " + std::to_string(1 + i) +
                              " --no-check --trace " + trace.string() + " >/dev/null 2>&1";
      ::_exit(std::system(cmd.c_str()) == 0 ? 0 : 1);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  const auto j = nlohmann::json::parse(slurp(trace));  // throws on a mix of two documents
  EXPECT_EQ(j["otherData"]["format"], "bitsim.trace/1");
  for (const auto& e : fs::directory_iterator(d.path)) EXPECT_EQ(e.path(), trace);  // no temporary left
}

TEST(BadInput, MakeModelRefusesAnExistingCheckpointWithoutForce) {
  TempDir d;
  const std::string out = (d.path / "m").string();
  ASSERT_EQ(bitsim("make-model --shape tiny --seed 1 --out " + out).code, 0);
  const std::string before = slurp(d.path / "m" / "model.safetensors");
  expect_refused(bitsim("make-model --shape tiny --seed 2 --out " + out), {"--out " + out, "--force"});
  EXPECT_EQ(slurp(d.path / "m" / "model.safetensors"), before);
  ASSERT_EQ(bitsim("make-model --shape tiny --seed 2 --force --out " + out).code, 0);
  EXPECT_NE(slurp(d.path / "m" / "model.safetensors"), before);
  // An empty folder is fine without --force.
  fs::create_directories(d.path / "empty");
  EXPECT_EQ(bitsim("make-model --shape tiny --out " + (d.path / "empty").string()).code, 0);
}

// ---- silently wrong -----------------------------------------------------------------------

// A damaged packed checkpoint (make-model --format packed, then one byte changed in place):
// an invalid code 3 in a projection's byte, a NaN weight_scale, a weight_scale of 0: each exit
// 2 naming the file and the tensor, in run (which reads the bytes) and in inspect.
TEST(BadInput, DamagedPackedCheckpointIsRefusedNamingFileAndTensor) {
  TempDir d;
  const fs::path m = d.path / "m", file = m / "model.safetensors";
  const std::string q = "model.layers.0.self_attn.q_proj.weight", qs = q + "_scale";
  for (int damage = 0; damage < 3; ++damage) {
    ASSERT_EQ(bitsim("make-model --shape tiny-2b4t --format packed --force --out " + m.string()).code, 0);
    uint64_t data = 0, at = 0;
    {
      std::ifstream in(file, std::ios::binary);
      in.read(reinterpret_cast<char*>(&data), 8);
      data += 8;
      const auto f = bitsim::model::SafetensorsFile::open(file);
      at = data + f.at(damage == 0 ? q : qs).data_begin;
    }
    const std::string tensor = damage == 0 ? q : qs;
    if (damage == 0) bitsim::test::edit_byte(file, at + 5, [](char c) { return char(c | 0x03); });  // field 0
    if (damage == 1) {  // BF16 0x7FC0, a NaN, little-endian
      bitsim::test::edit_byte(file, at, [](char) { return char(0xc0); });
      bitsim::test::edit_byte(file, at + 1, [](char) { return char(0x7f); });
    }
    if (damage == 2) {
      bitsim::test::edit_byte(file, at, [](char) { return char(0); });
      bitsim::test::edit_byte(file, at + 1, [](char) { return char(0); });
    }
    expect_refused(bitsim("run --no-cache --tokens 1 --prompt hi --quiet --model " + m.string()),
                   {file.string(), "'" + tensor + "'"});
    if (damage > 0) expect_refused(bitsim("inspect --model " + m.string()), {file.string(), "'" + tensor + "'"});
  }
}

TEST(BadInput, LeadingZeroIsDecimalNotOctal) {
  const Result r = bitsim("config --set matmul.pipeline_depth=0100");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "matmul.pipeline_depth = 100")) << r.out;
  expect_refused(bitsim("config --set matmul.pipeline_depth=0x10"), {"matmul.pipeline_depth", "'0x10'", "decimal"});
}

TEST(BadInput, Ddr3KeysAreCheckedNamingTheKey) {
  expect_refused(bitsim("config --set ddr3.trcd=0"), {"ddr3.trcd", "out of range"});
  expect_refused(bitsim("config --set ddr3.scheduler=random"), {"ddr3.scheduler", "frfcfs-port"});
  expect_refused(bitsim(kTiny + "--tokens 1 --set ddr3.columns=1000"), {"ddr3.columns", "power of two"});
  const Result ok = bitsim("config --set ddr3.clock_mhz=666");
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_TRUE(has(ok.out, "ddr3.clock_mhz = 666")) << ok.out;
}

// The class "a memory that can never serve, or serves a device the board cannot hold, is
// refused before anything runs": every relation among the ddr3.* keys (docs/ddr3.md,
// "Relations between the keys"), through the config check of config, run (both fidelities,
// under ddr.model = ddr3 where the memory would hang) and membench, each naming every key of
// its relation; at the edge of each relation the keys load.
TEST(BadInput, Ddr3KeyRelationsAreRefusedNamingBothKeys) {
  struct Case {
    std::string sets;
    std::vector<std::string> needles;
  };
  const std::vector<Case> refused = {
      {"--set ddr3.trfc=4090", {"ddr3.trfc = 4090", "ddr3.trefi = 4064", "never serves"}},
      {"--set ddr3.trefi=158", {"ddr3.trfc = 158", "ddr3.trefi = 158"}},
      {"--set ddr3.trc=25", {"ddr3.trc = 25", "ddr3.tras + ddr3.trp = 19 + 7"}},
      {"--set ddr3.tras=20", {"ddr3.trc = 26", "ddr3.tras + ddr3.trp = 20 + 7"}},
      {"--set ddr3.trefi=8 --set ddr3.trfc=7", {"ddr3.trfc = 7", "row cycle 32", "ddr3.trefi = 8"}},
      {"--set ddr3.banks=2", {"ddr3.banks x ddr3.rows x ddr3.columns x ddr3.bus_bytes = 2 x 32768 x 1024 x 2",
                              "(128 MiB)", "ddr.size_mib = 512"}},
      {"--set ddr.size_mib=1024", {"8 x 32768 x 1024 x 2", "(512 MiB)", "ddr.size_mib = 1024"}},
      {"--set ddr3.rows=8192 --set ddr3.bus_bytes=4", {"8 x 8192 x 1024 x 4", "(256 MiB)"}},
      {"--set ddr3.columns=512", {"8 x 32768 x 512 x 2", "(256 MiB)"}},
  };
  for (const Case& k : refused) {
    SCOPED_TRACE(k.sets);
    expect_refused(bitsim("config " + k.sets), k.needles);
    expect_refused(bitsim("membench --pattern seq-read " + k.sets), k.needles);
    for (const char* fidelity : {"fast", "cycle"})
      expect_refused(bitsim(kTiny + "--tokens 1 --set ddr.model=ddr3 --fidelity " + fidelity + " " + k.sets),
                     k.needles);
  }
  for (const char* edge : {"--set ddr3.trfc=4032", "--set ddr3.trc=27 --set ddr3.tras=20",
                           "--set ddr3.rows=16384 --set ddr3.bus_bytes=4", "--set ddr3.trefi=36 --set ddr3.trfc=2 "
                                                                           "--set ddr3.tras=27 --set ddr3.trc=34"}) {
    const Result r = bitsim(std::string("config ") + edge);
    EXPECT_EQ(r.code, 0) << edge << ": " << r.err;
  }
}

// The class "a memory that can never serve is refused, not run" at the refresh relation
// (docs/ddr3.md: ddr3.trefi >= ddr3.trfc + the row cycle, max(tRAS, tRCD + max(tRTP, CWL + 4
// + tWR)) + tRP): generated timings one and two cycles on either side of the boundary, the
// reported configs among them. A refused one exits 2 before anything runs naming every key of
// the relation with its value; an accepted one runs a tiny token under ddr.model = ddr3 to
// the end within a bounded time (SIGINT at 120 s would end it with 130).
TEST(BadInput, Ddr3RefreshRelationRefusesOrRunsATokenAroundItsBoundary) {
  struct Point {
    uint32_t trefi, tras, twr, tfaw;
  };
  const Point points[] = {{8, 19, 8, 21}, {40, 19, 8, 21}, {200, 19, 8, 21}, {64, 19, 8, 256}, {4064, 19, 8, 21},
                          {90, 40, 8, 21}, {120, 19, 40, 21}};
  int ran = 0, refused = 0;
  for (const Point& p : points) {
    const uint32_t row = std::max(p.tras, 7 + std::max(4u, 6 + 4 + p.twr)) + 7;  // the row cycle
    for (const int off : {-1, 0, 1, 2}) {
      const int64_t trfc = int64_t(p.trefi) - row + off;
      if (trfc < 1 || trfc > 4096) continue;
      const std::string sets = "--set ddr.model=ddr3 --set ddr3.trefi=" + std::to_string(p.trefi) +
                               " --set ddr3.trfc=" + std::to_string(trfc) + " --set ddr3.tras=" +
                               std::to_string(p.tras) + " --set ddr3.trc=" + std::to_string(p.tras + 7) +
                               " --set ddr3.twr=" + std::to_string(p.twr) + " --set ddr3.tfaw=" + std::to_string(p.tfaw);
      SCOPED_TRACE(sets);
      const Result r = bitsim::testing::run_bitsim(kTiny + "--tokens 1 " + sets, "timeout -s INT 120");
      if (off > 0) {
        ++refused;
        expect_refused(r, {"ddr3.trfc = " + std::to_string(trfc), "ddr3.trefi = " + std::to_string(p.trefi),
                           "ddr3.tras = " + std::to_string(p.tras), "ddr3.twr = " + std::to_string(p.twr),
                           "ddr3.trcd = 7", "ddr3.trp = 7"});
        EXPECT_TRUE(r.out.empty()) << r.out;  // refused before anything ran
      } else {
        ++ran;
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_TRUE(has(r.out, "tokens")) << r.out;
      }
    }
  }
  EXPECT_GE(ran, 10);
  EXPECT_GE(refused, 10);
}

// The class "the capacity of the KV cache is explained by what takes it": every refusal of a
// prompt or a context the CMA cannot hold (a prefill of P vectors, an INT4 or INT8 cache, a
// smaller CMA; the prompt alone or the prompt with the tokens to generate) names what else
// took the room, with the sizes of host::MemoryAccount, and the KV bytes per position; and
// bitsim inspect shows the same account with the P its activation slots hold.
TEST(BadInput, AKvCapacityRefusalNamesWhatTookTheRoom) {
  const std::string online = "--set attention.variant=online-softmax --set kv.format=int4 ";
  struct Case {
    std::string sets;
    int prompt, tokens;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {online + "--set prefill.tokens_per_pass=64", 1199, 1,
       {"prompt: 1200 tokens with BOS, over the board's KV cache of 448 positions", "kv.format = int4",
        "39936 bytes of KV per position", "1200 would take", "cma.mib = 192", "packed weight rows 140.87 MiB",
        "activation slots 25.69 MiB", "prefill.tokens_per_pass = 64", "call buffers"}},
      {online + "--set prefill.tokens_per_pass=64", 440, 20,
       {"context: the prompt (441 tokens with BOS) + 20 tokens", "461 would take", "prefill.tokens_per_pass = 64"}},
      {"--set cma.mib=150", 200, 1,
       {"kv.format = int8", "73728 bytes of KV per position", "cma.mib = 150", "packed weight rows",
        "prefill.tokens_per_pass = 1"}},
      // Room in the memory (the Zybo's 640 MiB): the limit is the unit's, and it is named as such.
      {"--config " + std::string(BITSIM_SOURCE_DIR) + "/configs/zybo-z7-20.toml", 600, 1,
       {"601 positions would take", "which the", "would hold", "the limit of 512 positions is the attention unit's",
        "kv.format = int8", "reaches 2048"}},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.sets);
    const Result r = bitsim("run --quiet --prompt " + std::string(size_t(k.prompt), 'a') + " --tokens " +
                            std::to_string(k.tokens) + " " + k.sets);
    expect_refused(r, k.needles);
  }
  const Result in = bitsim("inspect " + online + "--set prefill.tokens_per_pass=64");
  ASSERT_EQ(in.code, 0) << in.err;
  EXPECT_TRUE(has(in.out, "x vectors: prefill.tokens_per_pass = 64")) << in.out;
  EXPECT_TRUE(has(in.out, "results of 64 vectors")) << in.out;
}

// The class "a sweep whose point fails keeps the points that ran": a grid whose later point
// cannot hold the context (P = 64 takes the CMA the INT4 cache needs at T = 460) writes the
// points that ran to --csv and --json marked partial, names the failed point and why (what
// took the room), and exits 2; the same with worker processes.
TEST(BadInput, ASweepPointThatFailsKeepsThePointsThatRanMarkedPartial) {
  TempDir d;
  for (const char* jobs : {"1", "2"}) {
    SCOPED_TRACE(jobs);
    const fs::path csv = d.path / (std::string("s") + jobs + ".csv"), json = d.path / (std::string("s") + jobs + ".json");
    const Result r = bitsim("sweep --quiet --check-model '' --tokens 1 --context 460 --jobs " + std::string(jobs) +
                            " --set attention.variant=online-softmax --set kv.format=int4 --grid "
                            "prefill.tokens_per_pass=1,64 --csv " + csv.string() + " --json " + json.string());
    expect_refused(r, {"1 of 2 points failed", "point prefill.tokens_per_pass=64", "context 460..460",
                       "activation slots", "prefill.tokens_per_pass = 64", csv.string()});
    const std::string table = slurp(csv);
    EXPECT_TRUE(has(table, "\n1,")) << table;     // the point that ran
    EXPECT_FALSE(has(table, "\n64,")) << table;   // not the one that failed
    EXPECT_TRUE(has(table, "# partial: 1 of 2 points, the point prefill.tokens_per_pass=64: context 460..460"))
        << table;
    const auto j = nlohmann::json::parse(slurp(json));
    EXPECT_TRUE(j["partial"].get<bool>());
    EXPECT_EQ(j["points"].size(), 1u);
    ASSERT_EQ(j["failed"].size(), 1u);
    EXPECT_TRUE(has(j["failed"][0].get<std::string>(), "prefill.tokens_per_pass=64: context 460..460"));
  }
}

// The class "an invalid grid point is handled the same way for every key": a value that no
// point of the grid accepts, whether its key's range, a relation with another key or a
// choice refuses it, refuses the sweep before anything runs (exit 2, no CSV), naming the
// grid point, the key and value, and the config's reason with the keys it relates.
TEST(BadInput, AnInvalidGridValueIsRefusedTheSameWayForEveryKey) {
  TempDir d;
  const fs::path csv = d.path / "g.csv";
  struct Case {
    std::string grid;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"clock.mhz=100,0", {"clock.mhz", "= 0 is out of range"}},
      {"ddr3.trfc=158,4090", {"grid point ddr3.trfc=4090", "ddr3.trfc = 4090", "ddr3.trefi = 4064"}},
      {"ddr3.trefi=4064,100", {"grid point ddr3.trefi=100", "ddr3.trefi = 100"}},
      {"ddr3.banks=8,2", {"grid point ddr3.banks=2", "ddr.size_mib = 512"}},
      {"cma.mib=192,500", {"grid point cma.mib=500", "cma.mib = 500", "cma.base"}},
      {"dma.mm2s_fifo_beats=64,4", {"grid point dma.mm2s_fifo_beats=4", "dma.max_burst_beats = 16"}},
      {"timing.pass_mhz=125,300", {"grid point timing.pass_mhz=300", "timing.fail_mhz = 142.86"}},
      {"kv.format=int8,int4", {"grid point kv.format=int4", "attention.variant = online-softmax"}},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.grid);
    const Result r = bitsim("sweep --quiet --check-model '' --tokens 1 --grid " + k.grid + " --csv " + csv.string());
    expect_refused(r, k.needles);
    EXPECT_FALSE(fs::exists(csv));
  }
}

// The class "an output never replaces an input": every output option of every command that
// reads a file (a board config, a campaign), given the input by its path, another spelling
// of it, a symlink to it or a hard link to it, is refused before the work (exit 2, naming
// the option's output and the input), and the input keeps its bytes.
TEST(BadInput, NoOutputOfAnyCommandReplacesAnInput) {
  TempDir d;
  const fs::path config = d.path / "board.toml", campaign = d.path / "camp" / "campaign.json";
  const std::string config_text = "# the user's board\n[clock]\nmhz = 125\n", campaign_text = "{}\n";
  fs::create_directories(campaign.parent_path());
  std::ofstream(config) << config_text;
  std::ofstream(campaign) << campaign_text;
  struct Output {
    std::string command;  // {out}: the output's path
    fs::path input;
    std::string input_name;
  };
  const std::string run = kTiny + "--tokens 1 --config " + config.string() + " ";
  const std::string sweep = "sweep --quiet --check-model '' --tokens 1 --grid clock.mhz=100 --config " + config.string();
  const std::vector<Output> outputs = {
      {run + "--record-mmio {out}", config, "board config"},
      {run + "--trace {out}", config, "board config"},
      {run + "--layers-csv {out}", config, "board config"},
      {run + "--fidelity cycle --dram-trace {out}", config, "board config"},
      {run + "--fidelity cycle --vcd {out}", config, "board config"},
      {"bench --quick --quiet --json {out} --config " + config.string(), config, "--config"},
      {"regress --quiet --only tiny-fast --junit {out} --config " + config.string(), config, "--config"},
      {sweep + " --csv {out}", config, "--config"},
      {sweep + " --json {out}", config, "--config"},
      {sweep + " --out " + (d.path / "c2").string() + " --slurm-script {out}", config, "--config"},
      {"sweep merge " + campaign.parent_path().string() + " --csv {out}", campaign, "campaign file"},
      {"sweep merge " + campaign.parent_path().string() + " --json {out}", campaign, "campaign file"},
  };
  for (const Output& o : outputs) {
    const fs::path link = d.path / "link", hard = d.path / "hard";
    fs::remove(link), fs::remove(hard);
    fs::create_symlink(o.input, link);
    fs::create_hard_link(o.input, hard);
    const fs::path respelled = o.input.parent_path() / "." / o.input.filename();
    for (const fs::path& out : {o.input, respelled, link, hard}) {
      std::string command = o.command;
      command.replace(command.find("{out}"), 5, out.string());
      SCOPED_TRACE(command);
      expect_refused(bitsim(command), {out.string(), o.input_name, "must not replace"});
    }
    EXPECT_EQ(slurp(config), config_text);
    EXPECT_EQ(slurp(campaign), campaign_text);
  }
}

TEST(BadInput, GridAxesOverOneKeyAreRefused) {
  const std::string sweep = "sweep --quiet --check-model '' --tokens 1 ";
  expect_refused(bitsim(sweep + "--grid clock_mhz=100,200 --grid clock.mhz=150"), {"'clock.mhz' has two axes"});
  expect_refused(bitsim(sweep + "--grid clock.mhz=100 --grid clock.mhz=150"), {"'clock.mhz' has two axes"});
}

TEST(BadInput, ConfigThatIsAFolderIsRefused) {
  TempDir d;
  expect_refused(bitsim("config --config " + d.path.string()), {"config file " + d.path.string(), "is a folder"});
}

TEST(BadInput, NegativeAndHugeNumbersAreRefusedNotWrapped) {
  expect_refused(bitsim(kTiny + "--seed -1"), {"--seed", "'-1'", "out of range"});
  expect_refused(bitsim(kTiny + "--seed 99999999999999999999"), {"--seed", "out of range"});
  expect_refused(bitsim("make-model --seed -1 --out /tmp/never"), {"--seed", "'-1'"});
  expect_refused(bitsim("inspect --model synthetic:tiny:-1"), {"synthetic:tiny:-1", "seed", "'-1'"});
  expect_refused(bitsim("inspect --model synthetic:tiny:99999999999999999999"), {"seed", "out of range"});
  expect_refused(bitsim(kTiny + "--fidelity cycle --vcd /tmp/never.vcd --vcd-window 0:-1"),
                 {"--vcd-window '0:-1'", "END", "'-1'"});
  expect_refused(bitsim(kTiny + "--fidelity cycle --vcd /tmp/never.vcd --vcd-window 010:9"),
                 {"--vcd-window '010:9'", "END must be after START"});  // 010 is ten, not eight
  EXPECT_FALSE(fs::exists("/tmp/never.vcd"));
}

// ---- unclear ------------------------------------------------------------------------------

TEST(BadInput, MessagesNameTheThingAtFault) {
  TempDir d;
  ASSERT_EQ(bitsim("make-model --shape tiny --out " + (d.path / "m").string()).code, 0);
  fs::remove(d.path / "m" / "config.json");
  fs::create_directories(d.path / "m" / "config.json");
  expect_refused(bitsim("inspect --model " + (d.path / "m").string()), {"config.json", "is a folder"});
  expect_refused(bitsim(kTiny + "--tokenizer " + d.path.string()), {"tokenizer file " + d.path.string(), "is a folder"});

  const Result nan = bitsim(kTiny + "--temperature nan");
  expect_refused(nan, {"--temperature", "'nan' is not a number"});
  EXPECT_FALSE(has(nan.err, "loading")) << nan.err;  // refused before any work

  const Result topk = bitsim(kTiny + "--top-k -1");
  expect_refused(topk, {"--top-k", "'-1'", "0..2147483647"});
  EXPECT_LT(topk.err.size(), 200u) << topk.err;  // no 309-digit bound

  expect_refused(bitsim(kTiny + "--tokens abc"), {"--tokens", "'abc' is not a decimal integer", "0..2047"});
  expect_refused(bitsim("sweep --quiet --check-model '' --tokens 1 --grid clock_mhz=100,5000"),
                 {"--grid clock.mhz", "5000", "out of range"});
  const Result cma = bitsim("run --model synthetic:bitnet-large --prompt hi --tokens 1 --set cma.mib=1 --quiet");
  expect_refused(cma, {"cma.mib is 1.0 MiB"});
  EXPECT_FALSE(has(cma.err, "cma.bytes")) << cma.err;

  std::ofstream(d.path / "bad.model") << "not a tokenizer";
  const Result sp = bitsim(kTiny + "--tokenizer " + (d.path / "bad.model").string());
  expect_refused(sp, {"tokenizer file " + (d.path / "bad.model").string(), "not a SentencePiece model"});
  EXPECT_FALSE(has(sp.err, ".cc(")) << sp.err;  // no library source position

  // A tokenizer.json whose merge names a token the vocabulary lacks: the file and the field.
  std::ifstream fixture(std::string(BITSIM_SOURCE_DIR) + "/tests/data/bpe/llama3-small.json");
  std::string json((std::istreambuf_iterator<char>(fixture)), std::istreambuf_iterator<char>());
  json.replace(json.find("\"merges\": ["), 11, "\"merges\": [\"q zz\", ");
  std::ofstream(d.path / "tokenizer.json") << json;
  expect_refused(bitsim(kTiny + "--tokenizer " + (d.path / "tokenizer.json").string()),
                 {(d.path / "tokenizer.json").string() + ": model.merges[0]: the token \"zz\" is not in model.vocab"});
}

}  // namespace
