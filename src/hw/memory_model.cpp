#include "hw/memory_model.h"

#include <fmt/format.h>

#include "base/error.h"
#include "hw/ddr3_timing.h"


namespace bitsim::hw {

void MemoryTiming::key_state(const MemoryState& state, std::string& key) const {
  if (state.empty()) return;
  key += "m";
  for (const uint64_t w : state.words) key += fmt::format("{:x},", w);
  key += ';';
}

namespace {

// ddr.model = ddr3's fast side: the same words as Ddr3Memory::carried_state (a tag, the
// clock crossing's phase, Ddr3Timing::save), advanced over a gap by the engine itself, and
// every buffer's address in the key (its banks and rows set the timing).
class Ddr3MemoryTiming : public MemoryTiming {
 public:
  Ddr3MemoryTiming(const Ddr3Config& c, uint64_t pl_period_ps)
      : config_(c), crossing_(ddr3_board_clock(c, pl_period_ps)) {}
  void key_facts(uint64_t addr, uint64_t, std::string& key) const override { key += fmt::format("@{:x}", addr); }
  MemoryState initial_state() const override { return MemoryState{ddr3_carry(ddr3_board_engine(config_, crossing_), crossing_, 0)}; }
  MemoryState advance(const MemoryState& state, uint64_t idle_cycles) const override {
    Ddr3Timing t = ddr3_board_engine(config_, crossing_);
    const Ddr3Crossing x = ddr3_restore(t, crossing_, state.words, "memory model");
    return idle_cycles == 0 ? state : MemoryState{ddr3_carry(t, x, idle_cycles)};
  }

 private:
  Ddr3Config config_;
  Ddr3Crossing crossing_;
};

}  // namespace

// The fast-side part of each model of make_memory (hw/memory.cpp): wall and
// latency-bandwidth carry no state and their timing depends on no address fact beyond the
// 4 KB rule; ddr3 carries its state and keys on addresses.
std::unique_ptr<MemoryTiming> make_memory_timing(const DdrConfig& config, uint64_t pl_period_ps) {
  config.validate("memory model");  // a model outside ddr.model's choices, named with them
  if (config.model == "ddr3") return std::make_unique<Ddr3MemoryTiming>(config.ddr3, pl_period_ps);
  return std::make_unique<MemoryTiming>();
}

}  // namespace bitsim::hw
