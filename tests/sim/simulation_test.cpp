// The one place that builds a simulation (sim/simulation.h): each fidelity, from a SimConfig.
#include "sim/simulation.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "base/error.h"
#include "model/model_loader.h"

namespace bitsim::sim {
namespace {

const model::TernaryModel& tiny() {
  static const model::TernaryModel m = model::load_ternary_model(*model::open_model_source("synthetic:tiny"), 2);
  return m;
}

model::KvScales scales_of(const model::TernaryModel& m) {
  model::KvScales s;
  s.k.assign(size_t(m.config.num_layers) * m.config.num_heads, 0.05f);
  s.v = s.k;
  return s;
}

struct Ran {
  std::vector<host::TokenTiming> timing;
  std::vector<std::vector<float>> logits;
  size_t transfers = 0;
  hw::FastBoardStats stats;
};

Ran run_two_tokens(Fidelity f) {
  const model::KvScales scales = scales_of(tiny());
  const auto sim = make_simulation(make_sim_config(board_params()), tiny(), scales, SimulationOptions(f));
  EXPECT_EQ(sim->fidelity(), f);
  Ran r;
  sim->loop().load_weights();
  sim->run([&](host::TokenLoop& loop) {
    loop.init();
    for (int token : {1, 7}) {
      host::TokenTiming t;
      r.logits.push_back(loop.step(token, &t));
      r.timing.push_back(t);
    }
  });
  r.transfers = sim->platform().transfers().size();
  r.stats = sim->fast_stats();
  return r;
}

TEST(Simulation, BuildsEachFidelityWithTheSameCycleCounts) {
  const Ran cycle = run_two_tokens(Fidelity::kCycle);
  const Ran fast = run_two_tokens(Fidelity::kFast);
  const Ran timing = run_two_tokens(Fidelity::kTimingOnly);
  ASSERT_EQ(cycle.timing.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(cycle.timing[i].total_ps(), fast.timing[i].total_ps()) << i;
    EXPECT_EQ(cycle.timing[i].total_ps(), timing.timing[i].total_ps()) << i;
    EXPECT_EQ(cycle.timing[i].bytes_read, fast.timing[i].bytes_read) << i;
    EXPECT_EQ(cycle.logits[i], fast.logits[i]) << i;
  }
  EXPECT_GT(cycle.transfers, 0u);
  EXPECT_EQ(cycle.transfers, fast.transfers);
  // Only the fast board has batches; the clocked board reports none.
  EXPECT_EQ(cycle.stats.batches, 0u);
  EXPECT_GT(fast.stats.batches, 0u);
  EXPECT_EQ(timing.stats.batches, fast.stats.batches);
}

TEST(Simulation, FidelityNames) {
  EXPECT_STREQ(fidelity_name(Fidelity::kCycle), "cycle");
  EXPECT_STREQ(fidelity_name(Fidelity::kFast), "fast");
  EXPECT_STREQ(fidelity_name(Fidelity::kTimingOnly), "timing-only");
  for (const Fidelity f : {Fidelity::kCycle, Fidelity::kFast, Fidelity::kTimingOnly})
    EXPECT_EQ(fidelity_of(fidelity_name(f)), f);
}

TEST(Simulation, UnknownFidelityNamesTheValueAndTheChoices) {
  try {
    (void)fidelity_of("clocked");
    ADD_FAILURE() << "'clocked' accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'clocked'"), std::string::npos) << m;
    EXPECT_NE(m.find("cycle, fast, timing-only"), std::string::npos) << m;
  }
  EXPECT_THROW((void)fidelity_of("Fast"), Error);
  EXPECT_THROW((void)fidelity_of(""), Error);
}

TEST(Simulation, RefusesABadConfigNamingTheKey) {
  SimConfig c = make_sim_config(board_params());
  c.board.attention.drain = 1025;
  const model::KvScales scales = scales_of(tiny());
  for (const Fidelity f : {Fidelity::kCycle, Fidelity::kFast}) {
    try {
      (void)make_simulation(c, tiny(), scales, SimulationOptions(f));
      ADD_FAILURE() << fidelity_name(f) << ": drain 1025 accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("attention.drain"), std::string::npos) << e.what();
    }
  }
}

TEST(Simulation, VcdOnlyOnTheClockedBoard) {
  const model::KvScales scales = scales_of(tiny());
  SimulationOptions o(Fidelity::kFast);
  o.vcd_file = (std::filesystem::temp_directory_path() / "bitsim-simulation-test.vcd").string();
  EXPECT_THROW((void)make_simulation(make_sim_config(board_params()), tiny(), scales, o), Error);
}

TEST(Simulation, HostProgramErrorsComeBackFromTheClockedBoard) {
  const model::KvScales scales = scales_of(tiny());
  const auto sim = make_simulation(make_sim_config(board_params()), tiny(), scales, SimulationOptions(Fidelity::kCycle));
  EXPECT_THROW(sim->run([](host::TokenLoop&) { throw Error("from the PS thread"); }), Error);
}

}  // namespace
}  // namespace bitsim::sim
