#pragma once
// `bitsim sweep`: a grid of board configs, timing-only at a context T, to CSV/JSON after one
// functional check of the base config (study/sweep.h); with --out, --shard, --resume or
// --slurm-script a campaign, and `bitsim sweep merge DIR` (cli/sweep_campaign.h).
#include <memory>

#include "cli/command.h"

namespace bitsim::cli {

std::unique_ptr<Command> add_sweep_command(CLI::App& app);

}  // namespace bitsim::cli
