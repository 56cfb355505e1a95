#include "sim/golden_run.h"

#include <chrono>

#include <fmt/format.h>

#include "model/error.h"

namespace bitsim::sim {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
}  // namespace

RunResult run_golden(const RunRequest& req, const RunCallbacks& cb) {
  auto status = [&](const std::string& s) { if (cb.on_status) cb.on_status(s); };
  if (req.prompt.empty()) throw Error("--prompt: the prompt is empty");
  if (req.tokens < 0) throw Error("--tokens: must be >= 0");
  const auto t_start = Clock::now();

  RunResult res;
  auto source = model::open_model_source(req.model);
  const model::ModelConfig& cfg = source->config();
  auto tokenizer = model::select_tokenizer(req.tokenizer, model::model_folder(req.model), cfg.vocab_size);
  res.model = source->describe();
  res.shape = cfg.shape_string();
  res.tokenizer = tokenizer->describe();
  res.synthetic_tokenizer = tokenizer->is_synthetic();

  std::vector<int> ids{cfg.bos_token_id};
  for (int id : tokenizer->encode(req.prompt)) ids.push_back(id);
  res.prompt_tokens = int(ids.size());
  const int total = res.prompt_tokens + req.tokens;
  if (total > golden::kMaxContext && !req.stop_at_capacity)
    throw Error(fmt::format("context: prompt ({} tokens with BOS) + --tokens {} = {} positions, "
                            "over the board's KV cache of {} (use fewer tokens or "
                            "--stop-at-capacity)", res.prompt_tokens, req.tokens, total,
                            golden::kMaxContext));
  if (res.prompt_tokens > golden::kMaxContext)
    throw Error(fmt::format("--prompt: {} tokens with BOS, over the board's KV cache of {}",
                            res.prompt_tokens, golden::kMaxContext));

  status(fmt::format("loading {} ...", res.model));
  auto t0 = Clock::now();
  const model::TernaryModel m = model::load_ternary_model(*source, req.threads);
  source.reset();
  res.load_s = seconds_since(t0);

  status(fmt::format("calibrating K/V scales ({} tokens of the calibration text) ...",
                     golden::kCalibrationTokens));
  t0 = Clock::now();
  golden::KvScales scales =
      golden::calibrate_kv_scales(m, golden::calibration_tokens(*tokenizer, cfg.bos_token_id));
  res.calibration_s = seconds_since(t0);

  golden::BoardReference ref(m, std::move(scales),
                             {.legacy_attention = req.legacy_attention, .threads = req.threads});
  Sampler sampler(req.sampler);
  model::StreamDecoder decoder(*tokenizer, ids);  // the prompt as context keeps the first word's space
  int next = ids[0];
  for (int step = 0;; ++step) {
    const bool generated = step >= res.prompt_tokens;
    if (step >= total) break;
    if (step >= golden::kMaxContext) {
      res.stopped_at_capacity = true;
      break;
    }
    const int token = generated ? next : ids[step];
    t0 = Clock::now();
    const std::vector<float> logits = ref.step(token);
    StepRecord rec;
    rec.wall_ms = seconds_since(t0) * 1e3;
    rec.index = step;
    rec.context = ref.position();
    rec.token_id = token;
    rec.text = tokenizer->piece(token);
    rec.generated = generated;
    res.multiplier_lowered += ref.last_stats().multiplier_lowered;
    std::string new_text;
    if (generated) {
      new_text = decoder.push(token);
      res.generated_text += new_text;
    }
    res.steps.push_back(rec);
    if (cb.on_step) cb.on_step(rec, new_text);
    next = sampler.next(logits);
  }
  res.generated_text += decoder.flush();
  res.wall_s = seconds_since(t_start);
  return res;
}

}  // namespace bitsim::sim
