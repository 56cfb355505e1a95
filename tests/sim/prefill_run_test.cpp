// Prefill (docs/prefill.md): the prompt in chunks of P through the simulated board. With any
// P the KV cache after the prompt, the last prompt position's logits and every generated
// token's logits and id are the P = 1 run's and the golden reference's; with
// prefill.all_logits every prompt position's logits too; both fidelities give the same
// figures.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/attention_stream.h"
#include "model/model_file.h"
#include "sim/board_config.h"
#include "sim/board_run.h"

namespace bitsim::sim {
namespace {

struct PrefillOutcome {
  BoardRunResult res;
  std::vector<uint8_t> kv;  // every (layer, K/V head)'s K and V rows of the prompt, after the prompt
};

PrefillOutcome run(int P, const std::vector<std::string>& sets = {}, Fidelity fidelity = Fidelity::kFast,
                   const std::string& prompt = "The prompt runs in chunks", int tokens = 4, float temperature = 0,
                   const std::string& model = "synthetic:tiny") {
  BoardRunRequest r{RunRequest{}, board_params()};
  r.run.model = model;
  r.run.prompt = prompt;
  r.run.tokens = tokens;
  r.run.sampler.temperature = temperature;
  r.fidelity = fidelity;
  r.params.set("prefill.tokens_per_pass=" + std::to_string(P), "test");
  for (const auto& s : sets) r.params.set(s, "test");
  const model::ModelConfig mc = model::open_model_source(r.run.model)->config();
  PrefillOutcome out;
  int prompt_tokens = 0;
  r.before_step = [&](BoardSession& s, int step) {
    // Called before each step; the first generated step sees the prompt's KV cache.
    if (step == 0 || !out.kv.empty()) return;
    if (step != prompt_tokens) return;
    for (int l = 0; l < mc.num_layers; ++l)
      for (int h = 0; h < mc.num_kv_heads; ++h)  // the K/V heads' areas
        for (const uint64_t a : {s.k_cache_addr(l, h), s.v_cache_addr(l, h)}) {
          const auto b = s.read_ddr(a, size_t(prompt_tokens) * model::kBoardHeadDim);
          out.kv.insert(out.kv.end(), b.begin(), b.end());
        }
  };
  // The prompt's length is known once the run is planned: run it once to learn it.
  {
    BoardRunRequest probe = r;
    probe.before_step = {};
    probe.run.tokens = 0;
    probe.check = false;
    probe.fidelity = Fidelity::kTimingOnly;
    prompt_tokens = run_board(std::move(probe)).prompt_tokens;
  }
  out.res = run_board(std::move(r));
  return out;
}

std::vector<uint64_t> digests(const BoardRunResult& r, bool generated) {
  std::vector<uint64_t> d;
  for (const auto& t : r.tokens)
    if (t.generated == generated) d.push_back(t.logits_digest);
  return d;
}

std::vector<int> generated_ids(const BoardRunResult& r) {
  std::vector<int> ids;
  for (const auto& t : r.tokens)
    if (t.generated) ids.push_back(t.token_id);
  return ids;
}

void expect_checked(const BoardRunResult& r) {
  EXPECT_TRUE(r.mismatch.empty()) << r.mismatch;
  for (const auto& t : r.tokens) {
    EXPECT_EQ(t.logits_equal.has_value(), t.has_logits) << "token " << t.index;
    if (t.logits_equal) EXPECT_TRUE(*t.logits_equal) << "token " << t.index;
  }
}

TEST(PrefillRun, KvCacheLastPromptLogitsAndGeneratedTokensAreTheP1Runs) {
  const PrefillOutcome one = run(1);
  ASSERT_GT(one.res.prompt_tokens, 16);
  ASSERT_FALSE(one.kv.empty());
  expect_checked(one.res);
  for (const int P : {4, 8, 13}) {
    const PrefillOutcome p = run(P);
    SCOPED_TRACE("P = " + std::to_string(P));
    expect_checked(p.res);
    ASSERT_EQ(p.res.tokens.size(), one.res.tokens.size());
    EXPECT_EQ(p.kv, one.kv);
    const size_t last = size_t(one.res.prompt_tokens) - 1;
    EXPECT_TRUE(p.res.tokens[last].has_logits);
    EXPECT_EQ(p.res.tokens[last].logits_digest, one.res.tokens[last].logits_digest);
    EXPECT_EQ(digests(p.res, true), digests(one.res, true));
    EXPECT_EQ(generated_ids(p.res), generated_ids(one.res));
    // Chunks of P, the last shorter; only each chunk's last position has logits.
    for (size_t i = 0; i <= last; ++i) {
      const int chunk = int(i) / P;
      const int V = std::min(P, one.res.prompt_tokens - chunk * P);
      EXPECT_EQ(p.res.tokens[i].chunk_tokens, V) << i;
      EXPECT_EQ(p.res.tokens[i].phase, "prefill");
      EXPECT_EQ(p.res.tokens[i].has_logits, int(i) % P == V - 1 || i == last) << i;
    }
    EXPECT_EQ(p.res.tokens.back().phase, "decode");
    // The weights pass once per chunk: the time to the first token falls with P.
    EXPECT_LT(p.res.figures.ttft_ms, one.res.figures.ttft_ms);
    EXPECT_GT(p.res.figures.prefill_tok_s, one.res.figures.prefill_tok_s);
  }
}

TEST(PrefillRun, AllLogitsGivesEveryPromptPositionsP1Logits) {
  const PrefillOutcome one = run(1);
  const PrefillOutcome p = run(4, {"prefill.all_logits=true"});
  expect_checked(p.res);
  EXPECT_EQ(digests(p.res, false), digests(one.res, false));
  EXPECT_EQ(digests(p.res, true), digests(one.res, true));
  EXPECT_EQ(p.kv, one.kv);
  for (const auto& t : p.res.tokens) EXPECT_TRUE(t.has_logits);
}

TEST(PrefillRun, BothFidelitiesGiveTheSameFigures) {
  for (const int P : {1, 4}) {
    SCOPED_TRACE("P = " + std::to_string(P));
    const PrefillOutcome fast = run(P, {}, Fidelity::kFast, "Chunked", 2);
    const PrefillOutcome cycle = run(P, {}, Fidelity::kCycle, "Chunked", 2);
    expect_checked(cycle.res);
    ASSERT_EQ(fast.res.tokens.size(), cycle.res.tokens.size());
    for (size_t i = 0; i < fast.res.tokens.size(); ++i) {
      const host::TokenTiming& a = fast.res.tokens[i].timing;
      const host::TokenTiming& b = cycle.res.tokens[i].timing;
      EXPECT_EQ(a.total_ps(), b.total_ps()) << i;
      EXPECT_EQ(a.matmul_ps, b.matmul_ps) << i;
      EXPECT_EQ(a.attention_ps, b.attention_ps) << i;
      EXPECT_EQ(a.bytes_read, b.bytes_read) << i;
      EXPECT_EQ(a.dma_transfers, b.dma_transfers) << i;
      EXPECT_EQ(fast.res.tokens[i].logits_digest, cycle.res.tokens[i].logits_digest) << i;
    }
    EXPECT_EQ(fast.kv, cycle.kv);
    EXPECT_EQ(fast.res.figures.ttft_ms, cycle.res.figures.ttft_ms);
  }
}

TEST(PrefillRun, VariantsAndThePlWalkerCombineWithPrefill) {
  const std::vector<std::vector<std::string>> variants = {
      {"host.walker=pl"},
      {"attention.variant=online-softmax"},
      {"attention.variant=online-softmax", "kv.format=int4"},
      {"host.lanes=1"},
  };
  for (const auto& v : variants) {
    SCOPED_TRACE(v.front() + (v.size() > 1 ? " " + v.back() : ""));
    const PrefillOutcome one = run(1, v, Fidelity::kFast, "Prefill with a variant", 3);
    const PrefillOutcome p = run(8, v, Fidelity::kFast, "Prefill with a variant", 3);
    expect_checked(one.res);
    expect_checked(p.res);
    EXPECT_EQ(p.kv, one.kv);
    EXPECT_EQ(digests(p.res, true), digests(one.res, true));
    EXPECT_EQ(generated_ids(p.res), generated_ids(one.res));
    EXPECT_LT(p.res.figures.ttft_ms, one.res.figures.ttft_ms);
  }
}

TEST(PrefillRun, FiguresAddUpAndSamplingDoesNotDependOnP) {
  const PrefillOutcome one = run(1, {}, Fidelity::kFast, "Sampled prompt", 6, 0.8f);
  const PrefillOutcome p = run(8, {}, Fidelity::kFast, "Sampled prompt", 6, 0.8f);
  // The chunks' shares add up to the request; TPOT is a decode token's time.
  uint64_t sum = 0;
  for (const auto& t : p.res.tokens) sum += t.timing.total_ps();
  EXPECT_DOUBLE_EQ(p.res.figures.request_ms, double(sum) / 1e9);
  ASSERT_TRUE(p.res.figures.tpot_ms.has_value());
  EXPECT_GT(*p.res.figures.tpot_ms, 0.0);
  EXPECT_LT(p.res.figures.ttft_ms, p.res.figures.request_ms);
  EXPECT_EQ(p.res.tokens_per_pass, 8);
  EXPECT_TRUE(p.res.prefill.fits());
  EXPECT_EQ(generated_ids(p.res), generated_ids(one.res));
}

// A fault in the second chunk is named by position, layer and step: the first 2 KiB of
// layer 0's q rows, each byte changed to another valid one before the chunk at positions
// 4..7, change q_acc of every position and the logits of the chunk's last position; the
// divergence reported is the earliest position's, in layer 0, although the logits compared
// are position 7's. (A smaller fault, one q row, moves no logits of this tiny model.)
TEST(PrefillRun, AMismatchInAChunkNamesThePositionLayerAndStep) {
  for (const Fidelity f : {Fidelity::kFast, Fidelity::kCycle}) {
    BoardRunRequest r{RunRequest{}, board_params()};
    r.run.model = "synthetic:tiny";
    r.run.prompt = "A prompt of more than eight tokens";
    r.run.tokens = 1;
    r.fidelity = f;
    r.params.set("prefill.tokens_per_pass=4", "test");
    r.before_step = [](BoardSession& s, int step) {
      if (step != 4) return;
      const std::vector<uint8_t> bytes = s.read_ddr(s.weights_addr(), 2048);
      for (size_t b = 0; b < bytes.size(); ++b)  // each byte another valid one (< 243: five trits)
        s.poke_ddr(s.weights_addr() + b, (bytes[b] ^ 1) < 243 ? 1 : 2);
    };
    const BoardRunResult res = run_board(std::move(r));
    ASSERT_FALSE(res.mismatch.empty());
    ASSERT_EQ(res.tokens.size(), 8u) << res.mismatch;  // the first chunk checked, the second's last failed
    EXPECT_TRUE(*res.tokens[3].logits_equal);
    EXPECT_FALSE(*res.tokens[7].logits_equal);
    EXPECT_NE(res.mismatch.find("token 7 (context 8)"), std::string::npos) << res.mismatch;
    EXPECT_NE(res.mismatch.find("position 4, layer 0, step q_acc, element 0:"), std::string::npos) << res.mismatch;
  }
}

// Grouped-query attention (synthetic:tiny-gqa: 4 query heads, 2 K/V heads): prefill in chunks
// of 4 gives the P = 1 run's K/V areas, generated logits and ids, every token checked against
// the golden reference, in every attention variant and KV format.
TEST(PrefillRun, GroupedQueryChunksAreTheP1Run) {
  const std::vector<std::vector<std::string>> variants = {
      {"attention.variant=two-phase"},
      {"attention.variant=online-softmax"},
      {"attention.variant=online-softmax", "kv.format=int4", "kv.outlier_channels=4"},
      {"attention.variant=online-softmax", "kv.format=tip"},
  };
  for (const auto& v : variants) {
    SCOPED_TRACE(v.back());
    const PrefillOutcome one = run(1, v, Fidelity::kFast, "Grouped heads", 3, 0, "synthetic:tiny-gqa");
    const PrefillOutcome p = run(4, v, Fidelity::kFast, "Grouped heads", 3, 0, "synthetic:tiny-gqa");
    expect_checked(one.res);
    expect_checked(p.res);
    EXPECT_FALSE(p.kv.empty());
    EXPECT_EQ(p.kv, one.kv);
    EXPECT_EQ(digests(p.res, true), digests(one.res, true));
    EXPECT_EQ(generated_ids(p.res), generated_ids(one.res));
  }
}

// The shared-stream unit (attention.gqa = shared-stream) on synthetic:tiny-gqa: prefill in
// chunks of 4 gives the P = 1 run's K/V areas, logits and ids (each position's passes after
// the chunk's K/V), every token checked against the golden reference, in every KV format.
TEST(PrefillRun, SharedStreamChunksAreTheP1Run) {
  const std::vector<std::vector<std::string>> variants = {
      {"attention.gqa=shared-stream", "attention.variant=two-phase"},
      {"attention.gqa=shared-stream", "attention.variant=online-softmax"},
      {"attention.gqa=shared-stream", "attention.variant=online-softmax", "kv.format=int4", "kv.outlier_channels=4"},
      {"attention.gqa=shared-stream", "attention.variant=online-softmax", "kv.format=tip"},
  };
  for (const auto& v : variants) {
    SCOPED_TRACE(v.back());
    const PrefillOutcome one = run(1, v, Fidelity::kFast, "Grouped heads", 3, 0, "synthetic:tiny-gqa");
    const PrefillOutcome p = run(4, v, Fidelity::kFast, "Grouped heads", 3, 0, "synthetic:tiny-gqa");
    expect_checked(one.res);
    expect_checked(p.res);
    EXPECT_FALSE(p.kv.empty());
    EXPECT_EQ(p.kv, one.kv);
    EXPECT_EQ(digests(p.res, true), digests(one.res, true));
    EXPECT_EQ(generated_ids(p.res), generated_ids(one.res));
  }
}

}  // namespace
}  // namespace bitsim::sim
