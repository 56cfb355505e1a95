#include "hw/memory_model.h"

#include <fmt/format.h>


namespace bitsim::hw {

void MemoryTiming::key_state(const MemoryState& state, std::string& key) const {
  if (state.empty()) return;
  key += "m";
  for (const uint64_t w : state.words) key += fmt::format("{:x},", w);
  key += ';';
}

// The fast-side part of each model of make_memory (hw/memory.cpp): neither shipped model
// carries state, and their timing depends on no address fact beyond the 4 KB rule.
std::unique_ptr<MemoryTiming> make_memory_timing(const DdrConfig& config) {
  config.validate("memory model");  // a model outside ddr.model's choices, named with them
  return std::make_unique<MemoryTiming>();
}

}  // namespace bitsim::hw
