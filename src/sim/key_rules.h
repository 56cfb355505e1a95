#pragma once
// The rules between board config keys that no module's config struct checks, because the
// keys live in different structs or in none (the timing facts of the sweeps): a config whose
// keys contradict each other is a bitsim::Error naming both keys and their values.
#include "sim/params.h"

namespace bitsim::sim {

// timing.pass_mhz below timing.fail_mhz (a clock cannot both close and fail timing); the
// contiguous region (cma.base, cma.mib) inside the DDR (ddr.size_mib), the DDR below
// cma.base being what Linux keeps.
void check_key_rules(const ParamSet& p);

}  // namespace bitsim::sim
