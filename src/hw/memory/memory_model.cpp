#include "hw/memory/memory_model.h"

#include <fmt/format.h>

#include "base/error.h"
#include "hw/memory/memory_registry.h"


namespace bitsim::hw {

void MemoryTiming::key_state(const MemoryState& state, std::string& key) const {
  if (state.empty()) return;
  key += "m";
  for (const uint64_t w : state.words) key += fmt::format("{:x},", w);
  key += ';';
}


// The fast half the model's registration names (hw/memory/memory_registry.h); a model that
// names none carries no state and keys on no address fact beyond the 4 KB rule.
std::unique_ptr<MemoryTiming> make_memory_timing(const DdrConfig& config, uint64_t pl_period_ps) {
  config.validate("memory model");  // a model outside the registry's names, named with them
  const MemoryKind& kind = config.kind();
  if (kind.fast) return kind.fast(config, pl_period_ps);
  return std::make_unique<MemoryTiming>();
}

}  // namespace bitsim::hw
