#pragma once
// `bitsim replay`: a recorded MMIO program on the simulated board, every read compared with the
// recording (docs/mmio-record.md); exit 3 on a difference.
#include <memory>

#include "cli/command.h"

namespace bitsim::cli {

std::unique_ptr<Command> add_replay_command(CLI::App& app);

}  // namespace bitsim::cli
