#include "sim/key_rules.h"

#include <fmt/format.h>

#include "base/error.h"
#include "host/memory_map.h"

namespace bitsim::sim {

void check_key_rules(const ParamSet& p) {
  const double pass = p.real("timing.pass_mhz"), fail = p.real("timing.fail_mhz");
  if (!(pass < fail))
    throw Error(fmt::format("timing.pass_mhz = {} is not below timing.fail_mhz = {}: a clock known to close timing "
                            "must be below the one known to fail (every clock would be labelled failing)",
                            p.to_string("timing.pass_mhz"), p.to_string("timing.fail_mhz")));
  const uint64_t ddr = host::MemoryMapConfig{}.ddr_bytes;
  const uint64_t base = uint64_t(p.integer("cma.base")), mib = uint64_t(p.integer("cma.mib"));
  if (base + (mib << 20) > ddr)
    throw Error(fmt::format("cma.base = {} (0x{:x}) with cma.mib = {} ends at 0x{:x}, past the end of the {} MiB DDR: "
                            "the contiguous region must lie inside it",
                            base, base, mib, base + (mib << 20), ddr >> 20));
}

}  // namespace bitsim::sim
