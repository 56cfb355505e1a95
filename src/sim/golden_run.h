#pragma once
// A prompt through the golden reference alone (BoardReference), token by token. Until the
// simulated board runs the model, `bitsim run` uses this and says so.
//
// Steps: BOS + the prompt's tokens, then each generated token, each fed once through the
// model (so every token that appears in the output has been through the board's
// arithmetic). The logits of the last prompt token choose the first generated token.
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "golden/board_reference.h"
#include "sim/sampler.h"

namespace bitsim::sim {

struct RunRequest {
  std::string model = "synthetic:bitnet-large";
  std::string prompt;
  int tokens = 16;                                  // tokens to generate
  std::optional<std::filesystem::path> tokenizer;   // overrides the model folder's
  SamplerConfig sampler;
  int threads = 2;
  bool stop_at_capacity = false;                    // stop at 512 positions instead of refusing
  bool legacy_attention = false;
};

struct StepRecord {
  int index = 0;          // step number
  int context = 0;        // T: positions in the KV cache including this token's
  int token_id = 0;       // the token fed in
  std::string text;       // its text
  bool generated = false; // true when the model produced it
  double wall_ms = 0;     // host wall time of the step (this machine)
};

struct RunResult {
  std::string model, tokenizer;
  bool synthetic_tokenizer = false;
  std::string shape;
  double load_s = 0, calibration_s = 0, wall_s = 0;
  int prompt_tokens = 0;
  std::vector<StepRecord> steps;
  std::string generated_text;
  bool stopped_at_capacity = false;
  int multiplier_lowered = 0;
};

struct RunCallbacks {
  std::function<void(const std::string&)> on_status;        // progress lines
  std::function<void(const StepRecord&, const std::string& new_text)> on_step;
};

RunResult run_golden(const RunRequest& request, const RunCallbacks& callbacks = {});

}  // namespace bitsim::sim
