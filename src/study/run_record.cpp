#include "study/run_record.h"

#include <vector>

#include "study/calibrate.h"

namespace bitsim::sim {

const Fields<TokenRecord>& run_token_fields() {
  using T = TokenRecord;
  static const Fields<T> fields{
      {"index", &T::index},           {"context", &T::context},         {"token_id", &T::token_id},
      {"text", &T::text},             {"generated", &T::generated},     {"matmul_ms", &T::matmul_ms},
      {"attention_ms", &T::attention_ms}, {"cpu_ms", &T::cpu_ms},       {"total_ms", &T::total_ms},
      {"walker_ms", &T::walker_ms},   {"dma_calls", &T::dma_calls},     {"driver_calls", &T::driver_calls},
      {"fixed_call_ms", &T::fixed_call_ms}, {"bytes_read", &T::bytes_read}, {"read_gb_s", &T::read_gb_s},
      {"wall_ms", &T::wall_ms},       {"logits_equal", &T::logits_equal}};
  return fields;
}

RunSummary run_summary(const BoardRunResult& r) {
  RunSummary s;
  std::vector<double> totals;
  int equal = 0;
  for (const auto& t : r.tokens) {
    totals.push_back(t.total_ms);
    s.generated += t.generated;
    if (t.logits_equal) {
      ++s.logits_checked;
      equal += *t.logits_equal;
    }
  }
  s.tokens = r.tokens.size();
  s.median_total_ms = median(totals);
  s.tok_s = s.median_total_ms > 0 ? 1e3 / s.median_total_ms : 0.0;
  for (double t : totals) s.simulated_s += t / 1e3;
  s.wall_s = r.wall_s;
  s.first_token_s = r.first_token_s;
  s.load_s = r.load_s;
  s.calibration_s = r.calibration_s;
  s.model_cached = r.model_cached;
  s.scales_cached = r.scales_cached;
  s.sim_tok_per_wall_s = r.wall_s > 0 ? double(r.tokens.size()) / r.wall_s : 0.0;
  const FixedCostShare fixed = fixed_cost_share(r);
  s.driver_calls_per_token = fixed.calls_per_token;
  s.fixed_call_ms_per_token = fixed.fixed_ms_per_token;
  s.fixed_cost_share = fixed.share;
  if (r.checked) s.logits_equal = equal == s.logits_checked && r.mismatch.empty();
  s.kv_capacity = r.kv_capacity;
  return s;
}

const Fields<RunSummary>& run_summary_fields() {
  using S = RunSummary;
  static const Fields<S> fields{{"tokens", &S::tokens},
                                {"generated", &S::generated},
                                {"tok_s", &S::tok_s},
                                {"median_total_ms", &S::median_total_ms},
                                {"simulated_s", &S::simulated_s},
                                {"wall_s", &S::wall_s},
                                {"first_token_s", &S::first_token_s},
                                {"load_s", &S::load_s},
                                {"calibration_s", &S::calibration_s},
                                {"model_cached", &S::model_cached},
                                {"scales_cached", &S::scales_cached},
                                {"sim_tok_per_wall_s", &S::sim_tok_per_wall_s},
                                {"logits_checked", &S::logits_checked},
                                {"driver_calls_per_token", &S::driver_calls_per_token},
                                {"fixed_call_ms_per_token", &S::fixed_call_ms_per_token},
                                {"fixed_cost_share", &S::fixed_cost_share},
                                {"fixed_cost_share_evidence", &S::fixed_cost_share_evidence},
                                {"logits_equal", &S::logits_equal},
                                {"kv_capacity", &S::kv_capacity}};
  return fields;
}

}  // namespace bitsim::sim
