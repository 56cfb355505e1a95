#include "study/run_record.h"

#include "sim/energy_account.h"

#include <vector>

#include "study/calibrate.h"

namespace bitsim::study {

const Fields<sim::TokenRecord>& run_token_fields() {
  using T = sim::TokenRecord;
  static const Fields<T> fields{
      {"index", &T::index},           {"context", &T::context},         {"token_id", &T::token_id},
      {"text", &T::text},             {"generated", &T::generated},     {"matmul_ms", &T::matmul_ms},
      {"attention_ms", &T::attention_ms}, {"cpu_ms", &T::cpu_ms},       {"total_ms", &T::total_ms},
      {"walker_ms", &T::walker_ms},   {"dma_calls", &T::dma_calls},     {"driver_calls", &T::driver_calls},
      {"fixed_call_ms", &T::fixed_call_ms}, {"bytes_read", &T::bytes_read}, {"read_gb_s", &T::read_gb_s},
      {"wall_ms", &T::wall_ms},       {"logits_equal", &T::logits_equal},
      {"phase", &T::phase},           {"chunk_tokens", &T::chunk_tokens}, {"logits_digest", &T::logits_digest_hex},
      {"energy_mj", &T::energy_mj},   {"dram_mj", &T::dram_mj},         {"pl_mj", &T::pl_mj},
      {"ps_mj", &T::ps_mj}};
  return fields;
}

RunSummary run_summary(const sim::BoardRunResult& r) {
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
  sim::EnergyFigures all, prompt, decode;
  for (const auto& t : r.tokens) {
    all.add(t.energy, 1, t.timing.total_ps());
    (t.generated ? decode : prompt).add(t.energy, 1, t.timing.total_ps());
  }
  s.energy_mj_per_token = all.mj_per_token();
  if (all.tokens) {
    s.dram_mj_per_token = all.total.dram() / double(all.tokens);
    s.pl_mj_per_token = all.total.pl() / double(all.tokens);
    s.ps_mj_per_token = (all.total.ps() + all.total.board_other) / double(all.tokens);
  }
  s.avg_power_w = all.avg_power_w();
  s.tokens_per_j = all.tokens_per_j();
  s.prompt_j = prompt.total.total() * 1e-3;
  s.prompt_mj_per_token = prompt.mj_per_token();
  s.decode_mj_per_token = decode.mj_per_token();
  s.energy_evidence = sim::energy_evidence(r.energy_config, r.approximate);
  if (r.approximate) {
    for (std::string* e : {&s.fixed_cost_share_evidence, &s.ttft_ms_evidence, &s.prefill_tok_s_evidence,
                           &s.tpot_ms_evidence, &s.request_ms_evidence})
      *e = sim::timing_evidence(true);
  }
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
  const sim::FixedCostShare fixed = sim::fixed_cost_share(r);
  s.driver_calls_per_token = fixed.calls_per_token;
  s.fixed_call_ms_per_token = fixed.fixed_ms_per_token;
  s.fixed_cost_share = fixed.share;
  if (r.checked) s.logits_equal = equal == s.logits_checked && r.mismatch.empty();
  s.kv_capacity = r.kv_capacity;
  s.ttft_ms = r.figures.ttft_ms;
  s.prefill_tok_s = r.figures.prefill_tok_s;
  s.tpot_ms = r.figures.tpot_ms;
  s.request_ms = r.figures.request_ms;
  s.tokens_per_pass = r.tokens_per_pass;
  s.prefill_fit = r.prefill.verdict();
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
                                {"kv_capacity", &S::kv_capacity},
                                {"ttft_ms", &S::ttft_ms},
                                {"ttft_ms_evidence", &S::ttft_ms_evidence},
                                {"prefill_tok_s", &S::prefill_tok_s},
                                {"prefill_tok_s_evidence", &S::prefill_tok_s_evidence},
                                {"tpot_ms", &S::tpot_ms},
                                {"tpot_ms_evidence", &S::tpot_ms_evidence},
                                {"request_ms", &S::request_ms},
                                {"request_ms_evidence", &S::request_ms_evidence},
                                {"tokens_per_pass", &S::tokens_per_pass},
                                {"prefill_fit", &S::prefill_fit},
                                {"energy_mj_per_token", &S::energy_mj_per_token},
                                {"dram_mj_per_token", &S::dram_mj_per_token},
                                {"pl_mj_per_token", &S::pl_mj_per_token},
                                {"ps_mj_per_token", &S::ps_mj_per_token},
                                {"avg_power_w", &S::avg_power_w},
                                {"tokens_per_j", &S::tokens_per_j},
                                {"prompt_j", &S::prompt_j},
                                {"prompt_mj_per_token", &S::prompt_mj_per_token},
                                {"decode_mj_per_token", &S::decode_mj_per_token},
                                {"energy_evidence", &S::energy_evidence}};
  return fields;
}

TimingCacheSummary timing_cache_summary(const sim::BoardRunResult& r) {
  return {.batches = r.fast.batches, .hits = r.fast.cache_hits, .clocked_runs = r.fast.oracle_runs,
          .clocked_cycles = r.fast.oracle_cycles, .clocked_wall_s = r.fast.oracle_wall_s,
          .shapes_from_startup_cache = r.timing_entries_cached, .replays_accepted = r.fast.replays_accepted,
          .replays_rejected = r.fast.replays_rejected};
}

const Fields<TimingCacheSummary>& timing_cache_fields() {
  using T = TimingCacheSummary;
  static const Fields<T> fields{{"batches", &T::batches},
                                {"hits", &T::hits},
                                {"clocked_runs", &T::clocked_runs},
                                {"clocked_cycles", &T::clocked_cycles},
                                {"clocked_wall_s", &T::clocked_wall_s},
                                {"shapes_from_startup_cache", &T::shapes_from_startup_cache},
                                {"replays_accepted", &T::replays_accepted},
                                {"replays_rejected", &T::replays_rejected}};
  return fields;
}

const Fields<host::WalkerResourceRow>& walker_operator_fields() {
  using R = host::WalkerResourceRow;
  static const Fields<R> fields{
      {"name", &R::name}, {"elements_per_cycle", &R::lanes}, {"dsp", &R::dsp}, {"lut", &R::lut}, {"bram36", &R::bram36}};
  return fields;
}

const Fields<host::WalkerResources>& walker_resources_fields() {
  using W = host::WalkerResources;
  static const Fields<W> fields{{"dsp", &W::dsp}, {"lut", &W::lut}, {"bram36", &W::bram36}};
  return fields;
}

nlohmann::json walker_resources_json(const host::WalkerResources& w) {
  using W = host::WalkerResources;
  W device;
  device.dsp = W::kDeviceDsp;
  device.lut = W::kDeviceLut;
  device.bram36 = W::kDeviceBram36;
  nlohmann::json j = record_json(w, walker_resources_fields());
  j["evidence"] = "simulated";
  j["operators"] = records_json(w.rows, walker_operator_fields());
  j["device"] = record_json(device, walker_resources_fields());
  j["board_lut_share"] = W::kBoardLutShare;
  return j;
}

const Fields<hw::AttentionResourceRow>& attention_operator_fields() {
  using R = hw::AttentionResourceRow;
  static const Fields<R> fields{{"name", &R::name}, {"width", &R::width}, {"per_lane", &R::per_lane},
                                {"dsp", &R::dsp},   {"lut", &R::lut},     {"bram36", &R::bram36}};
  return fields;
}

const Fields<hw::AttentionResources>& attention_resources_fields() {
  using A = hw::AttentionResources;
  static const Fields<A> fields{
      {"dsp", &A::dsp}, {"lut", &A::lut}, {"lut_complete", &A::lut_complete}, {"bram36", &A::bram36}};
  return fields;
}

nlohmann::json attention_resources_json(const hw::AttentionResources& a) {
  nlohmann::json j = record_json(a, attention_resources_fields());
  j["evidence"] = "simulated";
  j["operators"] = records_json(a.rows, attention_operator_fields());
  return j;
}

nlohmann::json run_summary_json(const sim::BoardRunResult& r) {
  nlohmann::json summary = record_json(run_summary(r), run_summary_fields());
  if (!r.mismatch.empty()) summary["mismatch"] = r.mismatch;
  if (r.stopped_at_capacity) summary["stopped_at_capacity"] = true;
  if (r.fidelity != sim::Fidelity::kCycle) summary["timing_cache"] = record_json(timing_cache_summary(r), timing_cache_fields());
  if (r.walker) summary["walker_resources"] = walker_resources_json(*r.walker);
  summary["attention_resources"] = attention_resources_json(r.attention);
  summary["energy"] = run_energy_json(r);
  return summary;
}

nlohmann::json run_energy_json(const sim::BoardRunResult& r) {
  energy::Breakdown total;
  for (const auto& t : r.tokens) total += t.energy;
  const double n = r.tokens.empty() ? 1.0 : double(r.tokens.size());
  nlohmann::json comps = nlohmann::json::array();
  for (const energy::Component& c : energy::components(total, r.energy_config, energy::DramModel::kBytes))
    comps.push_back({{"name", c.name}, {"mj_per_token", c.mj / n}, {"evidence", evidence_name(c.evidence)}});
  return {{"idd_set", r.energy_config.idd_set},
          {"dram_pricing", "bytes"},
          {"board_figure", nullptr},
          {"components", comps}};
}

}  // namespace bitsim::study
