// KV storage formats (model/kv_format.h, docs/variants-attention.md section 8): the whole
// storage of the board's int8 rows and of the INT4 codec, against hand counts.
#include "model/kv_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace bitsim::model {
namespace {

TEST(KvFormat, Int8IsTheBoardsRows) {
  const KvStorage s = kv_storage(KvFormat::Int8, 0, kBoardHeadDim);
  EXPECT_EQ(s.k.total(), 96u);  // 96 int8, 12 beats, nothing else
  EXPECT_EQ(s.v.total(), 96u);
  EXPECT_EQ(s.k.payload, 96u);
  EXPECT_EQ(s.bank, 0u);
  EXPECT_EQ(s.per_position(), 192u);
  // bitnet-large: 24 layers x 16 heads x 512 positions x 192 bytes = 37,748,736 (CIRCUITS.md 5).
  EXPECT_EQ(s.cache_bytes(24 * 16, 512), 37'748'736u);
}

TEST(KvFormat, Int4HandCount) {
  // No outliers. K: 96 nibbles = 48 bytes (6 beats). V: 48 bytes of nibbles + 3 fp16 group
  // scales (96 / 32) = 54, padded to 56 (7 beats). Bank: 96 fp16 channel scales = 192.
  KvStorage s = kv_storage(KvFormat::Int4, 0, kBoardHeadDim);
  EXPECT_EQ(s.k.payload, 48u);
  EXPECT_EQ(s.k.padding, 0u);
  EXPECT_EQ(s.k.total(), 48u);
  EXPECT_EQ(s.v.payload, 48u);
  EXPECT_EQ(s.v.scales, 6u);
  EXPECT_EQ(s.v.padding, 2u);
  EXPECT_EQ(s.v.total(), 56u);
  EXPECT_EQ(s.bank, 192u);
  EXPECT_EQ(s.per_position(), 104u);  // against int8's 192: 1.85x, not the payload's 2x
  // 8 outlier channels: 88 nibbles in use = 44 bytes, 4 bytes of unused nibbles (padding),
  // 8 fp16 lanes = 16 bytes: 64 (8 beats). Bank: 192 + 8 index bytes = 200.
  s = kv_storage(KvFormat::Int4, 8, kBoardHeadDim);
  EXPECT_EQ(s.k.payload, 44u);
  EXPECT_EQ(s.k.outliers, 16u);
  EXPECT_EQ(s.k.padding, 4u);
  EXPECT_EQ(s.k.total(), 64u);
  EXPECT_EQ(s.v.total(), 56u);
  EXPECT_EQ(s.bank, 200u);
  EXPECT_EQ(s.per_position(), 120u);
  // 1 outlier channel: 95 nibbles = 47 whole bytes, the half byte is padding; 2 bytes of lane;
  // 48 + 2 = 50 padded to 56: padding 1 + 6 = 7. Bank: 193 -> 200.
  s = kv_storage(KvFormat::Int4, 1, kBoardHeadDim);
  EXPECT_EQ(s.k.payload, 47u);
  EXPECT_EQ(s.k.outliers, 2u);
  EXPECT_EQ(s.k.padding, 7u);
  EXPECT_EQ(s.k.total(), 56u);
  EXPECT_EQ(s.bank, 200u);
  // Every count is a whole number of beats per row.
  for (int n = 0; n <= kKvMaxOutlierChannels; ++n) {
    const KvStorage t = kv_storage(KvFormat::Int4, n, kBoardHeadDim);
    EXPECT_EQ(t.k.total() % 8, 0u) << n;
    EXPECT_EQ(t.v.total() % 8, 0u) << n;
    EXPECT_EQ(t.bank % 8, 0u) << n;
  }
}

// A unit built for another head dimension (attention.head_dim = d, docs/variants-attention.md
// 10.2): int8 rows of d bytes; INT4 rows of d / 2 nibble bytes, d / 32 V group scales, a bank
// of 2 d + n bytes, each to a beat; a d no unit takes, or (INT4) not whole V groups, is
// refused naming attention.head_dim.
TEST(KvFormat, HeadDimSizesTheRowsAndTheBank) {
  EXPECT_EQ(kv_storage(KvFormat::Int8, 0, 128).per_position(), 256u);
  const KvStorage s = kv_storage(KvFormat::Int4, 0, 128);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.k.total(), 64u);
  EXPECT_EQ(s.v.payload, 64u);
  EXPECT_EQ(s.v.scales, 8u);  // 4 groups of 32
  EXPECT_EQ(s.v.total(), 72u);
  EXPECT_EQ(s.bank, 256u);
  const KvStorage w = kv_storage(KvFormat::Int4, 8, 256);  // the widest unit, 8 outlier lanes
  EXPECT_EQ(w.k.payload, 124u);
  EXPECT_EQ(w.k.outliers, 16u);
  EXPECT_EQ(w.k.total(), 144u);
  EXPECT_EQ(w.bank, 520u);  // 512 + 8 channel bytes (channel 255 still fits one)
  EXPECT_NO_THROW(kv_storage(KvFormat::Int8, 0, 72));
  for (auto [format, d] : {std::pair{KvFormat::Int4, 72}, {KvFormat::Tip, 72}, {KvFormat::Int8, 100},
                           {KvFormat::Int8, 0}, {KvFormat::Int8, 264}}) {
    try {
      (void)kv_storage(format, 0, d);
      ADD_FAILURE() << d;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("attention.head_dim = " + std::to_string(d)), std::string::npos) << e.what();
    }
  }
  // A V row of 128: each of its 4 groups with its own scale, read back within half a step.
  float v[128], back[128];
  for (int i = 0; i < 128; ++i) v[i] = float((i * 37) % 23 - 11) * (1.0f + float(i / 32));
  std::vector<uint8_t> row(s.v.total(), 0xAA);
  encode_v_int4(v, 128, row.data());
  decode_v_int4(row.data(), 128, back);
  for (int g = 0; g < 4; ++g) {
    uint16_t h;
    std::memcpy(&h, row.data() + 64 + 2 * g, 2);
    const float scale = float_from_fp16(h);
    EXPECT_NEAR(scale, 11.0f * (1.0f + float(g)) / 7.0f, 0.01f) << g;
    for (int i = 32 * g; i < 32 * (g + 1); ++i) EXPECT_LE(std::fabs(back[i] - v[i]), scale / 2 + 1e-4f) << i;
  }
}

TEST(KvFormat, LargestContextCountsTheBankAndCaps) {
  const KvStorage s = kv_storage(KvFormat::Int4, 0, kBoardHeadDim);
  // 2 layer-heads, 10,000 free bytes: banks 384, then 9,616 / 208 = 46 positions.
  EXPECT_EQ(largest_context(s, 2, 10'000, 4096), 46);
  EXPECT_EQ(largest_context(s, 2, 10'000, 40), 40);  // capped
  EXPECT_EQ(largest_context(s, 2, 300, 4096), 0);    // not even the banks
  EXPECT_EQ(largest_context(kv_storage(KvFormat::Int8, 0, kBoardHeadDim), 2, 10'000, 4096), 26);  // 10,000 / 384
}

TEST(KvFormat, BadValuesNameTheKey) {
  try {
    kv_format_of("int2");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kv.format"), std::string::npos);
  }
  EXPECT_EQ(kv_format_of("int4"), KvFormat::Int4);
  EXPECT_EQ(kv_format_of("tip"), KvFormat::Tip);
  EXPECT_THROW(kv_storage(KvFormat::Int4, 9, kBoardHeadDim), Error);
  EXPECT_THROW(kv_storage(KvFormat::Int4, -1, kBoardHeadDim), Error);
  try {
    kv_storage(KvFormat::Int8, 2, kBoardHeadDim);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kv.outlier_channels"), std::string::npos);
  }
}

TEST(KvFormat, Fp16HandWorked) {
  EXPECT_EQ(fp16_from_float(1.0f), 0x3C00);
  EXPECT_EQ(fp16_from_float(-2.0f), 0xC000);
  EXPECT_EQ(fp16_from_float(0.5f), 0x3800);
  EXPECT_EQ(fp16_from_float(-1.3f), 0xBD33);     // 1 + 307/1024 = 1.2998046875
  EXPECT_EQ(fp16_from_float(1.0f / 3), 0x3555);
  EXPECT_EQ(fp16_from_float(65504.0f), 0x7BFF);  // the largest half
  EXPECT_EQ(fp16_from_float(65520.0f), 0x7C00);  // the tie rounds to even: infinity
  EXPECT_EQ(fp16_from_float(0x1p-24f), 0x0001);  // the smallest subnormal
  EXPECT_EQ(fp16_from_float(0x1p-25f), 0x0000);  // a tie with 0: even
  EXPECT_EQ(fp16_from_float(0x3p-26f), 0x0001);  // 0.75 of it: up
  EXPECT_EQ(fp16_from_float(1e-5f / 7.0f), 0x0018);  // 23.97 x 2^-24
  EXPECT_EQ(float_from_fp16(0xBD33), -1.2998046875f);
  EXPECT_EQ(float_from_fp16(0x0018), 24 * 0x1p-24f);
  EXPECT_EQ(float_from_fp16(0x7C00), INFINITY);
  // Every finite half survives the round trip.
  for (uint32_t h = 0; h < 0x10000; ++h)
    if ((h & 0x7C00) != 0x7C00) ASSERT_EQ(fp16_from_float(float_from_fp16(uint16_t(h))), h) << h;
}

TEST(KvFormat, Int4KRowHandWorked) {
  uint16_t sk[96];
  std::fill(sk, sk + 96, uint16_t(0x3800));  // every channel scale 0.5
  float k[96] = {};
  k[0] = 1.0f;    // 2
  k[1] = -1.3f;   // -2.6 -> -3 (nibble 0xD)
  k[2] = 10.0f;   // 20 -> 7
  k[3] = -10.0f;  // -20 -> -8 (0x8)
  k[4] = 0.25f;   // 0.5 -> 0 (even)
  k[5] = 0.75f;   // 1.5 -> 2
  uint8_t row[64];
  std::fill(row, row + 64, uint8_t(0xAA));
  encode_k_int4(k, sk, nullptr, 0, kBoardHeadDim, row);
  EXPECT_EQ(row[0], 0xD2);
  EXPECT_EQ(row[1], 0x87);
  EXPECT_EQ(row[2], 0x20);
  for (int i = 3; i < 48; ++i) EXPECT_EQ(row[i], 0) << i;
  float back[96];
  decode_k_int4(row, sk, nullptr, 0, kBoardHeadDim, back);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], -1.5f);
  EXPECT_EQ(back[2], 3.5f);
  EXPECT_EQ(back[3], -4.0f);
  EXPECT_EQ(back[4], 0.0f);
  EXPECT_EQ(back[5], 1.0f);
  // Channels 1 and 3 as fp16 outlier lanes: their nibbles 0, lanes at bytes 48 and 50, the
  // row 48 + 4 = 52 padded to 56.
  const int out[2] = {1, 3};
  std::fill(row, row + 64, uint8_t(0xAA));
  encode_k_int4(k, sk, out, 2, kBoardHeadDim, row);
  EXPECT_EQ(row[0], 0x02);
  EXPECT_EQ(row[1], 0x07);
  EXPECT_EQ(row[48] | (row[49] << 8), 0xBD33);
  EXPECT_EQ(row[50] | (row[51] << 8), 0xC900);
  for (int i = 52; i < 56; ++i) EXPECT_EQ(row[i], 0) << i;
  EXPECT_EQ(row[56], 0xAA);  // nothing past the row's 56 bytes
  decode_k_int4(row, sk, out, 2, kBoardHeadDim, back);
  EXPECT_EQ(back[1], -1.2998046875f);
  EXPECT_EQ(back[3], -10.0f);
  EXPECT_EQ(back[2], 3.5f);
}

TEST(KvFormat, Int4VRowHandWorked) {
  float v[96] = {};
  v[0] = 7.0f;     // group 0: max 7, scale 1.0: 7
  v[1] = -3.4f;    // -3 (0xD)
  v[64] = -3.5f;   // group 2: max 3.5, scale 0.5: -7 (0x9)
  v[65] = 1.25f;   // 2.5 -> 2
  uint8_t row[56];
  std::fill(row, row + 56, uint8_t(0xAA));
  encode_v_int4(v, kBoardHeadDim, row);
  EXPECT_EQ(row[0], 0xD7);
  EXPECT_EQ(row[32], 0x29);
  EXPECT_EQ(row[48] | (row[49] << 8), 0x3C00);  // 1.0
  EXPECT_EQ(row[50] | (row[51] << 8), 0x0018);  // group 1 all zero: 1e-5 / 7
  EXPECT_EQ(row[52] | (row[53] << 8), 0x3800);  // 0.5
  EXPECT_EQ(row[54], 0);
  EXPECT_EQ(row[55], 0);
  float back[96];
  decode_v_int4(row, kBoardHeadDim, back);
  EXPECT_EQ(back[0], 7.0f);
  EXPECT_EQ(back[1], -3.0f);
  EXPECT_EQ(back[64], -3.5f);
  EXPECT_EQ(back[65], 1.0f);
  EXPECT_EQ(back[40], 0.0f);
}

// ---- The unit's read path (docs/variants-attention.md 8.3) ------------------------------

TEST(KvInt4Steps, OutlierFixedPointByHand) {
  // 16 h / sk, exact, round half to even, 12 bits.
  EXPECT_EQ(kv_outlier_fixed(0x4200, 0x3800), 96);    // 16 * 3.0 / 0.5
  EXPECT_EQ(kv_outlier_fixed(0xC200, 0x3800), -96);   // -3.0
  EXPECT_EQ(kv_outlier_fixed(0x3C00, 0x3A00), 21);    // 16 / 0.75 = 21.33
  EXPECT_EQ(kv_outlier_fixed(fp16_from_float(0.5625f), 0x4000), 4);  // 4.5 -> 4 (even)
  EXPECT_EQ(kv_outlier_fixed(fp16_from_float(0.6875f), 0x4000), 6);  // 5.5 -> 6 (even)
  EXPECT_EQ(kv_outlier_fixed(fp16_from_float(0.65625f), 0x4000), 5); // 5.25
  EXPECT_EQ(kv_outlier_fixed(fp16_from_float(1000.0f), 0x3800), 2047);    // 32000 clamps
  EXPECT_EQ(kv_outlier_fixed(fp16_from_float(-1000.0f), 0x3800), -2048);
  EXPECT_EQ(kv_outlier_fixed(0x7BFF, 0x0001), 2047);  // 65504 / 2^-24: the shift's cap
  EXPECT_EQ(kv_outlier_fixed(0x7C00, 0x3C00), 2047);  // inf read as 65504
  EXPECT_EQ(kv_outlier_fixed(0x0001, 0x7BFF), 0);     // 2^-24 / 65504: the divisor's cap
  EXPECT_EQ(kv_outlier_fixed(0x0000, 0x3C00), 0);
  // Against the exact quotient in double (correctly rounded: an exact tie stays one).
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> bits(0, 0x7BFF), sbits(0x0001, 0x7BFF);
  for (int i = 0; i < 20000; ++i) {
    const uint16_t h = uint16_t(bits(rng) | (i % 2 ? 0x8000 : 0)), sk = uint16_t(sbits(rng));
    const double want = std::clamp(std::nearbyint(16.0 * double(float_from_fp16(h)) / double(float_from_fp16(sk))),
                                   -2048.0, 2047.0);
    ASSERT_EQ(kv_outlier_fixed(h, sk), int32_t(want)) << std::hex << h << " " << sk;
  }
}

TEST(KvInt4Steps, VWeightAlignsTheExponentByHand) {
  // p sv 2^16: exact for sv >= 2^-16 (E >= 9), rounded half up below.
  EXPECT_EQ(kv_v_weight(32767, 0x3C00), int64_t(32767) * 65536);  // sv = 1: P = 32767 * 1024 << 6
  EXPECT_EQ(kv_v_weight(32767, 0x3800), int64_t(32767) * 32768);  // sv = 0.5
  EXPECT_EQ(kv_v_weight(100, fp16_from_float(3.125f)), int64_t(100) * 3 * 65536 + 100 * 65536 / 8);  // 3.125
  EXPECT_EQ(kv_v_weight(777, 0x0100), 777);  // sv = 2^-16 (subnormal, M = 256): (P + 128) >> 8
  EXPECT_EQ(kv_v_weight(24, 0x0010), 2);     // sv = 2^-20: 24 / 16 = 1.5 -> 2 (half up)
  EXPECT_EQ(kv_v_weight(8, 0x0010), 1);      // 0.5 -> 1
  EXPECT_EQ(kv_v_weight(7, 0x0010), 0);
  EXPECT_EQ(kv_v_weight(32767, 0x7BFF), int64_t(32767) * 2047 << 21);  // the largest: < 2^47
  EXPECT_LT(kv_v_weight(32767, 0x7C00), int64_t(1) << 47);             // inf read as 65504
}

TEST(KvInt4Steps, RescaleAndNormalizeByHand) {
  // 2^16-multiples rescale exactly: 32767 * 2^16 * 30782 / 2^15.
  EXPECT_EQ(kv_rescale(int64_t(32767) * 65536, 30782), int64_t(32767) * 30782 * 2);
  EXPECT_EQ(kv_rescale(-3, 16384), -1);  // -1.5 -> -1 (half up)
  EXPECT_EQ(kv_rescale(int64_t(1) << 58, 32767), ((int64_t(1) << 58) / 32768) * 32767);  // wide: no overflow
  // One row: acc = 5 * 32767 * 2^16, sum = 32767 -> 5 * 2^16 (32767 r = 2^46 - 2).
  const int64_t acc[3] = {int64_t(5) * 32767 * 65536, -(int64_t(1) << 58), int64_t(1) << 58};
  int32_t o[3];
  kv_normalize(acc, 32767, 3, o);
  EXPECT_EQ(o[0], 5 * 65536);
  EXPECT_EQ(o[1], INT32_MIN);  // saturated
  EXPECT_EQ(o[2], INT32_MAX);
}

TEST(KvInt4Steps, BankPicksTheLargestChannelsAndRoundTrips) {
  float kmax[96];
  std::fill(kmax, kmax + 96, 1.0f);
  kmax[5] = kmax[7] = 9.0f;
  kmax[90] = kmax[20] = 4.0f;  // a tie: the lower channel first
  kmax[3] = 0.0f;              // floored at 1e-5
  const KvInt4Bank b = kv_int4_bank(kmax, 3, kBoardHeadDim);
  EXPECT_EQ(b.outliers, (std::vector<int>{5, 7, 20}));
  EXPECT_EQ(b.sk[0], fp16_from_float(1.0f / 7.0f));
  EXPECT_EQ(b.sk[5], fp16_from_float(9.0f / 7.0f));
  EXPECT_EQ(b.sk[3], fp16_from_float(1e-5f / 7.0f));
  EXPECT_TRUE(kv_int4_bank(kmax, 0, kBoardHeadDim).outliers.empty());
  EXPECT_THROW(kv_int4_bank(kmax, 9, kBoardHeadDim), Error);
  uint8_t bytes[200];
  std::fill(bytes, bytes + 200, uint8_t(0xEE));
  write_kv_bank(b, bytes);
  EXPECT_EQ(bytes[10] | (bytes[11] << 8), b.sk[5]);
  EXPECT_EQ(bytes[192], 5);
  EXPECT_EQ(bytes[193], 7);
  EXPECT_EQ(bytes[194], 20);
  EXPECT_EQ(bytes[195], 0);  // padding to the beat
  EXPECT_EQ(bytes[199], 0);
  const KvInt4Bank back = read_kv_bank(bytes, 3, kBoardHeadDim);
  EXPECT_EQ(back.outliers, b.outliers);
  EXPECT_EQ(back.sk, b.sk);
  bytes[193] = 5;  // repeats
  EXPECT_THROW(read_kv_bank(bytes, 3, kBoardHeadDim), Error);
  bytes[193] = 96;  // not a channel
  EXPECT_THROW(read_kv_bank(bytes, 3, kBoardHeadDim), Error);
}

}  // namespace
}  // namespace bitsim::model
