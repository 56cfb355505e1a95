// The energy account of a run (sim/energy_account.h, docs/energy.md): the same energy in both
// fidelities token by token, the parts adding up to the total, an idle interval drawing only
// static and background power, a faster clock trading PL power for time, and bad energy keys
// refused naming the key.
#include "sim/energy_account.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "sim/board_config.h"
#include "sim/board_run.h"

namespace bitsim::sim {
namespace {

BoardRunRequest request(Fidelity f, const std::vector<std::string>& sets = {}) {
  BoardRunRequest r{RunRequest{}, board_params()};
  r.run.model = "synthetic:tiny";
  r.run.prompt = "Energy";
  r.run.tokens = 4;
  r.fidelity = f;
  for (const auto& s : sets) r.params.set(s, "test");
  return r;
}

TEST(EnergyAccount, BothFidelitiesGiveTheSameEnergyTokenByToken) {
  const BoardRunResult fast = run_board(request(Fidelity::kFast));
  const BoardRunResult cycle = run_board(request(Fidelity::kCycle));
  ASSERT_EQ(fast.tokens.size(), cycle.tokens.size());
  ASSERT_GT(fast.tokens.size(), 4u);
  for (size_t i = 0; i < fast.tokens.size(); ++i) {
    EXPECT_GT(fast.tokens[i].energy_mj, 0.0);
    EXPECT_EQ(fast.tokens[i].energy_mj, cycle.tokens[i].energy_mj) << "token " << i;
    EXPECT_EQ(fast.tokens[i].dram_mj, cycle.tokens[i].dram_mj) << "token " << i;
    EXPECT_EQ(fast.tokens[i].pl_mj, cycle.tokens[i].pl_mj) << "token " << i;
  }
}

TEST(EnergyAccount, TheComponentsOfEveryTokenAddUpToItsTotal) {
  const BoardRunResult r = run_board(request(Fidelity::kFast, {"prefill.tokens_per_pass=3", "host.walker=pl"}));
  for (const TokenRecord& t : r.tokens) {
    double sum = 0;
    for (const auto& c : energy::components(t.energy, r.energy_config, energy::DramModel::kBytes)) sum += c.mj;
    EXPECT_NEAR(sum, t.energy_mj, 1e-9 * t.energy_mj);
    EXPECT_NEAR(t.dram_mj + t.pl_mj + t.ps_mj, t.energy_mj, 1e-9 * t.energy_mj);
    EXPECT_GT(t.energy.pl_dynamic[size_t(energy::Circuit::kWalker)], 0.0) << "the PL walker toggles";
    // The extra vectors toggle in the prompt's chunks of V > 1 only; their clock runs always.
    if (t.chunk_tokens > 1) EXPECT_GT(t.energy.pl_dynamic[size_t(energy::Circuit::kPrefill)], 0.0) << t.index;
    else EXPECT_EQ(t.energy.pl_dynamic[size_t(energy::Circuit::kPrefill)], 0.0) << t.index;
    EXPECT_GT(t.energy.pl_clock[size_t(energy::Circuit::kPrefill)], 0.0) << t.index;
  }
}

TEST(EnergyAccount, AnIdleBoardDrawsOnlyStaticAndBackgroundPower) {
  const SimConfig cfg = make_sim_config(board_params());
  const EnergyAccount a = energy_account(cfg, model::ModelConfig::bitnet_large(), 512);
  const energy::Breakdown idle = idle_energy(a, 1'000'000'000);  // 1 ms
  EXPECT_GT(idle.total(), 0.0);
  EXPECT_DOUBLE_EQ(idle.total(), idle.background());
  EXPECT_EQ(idle.dram_read + idle.dram_write + idle.dram_act_pre + idle.ps_compute + idle.ps_wait, 0.0);
  for (double d : idle.pl_dynamic) EXPECT_EQ(d, 0.0);
  // The same 1 ms with the CPU computing costs more than idling.
  host::TokenTiming t;
  t.cpu_ps = 1'000'000'000;
  EXPECT_GT(token_energy(a, t).total(), idle.total());
}

TEST(EnergyAccount, BadEnergyKeysAreRefusedNamingTheKey) {
  for (const auto& [set, key] : std::vector<std::pair<std::string, std::string>>{
           {"energy.dram.vdd_v=0", "energy.dram.vdd_v"},
           {"energy.dram.idd4r_ma=10", "energy.dram.idd4r_ma"},
           {"energy.ps.static_w=2", "energy.ps.static_w"}}) {
    ParamSet p = board_params();
    if (set.find("idd4r") != std::string::npos) p.set("energy.dram.idd_set=custom", "test");
    try {
      p.set(set, "test");
      (void)make_sim_config(p);
      ADD_FAILURE() << set << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace bitsim::sim
