// Sweeps: grids over config keys, timing-only points, timing closure, CSV and worker
// processes.
#include "study/sweep.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "sim/board_config.h"

namespace bitsim::study {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Options over `axes` at one timing-only token per point, without the functional check.
SweepOptions one_token(const sim::ParamSet& p, const std::vector<std::string>& axes) {
  SweepOptions o;
  for (const auto& a : axes) o.grid.push_back(parse_axis(p, a));
  o.tokens = 1;
  o.check_model.clear();
  return o;
}

TEST(Sweep, AxisParsingChecksKeysAndValues) {
  const sim::ParamSet p = sim::board_params();
  const auto a = parse_axis(p, "clock_mhz=100,125");
  EXPECT_EQ(a.key, "clock.mhz");
  EXPECT_EQ(a.values, (std::vector<std::string>{"100", "125"}));
  EXPECT_THAT([&] { parse_axis(p, "clock.ghz=1"); }, ThrowsMessage<Error>(HasSubstr("clock.mhz")));
  EXPECT_THAT([&] { parse_axis(p, "dma.length_bits=23,40"); }, ThrowsMessage<Error>(HasSubstr("[8, 26]")));
  EXPECT_THAT([&] { parse_axis(p, "clock.mhz="); }, ThrowsMessage<Error>(HasSubstr("KEY=V1,V2")));
  EXPECT_THAT([&] { parse_axis(p, "clock.mhz=100,,125"); }, ThrowsMessage<Error>(HasSubstr("empty value")));
  SweepOptions o;
  EXPECT_THAT([&] { run_sweep(p, o); }, ThrowsMessage<Error>(HasSubstr("grid is empty")));
}

TEST(Sweep, TimingClosureFollowsTheBoard) {
  sim::ParamSet p = sim::board_params();
  EXPECT_EQ(timing_closure(p), "met (board)");
  p.set("clock.mhz=142.86");
  EXPECT_EQ(timing_closure(p), "fails timing (board)");
  p.set("clock.mhz=135");
  EXPECT_EQ(timing_closure(p), "unknown");
  p.set("clock.mhz=150");
  p.set("dma.length_bits=16");
  EXPECT_EQ(timing_closure(p), "unknown");  // a narrower counter was never tried
}

TEST(Sweep, ClockSweepShowsTheDdrWallAndRunsInParallel) {
  const sim::ParamSet p = sim::board_params();
  SweepOptions o;
  o.grid.push_back(parse_axis(p, "clock_mhz=100,125,142.86,200"));
  o.tokens = 2;
  o.jobs = 1;
  const SweepResult serial = run_sweep(p, o);
  ASSERT_EQ(serial.points.size(), 4u);
  EXPECT_FALSE(serial.base_check.empty());
  const auto& p100 = serial.points[0];
  const auto& p125 = serial.points[1];
  const auto& p143 = serial.points[2];
  const auto& p200 = serial.points[3];
  EXPECT_LT(p100.tok_s, p125.tok_s);                // the ports bind below 125 MHz
  EXPECT_LE(p200.tok_s, p125.tok_s * 1.03);         // the DDR wall binds above it
  EXPECT_EQ(p143.timing, "fails timing (board)");
  EXPECT_EQ(p125.timing, "met (board)");
  EXPECT_GT(p125.wall_pct, 50.0);
  // The same points in two worker processes: the same figures.
  o.jobs = 2;
  o.check_model.clear();
  const SweepResult par = run_sweep(p, o);
  ASSERT_EQ(par.points.size(), serial.points.size());
  for (size_t i = 0; i < par.points.size(); ++i) {
    EXPECT_EQ(par.points[i].values, serial.points[i].values);
    EXPECT_DOUBLE_EQ(par.points[i].total_ms, serial.points[i].total_ms);
    EXPECT_EQ(par.points[i].dma_calls, serial.points[i].dma_calls);
  }
  const std::string csv = sweep_csv(par);
  EXPECT_EQ(csv.rfind("clock.mhz,tok_s,total_ms,matmul_ms,attention_ms,cpu_ms,walker_ms,read_gb_s,wall_pct,dma_calls,timing,"
                      "fit,tpot_ms,ttft_ms,prefill_tok_s,energy_mj_per_token,avg_power_w,tokens_per_j,prompt_j,energy_evidence,bitsim_version,git_commit,config_hash,model_hash,fidelity,host,point_wall_s,peak_rss_mib\n", 0),
            0u);
  // Every row carries its provenance: the point's own config hash, the model, the fidelity.
  EXPECT_EQ(par.points[0].prov.config_hash, serial.points[0].prov.config_hash);
  EXPECT_NE(par.points[0].prov.config_hash, par.points[1].prov.config_hash);
  EXPECT_EQ(par.points[0].prov.fidelity, "timing-only");
  EXPECT_EQ(par.points[0].prov.host, host_name());
  EXPECT_GT(par.points[0].prov.wall_s, 0.0);
  EXPECT_GT(par.points[0].prov.peak_rss_mib, 0.0);
  EXPECT_NE(csv.find("142.86,"), std::string::npos);
}

// The PL walker's own time is a column: 0 with the CPU, and the four columns add up to the
// token's time (one token per point: no medians between them).
TEST(Sweep, WalkerTimeIsItsOwnColumn) {
  const sim::ParamSet p = sim::board_params();
  const SweepOptions o = one_token(p, {"host.walker=cpu,pl"});
  const SweepResult r = run_sweep(p, o);
  ASSERT_EQ(r.points.size(), 2u);
  const SweepPoint& cpu = r.points[0];
  const SweepPoint& pl = r.points[1];
  EXPECT_EQ(cpu.walker_ms, 0.0);
  EXPECT_GT(pl.walker_ms, 1.0);
  EXPECT_LT(pl.cpu_ms, cpu.cpu_ms / 4);
  for (const SweepPoint* x : {&cpu, &pl})
    EXPECT_NEAR(x->total_ms, x->matmul_ms + x->attention_ms + x->cpu_ms + x->walker_ms, 1e-9) << x->values[0];
  const std::string csv = sweep_csv(r);
  const std::string header = csv.substr(0, csv.find('\n'));
  EXPECT_NE(header.find(",cpu_ms,walker_ms,"), std::string::npos) << header;
  EXPECT_NE(csv.find(fmt::format("pl,{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},", pl.tok_s, pl.total_ms, pl.matmul_ms,
                                 pl.attention_ms, pl.cpu_ms, pl.walker_ms)),
            std::string::npos)
      << csv;
  // and in the JSON document and a point's result (campaigns)
  EXPECT_EQ(sweep_json(r, o)["points"][1]["walker_ms"].get<double>(), pl.walker_ms);
  EXPECT_EQ(sweep_point_from_json(sweep_point_json(pl), "test").walker_ms, pl.walker_ms);
}

// --prompt-tokens N (docs/prefill.md 7): each point also times a prompt of N tokens in chunks
// of prefill.tokens_per_pass; the weight pass shared by a chunk shortens the time to the
// first token; without the option the columns are empty.
TEST(Sweep, PromptTokensGiveTheTimeToFirstTokenOfEachP) {
  const sim::ParamSet p = sim::board_params();
  SweepOptions o;
  o.grid = {parse_axis(p, "prefill.tokens_per_pass=1,8")};
  o.tokens = 1;
  o.check_model = "";
  o.prompt_tokens = 16;
  const SweepResult r = run_sweep(p, o);
  ASSERT_EQ(r.points.size(), 2u);
  for (const SweepPoint& pt : r.points) {
    ASSERT_TRUE(pt.ttft_ms.has_value());
    EXPECT_NEAR(*pt.prefill_tok_s, 16.0 / (*pt.ttft_ms / 1e3), 1e-6);
    EXPECT_EQ(pt.tpot_ms, pt.total_ms);
  }
  // P = 1: 16 board tokens, each ~119 ms less the lead before the first DMA.
  EXPECT_GT(*r.points[0].ttft_ms, 15 * r.points[0].total_ms);
  EXPECT_LT(*r.points[1].ttft_ms, *r.points[0].ttft_ms / 2);
  o.prompt_tokens = 0;
  o.grid = {parse_axis(p, "prefill.tokens_per_pass=1")};
  EXPECT_FALSE(run_sweep(p, o).points[0].ttft_ms.has_value());
}

// --shape NAME times another model shape: bitnet-large-gqa4 (16 query heads on 4 K/V heads) at
// T = 512, where the shared-stream unit reads each K/V head once for its group of 4 and so
// takes less attention time than one pass per query head, and less than bitnet-large's
// multi-head attention; the matmul time is the shape's own (k and v: 4 K/V heads of rows, not
// 16). The shape goes into the JSON document; an unknown one is refused naming the valid ones.
TEST(Sweep, ShapeTimesAGroupedQueryModel) {
  const sim::ParamSet p = sim::board_params();
  SweepOptions o = one_token(p, {"attention.gqa=per-head,shared-stream"});
  o.context = 512;
  o.shape = "bitnet-large-gqa4";
  const SweepResult gqa = run_sweep(p, o);
  ASSERT_EQ(gqa.points.size(), 2u);
  ASSERT_TRUE(gqa.failed.empty()) << gqa.failed[0];
  const SweepPoint &per_head = gqa.points[0], &shared = gqa.points[1];
  EXPECT_LT(shared.attention_ms, per_head.attention_ms / 2);
  EXPECT_GT(shared.tok_s, per_head.tok_s);
  EXPECT_EQ(shared.matmul_ms, per_head.matmul_ms);
  EXPECT_EQ(sweep_json(gqa, o)["shape"], "bitnet-large-gqa4");
  SweepOptions large = one_token(p, {"attention.gqa=per-head"});
  large.context = 512;
  const SweepResult mha = run_sweep(p, large);
  ASSERT_EQ(mha.points.size(), 1u);
  EXPECT_LT(per_head.matmul_ms, mha.points[0].matmul_ms);  // fewer k, v rows
  EXPECT_EQ(sweep_json(mha, large)["shape"], "bitnet-large");
  o.shape = "bitnet-huge";
  EXPECT_THAT([&] { (void)measure_sweep_point(p, o); },
              ThrowsMessage<Error>(AllOf(HasSubstr("bitnet-huge"), HasSubstr("bitnet-large-gqa4"))));
}

// Every point carries the prefill engine's fit verdict (docs/prefill.md 4), as `bitsim run`
// gives it: P = 8 fits beside the CPU host, not beside the PL walker; P = 16 fits neither.
TEST(Sweep, EachPointCarriesThePrefillFitVerdict) {
  const sim::ParamSet p = sim::board_params();
  SweepOptions o;
  o.grid = {parse_axis(p, "prefill.tokens_per_pass=1,8,16"), parse_axis(p, "host.walker=cpu,pl")};
  o.tokens = 1;
  o.check_model = "";
  const SweepResult r = run_sweep(p, o);
  ASSERT_EQ(r.points.size(), 6u);
  const std::vector<std::string> want{"fits", "fits", "fits", "DOES NOT FIT", "DOES NOT FIT", "DOES NOT FIT"};
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(r.points[i].fit.rfind(want[i], 0), 0u) << r.points[i].values[0] << " " << r.points[i].values[1] << ": "
                                                     << r.points[i].fit;
  EXPECT_NE(r.points[5].fit.find("BRAM36"), std::string::npos) << r.points[5].fit;
}

TEST(Sweep, TwoAxesMakeTheProduct) {
  const sim::ParamSet p = sim::board_params();
  const SweepOptions o = one_token(p, {"clock_mhz=100,125", "dma.length_bits=18,23"});
  const SweepResult r = run_sweep(p, o);
  ASSERT_EQ(r.points.size(), 4u);
  // An 18-bit length register splits the long matmul streams into more calls.
  EXPECT_GT(r.points[0].dma_calls, r.points[1].dma_calls);
}

// A combination the config validation refuses (INT4 KV with the two-phase unit) is left out
// and named; the valid points run, and INT4 KV moves fewer bytes in less attention time.
TEST(Sweep, RefusedCombinationsAreSkippedAndNamed) {
  const sim::ParamSet p = sim::board_params();
  const SweepOptions o = one_token(p, {"attention.variant=two-phase,online-softmax", "kv.format=int8,int4"});
  const SweepResult r = run_sweep(p, o);
  ASSERT_EQ(r.points.size(), 3u);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].rfind("attention.variant=two-phase kv.format=int4: ", 0), 0u) << r.skipped[0];
  EXPECT_NE(r.skipped[0].find("needs attention.variant = online-softmax"), std::string::npos) << r.skipped[0];
  EXPECT_EQ(r.points[2].values, (std::vector<std::string>{"online-softmax", "int4"}));
  EXPECT_LT(r.points[2].attention_ms, r.points[1].attention_ms);  // T = 64: 104 bytes a position, not 192
  EXPECT_EQ(r.points[2].matmul_ms, r.points[1].matmul_ms);
  // No valid point: the refusal itself.
  SweepOptions none;
  none.grid.push_back(parse_axis(p, "kv.format=int4"));
  none.tokens = 1;
  none.check_model.clear();
  EXPECT_THAT([&] { run_sweep(p, none); }, ThrowsMessage<Error>(HasSubstr("kv.format = int4 needs")));
}

}  // namespace
}  // namespace bitsim::study
