#include "host/walker.h"

#include <cmath>

#include "model/board_shape.h"

namespace bitsim::host {

bool walker_runs(CpuStep step) { return step != CpuStep::Embed && step != CpuStep::Argmax; }

int walker_passes(CpuStep step) {
  switch (step) {
    case CpuStep::RmsNorm:        // sum of squares, then x * r * w
    case CpuStep::Quantize:       // max |x|, then round(x * 127 / a)
    case CpuStep::QuantizeHeads:  // max |q| per head, then the rounding
      return 2;
    default: return 1;
  }
}

WalkerModel::WalkerModel(const WalkerConfig& config, uint64_t pl_period_ps) : config_(config), period_ps_(pl_period_ps) {
  config_.validate("layer walker");
}

uint64_t WalkerModel::cycles(CpuStep step, uint64_t elements, uint64_t bytes) const {
  uint64_t c = uint64_t(config_.op_latency_cycles);
  const double epc = config_.epc[size_t(step)];
  if (elements > 0 && epc > 0)
    c += uint64_t(walker_passes(step)) * uint64_t(std::ceil(double(elements) / epc));
  if (bytes > 0) c += uint64_t(std::ceil(double(bytes) / config_.write_bytes_per_cycle));
  return c;
}

uint64_t WalkerModel::step_ps(CpuStep step, uint64_t elements, uint64_t bytes) const {
  return cycles(step, elements, bytes) * period_ps_;
}

uint64_t WalkerModel::chunk_step_ps(CpuStep step, uint64_t vectors, uint64_t elements, uint64_t bytes) const {
  if (vectors <= 1) return step_ps(step, elements, bytes);
  const uint64_t latency = uint64_t(config_.op_latency_cycles);
  return (latency + vectors * (cycles(step, elements, bytes) - latency)) * period_ps_;
}

namespace {
// Stated unit costs (model; docs/variants-host.md section 2): fp32 units in the style of the
// Xilinx Floating-Point IP with full DSP usage, round to nearest even, no fused multiply-add.
constexpr int kMulDsp = 3, kMulLut = 110;   // fp32 multiply
constexpr int kAddDsp = 2, kAddLut = 240;   // fp32 add / subtract
constexpr int kDivLut = 800;                // fp32 divide (LUT only)
constexpr int kCvtLut = 200;                // int <-> fp32 conversion, round to nearest even
constexpr int kCmpLut = 60;                 // compare / abs / max, clamp
constexpr int kBramBytes = 4096;            // one BRAM36 as 1K x 32 bits

struct OpCost {
  CpuStep step;
  int mul, add, div, cvt, cmp;          // per lane (one element per cycle)
  int fixed_mul, fixed_add, fixed_div, fixed_cvt, fixed_lut;  // once per operator
};
// Per lane: the float operations one element needs in the numerics library's sequence.
constexpr OpCost kOps[] = {
    // RMSNorm: x*x, accumulate (8 interleaved partial sums, as num::sum_squares); x*r, *w.
    // Once: mean = sum / n, + eps, rsqrt (num::rsqrt: 3 Newton steps, 9 mul 4 add, pipelined).
    {CpuStep::RmsNorm, 3, 1, 0, 0, 0, 9, 5, 1, 0, 200},
    // Activation quantization: max |x|; x * s, round, clamp. Once: s = 127 / a.
    {CpuStep::Quantize, 1, 0, 0, 1, 2, 0, 0, 1, 0, 100},
    // Dequantization: int32 -> float, * (w_scale * a / 127). Once: that product.
    {CpuStep::Dequantize, 1, 0, 0, 1, 0, 2, 0, 0, 0, 100},
    // RoPE: x*c - y*s per element (pairs), from the cos/sin table (BRAM, below).
    {CpuStep::Rope, 2, 1, 0, 0, 0, 0, 0, 0, 0, 200},
    // q per head (dynamic) and K, V with fixed scales: as the quantization. Once: the
    // divisions, the multiplier m and the KV append addresses.
    {CpuStep::QuantizeHeads, 1, 0, 0, 1, 2, 2, 0, 1, 1, 300},
    // Attention finish: acc -> float, * (s_v / sum). Once: sum -> float, the division.
    {CpuStep::AttnFinish, 1, 0, 0, 1, 0, 0, 0, 1, 1, 100},
    // SiLU-gate: exp (num::exp_approx: 10 mul, 9 add), 1 + e, x / d, * up.
    {CpuStep::SiluGate, 11, 10, 1, 1, 1, 0, 0, 0, 0, 200},
    // Residual: h + d.
    {CpuStep::Residual, 0, 1, 0, 0, 0, 0, 0, 0, 0, 50},
    // Per-call partial sums: one int32 add (LUT carry chain).
    {CpuStep::PartialSum, 0, 0, 0, 0, 0, 0, 0, 0, 0, 50},
    // ReLU^2-gate (hidden_act relu2): max(g, 0), its square, * up.
    {CpuStep::Relu2Gate, 2, 0, 0, 0, 1, 0, 0, 0, 0, 50},
};
}  // namespace

WalkerResources walker_resources(const WalkerConfig& c, const model::ModelConfig& m, int positions) {
  if (positions < 1) throw Error(fmt::format("walker resources: a context of {} positions", positions));
  WalkerResources r;
  for (const OpCost& op : kOps) {
    // One gate operator: the model's activation's (model::HiddenAct).
    const CpuStep gate = m.hidden_act == model::HiddenAct::Relu2 ? CpuStep::SiluGate : CpuStep::Relu2Gate;
    if (op.step == gate) continue;
    const double lanes = c.epc[size_t(op.step)];
    const int n = int(std::ceil(lanes));
    WalkerResourceRow row{cpu_step_name(op.step), lanes, 0, 0, 0};
    row.dsp = n * (op.mul * kMulDsp + op.add * kAddDsp) + op.fixed_mul * kMulDsp + op.fixed_add * kAddDsp;
    row.lut = n * (op.mul * kMulLut + op.add * kAddLut + op.div * kDivLut + op.cvt * kCvtLut + op.cmp * kCmpLut +
                   (op.step == CpuStep::PartialSum ? 40 : 0)) +
              op.fixed_mul * kMulLut + op.fixed_add * kAddLut + op.fixed_div * kDivLut + op.fixed_cvt * kCvtLut +
              op.fixed_lut;
    if (op.step == CpuStep::Rope) {
      // The RoPE table: cos and sin for every position of the KV cache and every pair of a
      // head (num::RopeTable), as floats.
      const uint64_t bytes = uint64_t(positions) * uint64_t(m.head_dim() / 2) * 2 * 4;
      row.bram36 = int((bytes + kBramBytes - 1) / kBramBytes);
    }
    r.rows.push_back(row);
  }
  // The sequencer: descriptor fetch (a FIFO of one BRAM36), the DMA register master, the
  // header and x writer, the start/done registers.
  r.rows.push_back({"sequencer", 0, 0, 2500, 1});
  // The activation buffers, float or int32: h, a, q|k|v, o, gate|up, a matmul group's sums
  // (k and v: num_kv_heads x 96 each).
  const uint64_t H = uint64_t(m.hidden_size), F = uint64_t(m.intermediate_size), QKV = H + 2 * uint64_t(m.kv_dim());
  const uint64_t words = H + std::max(H, F) + QKV + H + 2 * F + std::max(QKV, 2 * F);
  r.rows.push_back({"activation buffers", 0, 0, 300, int((4 * words + kBramBytes - 1) / kBramBytes)});
  for (const auto& row : r.rows) {
    r.dsp += row.dsp;
    r.lut += row.lut;
    r.bram36 += row.bram36;
  }
  return r;
}

}  // namespace bitsim::host
