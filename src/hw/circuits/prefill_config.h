#pragma once
// Prefill (docs/prefill.md): the prompt in chunks of P prompt tokens, each weight row streamed
// once per chunk. One config, both keys: the matmul engine is built for P activation vectors
// (BoardConfig::matmul_config gives it P), the host's memory map lays out P-vector stream
// slots (sim::make_sim_config derives it) and the token loop's prompt step takes chunks of P
// (sim::run_prompt_chunks); prefill.all_logits is the host's verification choice.
#include <string>

#include "base/config_field.h"
#include "model/packed_image.h"

namespace bitsim::hw {

struct PrefillConfig {
  int tokens_per_pass = 1;  // P: prompt tokens per weight pass (1: the board)
  bool all_logits = false;  // the lm_head for every prompt position too (verification)

  template <typename Self, typename Visitor>
  static void visit(Self& c, Visitor&& v) {
    v(c.tokens_per_pass, FieldInfo{"prefill.tokens_per_pass", 1, model::kMaxVectors, "tokens", Evidence::kSimulated,
                                   "prefill: prompt tokens per weight pass P; the matmul engine keeps P activation "
                                   "vectors and returns P sums per row (1: the board; docs/prefill.md)"});
    v(c.all_logits, FieldInfo{"prefill.all_logits", 0, 1, "", Evidence::kSimulated,
                              "prefill: also compute (and check) the lm_head for every prompt position, not only "
                              "the last (verification; the realistic time to first token skips them)"});
  }
  void validate(const std::string& who) const { check_fields(*this, who); }
};

}  // namespace bitsim::hw
