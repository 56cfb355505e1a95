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
  Count
};
constexpr int kCpuSteps = int(CpuStep::Count);
const char* cpu_step_name(CpuStep s);

struct CpuModelConfig {
  double step_overhead_ns = 2000;  // fixed cost of each step (call, loop set-up), ns (calibrated)
  // ns per element of each step kind, in CpuStep order (calibrated: one scale fitted to
  // BOARD.md's CPU column; the ratios are NEON instruction-count estimates).
  std::array<double, kCpuSteps> ns_per_element{{1.0, 6.0, 6.0, 4.0, 10.0, 8.0, 4.0, 20.0, 2.0, 3.0, 0.0}};
  double write_ns_per_byte = 1.0;  // CPU stores into DDR buffers (headers, x, K/V rows), ns/byte
};

class CpuModel {
 public:
  explicit CpuModel(const CpuModelConfig& config) : config_(config) {}
  // Simulated time of one step, in picoseconds (integer so sums are exact).
  uint64_t step_ps(CpuStep step, uint64_t elements, uint64_t bytes_written = 0) const;
  const CpuModelConfig& config() const { return config_; }

 private:
  CpuModelConfig config_;
};

}  // namespace bitsim::host
