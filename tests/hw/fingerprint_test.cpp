// State fingerprints (hw/parts/fingerprint.h): the clocked modules' timing state, compared with
// the state after reset. The idle-board check of the fidelity test relies on them; these
// tests show that they see a transfer in flight and a drained wall, and that a quiet board
// returns to its reset state.
#include <gtest/gtest.h>

#include <algorithm>

#include "host/cycle_platform.h"
#include "host/ps.h"
#include "hw/memory/ddr.h"
#include "hw/board.h"
#include "hw/parts/sim_context.h"
#include "hw/parts/sc_kernel.h"
#include "model/packed_image.h"

namespace bitsim::hw {
namespace {

namespace R = dma_reg;

std::vector<std::string> differing(const std::vector<std::pair<std::string, uint64_t>>& a,
                                   const std::vector<std::pair<std::string, uint64_t>>& b) {
  std::vector<std::string> out;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].second != b[i].second) out.push_back(a[i].first);
  return out;
}

TEST(Fingerprint, SeesATransferAndTheWallAndComesBackAfterIt) {
  FreshSimContext ctx;
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  Board board("board", BoardConfig{});
  const auto reset = board.state_fingerprints(64);
  model::TernaryMatrix w;
  w.rows = 200;
  w.cols = 1000;
  w.scale = 1;
  w.trits.assign(size_t(w.rows) * w.cols, 1);
  std::vector<int8_t> x(size_t(w.cols), 3);
  const std::vector<uint8_t> stream = model::build_stream({{x.data(), w.cols, &w, 0, w.rows}});
  std::vector<std::string> mid, late;
  std::vector<std::pair<std::string, uint64_t>> idle;
  host::Ps ps("ps", [&](host::Ps& p) {
    const uint64_t mm0 = EngineRegistry::board().dma_base(0), period = board.clock().period().value();
    board.memory().write(0x100000, stream.data(), stream.size());
    for (uint32_t base : {0u, R::kS2mmOffset}) {
      p.write32(mm0 + base + R::kMm2sDmacr, R::kCrReset, 200'000);
      p.write32(mm0 + base + R::kMm2sDmacr, R::kCrRunStop, 200'000);
    }
    p.write32(mm0 + R::kS2mmDa, 0x200000, 200'000);
    p.write32(mm0 + R::kS2mmLength, 4096, 200'000);
    p.write32(mm0 + R::kMm2sSa, 0x100000, 200'000);
    p.write32(mm0 + R::kMm2sLength, uint32_t(stream.size()), 200'000);
    p.spend(2000 * period);
    mid = differing(board.state_fingerprints(board.clock().cycle()), reset);
    while (!(p.read32(mm0 + R::kS2mmDmasr, 200'000) & R::kSrIdle)) p.spend(1000 * period);
    p.spend(5000 * period);
    idle = board.state_fingerprints(board.clock().cycle());
  });
  ps.bus.bind(board.ps_bus);
  start_simulation();
  ASSERT_FALSE(ps.failure());
  // Mid-transfer the DMA, the port and the DDR hold beats and bursts.
  EXPECT_NE(std::find(mid.begin(), mid.end(), "mm0"), mid.end()) << ::testing::PrintToString(mid);
  EXPECT_NE(std::find(mid.begin(), mid.end(), "ddr"), mid.end()) << ::testing::PrintToString(mid);
  // Long after the transfer, the board is in its reset state again.
  EXPECT_TRUE(differing(idle, reset).empty()) << ::testing::PrintToString(differing(idle, reset));
}

TEST(Fingerprint, DdrBucketCountsUntilItIsFull) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{});
  Ddr ddr("ddr", clock, DdrConfig{});
  // Before the first refill the wall's bucket is empty; a few edges later it is full, and
  // from then on the state no longer changes with time.
  EXPECT_NE(ddr.state_fingerprint(0), ddr.state_fingerprint(64));
  EXPECT_EQ(ddr.state_fingerprint(64), ddr.state_fingerprint(100000));
}

}  // namespace
}  // namespace bitsim::hw
