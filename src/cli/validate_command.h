#pragma once
// `bitsim validate`: the simulator against the board's measurements (study/calibrate.h).
#include <memory>

#include "cli/command.h"

namespace bitsim::cli {

std::unique_ptr<Command> add_validate_command(CLI::App& app);

}  // namespace bitsim::cli
