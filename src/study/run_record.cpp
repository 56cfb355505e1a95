#include "study/run_record.h"

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

}  // namespace bitsim::sim
