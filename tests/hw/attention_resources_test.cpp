// The attention unit's resource model (hw/circuits/attention_resources.h) against hand counts:
// docs/variants-attention.md 5 (the board's 17 DSP, the online unit's 60, the datapath LUTs
// of both) and 8.7 (the INT4 unit's DSP and LUTs, operator by operator).
#include "hw/circuits/attention_resources.h"

#include <gtest/gtest.h>

namespace bitsim::hw {
namespace {

AttentionUnitConfig unit(const std::string& variant, const std::string& kv = "int8", int outliers = 0) {
  AttentionUnitConfig c;
  c.variant = variant;
  c.kv_format = kv;
  c.kv_outlier_channels = outliers;
  return c;
}

const AttentionResourceRow& row(const AttentionResources& r, const std::string& name) {
  for (const auto& x : r.rows)
    if (x.name == name) return x;
  ADD_FAILURE() << "no row " << name;
  return r.rows.front();
}

TEST(AttentionResources, Dsp48CountFollowsTheStatedRule) {
  EXPECT_EQ(dsp48_count(8, 8), 1);
  EXPECT_EQ(dsp48_count(23, 18), 1);   // fits 25 x 18 signed
  EXPECT_EQ(dsp48_count(18, 23), 1);   // either order
  EXPECT_EQ(dsp48_count(32, 15), 2);   // ceil(32/24) x ceil(15/17)
  EXPECT_EQ(dsp48_count(32, 31), 4);   // 2 x 2
  EXPECT_EQ(dsp48_count(60, 15), 3);   // 3 x 1
  EXPECT_EQ(dsp48_count(60, 31), 6);   // 3 x 2
  EXPECT_EQ(dsp48_count(48, 4), 2);    // why the V products are LUTs
}

// A unit built for another head dimension (attention.head_dim, docs/variants-attention.md
// 10.2): the MACs, multipliers and BRAMs are the board's at every d; the INT4 and TIP units'
// q operand select (a d/16:1 mux, 128 bits a lane) and outlier q LUTRAM (d x 8) follow d.
TEST(AttentionResources, HeadDimScalesOnlyTheQSelectAndTheOutlierLutram) {
  for (const auto& [variant, kv] : {std::pair{"two-phase", "int8"}, {"online-softmax", "int8"},
                                    {"online-softmax", "int4"}, {"online-softmax", "tip"}}) {
    SCOPED_TRACE(std::string(variant) + " " + kv);
    const auto at96 = attention_resources(unit(variant, kv));
    for (int d : {32, 128, 256}) {
      AttentionUnitConfig c = unit(variant, kv);
      c.head_dim = d;
      const auto r = attention_resources(c);
      EXPECT_EQ(r.dsp, at96.dsp) << d;
      EXPECT_EQ(r.bram36, at96.bram36) << d;
      const bool wide = std::string(kv) != "int8";
      // d = 32: a 2:1 select (one stage, 128 LUT a lane less) and half a LUTRAM's 16 (8 a lane
      // less); 128: the same 2 stages and 2 LUTRAMs as 96; 256: 4 LUTRAMs (16 a lane more).
      const int delta = !wide ? 0 : d == 32 ? -2 * (128 + 8) : d == 256 ? 2 * 16 : 0;
      EXPECT_EQ(r.lut, at96.lut + delta) << d;
    }
  }
  AttentionUnitConfig c = unit("online-softmax", "int4");
  c.head_dim = 256;
  EXPECT_EQ(*row(attention_resources(c), "q operand select").lut, 2 * 128 * 2);
}

TEST(AttentionResources, TheBoardsUnitIs17DspAndTwoScoreBuffers) {
  const auto r = attention_resources(AttentionUnitConfig{});
  EXPECT_EQ(r.dsp, 17);  // BOARD.md: 8 MACs per lane and the m multiplier
  EXPECT_EQ(r.bram36, 2);
  // LUT: per lane the maximum's compare and the difference (2 x 32) and the sum of p (32);
  // shared: the m product's shift (41 bits x 3 stages of 4:1), the legacy select (41), the
  // clamp's compare (41) and select (8); the EXP ROM (4 LUT6 of 64 x 1 and a 4:1 mux a bit,
  // 15 bits).
  EXPECT_TRUE(r.lut_complete);
  EXPECT_EQ(row(r, "score maximum and difference").lut, 2 * 64);
  EXPECT_EQ(row(r, "m multiplier").lut, 123 + 41 + 41 + 8);
  EXPECT_EQ(row(r, "EXP table (256 x 15 ROM)").lut, 5 * 15);
  EXPECT_EQ(row(r, "sum of p (32 bits)").lut, 2 * 32);
  EXPECT_EQ(row(r, "q.K and p.V MACs").lut, 0);
  EXPECT_EQ(r.lut, 128 + 213 + 75 + 64);
}

TEST(AttentionResources, TheOnlineUnitIs60Dsp) {
  const auto r = attention_resources(unit("online-softmax"));
  // 16 MACs + m + interpolation + 2 x 8 rescales of 2 + 2 sum rescales + 2 normalizers of 4
  EXPECT_EQ(r.dsp, 16 + 1 + 1 + 32 + 2 + 8);
  EXPECT_EQ(row(r, "rescale of acc (acc x alpha)").dsp, 32);
  EXPECT_EQ(r.bram36, 0);  // no score buffer
  // LUT: per lane the running maximum (compare and two subtractions of 32), the p select
  // (15), 8 adds of 32 (rescaled acc + p x V), the sum's add (24), the divider's 25-bit
  // subtract; shared: the z8 shift (49 bits x 3 stages), EXPI (two ROM reads of 75, 15 + 19
  // + 15 + 41 of arithmetic, a 15-bit select).
  EXPECT_TRUE(r.lut_complete);
  EXPECT_EQ(row(r, "running maximum and difference").lut, 2 * 96);
  EXPECT_EQ(row(r, "m multiplier").lut, 147);
  EXPECT_EQ(row(r, "interpolation").lut, 150 + 90 + 15);
  EXPECT_EQ(row(r, "rescale of acc (acc x alpha)").lut, 2 * 8 * 32);
  EXPECT_EQ(row(r, "normalizer (acc x r)").lut, 2 * 25);
  EXPECT_EQ(r.lut, 192 + 147 + 255 + 30 + 512 + 48 + 50);
}

TEST(AttentionResources, TheInt4UnitByHand) {
  const auto r = attention_resources(unit("online-softmax", "int4"));
  // Sized for T <= 2048 (docs/variants-attention.md 8.8: acc 62 bits, sum 26).
  // DSP: 2 lanes x 16 q.K, m, interpolation, 2 outlier products, 2 V weights, 2 x 16
  // rescales of 3 (62 x 15), 2 sum rescales of 2 (26 x 15), 2 normalizers of 6 (62 x 31).
  EXPECT_EQ(row(r, "q.K multipliers (nibbles)").dsp, 32);
  EXPECT_EQ(row(r, "rescale of acc (acc x alpha)").dsp, 96);
  EXPECT_EQ(row(r, "normalizer (acc x r)").dsp, 12);
  EXPECT_EQ(row(r, "rescale of sum").dsp, 4);
  EXPECT_EQ(r.dsp, 32 + 1 + 1 + 2 + 2 + 96 + 4 + 12);
  // LUT, per lane: q select 128 x 2; outlier lane 2 x 15 + 6 + 3 x 33 + 2 x 24 + 13 x 25 + 33
  // + 38 + 25 + 16 = 620; V weight 15 + 3 x 48 + 48 = 207; 16 V products of 3 x 51; 16
  // accumulators of 62. Two lanes.
  EXPECT_EQ(row(r, "q operand select").lut, 2 * 256);
  EXPECT_EQ(row(r, "outlier lane -> 12-bit K").lut, 2 * 620);
  EXPECT_EQ(row(r, "V weight p x M").lut, 2 * 207);
  EXPECT_EQ(row(r, "V products w x v (48 x 4)").lut, 2 * 16 * 153);
  EXPECT_EQ(row(r, "62-bit accumulate").lut, 2 * 16 * 62);
  // The int8 unit's maximum, exponent and p select (624), the sum's 26-bit add and the
  // divider's 27-bit subtract, two lanes.
  EXPECT_EQ(row(r, "rescale of sum").lut, 2 * 26);
  EXPECT_EQ(row(r, "normalizer (acc x r)").lut, 2 * 27);
  EXPECT_EQ(r.lut, 512 + 1240 + 414 + 4896 + 1984 + 192 + 147 + 255 + 30 + 52 + 54);
  EXPECT_EQ(r.bram36, 0);
  EXPECT_TRUE(r.lut_complete);
  EXPECT_EQ(row(r, "m multiplier").lut, 147);
}

// The unit takes n = 0..8 from its header: its resources do not depend on the key.
TEST(AttentionResources, OutlierChannelsDoNotChangeTheInt4Unit) {
  const auto a = attention_resources(unit("online-softmax", "int4", 0));
  const auto b = attention_resources(unit("online-softmax", "int4", 8));
  EXPECT_EQ(a.dsp, b.dsp);
  EXPECT_EQ(a.lut, b.lut);
  EXPECT_EQ(a.bram36, b.bram36);
}

TEST(AttentionResources, TheTipUnitIsTheInt4UnitPlusItsReadPathAndRegionState) {
  // docs/tip.md "Stream": the INT4 unit's rows (150 DSP, 9,776 LUT) and TIP's, sized for
  // 128 regions (T 2,048 at R 16) whatever kv.tip.* says.
  const auto i4 = attention_resources(unit("online-softmax", "int4"));
  const auto r = attention_resources(unit("online-softmax", "tip"));
  ASSERT_EQ(i4.dsp, 150);
  ASSERT_EQ(i4.lut, 9'776);
  // DSP: 2 lanes x 8 KVQ8 V products of 48 x 8 (2 each), 2 region-sum rescales 26 x 15 (2
  // each), 2 mass m multipliers and 2 mass interpolations (1 each).
  EXPECT_EQ(row(r, "KVQ8 V products w x v8").dsp, 32);
  EXPECT_EQ(row(r, "rescale of the region sum l").dsp, 4);
  EXPECT_EQ(row(r, "mass exponent (m multiplier)").dsp, 2);
  EXPECT_EQ(row(r, "mass exponent (interpolation)").dsp, 2);
  EXPECT_EQ(r.dsp, 150 + 32 + 4 + 2 + 2);
  // LUT, per lane: the K operand select 8 x 12; 8 accumulate selects of 62; the region sum's
  // 26-bit add; tags 2 x (2 + 1) + 3; the mass exponent's z8 shift 147 and EXPI 255; the mass
  // arithmetic 32 + 26 + 62 + 20 + 20 = 160. Two lanes.
  EXPECT_EQ(row(r, "KVQ8 K operand select").lut, 2 * 96);
  EXPECT_EQ(row(r, "KVQ8 V accumulate select").lut, 2 * 8 * 62);
  EXPECT_EQ(row(r, "rescale of the region sum l").lut, 2 * 26);
  EXPECT_EQ(row(r, "tier tags and row length").lut, 2 * 9);
  EXPECT_EQ(row(r, "mass exponent (m multiplier)").lut, 2 * 147);
  EXPECT_EQ(row(r, "mass exponent (interpolation)").lut, 2 * 255);
  EXPECT_EQ(row(r, "region masses (on the sum's and normalizer's multipliers)").lut, 2 * 160);
  EXPECT_EQ(r.lut, 9'776 + 192 + 992 + 52 + 18 + 294 + 510 + 320);
  EXPECT_EQ(r.lut, 12'154);
  // BRAM36: the (l_r, m_r) register file, 128 x 58 bits a lane.
  EXPECT_EQ(row(r, "region register file (l_r, m_r) x 128").bram36, 2);
  EXPECT_EQ(r.bram36, 2);
  EXPECT_TRUE(r.lut_complete);
  // The TIP keys do not change the unit (L and R come from its header).
  AttentionUnitConfig lean = unit("online-softmax", "tip");
  lean.tip = model::kTipLean;
  const auto l = attention_resources(lean);
  EXPECT_EQ(l.dsp, r.dsp);
  EXPECT_EQ(l.lut, r.lut);
  EXPECT_EQ(l.bram36, r.bram36);
}

// The shared-stream unit (docs/variants-attention.md 9) built for G = 4: the board's unit with
// every operator once per member (the lanes' one m multiplier and EXP read one per member per
// lane), G score buffers a lane, and a 4:1 select of each 64-bit result beat.
TEST(AttentionResources, TheSharedStreamUnitByHand) {
  AttentionUnitConfig c;
  c.gqa = "shared-stream";
  c.gqa_group = 4;
  const auto r = attention_resources(c);
  EXPECT_EQ(row(r, "q.K and p.V MACs").dsp, 4 * 16);
  EXPECT_EQ(row(r, "m multiplier (one per member, per lane)").dsp, 8);
  EXPECT_EQ(r.dsp, 64 + 8);
  EXPECT_EQ(r.bram36, 8);  // G x T scores a lane: 4 buffers of 512 x 32 bits
  EXPECT_EQ(row(r, "score maximum and difference").lut, 4 * 128);
  EXPECT_EQ(row(r, "m multiplier (one per member, per lane)").lut, 8 * 213);
  EXPECT_EQ(row(r, "EXP table (256 x 15 ROM) (one per member, per lane)").lut, 8 * 75);
  EXPECT_EQ(row(r, "result select (4 members onto the stream, 64 bits)").lut, 2 * 64);
  EXPECT_EQ(r.lut, 512 + 1704 + 600 + 256 + 128);
  // The per-head unit's figures do not depend on attention.gqa_group.
  AttentionUnitConfig per_head;
  per_head.gqa_group = 8;
  EXPECT_EQ(attention_resources(per_head).dsp, 17);
  // INT4: the outlier lanes' decode is the streamed row's (once a lane); the rest per member.
  AttentionUnitConfig i4 = unit("online-softmax", "int4");
  const auto one = attention_resources(i4);
  i4.gqa = "shared-stream";
  i4.gqa_group = 2;
  const auto two = attention_resources(i4);
  EXPECT_EQ(row(two, "outlier lane -> 12-bit K").lut, row(one, "outlier lane -> 12-bit K").lut);
  EXPECT_EQ(row(two, "q.K multipliers (nibbles)").dsp, 2 * row(one, "q.K multipliers (nibbles)").dsp);
  // Every DSP twice, and the lanes' shared m multiplier and interpolation (1 each) 2 x 2 each.
  EXPECT_EQ(two.dsp, 2 * (one.dsp - 2) + 2 * 2 * 2);
}

}  // namespace
}  // namespace bitsim::hw
