#pragma once
// The board config: every parameter of the DDR, ports, DMAs, circuits, driver and CPU, as
// documented keys (ParamSet), and their translation into the typed config structs of the
// modules. The facts of each key (default, range, unit, evidence, meaning) live next to its
// field in the module's config struct; configs/pynq-z2.toml is their dump.
#include <string>
#include <vector>

#include "host/cpu_model.h"
#include "host/dma_driver.h"
#include "host/memory_map.h"
#include "energy/energy_model.h"
#include "host/prefill.h"
#include "host/walker.h"
#include "hw/board.h"
#include "sim/params.h"

namespace bitsim::sim {

// Every key, with its default, range, unit, evidence label and meaning, taken from the
// modules' config structs (their visit(), base/config_field.h): the defaults are the shipped
// board, hw::BoardConfig{}.
ParamSet board_params();

// The text of a board config file (configs/pynq-z2.toml is board_params()'s): a header, then
// every key with its meaning, range, unit and evidence label (`bitsim config --dump`).
std::string config_file_text(const ParamSet& p);

// The default config file shipped with bitsim (configs/pynq-z2.toml), found next to the
// binary's source tree; empty when not found.
std::string default_config_path();

// The TOML file load_board_params(config) reads: `config`, or default_config_path() when
// empty (itself empty when the shipped file is not found). A command's input: no output of
// the command may replace it (base/file_io.h, check_outputs).
std::string board_config_file(const std::string& config);

// The board config of a command before its overrides: board_params(), then the TOML file
// board_config_file(config). Overrides follow with ParamSet::set.
ParamSet load_board_params(const std::string& config);

struct SimConfig {
  hw::BoardConfig board;
  host::DriverConfig driver;
  host::CpuModelConfig cpu;
  host::MemoryMapConfig memory;
  host::WalkerConfig walker;  // host.walker and the walker's keys (host/walker.h)
  energy::EnergyConfig energy;  // energy.* (energy/energy_model.h, docs/energy.md)
};

// The modules' own checks (ranges and the rules between fields): bitsim::Error naming the key.
void validate(const SimConfig& c);

// Builds the typed configs from the keys (the driver profile selects driver.c.* or
// driver.python.*) and validates them.
SimConfig make_sim_config(const ParamSet& p);

}  // namespace bitsim::sim
