#pragma once
// The board's energy account (docs/energy.md, "Where the activity comes from"): what a token,
// a prefill chunk or a whole run costs in joules, by component, from the token's simulated
// figures (host::TokenTiming) and the design's resource estimates. Every input is a figure
// both fidelities give identically, so the energy is identical in both, token by token.
//
//   - the PL circuits: each engine is busy for its calls' spans (matmul_ps, attention_ps),
//     the four DMAs for both, the PL walker for its steps (walker_ps), the prefill vectors
//     with the matmul engine; the PL clock runs for the whole token;
//   - the DRAM: under ddr.model = ddr3 from the commands the engine issued and the device
//     cycles with a bank open (TokenTiming::dram, both fidelities alike), the CPU's own
//     traffic as whole bursts; under wall and latency-bandwidth the bytes the PL read plus
//     the CPU's traffic (the bytes it cleaned to DDR, the results it invalidated and read
//     back, which the PL wrote), priced per byte with background and refresh over the
//     token's time (the approximation of docs/energy.md);
//   - the PS: computing for the CPU steps and the driver's fixed work (cpu_ps +
//     fixed_call_ps), waiting (polling DMASR) for the rest of the calls and the walker.
#include <cstdint>
#include <optional>

#include "energy/energy_model.h"
#include "host/prefill.h"
#include "host/token_loop.h"
#include "host/walker.h"
#include "hw/circuits/attention_resources.h"

namespace bitsim::sim {

struct SimConfig;

// What does not change from token to token: the config, the PL clock, the circuits'
// resources, the DRAM's geometry.
struct EnergyAccount {
  energy::EnergyConfig config;
  energy::Activity design;  // the circuits' resources and instances, the clock, the DRAM; no activity
  double dram_bytes_per_s = 2.009e9;  // the rate at which the DRAM's busy time is charged (ddr.wall_gb_s)
};

// The design's account: the matmul engine (the board's LUT share less the attention unit and
// the DMAs: it has no estimate of its own), the attention unit the config builds, the four
// DMAs, the PL walker and the prefill vectors when the config has them.
// `model` and `capacity`: the walker's tables and the prefill vectors are sized for them.
EnergyAccount energy_account(const SimConfig& config, const model::ModelConfig& model, int capacity);

// The energy of one token's (or chunk's, or its share's) figures; `chunk_tokens`: the V of the
// prefill chunk they belong to (the extra vectors of a P-vector engine toggle only when V > 1;
// their clock tree runs always).
energy::Breakdown token_energy(const EnergyAccount& account, const host::TokenTiming& t, int chunk_tokens = 1);

// The evidence label of every energy figure the config gives, and what it rests on: the
// published IDD set it names (datasheet) or the user's currents (custom), the PL's and PS7's
// vendor estimates, the model's own coefficients.
// `approximate`: the times the energy follows are approximate (sim::approximate_timing), and
// the label begins by saying so.
std::string energy_evidence(const energy::EnergyConfig& config, bool approximate = false);

// The energy of an idle interval of `ps` (static power and background only).
energy::Breakdown idle_energy(const EnergyAccount& account, uint64_t ps);

// A set of tokens' energy: their sum, and the figures every output prints (all simulated:
// datasheet IDD currents, vendor power estimates and the model's choices, docs/energy.md).
struct EnergyFigures {
  energy::Breakdown total;        // mJ by component, summed
  uint64_t tokens = 0, ps = 0;    // the tokens and their simulated time
  double mj_per_token() const { return tokens ? total.total() / double(tokens) : 0.0; }
  double avg_power_w() const { return energy::average_power_w(total, ps); }
  double tokens_per_j() const { return total.total() > 0 ? double(tokens) / (total.total() * 1e-3) : 0.0; }
  void add(const energy::Breakdown& b, uint64_t tokens_, uint64_t ps_) {
    total += b;
    tokens += tokens_;
    ps += ps_;
  }
};

}  // namespace bitsim::sim
