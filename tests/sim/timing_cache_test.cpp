// The persistent timing cache (sim/timing_cache.h): a run that finds the fast board's batch
// timings of an earlier run of the same build and board config runs no batch on the clocked
// board and gives the same times, transfers and logits; a longer context adds only its new
// shapes; another board config or another build is another entry; damaged bytes are never
// used. Every test has its own cache folder.
#include "sim/timing_cache.h"

#include <gtest/gtest.h>

#include "support/edit_byte.h"
#include "support/temp_dir.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "model/synthetic.h"
#include "model/tokenizer.h"
#include "sim/board_config.h"
#include "sim/board_run.h"
#include "sim/simulation.h"
#include "sim/startup.h"

using namespace bitsim;
using namespace bitsim::sim;
namespace fs = std::filesystem;

namespace {

using bitsim::test::TempDir;

BoardRunRequest request(const fs::path& cache, int tokens) {
  BoardRunRequest req{RunRequest{}, board_params()};
  req.run.model = "synthetic:tiny";
  req.run.prompt = "Timing";
  req.run.tokens = tokens;
  req.run.cache.enabled = true;
  req.run.cache.dir = cache;
  req.keep_transfers = true;
  return req;
}

void expect_same_run(const BoardRunResult& a, const BoardRunResult& b) {
  ASSERT_EQ(a.tokens.size(), b.tokens.size());
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    EXPECT_EQ(a.tokens[i].token_id, b.tokens[i].token_id) << "token " << i;
    EXPECT_EQ(a.tokens[i].matmul_ms, b.tokens[i].matmul_ms) << "token " << i;
    EXPECT_EQ(a.tokens[i].attention_ms, b.tokens[i].attention_ms) << "token " << i;
    EXPECT_EQ(a.tokens[i].total_ms, b.tokens[i].total_ms) << "token " << i;
  }
  EXPECT_TRUE(a.transfers == b.transfers);
  EXPECT_FALSE(a.transfers.empty());
  EXPECT_TRUE(b.all_equal);
}

// A tiny model's fast board after a few tokens, with its timing cache filled.
struct TinyBoard {
  model::TernaryModel m;
  model::KvScales scales;
  std::unique_ptr<Simulation> sim;
  explicit TinyBoard(int tokens) {
    model::SyntheticSource src(model::Shape::Tiny, 1);
    auto tok = model::make_byte_tokenizer(src.config().vocab_size);
    PreparedModel p = prepare_model(src, golden::calibration_tokens(*tok, src.config().bos_token_id), 2, nullptr);
    m = std::move(p.model);
    scales = p.scales;
    sim = make_simulation(make_sim_config(board_params()), m, scales, SimulationOptions(Fidelity::kFast));
    sim->loop().load_weights();
    sim->run([&](host::TokenLoop& loop) {
      loop.init();
      for (int t = 0; t < tokens; ++t) loop.step(1 + t, nullptr);
    });
  }
};

}  // namespace

TEST(TimingCache, ASecondRunTimesEveryBatchFromTheCacheWithTheSameTimesAndTransfers) {
  TempDir d;
  const BoardRunResult first = run_board(request(d.path, 4));
  const BoardRunResult second = run_board(request(d.path, 4));
  EXPECT_EQ(first.timing_entries_cached, 0u);
  EXPECT_GT(first.fast.oracle_runs, 0u);
  EXPECT_EQ(second.timing_entries_cached, first.fast.oracle_runs);
  EXPECT_EQ(second.fast.oracle_runs, 0u);
  EXPECT_EQ(second.fast.cache_hits, second.fast.batches);
  expect_same_run(first, second);
  // And the same as a run without any cache.
  BoardRunRequest none = request(d.path, 4);
  none.run.cache.enabled = false;
  expect_same_run(run_board(none), second);
}

TEST(TimingCache, ALongerContextTimesOnlyItsNewShapesAndStoresThem) {
  TempDir d;
  const BoardRunResult shorter = run_board(request(d.path, 2));
  const BoardRunResult longer = run_board(request(d.path, 6));
  EXPECT_EQ(longer.timing_entries_cached, shorter.fast.oracle_runs);
  EXPECT_GT(longer.fast.oracle_runs, 0u);                          // the new contexts' attention batches
  EXPECT_LT(longer.fast.oracle_runs, shorter.fast.oracle_runs);    // not the matmul shapes again
  const BoardRunResult again = run_board(request(d.path, 6));
  EXPECT_EQ(again.fast.oracle_runs, 0u);
  EXPECT_EQ(again.timing_entries_cached, shorter.fast.oracle_runs + longer.fast.oracle_runs);
  expect_same_run(longer, again);
}

TEST(TimingCache, AnotherBoardConfigIsAnotherEntry) {
  TempDir d;
  run_board(request(d.path, 2));
  BoardRunRequest other = request(d.path, 2);
  other.params.set("clock.mhz=200");
  const BoardRunResult r = run_board(other);
  EXPECT_EQ(r.timing_entries_cached, 0u);
  EXPECT_GT(r.fast.oracle_runs, 0u);
  EXPECT_TRUE(r.all_equal);
}

TEST(TimingCache, TheKeyFollowsEveryConfigFieldAndTheExecutable) {
  const hw::BoardConfig board = make_sim_config(board_params()).board;
  const std::string k = timing_cache_key(board, "exe-a");
  EXPECT_EQ(k, timing_cache_key(board, "exe-a"));
  EXPECT_NE(k, timing_cache_key(board, "exe-b"));
  hw::BoardConfig c = board;
  c.ddr.wall_bytes_per_s += 1;
  EXPECT_NE(k, timing_cache_key(c, "exe-a"));
  c = board;
  c.hp_ports = 1;
  EXPECT_NE(k, timing_cache_key(c, "exe-a"));
  c = board;
  c.attention_dma_sg = !c.attention_dma_sg;  // a field without a config key
  EXPECT_NE(k, timing_cache_key(c, "exe-a"));
  // The running executable's identity is its content hash (32 hex digits), the same twice.
  const std::string exe = executable_identity(nullptr);
  EXPECT_EQ(exe.size(), 32u);
  EXPECT_EQ(exe, executable_identity(nullptr));
}

TEST(TimingCache, AnImportAddsEachEntryOnceAndExportsTheSameBytes) {
  TinyBoard a(3);
  const std::vector<uint8_t> bytes = a.sim->fast_board()->export_timing();
  ASSERT_GT(a.sim->fast_board()->timing_entries(), 0u);
  TinyBoard fresh(0);
  hw::FastBoard& b = *fresh.sim->fast_board();
  const size_t before = b.timing_entries();
  b.import_timing(bytes.data(), bytes.size());
  EXPECT_EQ(b.timing_entries(), a.sim->fast_board()->timing_entries());
  EXPECT_EQ(b.timing_entries_imported(), a.sim->fast_board()->timing_entries() - before);
  // The same bytes again add nothing; an export of the imported board is the same bytes.
  b.import_timing(bytes.data(), bytes.size());
  EXPECT_EQ(b.timing_entries(), a.sim->fast_board()->timing_entries());
  EXPECT_EQ(b.export_timing(), bytes);
}

TEST(TimingCache, DamagedBytesAreRefusedWholeAndAddNothing) {
  TinyBoard a(2);
  const std::vector<uint8_t> bytes = a.sim->fast_board()->export_timing();
  TinyBoard fresh(0);
  hw::FastBoard& b = *fresh.sim->fast_board();
  const size_t before = b.timing_entries();
  EXPECT_THROW(b.import_timing(bytes.data(), bytes.size() - 1), Error);  // truncated
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_THROW(b.import_timing(longer.data(), longer.size()), Error);    // trailing bytes
  std::vector<uint8_t> foreign = bytes;
  foreign[0] ^= 1;
  EXPECT_THROW(b.import_timing(foreign.data(), foreign.size()), Error);  // not a timing cache
  std::vector<uint8_t> huge = bytes;
  for (int i = 8; i < 16; ++i) huge[size_t(i)] = 0xFF;                   // an entry count past the bytes
  EXPECT_THROW(b.import_timing(huge.data(), huge.size()), Error);
  EXPECT_EQ(b.timing_entries(), before);
  EXPECT_EQ(b.timing_entries_imported(), 0u);
}

TEST(TimingCache, ADamagedEntryFileIsWarnedAboutAndTimedAgain) {
  TempDir d;
  const BoardRunResult first = run_board(request(d.path, 2));
  fs::path entry;
  for (const auto& e : fs::directory_iterator(d.path))
    if (e.path().filename().string().rfind("timing-", 0) == 0 && e.path().extension() == ".bin") entry = e.path();
  ASSERT_FALSE(entry.empty());
  test::flip_byte(entry, fs::file_size(entry) - 9, 0x5A);
  std::vector<std::string> warnings;
  BoardRunCallbacks cb;
  cb.on_warning = [&](const std::string& w) { warnings.push_back(w); };
  const BoardRunResult again = run_board(request(d.path, 2), cb);
  EXPECT_EQ(again.timing_entries_cached, 0u);
  EXPECT_EQ(again.fast.oracle_runs, first.fast.oracle_runs);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("timing-"), std::string::npos) << warnings[0];
  expect_same_run(first, again);
  EXPECT_EQ(run_board(request(d.path, 2)).fast.oracle_runs, 0u);  // the rebuilt entry is good
}
