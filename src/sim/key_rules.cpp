#include "sim/key_rules.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::sim {

void check_key_rules(const ParamSet& p) {
  const double pass = p.real("timing.pass_mhz"), fail = p.real("timing.fail_mhz");
  if (!(pass < fail))
    throw Error(fmt::format("timing.pass_mhz = {} is not below timing.fail_mhz = {}: a clock known to close timing "
                            "must be below the one known to fail (every clock would be labelled failing)",
                            p.to_string("timing.pass_mhz"), p.to_string("timing.fail_mhz")));
  // The contiguous region lies inside the DDR: the DDR below cma.base is what Linux keeps
  // for itself, and cma.mib may take at most the rest.
  const uint64_t ddr_mib = uint64_t(p.integer("ddr.size_mib"));
  const uint64_t base = uint64_t(p.integer("cma.base")), mib = uint64_t(p.integer("cma.mib"));
  const uint64_t ddr = ddr_mib << 20, room = ddr - std::min(ddr, base);
  if (mib << 20 > room)
    throw Error(fmt::format("cma.mib = {} is more than ddr.size_mib = {} less the {:.1f} MiB below cma.base = {} (0x{:x}) "
                            "that Linux keeps: {:.1f} MiB; the contiguous region must lie inside the DDR",
                            mib, ddr_mib, double(std::min(ddr, base)) / 1048576.0, base, base,
                            double(room) / 1048576.0));
}

}  // namespace bitsim::sim
