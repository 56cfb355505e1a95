#pragma once
// `bitsim regress`: the regression suite against its checked-in baselines (study/regress.h,
// docs/regress.md). Exit 0: every figure as in the baselines; 1: a figure moved.
#include <memory>

#include "cli/command.h"

namespace bitsim::cli {

std::unique_ptr<Command> add_regress_command(CLI::App& app);

}  // namespace bitsim::cli
