#pragma once
// `bitsim config`: the effective board config: every key documented (--dump) or the keys that
// differ from the defaults.
#include <memory>

#include "cli/command.h"

namespace bitsim::cli {

std::unique_ptr<Command> add_config_command(CLI::App& app);

}  // namespace bitsim::cli
