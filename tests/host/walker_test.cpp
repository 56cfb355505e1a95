// The PL layer walker's timing and resource model (host/walker.h, docs/variants-host.md
// section 2), worked by hand.
#include "host/walker.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace bitsim::host {
namespace {

TEST(Walker, OperatorCyclesHandWorked) {
  WalkerConfig c;
  c.op_latency_cycles = 10;
  c.epc[size_t(CpuStep::RmsNorm)] = 4;
  c.epc[size_t(CpuStep::Residual)] = 3;
  c.write_bytes_per_cycle = 8;
  const WalkerModel m(c, 8000);  // 125 MHz
  // RMSNorm of 1536: two passes of 1536 / 4 = 384 cycles, plus the latency.
  EXPECT_EQ(m.cycles(CpuStep::RmsNorm, 1536, 0), 10u + 2 * 384);
  EXPECT_EQ(m.step_ps(CpuStep::RmsNorm, 1536, 0), (10u + 768) * 8000);
  // Residual of 10 at 3 per cycle: one pass of ceil(10/3) = 4.
  EXPECT_EQ(m.cycles(CpuStep::Residual, 10, 0), 14u);
  // Header + x of 1552 bytes: 194 beats.
  EXPECT_EQ(m.cycles(CpuStep::WriteHeaders, 0, 1552), 10u + 194);
  EXPECT_EQ(m.cycles(CpuStep::WriteHeaders, 0, 1553), 10u + 195);
  EXPECT_TRUE(walker_runs(CpuStep::SiluGate));
  EXPECT_FALSE(walker_runs(CpuStep::Embed));
  EXPECT_FALSE(walker_runs(CpuStep::Argmax));
}

TEST(Walker, ResourcesSumTheStatedCosts) {
  WalkerConfig c;
  c.epc.fill(1);
  model::ModelConfig m = model::ModelConfig::bitnet_large();
  const WalkerResources one = walker_resources(c, m);
  int dsp = 0, lut = 0, bram = 0;
  for (const auto& r : one.rows) {
    dsp += r.dsp;
    lut += r.lut;
    bram += r.bram36;
  }
  EXPECT_EQ(one.dsp, dsp);
  EXPECT_EQ(one.lut, lut);
  EXPECT_EQ(one.bram36, bram);
  // By hand: the residual lane is one fp32 adder (2 DSP, 240 LUT) plus 50 LUT of control;
  // the RoPE table 512 x 48 x 2 floats = 196,608 bytes = 48 BRAM36 of 4 KiB; the activation
  // buffers (1536 + 4096 + 3*1536 + 1536 + 2*4096 + 8192) words x 4 B = 112,640 B = 28 BRAM36.
  for (const auto& r : one.rows) {
    if (r.name == "residual") {
      EXPECT_EQ(r.dsp, 2);
      EXPECT_EQ(r.lut, 290);
    }
    if (r.name == "rope") EXPECT_EQ(r.bram36, 48);
    if (r.name == "activation buffers") EXPECT_EQ(r.bram36, 28);
  }
  // With 4 K/V heads k and v are 384 words each: (1536 + 4096 + 2304 + 1536 + 2*4096 + 8192)
  // words x 4 B = 103,424 B = 26 BRAM36.
  for (const auto& r : walker_resources(c, model::ModelConfig::bitnet_large_gqa4()).rows)
    if (r.name == "activation buffers") EXPECT_EQ(r.bram36, 26);
  // The RoPE table covers the context the walker serves (docs/variants-attention.md 8.8):
  // 1,319 positions x 384 bytes = 506,496 bytes = 124 BRAM36.
  const WalkerResources wide = walker_resources(c, m, 1319);
  for (const auto& r : wide.rows)
    if (r.name == "rope") EXPECT_EQ(r.bram36, 124);
  EXPECT_EQ(wide.bram36, one.bram36 + 124 - 48);
  EXPECT_THROW(walker_resources(c, m, 0), Error);
  // Two lanes of the residual: twice the lane, the control once.
  c.epc[size_t(CpuStep::Residual)] = 2;
  const WalkerResources two = walker_resources(c, m);
  EXPECT_EQ(two.dsp, one.dsp + 2);
  EXPECT_EQ(two.lut, one.lut + 240);
}

TEST(Walker, BadKeysAreNamed) {
  WalkerConfig c;
  c.mode = "fpga";
  try {
    c.validate("layer walker");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("host.walker"), std::string::npos);
  }
  c.mode = "pl";
  c.epc[size_t(CpuStep::Rope)] = 0;
  EXPECT_THROW(c.validate("layer walker"), Error);
}

}  // namespace
}  // namespace bitsim::host
