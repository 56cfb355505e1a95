#pragma once
// The board config: every parameter of the DDR, ports, DMAs, circuits, driver and CPU, as
// documented keys (ParamSet), and their translation into the typed config structs of the
// modules. configs/pynq-z2.toml holds the same keys with the board's values.
#include <string>

#include "host/cpu_model.h"
#include "host/dma_driver.h"
#include "host/memory_map.h"
#include "hw/board.h"
#include "sim/params.h"

namespace bitsim::sim {

// Every key, with its default, range, unit, evidence label and meaning.
ParamSet board_params();

// The default config file shipped with bitsim (configs/pynq-z2.toml), found next to the
// binary's source tree; empty when not found.
std::string default_config_path();

struct SimConfig {
  hw::BoardConfig board;
  host::DriverConfig driver;
  host::CpuModelConfig cpu;
  host::MemoryMapConfig memory;
};

// Builds the typed configs from the keys (the driver profile selects driver.c.* or
// driver.python.*).
SimConfig make_sim_config(const ParamSet& p);

}  // namespace bitsim::sim
