// CpuModel (CIRCUITS.md 5, "CPU cost model"): a step's time is
//     step_overhead + elements x ns_per_element(kind) + bytes_written x write_ns_per_byte,
// in picoseconds. Each test works the expected value out by hand from the coefficients it
// sets, so none depends on the shipped (calibrated) numbers.
#include "host/cpu_model.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace bitsim::host {
namespace {

// Distinct whole-ns coefficients per step so that a mix-up of two kinds shows.
CpuModelConfig distinct_config() {
  CpuModelConfig c;
  c.step_overhead_ns = 700;
  for (int i = 0; i < kCpuSteps; ++i) c.ns_per_element[size_t(i)] = double(3 + 2 * i);  // 3, 5, 7, ...
  c.write_ns_per_byte = 4;
  return c;
}

TEST(CpuModel, ZeroWorkCostsOnlyTheFixedPart) {
  const CpuModel m(distinct_config());
  for (int i = 0; i < kCpuSteps; ++i) EXPECT_EQ(m.step_ps(CpuStep(i), 0, 0), 700'000u) << cpu_step_name(CpuStep(i));
}

TEST(CpuModel, EachStepGrowsByItsOwnCoefficientPerElement) {
  const CpuModel m(distinct_config());
  for (int i = 0; i < kCpuSteps; ++i) {
    const CpuStep s = CpuStep(i);
    // 1000 elements of step i: 700 ns + 1000 x (3 + 2i) ns.
    const uint64_t want = 700'000u + 1000u * uint64_t(3 + 2 * i) * 1000u;
    EXPECT_EQ(m.step_ps(s, 1000), want) << cpu_step_name(s);
    // Linear: twice the elements add the same again.
    EXPECT_EQ(m.step_ps(s, 2000) - m.step_ps(s, 1000), m.step_ps(s, 1000) - m.step_ps(s, 0)) << cpu_step_name(s);
  }
}

TEST(CpuModel, BytesWrittenCostTheWriteRateWhateverTheStep) {
  const CpuModel m(distinct_config());
  // 250 bytes at 4 ns/B = 1000 ns on top of the step's own cost.
  for (int i = 0; i < kCpuSteps; ++i)
    EXPECT_EQ(m.step_ps(CpuStep(i), 10, 250) - m.step_ps(CpuStep(i), 10, 0), 1'000'000u) << cpu_step_name(CpuStep(i));
  // WriteHeaders as the token loop charges it: no elements, 2 x (16 + 104) bytes for n = 100
  // (x padded to 104): 700 + 240 x 4 = 1660 ns.
  EXPECT_EQ(m.step_ps(CpuStep::WriteHeaders, 0, 2 * (16 + 104)), 1'660'000u);
}

TEST(CpuModel, ScalingEveryCoefficientScalesEveryStep) {
  // The calibration fits one factor over the coefficients (sim/calibrate): a factor k on
  // the config is a factor k on every step's time.
  const CpuModelConfig base = distinct_config();
  CpuModelConfig scaled = base;
  const double k = 2.5;
  scaled.step_overhead_ns *= k;
  for (auto& v : scaled.ns_per_element) v *= k;
  scaled.write_ns_per_byte *= k;
  const CpuModel a(base), b(scaled);
  for (int i = 0; i < kCpuSteps; ++i)
    for (uint64_t e : {0u, 1u, 96u, 1536u})
      EXPECT_EQ(b.step_ps(CpuStep(i), e, 64), uint64_t(double(a.step_ps(CpuStep(i), e, 64)) * k))
          << cpu_step_name(CpuStep(i)) << " " << e;
}

TEST(CpuModel, FractionalNanosecondsRoundToThePicosecond) {
  CpuModelConfig c;
  c.step_overhead_ns = 0.25;
  c.ns_per_element.fill(0.0014);  // 1.4 ps per element
  c.write_ns_per_byte = 0;
  const CpuModel m(c);
  EXPECT_EQ(m.step_ps(CpuStep::Rope, 0), 250u);
  EXPECT_EQ(m.step_ps(CpuStep::Rope, 10), 264u);   // 250 + 14
  EXPECT_EQ(m.step_ps(CpuStep::Rope, 1), 251u);    // 251.4 -> 251
  EXPECT_EQ(m.step_ps(CpuStep::Rope, 3), 254u);    // 254.2 -> 254
}

TEST(CpuModel, StepNamesAreDistinctKeys) {
  // The names are config keys (cpu.ns_per_element.<name>): one per step, none empty.
  std::set<std::string> names;
  for (int i = 0; i < kCpuSteps; ++i) {
    const std::string n = cpu_step_name(CpuStep(i));
    EXPECT_FALSE(n.empty());
    EXPECT_EQ(n.find_first_of(" ."), std::string::npos) << n;
    names.insert(n);
  }
  EXPECT_EQ(names.size(), size_t(kCpuSteps));
  EXPECT_STREQ(cpu_step_name(CpuStep::Embed), "embed");
  EXPECT_STREQ(cpu_step_name(CpuStep::WriteHeaders), "write_headers");
}

// Prefill (docs/prefill.md 6): one call over a chunk's vectors.
TEST(CpuModel, AStepOverAChunkPaysItsOverheadOnceAndItsWorkPerVector) {
  const CpuModel cpu{CpuModelConfig{}};
  for (int s = 0; s < kCpuSteps; ++s) {
    const CpuStep step = CpuStep(s);
    EXPECT_EQ(cpu.chunk_step_ps(step, 1, 1536, 96), cpu.step_ps(step, 1536, 96)) << cpu_step_name(step);
    const uint64_t overhead = cpu.step_ps(step, 0, 0);
    const uint64_t work = cpu.step_ps(step, 1536, 96) - overhead;
    const uint64_t eight = cpu.chunk_step_ps(step, 8, 1536, 96);
    // overhead + 8 x work, within the rounding of each term to a picosecond.
    EXPECT_NEAR(double(eight), double(overhead + 8 * work), 8.0) << cpu_step_name(step);
    EXPECT_LE(eight, 8 * cpu.step_ps(step, 1536, 96)) << cpu_step_name(step);
  }
}

}  // namespace
}  // namespace bitsim::host
