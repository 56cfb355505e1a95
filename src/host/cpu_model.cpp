#include "host/cpu_model.h"

#include <cmath>

namespace bitsim::host {

const char* cpu_step_name(CpuStep s) {
  static const char* names[kCpuSteps] = {"embed",     "rmsnorm",      "quantize",    "dequantize",
                                         "rope",      "quantize_heads", "attn_finish", "silu_gate",
                                         "residual",  "argmax",       "write_headers", "partial_sum",
                                         "relu2_gate"};
  return names[int(s)];
}

uint64_t CpuModel::step_ps(CpuStep step, uint64_t elements, uint64_t bytes_written) const {
  const double ns = config_.step_overhead_ns +
                    double(elements) * config_.ns_per_element[size_t(step)] +
                    double(bytes_written) * config_.write_ns_per_byte;
  return uint64_t(std::llround(ns * 1000.0));
}

uint64_t CpuModel::chunk_step_ps(CpuStep step, uint64_t vectors, uint64_t elements, uint64_t bytes_written) const {
  if (vectors == 1) return step_ps(step, elements, bytes_written);  // the same sums in the same order
  const double ns = config_.step_overhead_ns +
                    double(vectors) * (double(elements) * config_.ns_per_element[size_t(step)] +
                                       config_.write_ns_per_byte * double(bytes_written));
  return uint64_t(std::llround(ns * 1000.0));
}

}  // namespace bitsim::host
