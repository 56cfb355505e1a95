#pragma once
// The records of `bitsim run` as bitsim.run/1 writes them: one token (sim::TokenRecord) and
// the run's summary figures (RunSummary), each with its fields once (study/record.h;
// docs/json-schemas.md, "tokens" and "summary").
#include <cstdint>
#include <optional>
#include <string>

#include "sim/board_run.h"
#include "study/record.h"

namespace bitsim::sim {

const Fields<TokenRecord>& run_token_fields();

// The summary's figures over the run's tokens (the nested objects, the mismatch and the
// capacity stop are written beside them).
struct RunSummary {
  uint64_t tokens = 0;
  int generated = 0;
  double tok_s = 0, median_total_ms = 0;  // 1000 / median, the median token (simulated)
  double simulated_s = 0;                 // the sum of total_ms
  double wall_s = 0, first_token_s = 0, load_s = 0, calibration_s = 0;
  bool model_cached = false, scales_cached = false;
  double sim_tok_per_wall_s = 0;
  int logits_checked = 0;
  double driver_calls_per_token = 0, fixed_call_ms_per_token = 0, fixed_cost_share = 0;
  std::string fixed_cost_share_evidence = "simulated";
  std::optional<bool> logits_equal;       // every checked token equal; empty without the check
  int kv_capacity = 0;
};

RunSummary run_summary(const BoardRunResult& r);
const Fields<RunSummary>& run_summary_fields();

}  // namespace bitsim::sim
