// The simulated board end to end: bitnet on the SystemC board, every token's logits
// compared bit for bit with the golden reference.
#include "sim/board_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "sim/board_config.h"

namespace bitsim::sim {
namespace {

BoardRunRequest request(const std::string& model, const std::string& prompt, int tokens) {
  BoardRunRequest r{RunRequest{}, board_params()};
  r.run.model = model;
  r.run.prompt = prompt;
  r.run.tokens = tokens;
  return r;
}

void expect_all_equal(const BoardRunResult& r) {
  EXPECT_TRUE(r.mismatch.empty()) << r.mismatch;
  for (const auto& t : r.tokens) {
    ASSERT_TRUE(t.logits_equal.has_value());
    EXPECT_TRUE(*t.logits_equal) << "token " << t.index;
    EXPECT_GT(t.matmul_ms, 0.0);
    EXPECT_GT(t.attention_ms, 0.0);
    EXPECT_GT(t.cpu_ms, 0.0);
    EXPECT_DOUBLE_EQ(t.total_ms, t.matmul_ms + t.attention_ms + t.cpu_ms);
    EXPECT_GT(t.bytes_read, 0u);
  }
}

TEST(BoardRun, Tiny64TokensBitIdenticalAndReproducible) {
  // BOS + 4 prompt bytes + 59 generated + ... = 64 steps through the board.
  const auto a = run_board(request("synthetic:tiny", "Tiny", 59));
  ASSERT_EQ(a.tokens.size(), 64u);
  expect_all_equal(a);
  // Attention time grows with the context; matmul time does not.
  EXPECT_GT(a.tokens[63].attention_ms, a.tokens[0].attention_ms);
  EXPECT_DOUBLE_EQ(a.tokens[63].matmul_ms, a.tokens[1].matmul_ms);
  // A second simulation in the same process: same tokens, same simulated times.
  const auto b = run_board(request("synthetic:tiny", "Tiny", 59));
  ASSERT_EQ(b.tokens.size(), a.tokens.size());
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    EXPECT_EQ(a.tokens[i].token_id, b.tokens[i].token_id) << i;
    EXPECT_EQ(a.tokens[i].total_ms, b.tokens[i].total_ms) << i;
    EXPECT_EQ(a.tokens[i].bytes_read, b.tokens[i].bytes_read) << i;
  }
}

TEST(BoardRun, BitnetLargeTwoTokensBitIdentical) {
  auto r = request("synthetic:bitnet-large", "A", 1);  // BOS, 'A', one generated token
  const auto res = run_board(std::move(r));
  ASSERT_EQ(res.tokens.size(), 3u);
  expect_all_equal(res);
  // The weights image is read once per token: at least 141 MB (the packed image).
  EXPECT_GT(res.tokens[1].bytes_read, 147000000u);
  std::printf("[sim] bitnet-large on the board: token 1 %.3f ms (matmul %.3f, attention %.3f, cpu %.3f) "
              "simulated; %.0f ms wall\n", res.tokens[1].total_ms, res.tokens[1].matmul_ms,
              res.tokens[1].attention_ms, res.tokens[1].cpu_ms, res.tokens[1].wall_ms);
}

TEST(BoardRun, CorruptedWeightByteIsCaughtAndLocated) {
  auto r = request("synthetic:tiny", "Hi", 2);
  // Byte 0 of lane 0's lm_head rows holds the trits of elements 0..4 of vocabulary row 0:
  // flipping its low bit changes element 0's trit, hence acc_0 of the lm_head (x_0 != 0).
  r.before_step = [](BoardSession& s, int step) {
    if (step == 0) s.poke_ddr(s.lm_head_addr(), 0x01);
  };
  const auto res = run_board(std::move(r));
  ASSERT_FALSE(res.mismatch.empty());
  EXPECT_FALSE(res.all_equal);
  ASSERT_EQ(res.tokens.size(), 1u);  // the run stops at the first token
  EXPECT_FALSE(*res.tokens[0].logits_equal);
  EXPECT_NE(res.mismatch.find("step lm_head_acc, element 0:"), std::string::npos) << res.mismatch;
}

TEST(BoardRun, CorruptedKvEntryIsCaughtInAttention) {
  auto r = request("synthetic:tiny", "Hello", 2);
  // Before step 3, poison the V row of position 1 (written by step 1) of layer 1, head 0:
  // step 3's attention reads it (T = 4).
  r.before_step = [](BoardSession& s, int step) {
    if (step == 3)
      for (int d = 0; d < 96; ++d) s.poke_ddr(s.v_cache_addr(1, 0) + 96 + d, 0x55);
  };
  const auto res = run_board(std::move(r));
  ASSERT_FALSE(res.mismatch.empty());
  ASSERT_EQ(res.tokens.size(), 4u);
  EXPECT_TRUE(*res.tokens[2].logits_equal);
  EXPECT_NE(res.mismatch.find("layer 1, step attn_out"), std::string::npos) << res.mismatch;
}

TEST(BoardRun, CmaRefusalNamesTheSizes) {
  auto r = request("synthetic:bitnet-large", "A", 1);
  r.params.set("cma.mib=128");
  try {
    run_board(std::move(r));
    FAIL() << "bitnet-large fitted in 128 MiB";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("contiguous memory"), std::string::npos) << w;
    EXPECT_NE(w.find("weights image 141.5 MiB"), std::string::npos) << w;  // page-aligned buffers
  }
  auto i8 = request("synthetic:bitnet-large", "A", 1);
  i8.params.set("model.int8_lm_head=true");
  EXPECT_THROW(run_board(std::move(i8)), Error);
}

TEST(BoardRun, ContextOverTheKvCacheIsRefusedBeforeRunning) {
  EXPECT_THROW(run_board(request("synthetic:tiny", std::string(300, 'x'), 300)), Error);
  auto r = request("synthetic:tiny", std::string(500, 'x'), 20);
  r.run.stop_at_capacity = true;
  const auto res = run_board(std::move(r));
  EXPECT_TRUE(res.stopped_at_capacity);
  EXPECT_EQ(res.tokens.size(), 512u);
  EXPECT_TRUE(res.mismatch.empty()) << res.mismatch;
}

TEST(BoardRun, NoCheckLeavesLogitsUnchecked) {
  auto r = request("synthetic:tiny", "ab", 1);
  r.check = false;
  const auto res = run_board(std::move(r));
  for (const auto& t : res.tokens) EXPECT_FALSE(t.logits_equal.has_value());
}

TEST(BoardRun, NarrowLengthRegisterSplitsCallsAndStaysExact) {
  auto r = request("synthetic:tiny", "ab", 1);
  r.params.set("dma.length_bits=12");  // 4095-byte transfers: the lm_head needs several calls
  const auto res = run_board(std::move(r));
  expect_all_equal(res);
  auto base = run_board(request("synthetic:tiny", "ab", 1));
  EXPECT_GT(res.tokens[0].dma_calls, base.tokens[0].dma_calls);
}

// ddr3.fast_reuse = approximate (docs/ddr3.md, "Approximate reuse"): a record is reused at
// the same addresses whatever the DDR3 state, so fewer batches are clocked than with exact
// reuse; the logits are still the golden reference's (only times are approximate), the run
// says it is approximate, and its times stay near the exact run's. Under the wall, which
// carries no state, the key changes nothing. The cycle fidelity is exact whatever it says.
TEST(BoardRun, ApproximateDdr3ReuseClocksFewerBatchesAndSaysSo) {
  auto run = [](Fidelity f, const std::vector<std::string>& sets) {
    BoardRunRequest r = request("synthetic:tiny", "Approximate", 8);
    r.fidelity = f;
    for (const auto& s : sets) r.params.set(s, "test");
    return run_board(std::move(r));
  };
  const BoardRunResult exact = run(Fidelity::kFast, {"ddr.model=ddr3"});
  const BoardRunResult approx = run(Fidelity::kFast, {"ddr.model=ddr3", "ddr3.fast_reuse=approximate"});
  EXPECT_FALSE(exact.approximate);
  EXPECT_TRUE(approx.approximate);
  expect_all_equal(approx);
  ASSERT_EQ(approx.tokens.size(), exact.tokens.size());
  EXPECT_LT(approx.fast.oracle_runs * 2, exact.fast.oracle_runs);
  EXPECT_GT(approx.fast.cache_hits, exact.fast.cache_hits);
  double worst = 0;
  for (size_t i = 0; i < exact.tokens.size(); ++i) {
    EXPECT_EQ(approx.tokens[i].token_id, exact.tokens[i].token_id) << i;
    EXPECT_EQ(approx.tokens[i].bytes_read, exact.tokens[i].bytes_read) << i;
    worst = std::max(worst, std::abs(approx.tokens[i].total_ms / exact.tokens[i].total_ms - 1));
  }
  EXPECT_LT(worst, 0.02);
  std::printf("[sim] ddr3, tiny: approximate reuse clocked %llu batches against %llu; worst token time %.4f%% off\n",
              static_cast<unsigned long long>(approx.fast.oracle_runs),
              static_cast<unsigned long long>(exact.fast.oracle_runs), 100 * worst);

  const BoardRunResult wall = run(Fidelity::kFast, {});
  const BoardRunResult wall_marked = run(Fidelity::kFast, {"ddr3.fast_reuse=approximate"});
  EXPECT_FALSE(wall_marked.approximate);
  EXPECT_EQ(wall_marked.fast.oracle_runs, wall.fast.oracle_runs);
  for (size_t i = 0; i < wall.tokens.size(); ++i) EXPECT_EQ(wall_marked.tokens[i].total_ms, wall.tokens[i].total_ms) << i;

  const BoardRunResult cycle = run(Fidelity::kCycle, {"ddr.model=ddr3", "ddr3.fast_reuse=approximate"});
  EXPECT_FALSE(cycle.approximate);
  for (size_t i = 0; i < exact.tokens.size(); ++i) EXPECT_EQ(cycle.tokens[i].total_ms, exact.tokens[i].total_ms) << i;
}

}  // namespace
}  // namespace bitsim::sim
