#pragma once
// `bitsim inspect`: a model's shape, parameters, zero fraction, packed image size and KV capacity.
#include <memory>

#include "cli/command.h"

namespace bitsim::cli {

std::unique_ptr<Command> add_inspect_command(CLI::App& app);

}  // namespace bitsim::cli
