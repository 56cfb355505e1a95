#pragma once
// `bitsim make-model`: a synthetic checkpoint in the real file layout (model/synthetic.h).
#include <memory>

#include "cli/command.h"

namespace bitsim::cli {

std::unique_ptr<Command> add_make_model_command(CLI::App& app);

}  // namespace bitsim::cli
