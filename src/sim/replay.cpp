#include "sim/replay.h"

namespace bitsim::sim {

host::ReplayResult replay_program(const host::MmioProgram& program, const hw::BoardConfig& board, Fidelity fidelity) {
  SimulationOptions options(fidelity, 1);
  const auto machine = make_machine(board, options);
  host::ReplayResult result;
  machine->run([&] { result = host::run_program(program, machine->platform()); });
  return result;
}

}  // namespace bitsim::sim
