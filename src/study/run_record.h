#pragma once
// The records of `bitsim run` as bitsim.run/1 writes them: one token (sim::TokenRecord), the
// run's summary figures (RunSummary) and the summary's nested objects (the timing cache, the
// walker's and the attention unit's resources), each with its fields once (study/record.h;
// docs/json-schemas.md, "tokens" and "summary").
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/board_run.h"
#include "study/record.h"

namespace bitsim::study {

const Fields<sim::TokenRecord>& run_token_fields();

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
  // The request's figures (docs/prefill.md 7), each simulated.
  double ttft_ms = 0, prefill_tok_s = 0, request_ms = 0;
  std::optional<double> tpot_ms;  // empty (null) when no token was decoded
  std::string ttft_ms_evidence = "simulated", prefill_tok_s_evidence = "simulated",
              tpot_ms_evidence = "simulated", request_ms_evidence = "simulated";
  int tokens_per_pass = 1;                // prefill.tokens_per_pass
  std::string prefill_fit;                // "fits", or "DOES NOT FIT (BRAM36 142 > 140)" (model)
  // Energy (docs/energy.md), over the run's tokens: mJ per token in all and by part, the
  // average power over the simulated time, tokens per joule; the prompt's joules (to the
  // first token) and mJ per prompt token; mJ per generated token. No board figure exists:
  // every energy figure is a prediction from datasheets and vendor estimates.
  double energy_mj_per_token = 0, dram_mj_per_token = 0, pl_mj_per_token = 0, ps_mj_per_token = 0;
  double avg_power_w = 0, tokens_per_j = 0;
  double prompt_j = 0, prompt_mj_per_token = 0, decode_mj_per_token = 0;
  std::string energy_evidence;  // sim::energy_evidence of the run's energy config
};

RunSummary run_summary(const sim::BoardRunResult& r);
// The run's energy by component (mJ per token), each with its evidence label ("energy").
nlohmann::json run_energy_json(const sim::BoardRunResult& r);
const Fields<RunSummary>& run_summary_fields();

// The fast fidelity's batch timings over the run ("timing_cache"; fast and timing-only).
struct TimingCacheSummary {
  uint64_t batches = 0, hits = 0;                 // DMA batches; those timed from the cache
  uint64_t clocked_runs = 0, clocked_cycles = 0;  // batches run once on the clocked board, their PL cycles
  double clocked_wall_s = 0;                      // this host's wall time in those runs
  uint64_t shapes_from_startup_cache = 0;         // batch shapes whose timing the start-up cache gave
  // Under ddr.model = ddr3 (checked reuse): records the memory's replay accepted (each a hit)
  // and rejected (hw::FastBoardStats).
  uint64_t replays_accepted = 0, replays_rejected = 0;
};
TimingCacheSummary timing_cache_summary(const sim::BoardRunResult& r);
const Fields<TimingCacheSummary>& timing_cache_fields();

// The layer walker's resources ("walker_resources"; host.walker = pl): per operator, and the
// walker's totals; the device's are written in the same fields ("device").
const Fields<host::WalkerResourceRow>& walker_operator_fields();
const Fields<host::WalkerResources>& walker_resources_fields();
nlohmann::json walker_resources_json(const host::WalkerResources& w);

// The configured attention unit's resources ("attention_resources"): per operator, and the totals.
const Fields<hw::AttentionResourceRow>& attention_operator_fields();
const Fields<hw::AttentionResources>& attention_resources_fields();
nlohmann::json attention_resources_json(const hw::AttentionResources& a);

// The whole "summary" object of bitsim.run/1: the figures, the mismatch, the capacity stop
// and the nested objects.
nlohmann::json run_summary_json(const sim::BoardRunResult& r);

}  // namespace bitsim::study
