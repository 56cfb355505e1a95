#pragma once
// `bitsim membench`: UG585's DDR efficiency table through the DDR3 model (study/membench.h).
#include <memory>

#include "cli/command.h"

namespace bitsim::cli {

std::unique_ptr<Command> add_membench_command(CLI::App& app);

}  // namespace bitsim::cli
