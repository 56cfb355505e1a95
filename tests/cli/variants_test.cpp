// The host-side variants of docs/variants-host.md through the bitsim command: matmul.format
// (header | per-call), host.walker (cpu | pl), the board knobs, and the what-if presets of
// configs/. Each variant runs with `logits equal` on every token, in both fidelities with
// the same times; the board's defaults move nothing.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/run_bitsim.h"
#include "support/temp_dir.h"

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

// ---- Board knobs and presets --------------------------------------------------------------

// Lanes per engine, HP ports used and the DDR wall: each a what-if in both fidelities with
// the same times, logits equal.
TEST(Variants, BoardKnobsInBothFidelities) {
  expect_fidelities_agree("--model synthetic:tiny --tokens 2 --set host.lanes=1");
  expect_fidelities_agree("--model synthetic:tiny --tokens 2 --set board.hp_ports=1");
  expect_fidelities_agree("--model synthetic:tiny --tokens 2 --set ddr.wall_gb_s=4.018 --set clock.mhz=200");
  expect_fidelities_agree("--model synthetic:tiny --tokens 2 --set host.lanes=1 --set board.hp_ports=1 "
                          "--set ddr.wall_gb_s=1.0");
}

TEST(Variants, BoardKnobsMoveTheMatmulColumnTheWayTheyShould) {
  const std::string tiny = "--model synthetic:tiny --tokens 1 ";
  const auto board = run_json(tiny);
  const auto one_lane = run_json(tiny + "--set host.lanes=1");
  const auto one_port = run_json(tiny + "--set board.hp_ports=1");
  const auto slow_wall = run_json(tiny + "--set ddr.wall_gb_s=0.5");
  ASSERT_FALSE(board.is_null());
  const auto mm = [](const nlohmann::json& j) { return j["tokens"][0]["matmul_ms"].get<double>(); };
  // One lane: half the DMA starts and slower matmuls; the same rows, but each group's
  // header and x are read once instead of once per lane, so a few bytes fewer.
  EXPECT_EQ(one_lane["tokens"][0]["dma_calls"].get<int>() * 2, board["tokens"][0]["dma_calls"].get<int>());
  EXPECT_LT(one_lane["tokens"][0]["bytes_read"].get<double>(), board["tokens"][0]["bytes_read"].get<double>());
  EXPECT_GT(one_lane["tokens"][0]["bytes_read"].get<double>(), 0.97 * board["tokens"][0]["bytes_read"].get<double>());
  EXPECT_GT(mm(one_lane), mm(board));
  // One HP port for both lanes: the same calls and bytes, slower.
  EXPECT_EQ(one_port["tokens"][0]["dma_calls"], board["tokens"][0]["dma_calls"]);
  EXPECT_GT(mm(one_port), mm(board));
  // A quarter of the wall: slower still.
  EXPECT_GT(mm(slow_wall), mm(board));
  for (const auto* j : {&one_lane, &one_port, &slow_wall}) EXPECT_EQ((*j)["summary"]["logits_equal"], true);
}

// Every preset in configs/ loads (`bitsim config --config F`). A preset whose keys this build
// does not have yet (online-softmax.toml and all-three.toml need attention.variant and
// kv.format from the attention variants) skips with a message until they exist.
TEST(Variants, EveryPresetInConfigsLoads) {
  const Result dump = bitsim("config --dump");
  ASSERT_EQ(dump.code, 0) << dump.err;
  const bool attention_variants = dump.out.find("variant = ") != std::string::npos;
  int loaded = 0;
  std::vector<std::string> skipped;
  for (const auto& e : fs::directory_iterator(fs::path(BITSIM_SOURCE_DIR) / "configs")) {
    if (e.path().extension() != ".toml") continue;
    const std::string name = e.path().filename().string();
    if (name == "regress.toml") continue;  // the regress suite, not a board config (docs/regress.md)
    const bool needs_attn = name == "online-softmax.toml" || name == "all-three.toml";
    if (needs_attn && !attention_variants) {
      skipped.push_back(name);
      continue;
    }
    const Result r = bitsim("config --config " + e.path().string());
    EXPECT_EQ(r.code, 0) << name << ": " << r.err;
    ++loaded;
    // Documented at the top: what it changes and why someone would ask.
    std::ifstream f(e.path());
    std::string first;
    std::getline(f, first);
    EXPECT_EQ(first.rfind("# ", 0), 0u) << name << " starts without its description";
  }
  EXPECT_GE(loaded, 3);  // pynq-z2, ddr-2x, pl-walker
  const Result two = bitsim("config --config " + (fs::path(BITSIM_SOURCE_DIR) / "configs" / "ddr-2x.toml").string());
  EXPECT_EQ(two.out, "ddr.wall_gb_s = 4.018\n");
  const Result pl = bitsim("config --config " + (fs::path(BITSIM_SOURCE_DIR) / "configs" / "pl-walker.toml").string());
  EXPECT_NE(pl.out.find("host.walker = pl"), std::string::npos) << pl.out;
  for (const auto& s : skipped)
    std::printf("[variants] %s skipped: its keys come with the attention variants (enable after merge)\n", s.c_str());
}

TEST(Variants, PlWalkerPresetRunsWithLogitsEqual) {
  const auto j = run_json("--model synthetic:tiny --tokens 2 --config " +
                          (fs::path(BITSIM_SOURCE_DIR) / "configs" / "pl-walker.toml").string());
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["summary"]["logits_equal"], true);
  EXPECT_GT(j["tokens"][0]["walker_ms"].get<double>(), 0.0);
}

// ---- kv.format ---------------------------------------------------------------------------

TEST(Variants, Int4KvLogitsEqualInBothFidelities) {
  expect_fidelities_agree("--model synthetic:tiny --tokens 3 --set attention.variant=online-softmax --set kv.format=int4");
  expect_fidelities_agree("--model synthetic:tiny --tokens 2 --set attention.variant=online-softmax --set kv.format=int4 "
                          "--set kv.outlier_channels=8");
}

TEST(Variants, Int4KvReadsFewerBytesAndIsRefusedWithTheTwoPhaseUnit) {
  const auto i8 = run_json("--model synthetic:tiny --tokens 2 --set attention.variant=online-softmax");
  const auto i4 = run_json("--model synthetic:tiny --tokens 2 --set attention.variant=online-softmax --set kv.format=int4");
  ASSERT_FALSE(i8.is_null());
  ASSERT_FALSE(i4.is_null());
  // The same calls; per (layer, head) the attention reads 104 bytes per position instead of
  // 192, and the bank's 192 once per call: i8 - i4 = LH (88 T - 192) at context T, LH the
  // layer-heads (T = 1 gives it; from T = 3 on the INT4 call reads less).
  ASSERT_EQ(i8["tokens"].size(), i4["tokens"].size());
  const int64_t lh = (i4["tokens"][0]["bytes_read"].get<int64_t>() - i8["tokens"][0]["bytes_read"].get<int64_t>()) / 104;
  EXPECT_GT(lh, 0);
  for (size_t i = 0; i < i8["tokens"].size(); ++i) {
    const int64_t T = i4["tokens"][i]["context"].get<int64_t>();
    EXPECT_EQ(i8["tokens"][i]["dma_calls"], i4["tokens"][i]["dma_calls"]);
    EXPECT_EQ(i8["tokens"][i]["bytes_read"].get<int64_t>() - i4["tokens"][i]["bytes_read"].get<int64_t>(),
              lh * (88 * T - 192))
        << "T " << T;
    if (T >= 8) EXPECT_LT(i4["tokens"][i]["attention_ms"].get<double>(), i8["tokens"][i]["attention_ms"].get<double>());
  }
  const Result r = bitsim("run --prompt x --model synthetic:tiny --tokens 1 --set kv.format=int4");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("kv.format"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("attention.variant"), std::string::npos) << r.err;
}

TEST(Variants, Int4KvHoldsAContextPast512AndNamesItsCapacity) {
  // docs/variants-attention.md 8.8: the INT4 unit takes T up to 2048; tiny's small cache
  // holds all 2048, bitnet-large's 1,319 in the shipped CMA; int8 stays at 512.
  const auto r = run_json("--model synthetic:tiny --tokens 520 --set attention.variant=online-softmax "
                          "--set kv.format=int4");
  ASSERT_FALSE(r.is_null());
  EXPECT_EQ(r["summary"]["kv_capacity"], 2048);
  EXPECT_EQ(r["summary"]["logits_equal"], true);
  EXPECT_EQ(r["summary"]["logits_checked"], r["tokens"].size());
  EXPECT_GT(r["tokens"].back()["context"].get<int>(), 520);
  EXPECT_EQ(r["tokens"].back()["logits_equal"], true);
  const Result big = bitsim("run --model synthetic:bitnet-large --prompt x --tokens 1400 --timing-only "
                            "--set attention.variant=online-softmax --set kv.format=int4");
  EXPECT_EQ(big.code, 2);
  EXPECT_NE(big.err.find("KV cache of 1319"), std::string::npos) << big.err;
  const Result i8 = bitsim("run --model synthetic:tiny --prompt x --tokens 600 --set attention.variant=online-softmax");
  EXPECT_EQ(i8.code, 2);
  EXPECT_NE(i8.err.find("KV cache of 512"), std::string::npos) << i8.err;
  const Result over = bitsim("run --model synthetic:tiny --prompt x --tokens 2048");
  EXPECT_EQ(over.code, 2);
  EXPECT_NE(over.err.find("--tokens"), std::string::npos) << over.err;
}

// docs/tip.md: kv.format = tip on the online-softmax unit, with regions small enough that
// they leave the recent window within the run (placed, re-encoded and streamed at their
// tiers): both fidelities give the same times and the golden counterpart's logits; its MMIO
// recording replays equal on both; the two-phase unit and the PL walker are refused; the
// kv.tip.* keys are checked by name.
// attention.gqa = shared-stream (docs/variants-attention.md 9) on synthetic:tiny-gqa: both
// fidelities give the same times and the golden counterpart's logits, in fewer attention bytes
// than one pass per query head; what the unit cannot take is refused with exit 2 naming the key.
TEST(Variants, SharedStreamRunsInBothFidelitiesAndRefusesWhatItCannotTake) {
  expect_fidelities_agree("--model synthetic:tiny-gqa --tokens 4 --set attention.gqa=shared-stream");
  const auto s = run_json("--model synthetic:tiny-gqa --tokens 2 --set attention.gqa=shared-stream");
  const auto p = run_json("--model synthetic:tiny-gqa --tokens 2");
  ASSERT_FALSE(s.is_null());
  ASSERT_FALSE(p.is_null());
  EXPECT_LT(s["tokens"].back()["bytes_read"].get<uint64_t>(), p["tokens"].back()["bytes_read"].get<uint64_t>());
  const struct {
    const char* args;
    const char* says;
  } bad[] = {{"--model synthetic:tiny --set attention.gqa=shared-stream", "attention.gqa = shared-stream"},
             {"--model synthetic:bitnet-large-gqa4 --timing-only --set attention.gqa=shared-stream "
              "--set attention.gqa_group=2",
              "attention.gqa_group = 2"},
             {"--model synthetic:tiny-gqa --set attention.gqa=shared-stream --set attention.gqa_group=1",
              "attention.gqa_group"},
             {"--model synthetic:tiny-gqa --set attention.gqa=grouped", "attention.gqa"}};
  for (const auto& b : bad) {
    const Result r = bitsim(std::string("run --prompt x --tokens 1 ") + b.args);
    EXPECT_EQ(r.code, 2) << b.args;
    EXPECT_NE(r.err.find(b.says), std::string::npos) << b.args << ": " << r.err;
  }
}

TEST(Variants, TipRunsInBothFidelitiesWithItsGoldenAndItsKeysAreChecked) {
  const std::string tip = " --set attention.variant=online-softmax --set kv.format=tip --set kv.tip.region=16 "
                          "--set kv.tip.sink=0 --set kv.tip.recent=16 --set kv.tip.kvq8_regions=0 "
                          "--set kv.tip.lane_regions=1";
  expect_fidelities_agree("--model synthetic:tiny --tokens 40" + tip);
  // Fewer bytes than the same run with every region at KVQ8, from the first demotion on.
  const auto t = run_json("--model synthetic:tiny --tokens 40" + tip);
  const auto t8 = run_json("--model synthetic:tiny --tokens 40" + tip + " --set kv.tip.kvq8_regions=2048");
  ASSERT_FALSE(t.is_null());
  ASSERT_FALSE(t8.is_null());
  EXPECT_LT(t["tokens"].back()["bytes_read"].get<uint64_t>(), t8["tokens"].back()["bytes_read"].get<uint64_t>());
  EXPECT_EQ(t["tokens"][5]["bytes_read"], t8["tokens"][5]["bytes_read"]);  // before any region left the window
  const bitsim::test::MadeTempDir dir;
  const std::string rec = (dir.path / "tip.mmio").string();
  const Result run = bitsim("run --model synthetic:tiny --prompt x --tokens 36 --quiet --record-mmio " + rec + tip);
  ASSERT_EQ(run.code, 0) << run.err;
  for (const char* fidelity : {"fast", "cycle"}) {
    const Result r = bitsim(std::string("replay ") + rec + " --json --fidelity " + fidelity);
    ASSERT_EQ(r.code, 0) << fidelity << ": " << r.err;
    EXPECT_TRUE(nlohmann::json::parse(r.out)["equal"].get<bool>()) << fidelity;
  }
  const Result two = bitsim("run --prompt x --model synthetic:tiny --tokens 1 --set kv.format=tip");
  EXPECT_EQ(two.code, 2);
  EXPECT_NE(two.err.find("kv.format: tip needs attention.variant = online-softmax"), std::string::npos) << two.err;
  const Result walker = bitsim("run --prompt x --model synthetic:tiny --tokens 1 --set attention.variant=online-softmax "
                               "--set kv.format=tip --set host.walker=pl");
  EXPECT_EQ(walker.code, 2);
  EXPECT_NE(walker.err.find("host.walker: pl with kv.format = tip"), std::string::npos) << walker.err;
  const struct {
    const char* set;
    const char* says;
  } bad[] = {{"kv.tip.region=48", "kv.tip.region = 48 is not a power of two"},
             {"kv.tip.region=512", "kv.tip.region"},
             {"kv.tip.sink=32", "kv.tip.sink = 32 is not a multiple of kv.tip.region"},
             {"kv.tip.recent=100", "kv.tip.recent = 100"},
             {"kv.tip.lanes=5", "kv.tip.lanes = 5 is not 4 or 8"},
             {"kv.tip.kvq8_regions=-1", "kv.tip.kvq8_regions"}};
  for (const auto& b : bad) {
    const Result r = bitsim(std::string("run --prompt x --model synthetic:tiny --tokens 1 --set ") + b.set);
    EXPECT_EQ(r.code, 2) << b.set;
    EXPECT_NE(r.err.find(b.says), std::string::npos) << b.set << ": " << r.err;
  }
}

TEST(Variants, OnlineSoftmaxAndAllThreePresetsRunWithLogitsEqual) {
  for (const char* preset : {"online-softmax.toml", "all-three.toml"}) {
    const auto j = run_json("--model synthetic:tiny --tokens 2 --config " +
                            (fs::path(BITSIM_SOURCE_DIR) / "configs" / preset).string());
    ASSERT_FALSE(j.is_null()) << preset;
    EXPECT_EQ(j["summary"]["logits_equal"], true) << preset;
    EXPECT_EQ(j["config"]["kv.format"], "int4") << preset;
  }
}

// The run refuses the legacy shift with the online unit (sim::run_board's FieldError on
// legacy_attention) and names the option that asked for it.
TEST(Variants, LegacyAttentionWithTheOnlineUnitIsRefusedNamingTheOption) {
  const Result r = bitsim("run --model synthetic:tiny --prompt x --tokens 1 --legacy-attention --set "
                          "attention.variant=online-softmax");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bitsim: error: --legacy-attention: the online-softmax unit (attention.variant) has no "
                       "legacy shift mode"),
            std::string::npos)
      << r.err;
}

// The attention unit's resource estimate (hw/circuits/attention_resources.h) in the run's summary,
// for the unit the config builds.
TEST(Variants, RunSummaryCarriesTheAttentionUnitsResources) {
  const auto board = run_json("--model synthetic:tiny --tokens 1");
  ASSERT_FALSE(board.is_null());
  const auto& b = board["summary"]["attention_resources"];
  EXPECT_EQ(b["evidence"], "simulated");
  EXPECT_EQ(b["dsp"], 17);
  EXPECT_EQ(b["bram36"], 2);
  EXPECT_EQ(b["lut_complete"], true);
  EXPECT_EQ(b["lut"], 480);
  const auto online = run_json("--model synthetic:tiny --tokens 1 --set attention.variant=online-softmax");
  ASSERT_FALSE(online.is_null());
  EXPECT_EQ(online["summary"]["attention_resources"]["dsp"], 60);
  const auto int4 = run_json("--model synthetic:tiny --tokens 1 --config " +
                             (fs::path(BITSIM_SOURCE_DIR) / "configs" / "all-three.toml").string());
  ASSERT_FALSE(int4.is_null());
  const auto& r = int4["summary"]["attention_resources"];
  EXPECT_EQ(r["dsp"], 150);
  EXPECT_EQ(r["lut"], 9776);
  int dsp = 0, lut = 0;
  for (const auto& op : r["operators"]) {
    dsp += op["dsp"].get<int>();
    if (!op["lut"].is_null()) lut += op["lut"].get<int>();
  }
  EXPECT_EQ(r["dsp"], dsp);
  EXPECT_EQ(r["lut"], lut);
  // "with the board": the walker beside the configured attention unit and the board's 34% LUT
  const Result t = bitsim("run --model synthetic:tiny --prompt x --tokens 1 --config " +
                          (fs::path(BITSIM_SOURCE_DIR) / "configs" / "all-three.toml").string());
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("attention unit        150 DSP48E1, 0 BRAM36, 9776 LUT (model"),
            std::string::npos) << t.out;
  const int walker_dsp = int4["summary"]["walker_resources"]["dsp"].get<int>();
  EXPECT_NE(t.out.find(fmt::format("with the board      {} DSP", walker_dsp + 150)), std::string::npos) << t.out;
}

}  // namespace
