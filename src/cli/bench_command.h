#pragma once
// `bitsim bench`: how fast the simulator is on this host (study/bench.h).
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/options.h"
#include "study/bench.h"

namespace bitsim::cli {

std::unique_ptr<Command> add_bench_command(CLI::App& app);

// The command line of one `bitsim run` process of the bench: the executable `exe` with the
// process's flags and the board config's (--config as an absolute path, every --set).
std::vector<std::string> bench_run_command(const std::string& exe, const BoardArgs& board,
                                           const study::BenchRunProcess& p);
// The same run as a user types it (for the bench's texts): "bitsim run --model M --prompt A
// --tokens N [--set KEY=VALUE ...] [--no-check]", leaving out an empty model or prompt and 0 tokens.
std::string bench_run_text(const study::BenchRunProcess& p);

}  // namespace bitsim::cli
