#pragma once
// CpuModel: the simulated Cortex-A9's time for each CPU step of the token loop
// (CIRCUITS.md 5, "CPU cost model"). A step's time is computed from the work it does:
//     t = step_overhead + elements x ns_per_element(kind) + bytes_written x write_ns_per_byte
// with coefficients from the board config (calibrated so that the CPU column matches
// BOARD.md's 26.6 ms at T=64). The arithmetic itself runs on the host with the numerics
// library; only its duration is modelled here.
#include <array>
#include <cstdint>
#include <string>

#include "base/config_field.h"

namespace bitsim::host {

enum class CpuStep {
  Embed,          // embedding row copy
  RmsNorm,        // RMSNorm (sum of squares, rsqrt, scale)
  Quantize,       // activation quantization to int8 (max, scale, round)
  Dequantize,     // int32 accumulators to float
  Rope,           // RoPE on q and k
  QuantizeHeads,  // q per head (dynamic) and K/V with fixed scales, KV append
  AttnFinish,     // o = acc * (s_v / sum)
  SiluGate,       // SiLU(gate) * up
  Residual,       // h += d
  Argmax,         // next-token choice over the logits
  WriteHeaders,   // building stream headers, x and descriptors in DDR
  PartialSum,     // per-call format: adding a segment's partial sums into the accumulators
  Relu2Gate,      // relu(gate)^2 * up (hidden_act relu2, BitNet b1.58 2B4T)
  Count
};
constexpr int kCpuSteps = int(CpuStep::Count);
const char* cpu_step_name(CpuStep s);

// The shipped default is the calibrated Cortex-A9 (`bitsim calibrate` fits every
// coefficient with one factor to BOARD.md's CPU column); visit() gives each field's key,
// range, unit, evidence label and meaning (base/config_field.h).
struct CpuModelConfig {
  double step_overhead_ns = 5457.6254;  // fixed cost of each step (call, loop set-up), ns
  // ns per element of each step kind, in CpuStep order (one scale fitted to BOARD.md's CPU
  // column; the ratios are NEON instruction-count estimates).
  std::array<double, kCpuSteps> ns_per_element{
      {2.7288, 16.3729, 16.3729, 10.9152, 27.2881, 21.8305, 10.9152, 54.5762, 5.4576, 8.1864, 0.0,
       5.4576,    // partial_sum: one int32 add per element, as residual
       10.9152}};  // relu2_gate: max, two multiplies, flush: dequantize's count (never run on the board)
  double write_ns_per_byte = 2.7288;  // CPU stores into DDR buffers (headers, x, K/V rows), ns/byte

  template <typename Self, typename Visitor>
  static void visit(Self& c, Visitor&& v) {
    using bitsim::Evidence;
    using bitsim::FieldInfo;
    v(c.step_overhead_ns, FieldInfo{"cpu.step_overhead_ns", 0, 1e7, "ns", Evidence::kCalibrated,
                                    "fixed Cortex-A9 time of each CPU step of the token loop"});
    for (int i = 0; i < kCpuSteps; ++i) {
      const std::string step = cpu_step_name(CpuStep(i));
      v(c.ns_per_element[size_t(i)], FieldInfo{"cpu.ns_per_element." + step, 0, 1e5, "ns", Evidence::kCalibrated,
                                               "Cortex-A9 (NEON C) time per element of the " + step + " step"});
    }
    v(c.write_ns_per_byte, FieldInfo{"cpu.write_ns_per_byte", 0, 1e3, "ns/B", Evidence::kCalibrated,
                                     "CPU stores into DMA buffers (headers, x, K/V rows, descriptors)"});
  }
  // Throws bitsim::Error naming `who` and the key of the first field out of range.
  void validate(const std::string& who) const { bitsim::check_fields(*this, who); }
};

class CpuModel {
 public:
  explicit CpuModel(const CpuModelConfig& config) : config_(config) { config_.validate("cpu model"); }
  // Simulated time of one step, in picoseconds (integer so sums are exact).
  uint64_t step_ps(CpuStep step, uint64_t elements, uint64_t bytes_written = 0) const;
  // Prefill (docs/prefill.md 6; simulated): the step over `vectors` vectors of `elements`
  // elements and `bytes_written` bytes each, in one call: its overhead once, the work
  // `vectors` times. vectors = 1 is step_ps.
  uint64_t chunk_step_ps(CpuStep step, uint64_t vectors, uint64_t elements, uint64_t bytes_written = 0) const;
  const CpuModelConfig& config() const { return config_; }

 private:
  CpuModelConfig config_;
};

}  // namespace bitsim::host
