#pragma once
// `bitsim calibrate`: fits the calibrated parameters to the board's figures (study/calibrate.h).
#include <memory>

#include "cli/command.h"

namespace bitsim::cli {

std::unique_ptr<Command> add_calibrate_command(CLI::App& app);

}  // namespace bitsim::cli
