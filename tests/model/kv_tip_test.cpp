// TIP's precision tiers (model/kv_tip.h, docs/tip.md): the settings' checks, the storage
// against hand counts, the rows' re-encoding and the tier rule.
#include "model/kv_tip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "base/error.h"

namespace bitsim::model {
namespace {

constexpr int kHeadDim = kBoardHeadDim;  // the board's unit (attention.head_dim's default)

void expect_refused(TipSettings s, const std::string& key) {
  try {
    s.validate("test");
    ADD_FAILURE() << "accepted " << key;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

TEST(KvTip, EveryKeyOutOfRangeIsRefusedByName) {
  TipSettings ok;
  EXPECT_NO_THROW(ok.validate("test"));
  TipSettings s;
  s.region = 48;  // not a power of two
  expect_refused(s, "kv.tip.region");
  s = {};
  s.region = 512;
  expect_refused(s, "kv.tip.region");
  s = {};
  s.sink = 32;  // not a multiple of 64
  expect_refused(s, "kv.tip.sink");
  s = {};
  s.recent = 0;
  expect_refused(s, "kv.tip.recent");
  s = {};
  s.recent = 4096;
  expect_refused(s, "kv.tip.recent");
  s = {};
  s.kvq8_regions = -1;
  expect_refused(s, "kv.tip.kvq8_regions");
  s = {};
  s.lane_regions = 5000;
  expect_refused(s, "kv.tip.lane_regions");
  s = {};
  s.lanes = 6;
  expect_refused(s, "kv.tip.lanes");
}

TEST(KvTip, RowBytesPerTier) {
  EXPECT_EQ(tip_row_bytes(TipTier::Kvq8, 4, kBoardHeadDim), 192u);       // 96 + 96 int8
  EXPECT_EQ(tip_row_bytes(TipTier::Kvq4Lanes, 4, kBoardHeadDim), 112u);  // K 46 + 2 unused + 8 lanes = 56, V 56
  EXPECT_EQ(tip_row_bytes(TipTier::Kvq4Lanes, 8, kBoardHeadDim), 120u);  // K 44 + 4 + 16 = 64, V 56
  EXPECT_EQ(tip_row_bytes(TipTier::Kvq4, 4, kBoardHeadDim), 104u);       // K 48, V 56
  EXPECT_EQ(tip_bank_bytes(4, kBoardHeadDim), 200u);                     // 192 + 2 + 4 = 198 -> 200
  EXPECT_EQ(tip_bank_bytes(8, kBoardHeadDim), 208u);                     // 202 -> 208
}

// Rows and banks of a unit built for head dimension 128 (docs/variants-attention.md 10.2).
TEST(KvTip, RowBytesPerTierAtHeadDim128) {
  EXPECT_EQ(tip_row_bytes(TipTier::Kvq8, 4, 128), 256u);       // 128 + 128 int8
  EXPECT_EQ(tip_row_bytes(TipTier::Kvq4Lanes, 4, 128), 144u);  // K 62 + 2 unused + 8 lanes = 72, V 64 + 8 = 72
  EXPECT_EQ(tip_row_bytes(TipTier::Kvq4, 4, 128), 136u);       // K 64, V 72
  EXPECT_EQ(tip_k_bytes(TipTier::Kvq8, 4, 128), 128u);
  EXPECT_EQ(tip_bank_bytes(4, 128), 264u);                     // 256 + 2 + 4 = 262 -> 264
  EXPECT_EQ(tip_storage(TipSettings{}, 512, 128).bank, 264u);
  EXPECT_GT(tip_storage(TipSettings{}, 512, 128).rows, tip_storage(TipSettings{}, 512, kHeadDim).rows);
}

TEST(KvTip, StorageAtTheDefaultsMatchesTheHandCount) {
  // docs/tip.md: T = 2,048, 32 regions: 1 sink + 5 window + 3 budget KVQ8, 8 KVQ4+4, 15 KVQ4.
  const TipStorage st = tip_storage(TipSettings{}, 2048, kBoardHeadDim);
  EXPECT_EQ(st.regions, 32);
  EXPECT_EQ(st.kvq8, 9);
  EXPECT_EQ(st.lanes, 8);
  EXPECT_EQ(st.kvq4, 15);
  EXPECT_EQ(st.rows, 64u * (9 * 192 + 8 * 112 + 15 * 104));
  EXPECT_EQ(st.table, 32u * 8);
  EXPECT_EQ(st.bank, 200u);
  EXPECT_NEAR(st.per_position(2048), 130.97, 0.005);
  EXPECT_LT(st.per_position(2048), 0.70 * 192);
  // At 512 positions every region is a sink, recent or within the budget: all KVQ8.
  const TipStorage short_ctx = tip_storage(TipSettings{}, 512, kBoardHeadDim);
  EXPECT_EQ(short_ctx.kvq8, 8);
  EXPECT_EQ(short_ctx.lanes + short_ctx.kvq4, 0);
  EXPECT_GT(short_ctx.per_position(512), 192.0);
}

TEST(KvTip, LargestContextIsTheLastThatFits) {
  // The area is whole region slots: 1,500 positions take as much as 1,536 (24 regions of 64).
  const TipSettings s;
  const uint64_t lh = 24 * 16;
  const uint64_t free = lh * tip_storage(s, 1500, kBoardHeadDim).total();
  EXPECT_EQ(tip_largest_context(s, lh, free, 2048, kBoardHeadDim), 1536);
  EXPECT_EQ(tip_largest_context(s, lh, free - 1, 2048, kBoardHeadDim), 1472);
  EXPECT_EQ(tip_largest_context(s, lh, 1ull << 40, 2048, kBoardHeadDim), 2048);
  EXPECT_EQ(tip_largest_context(s, lh, 0, 2048, kBoardHeadDim), 0);
}

TipBank bank_for_test(int lanes) {
  float kmax[kHeadDim];
  for (int d = 0; d < kHeadDim; ++d) kmax[d] = 0.5f + 0.01f * float(d);
  kmax[7] = 9.0f;  // the largest: an outlier channel
  kmax[40] = 7.0f;
  return tip_bank(kmax, 0.02f, lanes, kBoardHeadDim);
}

TEST(KvTip, Kvq8RowsQuantizeKPerChannelAndVByTheBankScale) {
  const TipBank bank = bank_for_test(4);
  float k[kHeadDim], v[kHeadDim];
  for (int d = 0; d < kHeadDim; ++d) k[d] = 0.1f * float(d % 11) - 0.5f, v[d] = 0.01f * float(d % 9) - 0.04f;
  k[3] = 100.0f;  // clipped at 127
  uint8_t row[2 * kHeadDim];
  encode_kvq8(k, v, bank, row);
  for (int d = 0; d < kHeadDim; ++d) {
    const float step = float_from_fp16(bank.k.sk[size_t(d)]) / 16;
    const int want = d == 3 ? 127 : int(std::nearbyint(k[d] / step));
    EXPECT_EQ(int(int8_t(row[d])), want) << d;
    EXPECT_EQ(int(int8_t(row[kHeadDim + d])), int(std::nearbyint(v[d] / float_from_fp16(bank.sv)))) << d;
  }
}

TEST(KvTip, DemotionReencodesFromTheStoredIntegers) {
  const TipBank bank = bank_for_test(4);
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> q(-127, 127);
  uint8_t row[2 * kHeadDim];
  for (auto& b : row) b = uint8_t(int8_t(q(rng)));
  // KVQ8 -> KVQ4+4: nibbles are rne(k8 / 16) clamped; lanes keep the outlier channels.
  const std::vector<uint8_t> l4 = tip_demote(row, TipTier::Kvq8, TipTier::Kvq4Lanes, bank);
  ASSERT_EQ(l4.size(), 112u);
  for (int d = 0; d < kHeadDim; ++d) {
    const bool lane = std::find(bank.k.outliers.begin(), bank.k.outliers.end(), d) != bank.k.outliers.end();
    const int k8 = int8_t(row[d]);
    if (lane) {
      EXPECT_EQ(kv_nibble(l4.data(), d), 0) << d;
      const size_t j = size_t(std::find(bank.k.outliers.begin(), bank.k.outliers.end(), d) - bank.k.outliers.begin());
      uint16_t h;
      std::memcpy(&h, l4.data() + 48 + 2 * j, 2);
      EXPECT_NEAR(kv_outlier_fixed(h, bank.k.sk[size_t(d)]), k8, 1) << d;  // the lane holds k8 in fp16
    } else {
      EXPECT_EQ(kv_nibble(l4.data(), d), std::clamp(int(std::nearbyint(k8 / 16.0)), -8, 7)) << d;
    }
  }
  // V: an INT4 row of the dequantized values.
  float vf[kHeadDim], back[kHeadDim];
  for (int d = 0; d < kHeadDim; ++d) vf[d] = float(int8_t(row[kHeadDim + d])) * float_from_fp16(bank.sv);
  uint8_t vrow[56];
  encode_v_int4(vf, kBoardHeadDim, vrow);
  EXPECT_EQ(std::memcmp(vrow, l4.data() + 56, 56), 0);
  decode_v_int4(l4.data() + 56, kBoardHeadDim, back);
  for (int d = 0; d < kHeadDim; ++d) {  // within half a step of the group's scale max|V_g| / 7
    float gmax = 0;
    for (int i = d / 32 * 32; i < d / 32 * 32 + 32; ++i) gmax = std::max(gmax, std::fabs(vf[i]));
    EXPECT_NEAR(back[d], vf[d], gmax / 7 * 0.5 * 1.01 + 1e-6) << d;
  }
  // KVQ4+4 -> KVQ4: the lanes become nibbles, V unchanged; the result equals demoting KVQ8
  // straight to KVQ4 except where the lane's fp16 rounding moved a value across a half step.
  const std::vector<uint8_t> k4 = tip_demote(l4.data(), TipTier::Kvq4Lanes, TipTier::Kvq4, bank);
  const std::vector<uint8_t> direct = tip_demote(row, TipTier::Kvq8, TipTier::Kvq4, bank);
  ASSERT_EQ(k4.size(), 104u);
  EXPECT_EQ(std::memcmp(k4.data() + 48, l4.data() + 56, 56), 0);
  for (int d = 0; d < kHeadDim; ++d) EXPECT_NEAR(kv_nibble(k4.data(), d), kv_nibble(direct.data(), d), 1) << d;
  // No promotion.
  EXPECT_THROW(tip_demote(k4.data(), TipTier::Kvq4, TipTier::Kvq8, bank), Error);
  EXPECT_THROW(tip_demote(l4.data(), TipTier::Kvq4Lanes, TipTier::Kvq4Lanes, bank), Error);
}

TEST(KvTip, RegionsLeaveTheWindowOncePerRegionAfterTheSinks) {
  TipSettings s;  // R 64, S 64, W 256
  TipRegions r(s);
  std::vector<int> left;
  for (int pos = 0; pos < 2048; ++pos)
    if (r.leaving(pos) >= 0) left.push_back(pos);
  // Region 0 is the sink; region 1 leaves when the window is [128, 383], at pos 383.
  ASSERT_FALSE(left.empty());
  EXPECT_EQ(left.front(), 383);
  EXPECT_EQ(r.leaving(383), 1);
  EXPECT_EQ(r.leaving(447), 2);
  EXPECT_EQ(left.size(), size_t((2048 - 256) / 64 - 1));  // regions 1 .. 27 by position 2,047
}

// Masses that make region i's mean mass `mean[i]`: one query reads them all.
void read_once(TipRegions& r, const std::vector<uint32_t>& mass) { r.add_masses(mass); }

TEST(KvTip, TheBudgetKeepsTheHeaviestRegionsAndNeverPromotes) {
  TipSettings s;
  s.region = 16, s.sink = 0, s.recent = 16, s.kvq8_regions = 1, s.lane_regions = 1, s.lanes = 4;
  TipRegions r(s);
  // Regions 0..3 with masses 10, 30, 20, 5 from one query.
  read_once(r, {10, 30, 20, 5});
  // Region 0 leaves first: the KVQ8 budget is free.
  EXPECT_TRUE(r.place(0).empty());
  EXPECT_EQ(r.tier(0), TipTier::Kvq8);
  // Region 1 (30) beats region 0 (10): 1 keeps KVQ8, 0 goes to KVQ4+L (free).
  auto c = r.place(1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].region, 0);
  EXPECT_EQ(c[0].from, TipTier::Kvq8);
  EXPECT_EQ(c[0].to, TipTier::Kvq4Lanes);
  // Region 2 (20) loses to 1 (30), then beats 0 (10) for the lanes: 0 drops to KVQ4.
  c = r.place(2);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].region, 0);
  EXPECT_EQ(c[0].to, TipTier::Kvq4);
  EXPECT_EQ(c[1].region, 2);
  EXPECT_EQ(c[1].to, TipTier::Kvq4Lanes);
  // Region 3 (5) loses everything.
  c = r.place(3);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].to, TipTier::Kvq4);
  // Region 0 later becomes the heaviest: it is not promoted (it is placed once).
  for (int i = 0; i < 10; ++i) read_once(r, {60000, 0, 0, 0});
  EXPECT_EQ(r.tier(0), TipTier::Kvq4);
  EXPECT_EQ(r.tier(1), TipTier::Kvq8);
  EXPECT_EQ(r.tier(2), TipTier::Kvq4Lanes);
}

TEST(KvTip, ATieKeepsTheSetAndMeansAreCompared) {
  TipSettings s;
  s.region = 16, s.sink = 0, s.recent = 16, s.kvq8_regions = 1, s.lane_regions = 0, s.lanes = 4;
  TipRegions r(s);
  read_once(r, {20, 20, 0});
  EXPECT_TRUE(r.place(0).empty());
  // Equal means: the leaving region does not beat the set's minimum, so it drops (no lanes budget).
  auto c = r.place(1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].region, 1);
  EXPECT_EQ(c[0].to, TipTier::Kvq4);
  // Means, not sums: region 2 read by fewer queries with a higher mean beats region 0.
  TipRegions m(s);
  for (int i = 0; i < 4; ++i) m.add_masses({10});          // region 0: 4 queries, mean 10
  m.add_masses({10, 0, 30});                               // region 0 mean 10; region 2: 1 query, mean 30
  EXPECT_TRUE(m.beats(2, 0));
  EXPECT_FALSE(m.beats(0, 2));
  EXPECT_EQ(m.queries(0), 5u);
  EXPECT_EQ(m.importance(0), 50u);
}

TEST(KvTip, CountersSaturate) {
  TipSettings s;
  TipRegions r(s);
  for (int i = 0; i < 300; ++i) r.add_masses({65535});
  EXPECT_EQ(r.importance(0), (1u << 24) - 1);  // 300 x 65,535 > 2^24
  EXPECT_EQ(r.queries(0), 300u);
}

// ---- The stream (docs/tip.md "Stream") ------------------------------------------------

TEST(KvTipStream, TagsTwoBitsARegionAndTheirReservedValues) {
  EXPECT_EQ(tip_regions(1, 6), 1);
  EXPECT_EQ(tip_regions(64, 6), 1);
  EXPECT_EQ(tip_regions(65, 6), 2);
  EXPECT_EQ(tip_regions(2048, 4), 128);
  EXPECT_EQ(tip_tag_beats(32), 1);
  EXPECT_EQ(tip_tag_beats(33), 2);
  EXPECT_EQ(tip_tag_beats(128), 4);
  EXPECT_EQ(tip_mass_beats(32), 8);
  EXPECT_EQ(tip_mass_beats(5), 2);
  // Regions 0..4: KVQ8, KVQ4+L, KVQ4, KVQ4+L, KVQ4 -> bits 00 01 10 01 10 from bit 0.
  const std::vector<TipTier> t = {TipTier::Kvq8, TipTier::Kvq4Lanes, TipTier::Kvq4, TipTier::Kvq4Lanes, TipTier::Kvq4};
  uint8_t b[8];
  write_tip_tags(t, b);
  uint64_t beat;
  std::memcpy(&beat, b, 8);
  EXPECT_EQ(beat, 0b10'01'10'01'00u);
  std::vector<TipTier> back;
  ASSERT_TRUE(read_tip_tags(b, 5, &back));
  EXPECT_EQ(back, t);
  // Region 40 sits in beat 1, bits 17:16.
  std::vector<TipTier> many(41, TipTier::Kvq8);
  many[40] = TipTier::Kvq4;
  uint8_t b2[16];
  write_tip_tags(many, b2);
  uint64_t beat1;
  std::memcpy(&beat1, b2 + 8, 8);
  EXPECT_EQ(beat1, 2ull << 16);
  ASSERT_TRUE(read_tip_tags(b2, 41, &back));
  EXPECT_EQ(back, many);
  // Tag 3 and a bit past the last region are reserved.
  uint8_t bad[8] = {};
  bad[0] = 3 << 2;
  EXPECT_FALSE(read_tip_tags(bad, 2, &back));
  EXPECT_FALSE(read_tip_tags(bad, 1, &back));  // region 1's bits, past a 1-region head
  bad[0] = 0;
  bad[7] = 0x80;                                // bits 63:62 = 2: region 31 at KVQ4
  EXPECT_FALSE(read_tip_tags(bad, 31, &back));  // past a 31-region head
  ASSERT_TRUE(read_tip_tags(bad, 32, &back));
  EXPECT_EQ(back[31], TipTier::Kvq4);
}

TEST(KvTipStream, BankRoundTripsWithTheVScaleAfterTheLanes) {
  std::vector<float> kmax(kHeadDim);
  for (int d = 0; d < kHeadDim; ++d) kmax[size_t(d)] = 0.5f + 0.01f * float((d * 37) % 96);
  for (int lanes : {4, 8}) {
    const TipBank b = tip_bank(kmax.data(), 0.0123f, lanes, kBoardHeadDim);
    std::vector<uint8_t> bytes(tip_bank_bytes(lanes, kBoardHeadDim), 0xAA);
    write_tip_bank(b, bytes.data());
    uint16_t sv;
    std::memcpy(&sv, bytes.data() + 192 + lanes, 2);
    EXPECT_EQ(sv, b.sv);
    for (size_t i = 192 + size_t(lanes) + 2; i < bytes.size(); ++i) EXPECT_EQ(bytes[i], 0) << i;
    const TipBank r = read_tip_bank(bytes.data(), lanes, kBoardHeadDim);
    EXPECT_EQ(r.k.sk, b.k.sk);
    EXPECT_EQ(r.k.outliers, b.k.outliers);
    EXPECT_EQ(r.sv, b.sv);
    bytes[192] = 96;  // not a channel
    EXPECT_THROW(read_tip_bank(bytes.data(), lanes, kBoardHeadDim), Error);
  }
}

TEST(KvTipStream, RowReadPathPerTierByHand) {
  KvInt4Bank bank;
  bank.sk.assign(kHeadDim, fp16_from_float(0.5f));
  bank.outliers = {5, 9, 10, 90};
  uint8_t row[192] = {};
  int32_t k12[kHeadDim];
  // KVQ8: the int8 value is K's fixed point itself.
  row[0] = uint8_t(int8_t(-100));
  row[95] = 127;
  tip_k12(row, TipTier::Kvq8, bank, k12);
  EXPECT_EQ(k12[0], -100);
  EXPECT_EQ(k12[95], 127);
  EXPECT_EQ(k12[5], 0);
  // KVQ4: 16 times the nibble, lanes ignored; KVQ4+L: lane 1 (channel 9) = rne(16 h / sk).
  std::memset(row, 0, sizeof row);
  kv_set_nibble(row, 9, -3);
  kv_set_nibble(row, 4, 7);
  const uint16_t h = fp16_from_float(1.25f);
  std::memcpy(row + 48 + 2, &h, 2);
  tip_k12(row, TipTier::Kvq4, bank, k12);
  EXPECT_EQ(k12[9], -48);
  EXPECT_EQ(k12[4], 112);
  tip_k12(row, TipTier::Kvq4Lanes, bank, k12);
  EXPECT_EQ(k12[9], 40);  // 16 x 1.25 / 0.5
  EXPECT_EQ(k12[4], 112);
  EXPECT_EQ(k12[5], 0);   // lane 0 holds 0
  // V: KVQ8 one weight for the row, w = p sv 2^16; sv = 0.5, p = 3: w = 98,304.
  uint8_t v[96] = {};
  v[0] = 2;
  v[50] = uint8_t(int8_t(-1));
  int64_t acc[kHeadDim] = {};
  tip_accumulate_v(v, TipTier::Kvq8, fp16_from_float(0.5f), 3, kBoardHeadDim, acc);
  EXPECT_EQ(acc[0], 2 * 98'304);
  EXPECT_EQ(acc[50], -98'304);
  EXPECT_EQ(acc[1], 0);
  // KVQ4: per group; group 1's scale 0.25 (w = 49,152), nibble 5 at channel 33.
  uint8_t v4[56] = {};
  kv_set_nibble(v4, 33, 5);
  const uint16_t g1 = fp16_from_float(0.25f);
  std::memcpy(v4 + 48 + 2, &g1, 2);
  int64_t acc4[kHeadDim] = {};
  tip_accumulate_v(v4, TipTier::Kvq4, 0, 3, kBoardHeadDim, acc4);
  EXPECT_EQ(acc4[33], 5 * 49'152);
  EXPECT_EQ(acc4[0], 0);
}

TEST(KvTipStream, RegionMassByHand) {
  // One region holding the whole sum at the maximum: e = EXP[0] = 32767, rr = floor(2^46 /
  // 1000) = 70,368,744,177; a = (1000 x 32767 x rr + 2^44) >> 45 = 65,534 (UQ0.16 of 1).
  const uint32_t total = 1000;
  EXPECT_EQ(tip_region_mass(1000, 7, 7, total, 50'000, 24), 65'534u);
  // Half of the sum: 32,767.
  const uint32_t half = tip_region_mass(500, 7, 7, total, 50'000, 24);
  EXPECT_EQ(half, 32'767u);
  // A region whose maximum lies below M is scaled by e^(m_r - M) < 1.
  EXPECT_LT(tip_region_mass(500, 0, 100'000, total, 50'000, 24), half);
  EXPECT_EQ(tip_region_mass(0, 7, 7, total, 50'000, 24), 0u);
  // The cap: a sum rounded below the region's part (after a rescale) cannot pass 65,535.
  EXPECT_EQ(tip_region_mass(1100, 7, 7, total, 50'000, 24), 65'535u);
}

}  // namespace
}  // namespace bitsim::model
