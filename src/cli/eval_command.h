#pragma once
// `bitsim eval`: perplexity of a text under the model's, the board's and the variants'
// arithmetics (study/eval.h).
#include <memory>

#include "cli/command.h"

namespace bitsim::cli {

std::unique_ptr<Command> add_eval_command(CLI::App& app);

}  // namespace bitsim::cli
