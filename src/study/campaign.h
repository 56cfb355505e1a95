#pragma once
// Campaigns: a sweep split into shards that run anywhere (one machine, a Slurm array), each
// point's result in its own file in a campaign directory, and a merge that checks nothing
// is missing (docs/campaigns.md).
//
//   DIR/campaign.json          the grid (every point, its key and file), tokens, context, the
//                              base config and its hash: written by the first shard to start
//   DIR/points/<hash>.json     one point's full config, figures and provenance, or its error;
//                              written atomically (temp file + rename)
//
// A point's key is its swept keys' values in canonical form, "key=value\n" sorted by key
// (values as the config prints them, so 125 and 125.0 are one point). Its hash is FNV-1a 64
// of the key through the splitmix64 finalizer; shard K of N (0 <= K < N) runs the points with hash mod N == K, so a point
// always lands in the same shard whatever the order of the axes or the other points.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "sim/params.h"
#include "study/sweep.h"

namespace bitsim::study {

struct Shard {
  int index = 0;  // K, 0 <= K < count
  int count = 1;  // N
};
// "K/N" with 0 <= K < N <= 100000; a bitsim::Error naming the text otherwise, beginning
// with `origin` (where the text came from).
Shard parse_shard(const std::string& text, const std::string& origin = "shard");
// The shard of a Slurm array task: K = SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN, N =
// SLURM_ARRAY_TASK_COUNT (or MAX - MIN + 1). Empty outside an array task. A stepped or
// sparse array (COUNT != MAX - MIN + 1) is an Error: shards must be MIN..MAX, every one
// (the caller may name another way to give the shard).
// `env` is getenv (a parameter so that tests can give their own environment).
std::optional<Shard> shard_from_slurm(const std::function<const char*(const char*)>& env);

// The canonical key of a point over the swept keys, its 64-bit hash and its shard.
std::string point_key(const std::vector<std::string>& keys, const sim::ParamSet& point);
uint64_t point_hash(const std::string& key);
int shard_of(const std::string& key, int count);

struct CampaignOptions {
  std::string dir;
  Shard shard;
  bool resume = false;       // keep the valid results already in DIR, redo the rest
  bool allow_mixed = false;  // run although DIR's campaign has another base config
};

// run_shard's refusal of a campaign directory that an option of CampaignOptions would let it
// use (the CLI names that option's flag).
class CampaignRefused : public Error {
 public:
  enum class LiftedBy { kResume, kAllowMixed };
  CampaignRefused(const std::string& what, LiftedBy lifted) : Error(what), lifted_by(lifted) {}
  LiftedBy lifted_by;
};

struct ShardReport {
  int grid_points = 0, shard_points = 0, skipped = 0, ran = 0;
  std::vector<std::string> failed;    // "point: error"
  std::vector<std::string> warnings;  // corrupt result files redone, ...
  std::string base_check;
  double wall_s = 0;
};

// Runs this shard's points of the sweep, one result file each, in `options.jobs` worker
// processes. Writes DIR/campaign.json if absent; refuses (bitsim::Error) a DIR holding
// another campaign (other axes, tokens or context; another base config unless
// allow_mixed), or holding results of this shard's points without `resume` (those two as
// CampaignRefused).
ShardReport run_shard(const sim::ParamSet& base, const SweepOptions& options, const CampaignOptions& campaign,
                      const std::function<void(const std::string&)>& status = {});

struct MissingPoint {
  int index = 0;
  std::string point;  // "clock.mhz=100 dma.length_bits=23" (grid order, values as given)
  std::string file;   // DIR/points/<hash>.json
  std::string error;  // empty: no result file; else the point's error or why its file is invalid
  bool corrupt = false;  // the file is not a valid result of this campaign's point (error says why)
};

struct MergeResult {
  std::string dir;
  SweepOptions options;   // grid, tokens, context, check model of the campaign
  SweepResult result;     // the completed points, in grid order
  int total = 0;
  std::vector<MissingPoint> missing;  // missing or failed, in grid order
  std::vector<std::string> mixed;     // why rows cannot be merged as one campaign (empty: they can)
  std::string version, commit, base_config_hash;  // of campaign.json
  bool complete() const { return missing.empty(); }
};

// Reads DIR (campaign.json and every point's file). Never refuses: the caller decides.
MergeResult merge_campaign(const std::string& dir);
// The merged rows as `bitsim sweep --csv` writes them; an incomplete merge starts with one
// line "# PARTIAL: ...".
std::string merge_csv(const MergeResult& m);
// bitsim.sweep/1 with a "campaign" object (complete, partial, completed, total, missing).
nlohmann::json merge_json(const MergeResult& m);

}  // namespace bitsim::study
