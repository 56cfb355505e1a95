// The energy account of a run (sim/energy_account.h, docs/energy.md): the same energy in both
// fidelities token by token, the parts adding up to the total, an idle interval drawing only
// static and background power, a faster clock trading PL power for time, and bad energy keys
// refused naming the key.
#include "sim/energy_account.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "base/error.h"
#include "sim/board_config.h"
#include "sim/board_run.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

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

// ddr.model = ddr3: the DRAM is priced by the commands the engine issued, which both
// fidelities give token by token (the fast board from its batches' clocked runs and its idle
// gaps' refreshes, the clocked board from its own engine), a prompt in chunks too.
TEST(EnergyAccount, BothFidelitiesGiveTheSameDramCommandsTokenByToken) {
  for (const std::string prefill : {"prefill.tokens_per_pass=1", "prefill.tokens_per_pass=3"}) {
    const std::vector<std::string> sets = {"ddr.model=ddr3", prefill};
    const BoardRunResult fast = run_board(request(Fidelity::kFast, sets));
    const BoardRunResult cycle = run_board(request(Fidelity::kCycle, sets));
    ASSERT_EQ(fast.tokens.size(), cycle.tokens.size());
    hw::DramActivity run;
    for (size_t i = 0; i < fast.tokens.size(); ++i) {
      const hw::DramActivity& f = fast.tokens[i].timing.dram;
      EXPECT_EQ(f, cycle.tokens[i].timing.dram) << prefill << ", token " << i;
      EXPECT_EQ(fast.tokens[i].energy_mj, cycle.tokens[i].energy_mj) << prefill << ", token " << i;
      EXPECT_GT(f.counts.rd, 0u) << "token " << i;
      EXPECT_GT(f.open_cycles, 0u) << "token " << i;
      run += f;
    }
    EXPECT_GT(run.counts.act, 0u);
    EXPECT_GT(run.counts.ref, 0u);
    // Every byte the PL read came in a BL8 burst of the 16-bit bus (16 bytes): at least so many RDs.
    uint64_t bytes = 0;
    for (const TokenRecord& t : fast.tokens) bytes += t.timing.bytes_read;
    EXPECT_GE(run.counts.rd * 16, bytes);
  }
}

// The token's DRAM components under ddr3 are its commands at the IDD set's energies.
TEST(EnergyAccount, UnderDdr3TheDramIsPricedByItsCommands) {
  const BoardRunResult r = run_board(request(Fidelity::kFast, {"ddr.model=ddr3"}));
  const energy::DramEnergies e = energy::dram_energies(r.energy_config, energy::dram_timing(hw::Ddr3Config{}));
  for (const TokenRecord& t : r.tokens) {
    const hw::Ddr3CommandCounts& k = t.timing.dram.counts;
    EXPECT_NEAR(t.energy.dram_refresh, double(k.ref) * e.ref * 1e-9, 1e-15) << t.index;
    EXPECT_NEAR(t.energy.dram_act_pre, (double(k.act) * e.act + double(k.pre + k.prea_banks) * e.pre) * 1e-9, 1e-15)
        << t.index;
    // The reads: the PL's bursts and the CPU's read-back of the results, in whole bursts.
    const uint64_t cpu_rd = (t.timing.invalidated_bytes + 15) / 16;
    EXPECT_NEAR(t.energy.dram_read, double(k.rd + cpu_rd) * e.rd * 1e-9, 1e-15) << t.index;
  }
}

// `bitsim run --dram-commands FILE` (docs/energy.md, "DRAM commands and DRAMPower's trace"):
// DRAMPower's lines in cycle order, every command of the run's tokens among them; refused
// under the fast fidelity and under a memory without commands, naming the file.
TEST(EnergyAccount, TheDramCommandsFileHoldsEveryCommandOfTheRun) {
  test::TempDir d;
  std::filesystem::create_directories(d.path);
  BoardRunRequest r = request(Fidelity::kCycle, {"ddr.model=ddr3"});
  r.dram_commands_file = (d.path / "commands.txt").string();
  const BoardRunResult res = run_board(r);
  std::ifstream f(r.dram_commands_file);
  std::map<std::string, uint64_t> kinds;
  uint64_t last = 0, lines = 0;
  for (std::string line; std::getline(f, line); ++lines) {
    std::istringstream in(line);
    std::string cycle, kind, bank;
    ASSERT_TRUE(std::getline(in, cycle, ',') && std::getline(in, kind, ',') && std::getline(in, bank)) << line;
    const uint64_t c = std::stoull(cycle);
    EXPECT_GE(c, last) << "line " << lines << ": " << line;
    last = c;
    ++kinds[kind];
    EXPECT_LT(std::stoul(bank), 8u) << line;
  }
  hw::DramActivity tokens;
  for (const TokenRecord& t : res.tokens) tokens += t.timing.dram;
  EXPECT_GT(lines, 100u);
  // Every ACT, RD, WR and PRE is a token's (the board is idle outside them); the refreshes
  // of the idle time before the first token are in the file only.
  EXPECT_EQ(kinds["ACT"], tokens.counts.act);
  EXPECT_EQ(kinds["RD"], tokens.counts.rd);
  EXPECT_EQ(kinds["WR"], tokens.counts.wr);
  EXPECT_EQ(kinds["PRE"], tokens.counts.pre);
  EXPECT_GE(kinds["REF"], tokens.counts.ref);
  EXPECT_GE(kinds["PREA"], tokens.counts.prea);

  BoardRunRequest fast = request(Fidelity::kFast, {"ddr.model=ddr3"});
  fast.dram_commands_file = (d.path / "fast.txt").string();
  EXPECT_NE(test::error_of([&] { run_board(fast); }).find("fast.txt"), std::string::npos);
  BoardRunRequest wall = request(Fidelity::kCycle);
  wall.dram_commands_file = (d.path / "wall.txt").string();
  const std::string e = test::error_of([&] { run_board(wall); });
  EXPECT_NE(e.find("wall.txt"), std::string::npos) << e;
  EXPECT_NE(e.find("ddr.model = wall"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(d.path / "fast.txt"));
  EXPECT_FALSE(std::filesystem::exists(d.path / "wall.txt"));
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
