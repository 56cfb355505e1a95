#pragma once
// Replay: runs an MmioProgram (host/mmio_program.h) on a machine of either fidelity
// (sim/simulation.h) and compares every read with the program's. `bitsim replay FILE` and
// the register differential test use it.
#include "host/mmio_program.h"
#include "hw/board.h"
#include "sim/simulation.h"

namespace bitsim::sim {

// Throws bitsim::Error for what the program does wrong (an access the board rejects, an op
// due before the platform's clock).
host::ReplayResult replay_program(const host::MmioProgram& program, const hw::BoardConfig& board, Fidelity fidelity);

}  // namespace bitsim::sim
