// libFuzzer target: random MMIO programs run on both fidelities, every read compared (the
// register differential test, tests/hw/register_differential_test.cpp, driven by the
// fuzzer). The program starts with the streams, SG rings and descriptors of a generated
// program (tests/support/mmio_programs.h, seeded from the input), then runs register
// writes, register reads, waits and DDR loads chosen by the input: addresses inside the
// four DMA windows and the two engine register files, values raw or pointing at the
// streams and rings. The clocked board's reads are the expected values; the fast board must
// read the same. bitsim::Error (an access the board rejects) is accepted from both alike.
// With BITSIM_FUZZ_PROGRAM=FILE set, the program is also written to FILE (an MMIO program,
// docs/mmio-record.md) with the clocked board's answers: `tools/fuzz fuzz_mmio_replay --repro
// INPUT` then `bitsim replay FILE --fidelity fast` shows a finding in the ordinary build.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdlib>
#include <vector>

#include "fuzz_common.h"
#include "host/mmio_program.h"
#include "hw/board.h"
#include "hw/interconnect/dma_registers.h"
#include "sim/replay.h"
#include "support/mmio_programs.h"

namespace {

namespace host = bitsim::host;
namespace R = bitsim::hw::dma_reg;

uint32_t pick_value(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0: return in.ConsumeIntegral<uint32_t>();
    case 1: return 0x0100'0000u + 8u * in.ConsumeIntegral<uint16_t>();          // matmul streams, results
    case 2: return 0x0200'0000u + 0x40u * in.ConsumeIntegral<uint16_t>();       // SG rings, descriptors
    case 3: return 0x0300'0000u + 8u * in.ConsumeIntegral<uint16_t>();          // attention buffers
    case 4: return in.ConsumeIntegralInRange<uint32_t>(0, 0x4000);              // lengths
    default:                                                                    // control bits
      return in.PickValueInArray({R::kCrRunStop, R::kCrReset, R::kCrRunStop | R::kCrIocIrqEn,
                                  R::kCrKeyhole, R::kCrCyclic, R::kSrErrors, 0u, 0xFFFF'FFFFu});
  }
}

uint64_t pick_register(FuzzedDataProvider& in) {
  const int where = in.ConsumeIntegralInRange<int>(0, 9);
  if (where < 8) return bitsim::hw::EngineRegistry::board().dma_base(where / 2) + 4u * in.ConsumeIntegralInRange<uint32_t>(0, 0x17);
  return (where == 8 ? bitsim::hw::EngineRegistry::board()[0].regs : bitsim::hw::EngineRegistry::board()[1].regs) +
         4u * in.ConsumeIntegralInRange<uint32_t>(0, 0xF);
}

// The generated setups: 256 of them, made once per process (in libFuzzer's first run) and
// picked by the input's first two bytes modulo 256. Made as they were needed and kept, they
// left allocations behind in the run that made one, and libFuzzer takes a run that
// allocates more than it frees for a possible leak: it runs the input again and scans the
// whole heap, which took about 60% of the target's time. (The two finding reproducers in
// the seed corpus pick setup 146, as they did.)
const host::MmioProgram& setup(uint16_t seed) {
  static const std::vector<host::MmioProgram> setups = [] {
    std::vector<host::MmioProgram> all;
    for (uint16_t s = 0; s < 256; ++s) all.push_back(bitsim::testing::MmioProgramGenerator(s, true).generate(0));
    return all;
  }();
  return setups[seed % setups.size()];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  host::MmioProgram p = setup(in.ConsumeIntegral<uint16_t>());
  uint64_t t = 1'000'000;
  for (const auto& op : p.ops) t = std::max(t, op.time_ps);
  constexpr uint64_t kAccess = 200'000;
  for (int i = 0; i < 96 && in.remaining_bytes() > 0; ++i) {
    host::MmioOp op;
    op.time_ps = t;
    op.access_ps = kAccess;
    const int kind = in.ConsumeIntegralInRange<int>(0, 9);
    if (kind < 5) {
      op.kind = host::MmioOp::Kind::kWrite;
      op.addr = pick_register(in);
      op.value = pick_value(in);
    } else if (kind < 8) {
      op.kind = host::MmioOp::Kind::kRead;
      op.addr = pick_register(in);
    } else if (kind == 8) {
      // Up to 40 us (a 16 KiB transfer ends within about 30; waits in a row reach longer
      // spans). The clocked board clocks every idle cycle of a wait: the former bound,
      // 200 us, spent most of a long input's time on idle cycles.
      t += in.ConsumeIntegralInRange<uint64_t>(0, 40'000'000);
      continue;
    } else {
      op.kind = host::MmioOp::Kind::kMemRead;
      op.addr = pick_value(in) & ~7u;
      op.size = in.ConsumeIntegralInRange<uint64_t>(1, 512);
    }
    p.ops.push_back(op);
    t += kAccess + 8'000 * in.ConsumeIntegralInRange<uint64_t>(0, 3);
  }
  // The clocked board's answers are the expected values; the fast board must give the same.
  host::ReplayResult cycle;
  std::string cycle_error, fast_error;
  try {
    cycle = bitsim::sim::replay_program(p, bitsim::hw::BoardConfig{}, bitsim::sim::Fidelity::kCycle);
  } catch (const bitsim::Error& e) {
    cycle_error = e.what();
  }
  if (cycle_error.empty()) {
    size_t r = 0, m = 0;
    for (auto& op : p.ops) {
      if (op.kind == host::MmioOp::Kind::kRead) op.value = cycle.read_values.at(r++);
      if (op.kind == host::MmioOp::Kind::kMemRead) op.digest = cycle.digests.at(m++);
    }
    // For a finding: the program with the clocked board's answers, as a file that
    // `bitsim replay FILE --fidelity fast` runs again outside the fuzzer.
    if (const char* out = std::getenv("BITSIM_FUZZ_PROGRAM")) host::save_program(p, out);
  }
  host::ReplayResult fast;
  try {
    fast = bitsim::sim::replay_program(p, bitsim::hw::BoardConfig{}, bitsim::sim::Fidelity::kFast);
  } catch (const bitsim::Error& e) {
    fast_error = e.what();
  }
  if (cycle_error.empty() != fast_error.empty()) {
    std::fprintf(stderr, "cycle: %s\nfast: %s\n", cycle_error.empty() ? "ok" : cycle_error.c_str(),
                 fast_error.empty() ? "ok" : fast_error.c_str());
    bitsim::fuzz::fail("one fidelity rejected the program, the other did not");
  }
  if (cycle_error.empty() && !fast.ok()) {
    for (const auto& mm : fast.mismatches) std::fprintf(stderr, "%s\n", host::describe(mm).c_str());
    bitsim::fuzz::fail("the fast board read differently from the clocked board");
  }
  return 0;
}
