// The host-side variants of docs/variants-host.md through the bitsim command: matmul.format
// (header | per-call), host.walker (cpu | pl), the board knobs, and the what-if presets of
// configs/. Each variant runs with `logits equal` on every token, in both fidelities with
// the same times; the board's defaults move nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "support/run_bitsim.h"

namespace fs = std::filesystem;

namespace {

using Result = bitsim::testing::CommandResult;
Result bitsim(const std::string& args) { return bitsim::testing::run_bitsim(args); }

nlohmann::json run_json(const std::string& args) {
  const Result r = bitsim("run --prompt 'The variants' --json " + args);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  if (r.code != 0) return {};
  return nlohmann::json::parse(r.out);
}

// Both fidelities: every token's times, bytes and calls equal, and every token's logits
// equal to the golden reference's.
void expect_fidelities_agree(const std::string& args) {
  const auto c = run_json(args + " --fidelity cycle"), f = run_json(args + " --fidelity fast");
  ASSERT_FALSE(c.is_null());
  ASSERT_FALSE(f.is_null());
  EXPECT_EQ(f["summary"]["logits_equal"], true) << args;
  EXPECT_EQ(c["summary"]["logits_equal"], true) << args;
  ASSERT_EQ(c["tokens"].size(), f["tokens"].size());
  for (size_t i = 0; i < c["tokens"].size(); ++i)
    for (const char* k : {"matmul_ms", "attention_ms", "cpu_ms", "total_ms", "bytes_read", "dma_calls",
                          "driver_calls", "fixed_call_ms", "logits_equal"})
      EXPECT_EQ(c["tokens"][i][k], f["tokens"][i][k]) << args << ": " << k << " token " << i;
}

// ---- matmul.format -----------------------------------------------------------------------

TEST(Variants, PerCallFormatLogitsEqualInBothFidelities) {
  expect_fidelities_agree("--model synthetic:tiny --tokens 3 --set matmul.format=per-call");
  // Fixed rows shorter than the rows: every row in several segments.
  expect_fidelities_agree("--model synthetic:tiny --tokens 2 --set matmul.format=per-call "
                          "--set matmul.per_call_row_trits=100");
}

TEST(Variants, PerCallFormatMoreCallsAndItsFixedCostShare) {
  const auto h = run_json("--model synthetic:tiny --tokens 2");
  const auto p = run_json("--model synthetic:tiny --tokens 2 --set matmul.format=per-call "
                          "--set matmul.per_call_row_trits=100");
  ASSERT_FALSE(h.is_null());
  ASSERT_FALSE(p.is_null());
  // tiny: hidden 192 -> 2 segments of 100, ffn 512 -> 6; 2 layers: per layer qkv, o, gate_up
  // 2 calls each and down 6, plus lm_head 2, plus one attention call a layer.
  EXPECT_EQ(h["tokens"][0]["driver_calls"], 2 * (4 + 1) + 1);
  EXPECT_EQ(p["tokens"][0]["driver_calls"], 2 * (3 * 2 + 6 + 1) + 2);
  const double hs = h["summary"]["fixed_cost_share"], ps = p["summary"]["fixed_cost_share"];
  EXPECT_GT(hs, 0.0);
  EXPECT_GT(ps, hs);
  EXPECT_LT(ps, 1.0);
  EXPECT_EQ(p["summary"]["fixed_cost_share_evidence"], "simulated");
  // The text report says it with its label.
  const Result t = bitsim("run --model synthetic:tiny --prompt x --tokens 1 --set matmul.format=per-call");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("fixed call cost"), std::string::npos);
  EXPECT_NE(t.out.find("of token time  [simulated]"), std::string::npos);
}

TEST(Variants, BadFormatNamesTheKey) {
  const Result r = bitsim("run --model synthetic:tiny --prompt x --tokens 1 --set matmul.format=fixed");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("matmul.format"), std::string::npos) << r.err;
}

// ---- host.walker ----------------------------------------------------------------------

TEST(Variants, PlWalkerLogitsEqualInBothFidelities) {
  expect_fidelities_agree("--model synthetic:tiny --tokens 3 --set host.walker=pl");
  expect_fidelities_agree("--model synthetic:tiny --tokens 2 --set host.walker=pl --set walker.start=layer "
                          "--set matmul.format=per-call --set matmul.per_call_row_trits=100");
}

TEST(Variants, PlWalkerTakesTheSmallOpsOffTheCpuAndPrintsItsResources) {
  const auto c = run_json("--model synthetic:tiny --tokens 2");
  const auto w = run_json("--model synthetic:tiny --tokens 2 --set host.walker=pl");
  const auto l = run_json("--model synthetic:tiny --tokens 2 --set host.walker=pl --set walker.start=layer");
  ASSERT_FALSE(c.is_null());
  ASSERT_FALSE(w.is_null());
  ASSERT_FALSE(l.is_null());
  for (size_t i = 0; i < c["tokens"].size(); ++i) {
    // The same calls on the same engines; the CPU keeps the embedding, the starts and the argmax.
    EXPECT_EQ(w["tokens"][i]["driver_calls"], c["tokens"][i]["driver_calls"]);
    EXPECT_EQ(w["tokens"][i]["bytes_read"], c["tokens"][i]["bytes_read"]);
    EXPECT_EQ(c["tokens"][i]["walker_ms"], 0.0);
    EXPECT_GT(w["tokens"][i]["walker_ms"].get<double>(), 0.0);
    EXPECT_LT(w["tokens"][i]["cpu_ms"].get<double>(), c["tokens"][i]["cpu_ms"].get<double>() / 4);
    EXPECT_LT(w["tokens"][i]["total_ms"].get<double>(), c["tokens"][i]["total_ms"].get<double>());
    // Starting each layer (2 layers + the final stage) costs two more starts than one a token.
    EXPECT_GT(l["tokens"][i]["fixed_call_ms"].get<double>(), w["tokens"][i]["fixed_call_ms"].get<double>());
  }
  EXPECT_LT(w["summary"]["fixed_cost_share"].get<double>(), c["summary"]["fixed_cost_share"].get<double>());
  const auto& res = w["summary"]["walker_resources"];
  EXPECT_EQ(res["evidence"], "simulated");
  EXPECT_EQ(res["device"]["dsp"], 220);
  EXPECT_EQ(res["device"]["lut"], 53200);
  EXPECT_EQ(res["device"]["bram36"], 140);
  int dsp = 0;
  for (const auto& op : res["operators"]) dsp += op["dsp"].get<int>();
  EXPECT_EQ(res["dsp"], dsp);
  EXPECT_FALSE(c["summary"].contains("walker_resources"));
  const Result t = bitsim("run --model synthetic:tiny --prompt x --tokens 1 --set host.walker=pl");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("walker resources"), std::string::npos);
  EXPECT_NE(t.out.find("53,200 LUT"), std::string::npos);
}

}  // namespace
