#pragma once
// `bitsim sweep --out DIR [--shard K/N] [--resume]`, `bitsim sweep --slurm-script FILE` and
// `bitsim sweep merge DIR`: the campaign side of the sweep command (study/campaign.h,
// docs/campaigns.md). cli/sweep_command.cpp registers these options on its `sweep` subcommand.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "sim/params.h"
#include "study/sweep.h"

namespace bitsim::cli {

struct CampaignCli {
  std::string out;            // --out DIR
  std::string shard;          // --shard K/N
  bool resume = false;
  bool allow_mixed = false;
  std::string slurm_script;   // --slurm-script FILE
  int shards = 8;             // --shards N (array tasks of the script)
  int max_running = 4;        // --max-running M (the array's % cap)
  std::string partition;      // --partition P (optional)
};

struct MergeCli {
  CLI::App* sub = nullptr;
  std::string dir, csv, json;
  bool partial = false, allow_mixed = false;
};

// The sweep's own arguments as given (for the Slurm script's command line and checks).
struct SweepCommandLine {
  std::string config;
  std::vector<std::string> sets, grid;
  std::string csv, json;
};

void add_campaign_options(CLI::App* sweep, CampaignCli& c);
void add_merge_subcommand(CLI::App* sweep, MergeCli& m);
bool campaign_requested(const CampaignCli& c);
int run_campaign(const sim::ParamSet& base, const study::SweepOptions& options, const CampaignCli& c,
                 const SweepCommandLine& line, bool quiet);
int run_merge(const MergeCli& m);

}  // namespace bitsim::cli
