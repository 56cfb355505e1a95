#pragma once
// `bitsim cache`: the start-up cache's info and clear (docs/cache.md).
#include <memory>

#include "cli/command.h"

namespace bitsim::cli {

std::unique_ptr<Command> add_cache_command(CLI::App& app);

}  // namespace bitsim::cli
