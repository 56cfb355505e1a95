// The prefill engine's resource estimate and fit verdict (docs/prefill.md 4).
#include "host/prefill.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "hw/circuits/attention_resources.h"
#include "model/model_config.h"
#include "model/packed_image.h"

namespace bitsim::host {
namespace {

TEST(PrefillResources, OneVectorIsTheBoardAndEachMoreCostsItsStatedOperators) {
  const hw::AttentionUnitConfig unit;
  const PrefillResources one = prefill_resources(1, unit);
  EXPECT_EQ(one.lut, 0);
  EXPECT_EQ(one.bram36, 0);
  EXPECT_EQ(one.dsp, 0);
  EXPECT_TRUE(one.fits()) << one.overflow();
  // The board: 34% of 53,200 LUT, two x buffers of 5 BRAM36, the attention unit's BRAM and DSP.
  const hw::AttentionResources at = hw::attention_resources(unit);
  EXPECT_EQ(one.board_lut, 18088);
  EXPECT_EQ(one.board_bram36, 10 + at.bram36);
  EXPECT_EQ(one.board_dsp, at.dsp);
  // Per extra vector, both lanes: 2 x 5 BRAM36 and 2 x (40 x 8 + 39 x 12 + 32 + 16) = 1,672 LUT.
  const PrefillResources eight = prefill_resources(8, unit);
  EXPECT_EQ(eight.bram36, 7 * 10);
  EXPECT_EQ(eight.lut, 7 * 1672);
  EXPECT_EQ(eight.dsp, 0);
  EXPECT_EQ(eight.total_bram36(), one.board_bram36 + 70);
  EXPECT_EQ(eight.rows.size(), 5u);
}

TEST(PrefillResources, TheVerdictNamesTheResourceThatOverflows) {
  const hw::AttentionUnitConfig unit;
  int largest = 0;
  for (int p = 1; p <= model::kMaxVectors; ++p) {
    const PrefillResources r = prefill_resources(p, unit);
    if (r.fits()) {
      EXPECT_EQ(largest, p - 1) << "fit is monotonic in P";
      largest = p;
    } else {
      EXPECT_NE(r.overflow().find("BRAM36"), std::string::npos) << p << ": " << r.overflow();
    }
  }
  // BRAM36 binds first: 10 per extra vector against 140 less the board's.
  const int board = prefill_resources(1, unit).board_bram36;
  EXPECT_EQ(largest, 1 + (140 - board) / 10);
  EXPECT_EQ(board, 12);     // 2 x 5 for the x buffers, the two-phase unit's 2 (docs/prefill.md 4)
  EXPECT_EQ(largest, 13);   // the table in docs/prefill.md
  EXPECT_FALSE(prefill_resources(16, unit).fits());
  // With the PL walker beside it, the walker's BRAM counts too: never a larger P.
  const auto walker = walker_resources(WalkerConfig{}, model::ModelConfig::bitnet_large());
  int with_walker = 0;
  for (int p = 1; p <= model::kMaxVectors && prefill_resources(p, unit, walker).fits(); ++p) with_walker = p;
  EXPECT_LE(with_walker, largest);
  EXPECT_EQ(with_walker, 6);  // the walker's 77 BRAM36 (RoPE table 48, buffers 28, sequencer 1)
  for (int bad : {0, model::kMaxVectors + 1}) {
    try {
      (void)prefill_resources(bad, unit);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("prefill.tokens_per_pass"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace bitsim::host
