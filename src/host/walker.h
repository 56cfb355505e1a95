#pragma once
// The PL layer walker (host.walker = pl; docs/variants-host.md section 2), after APEX's walk
// mode: the small operations between the engine calls (RMSNorm, quantization,
// dequantization, RoPE, the q/K/V quantization and KV append, the attention finish,
// SiLU-gate, the residual adds, the stream headers and x) run on a third PL circuit; the host
// starts a token (or a layer) once and the walker fetches each call's descriptor and
// programs the DMAs itself, so the per-call driver cost and the cache maintenance fall away.
//
// The walker is a timing and resource model, not a clocked module (model):
//   - an operator step of e elements takes op_latency_cycles + passes x ceil(e / epc)
//     PL cycles, plus ceil(bytes / write_bytes_per_cycle) for what it writes to DDR
//     (headers, x, K/V rows); epc = the operator's elements per cycle (a config key);
//   - an engine call costs call_cycles (descriptor fetch and sequencing) and each register
//     access the walker makes on the DMAs reg_access_cycles: the same accesses as the
//     driver's, on the same simulated DMAs, so both fidelities run the same program;
//   - the arithmetic is the numerics library's, the same IEEE float operations in the same
//     order (the walker's float units round to nearest, no fused multiply-add), so the
//     logits stay bit-equal to the golden reference.
// The resource estimate sums stated per-operator costs (WalkerResources).
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "host/cpu_model.h"
#include "base/config_field.h"
#include "model/model_config.h"

namespace bitsim::host {

// Whether a CPU step of the token loop runs on the walker when host.walker = pl. The
// embedding lookup (the float table is not in the contiguous memory) and the argmax (the
// host's choice of the next token) stay on the CPU.
bool walker_runs(CpuStep step);

struct WalkerConfig {
  std::string mode = "cpu";     // host.walker: cpu (the board) | pl (the layer walker)
  std::string start = "token";  // what the host starts: a token, or each layer
  // Elements per PL cycle of each operator, in CpuStep order (steps the walker does not run:
  // unused). Defaults: docs/variants-host.md.
  std::array<double, kCpuSteps> epc{{0, 2, 4, 4, 2, 4, 2, 1, 4, 0, 0, 4, 2}};  // relu2_gate: as rope's 2
  int op_latency_cycles = 16;        // pipeline fill and sequencing of one operator step
  double write_bytes_per_cycle = 8;  // the walker's DDR writes (headers, x, K/V rows): one 64-bit beat
  int call_cycles = 64;              // per engine call: descriptor fetch from DDR and sequencing
  int reg_access_cycles = 4;         // one AXI-Lite access from the walker to a DMA register

  bool pl() const { return mode == "pl"; }
  bool per_layer() const { return start == "layer"; }

  template <typename Self, typename Visitor>
  static void visit(Self& c, Visitor&& v) {
    using bitsim::Evidence;
    using bitsim::FieldInfo;
    v(c.mode, FieldInfo{"host.walker", 0, 0, "", Evidence::kSimulated,
                        "who runs the small operations between the engine calls: cpu (the board: the Cortex-A9 "
                        "and the C driver) or pl (APEX's layer walker, a third circuit; docs/variants-host.md)",
                        1, true, {"cpu", "pl"}});
    v(c.start, FieldInfo{"walker.start", 0, 0, "", Evidence::kSimulated,
                         "host.walker = pl: the host starts the walker once per token or once per layer", 1, true,
                         {"token", "layer"}});
    for (int i = 0; i < kCpuSteps; ++i) {
      if (!walker_runs(CpuStep(i)) || CpuStep(i) == CpuStep::WriteHeaders) continue;  // bytes only
      const std::string step = cpu_step_name(CpuStep(i));
      v(c.epc[size_t(i)], FieldInfo{"walker.epc." + step, 0.125, 64, "elements/cycle", Evidence::kSimulated,
                                    "layer walker: elements per PL cycle of the " + step + " operator (model)"});
    }
    v(c.op_latency_cycles, FieldInfo{"walker.op_latency_cycles", 0, 100000, "cycles", Evidence::kSimulated,
                                     "layer walker: pipeline fill and sequencing of one operator step (model)"});
    v(c.write_bytes_per_cycle, FieldInfo{"walker.write_bytes_per_cycle", 0.5, 64, "B/cycle", Evidence::kSimulated,
                                         "layer walker: its DDR writes of headers, x and K/V rows (model)"});
    v(c.call_cycles, FieldInfo{"walker.call_cycles", 0, 100000, "cycles", Evidence::kSimulated,
                               "layer walker: per engine call, descriptor fetch and sequencing (model)"});
    v(c.reg_access_cycles, FieldInfo{"walker.reg_access_cycles", 1, 1000, "cycles", Evidence::kSimulated,
                                     "layer walker: one AXI-Lite access to a DMA register (model)"});
  }
  // Throws bitsim::Error naming `who` and the key of the first field out of range.
  void validate(const std::string& who) const { bitsim::check_fields(*this, who); }
};

class WalkerModel {
 public:
  WalkerModel(const WalkerConfig& config, uint64_t pl_period_ps);
  // PL time of one operator step of `elements` elements writing `bytes` bytes to DDR.
  uint64_t step_ps(CpuStep step, uint64_t elements, uint64_t bytes) const;
  uint64_t cycles(CpuStep step, uint64_t elements, uint64_t bytes) const;
  // Prefill (docs/prefill.md 6; simulated): the step over `vectors` vectors of `elements`
  // elements and `bytes` bytes each: the operator's latency once, its passes and writes
  // `vectors` times. vectors = 1 is step_ps.
  uint64_t chunk_step_ps(CpuStep step, uint64_t vectors, uint64_t elements, uint64_t bytes) const;
  const WalkerConfig& config() const { return config_; }
  uint64_t period_ps() const { return period_ps_; }

 private:
  WalkerConfig config_;
  uint64_t period_ps_;
};

// Passes an operator makes over its elements: RMSNorm and the quantizations read their
// input twice (sum of squares or max |x|, then the scaled values); the others once.
int walker_passes(CpuStep step);

// The resource estimate of the walker (model: stated per-operator costs, docs/variants-host.md
// section 2), beside the Zynq-7020 and what the board uses today.
struct WalkerResourceRow {
  std::string name;      // operator or block
  double lanes = 0;      // elements per cycle (operators), 0 for fixed blocks
  int dsp = 0, lut = 0, bram36 = 0;
};
struct WalkerResources {
  std::vector<WalkerResourceRow> rows;
  int dsp = 0, lut = 0, bram36 = 0;  // walker totals
  // The device and the board today (BOARD.md): 220 DSP48E1, 53,200 LUT, 140 BRAM36; both
  // circuits use 34% of the LUTs and the attention unit 17 DSPs.
  static constexpr int kDeviceDsp = 220, kDeviceLut = 53200, kDeviceBram36 = 140;
  static constexpr double kBoardLutShare = 0.34;
  static constexpr int kBoardDsp = 17;
};
// `positions`: the context the walker serves (its RoPE table holds cos and sin for each
// position; the run's KV context limit, docs/variants-attention.md 8.8).
WalkerResources walker_resources(const WalkerConfig& config, const model::ModelConfig& model,
                                 int positions = model::kKvPositions);

}  // namespace bitsim::host
