#include "sim/energy_account.h"

#include <algorithm>
#include <cmath>

#include "hw/memory/memory_model.h"
#include "hw/parts/clock.h"
#include "sim/board_config.h"
#include "sim/board_run.h"

namespace bitsim::sim {

namespace {
using energy::Circuit;

energy::Resources resources_of(int lut, int bram36, int dsp) {
  energy::Resources r;
  r.lut = lut;
  r.bram36 = bram36;
  r.dsp = dsp;
  return r;
}
// ddr.model = ddr3 (docs/energy.md, "Where the activity comes from"): the commands the engine
// issued for the PL's transfers, and the device cycles with a bank open; the CPU's own DDR
// traffic, which the DRAM model does not time, as whole BL8 bursts of the bus in open rows
// (a read burst per burst of results it reads back, a write burst per burst it cleans).
void dram_commands(energy::Activity& a, const host::TokenTiming& t) {
  const hw::Ddr3CommandCounts& k = t.dram.counts;
  const uint64_t burst = uint64_t(a.dram.bus_bytes) * a.dram.burst_length;
  const auto bursts = [&](uint64_t bytes) { return (bytes + burst - 1) / burst; };
  energy::DramCommands& c = a.commands;
  c.act = k.act;
  c.pre = k.pre;
  c.prea_banks = k.prea_banks;
  c.rd = k.rd + bursts(t.invalidated_bytes);
  c.wr = k.wr + bursts(t.flushed_bytes);
  c.ref = k.ref;
  // The interval's device cycles run from its first edge's to its last edge's: a few cycles
  // more than its picoseconds hold when a bank is open throughout.
  const uint64_t device_cycles = uint64_t(double(a.duration_ps) * a.dram.clock_mhz * 1e-6);
  c.open_cycles = std::min(t.dram.open_cycles, device_cycles);
  c.precharged_cycles = device_cycles - c.open_cycles;
}
}  // namespace

EnergyAccount energy_account(const SimConfig& config, const model::ModelConfig& model, int capacity) {
  const hw::AttentionResources attention = hw::attention_resources(config.board.attention);
  std::optional<host::WalkerResources> walker;
  if (config.walker.pl()) walker = host::walker_resources(config.walker, model, capacity);
  const host::PrefillResources prefill = prefill_resources_of(config, model, capacity);
  EnergyAccount a;
  a.config = config.energy;
  energy::Activity& d = a.design;
  d.pl_period_ps = hw::clock_period_ps(config.board.clock.mhz);
  // A memory model that issues DRAM commands (ddr3) is priced by them; the others by bytes.
  d.dram_model = hw::make_memory_timing(config.board.ddr, d.pl_period_ps)->ledger() ? energy::DramModel::kCommands
                                                                                    : energy::DramModel::kBytes;
  d.dram = energy::dram_timing(config.board.ddr.ddr3);
  a.dram_bytes_per_s = config.board.ddr.wall_bytes_per_s;
  // The matmul engine: the board's LUTs (BOARD.md: 34%) less the board's attention unit and
  // the four DMAs; its x buffers' BRAM36 (two lanes, docs/prefill.md 4).
  const hw::AttentionResources board_unit = hw::attention_resources(hw::AttentionUnitConfig{});
  const double board_lut = host::WalkerResources::kBoardLutShare * host::WalkerResources::kDeviceLut;
  const double matmul_lut = std::max(0.0, board_lut - board_unit.lut - 4 * a.config.dma_lut);
  d.circuit(Circuit::kMatmul).resources =
      resources_of(int(std::lround(matmul_lut)), 2 * host::kPrefillXBram36PerVector, 0);
  d.circuit(Circuit::kAttention).resources = resources_of(attention.lut, attention.bram36, attention.dsp);
  d.circuit(Circuit::kDma).resources = energy::dma_resources(a.config);
  d.circuit(Circuit::kDma).instances = 4;
  if (walker) d.circuit(Circuit::kWalker).resources = resources_of(walker->lut, walker->bram36, walker->dsp);
  if (prefill.tokens_per_pass > 1)
    d.circuit(Circuit::kPrefill).resources = resources_of(prefill.lut, prefill.bram36, prefill.dsp);
  return a;
}

energy::Breakdown token_energy(const EnergyAccount& account, const host::TokenTiming& t, int chunk_tokens) {
  energy::Activity a = account.design;
  const uint64_t period = a.pl_period_ps;
  a.duration_ps = t.total_ps();
  auto cycles = [&](uint64_t ps) { return ps / period; };
  a.circuit(Circuit::kMatmul).busy_cycles = cycles(t.matmul_ps);
  a.circuit(Circuit::kAttention).busy_cycles = cycles(t.attention_ps);
  a.circuit(Circuit::kDma).busy_cycles = 2 * cycles(t.matmul_ps + t.attention_ps);  // a call's two DMAs
  if (a.circuit(Circuit::kWalker).resources.lut > 0) a.circuit(Circuit::kWalker).busy_cycles = cycles(t.walker_ps);
  if (a.circuit(Circuit::kPrefill).resources.lut > 0 && chunk_tokens > 1)
    a.circuit(Circuit::kPrefill).busy_cycles = cycles(t.matmul_ps);
  if (a.dram_model == energy::DramModel::kCommands) {
    dram_commands(a, t);
  } else {
    a.dram_bytes_read = t.bytes_read + t.invalidated_bytes;
    a.dram_bytes_written = t.flushed_bytes + t.invalidated_bytes;
    // The device moves data for the bytes' time at the wall's rate (a bank counted open then).
    const double busy = double(a.dram_bytes_read + a.dram_bytes_written) / account.dram_bytes_per_s * 1e12;
    a.dram_busy_ps = std::min(a.duration_ps, uint64_t(std::llround(busy)));
  }
  const uint64_t compute = std::min(a.duration_ps, t.cpu_ps + t.fixed_call_ps);
  a.cpu_compute_ps = compute;
  a.cpu_wait_ps = a.duration_ps - compute;
  return energy::energy(account.config, a);
}

std::string energy_evidence(const energy::EnergyConfig& config, bool approximate) {
  const std::string dram = config.idd_set == "custom" ? "custom IDD currents"
                                                      : "the " + config.idd_set + " IDD set (datasheet)";
  return std::string(approximate ? "approximate (ddr3.fast_reuse) times, " : "") + "simulated: " + dram +
         ", vendor power estimates for the PS7 and the PL's static power, the model's coefficients";
}

energy::Breakdown idle_energy(const EnergyAccount& account, uint64_t ps) {
  energy::Activity a = account.design;
  a.duration_ps = ps;
  // An idle interval's only DRAM commands are its refreshes, one each tREFI with every bank
  // precharged: what the per-byte model charges for no bytes, whatever the memory model.
  a.dram_model = energy::DramModel::kBytes;
  return energy::energy(account.config, a);
}

}  // namespace bitsim::sim
