#pragma once
// `bitsim run`: a prompt token by token on the simulated board, every token's logits checked
// against the golden reference (sim/board_run.h).
#include <memory>

#include "cli/command.h"

namespace bitsim::cli {

std::unique_ptr<Command> add_run_command(CLI::App& app);

}  // namespace bitsim::cli
