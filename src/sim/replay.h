#pragma once
// Replay: runs an MmioProgram (host/mmio_program.h) on the simulated board in either
// fidelity and compares every read with the program's. `bitsim replay FILE` and the
// register differential test use it.
#include "host/mmio_program.h"
#include "hw/board.h"

namespace bitsim::sim {

// `cycle`: the clocked board (SystemC); otherwise the fast board. Throws bitsim::Error for
// what the program does wrong (an access the board rejects, an op before the platform's
// clock) or what the fidelity cannot model.
host::ReplayResult replay_program(const host::MmioProgram& program, const hw::BoardConfig& board, bool cycle);

}  // namespace bitsim::sim
