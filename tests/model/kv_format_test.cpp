// KV storage formats (model/kv_format.h, docs/variants-attention.md section 8): the whole
// storage of the board's int8 rows and of the INT4 codec, against hand counts.
#include "model/kv_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/error.h"

namespace bitsim::model {
namespace {

TEST(KvFormat, Int8IsTheBoardsRows) {
  const KvStorage s = kv_storage(KvFormat::Int8, 0);
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
  KvStorage s = kv_storage(KvFormat::Int4, 0);
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
  s = kv_storage(KvFormat::Int4, 8);
  EXPECT_EQ(s.k.payload, 44u);
  EXPECT_EQ(s.k.outliers, 16u);
  EXPECT_EQ(s.k.padding, 4u);
  EXPECT_EQ(s.k.total(), 64u);
  EXPECT_EQ(s.v.total(), 56u);
  EXPECT_EQ(s.bank, 200u);
  EXPECT_EQ(s.per_position(), 120u);
  // 1 outlier channel: 95 nibbles = 47 whole bytes, the half byte is padding; 2 bytes of lane;
  // 48 + 2 = 50 padded to 56: padding 1 + 6 = 7. Bank: 193 -> 200.
  s = kv_storage(KvFormat::Int4, 1);
  EXPECT_EQ(s.k.payload, 47u);
  EXPECT_EQ(s.k.outliers, 2u);
  EXPECT_EQ(s.k.padding, 7u);
  EXPECT_EQ(s.k.total(), 56u);
  EXPECT_EQ(s.bank, 200u);
  // Every count is a whole number of beats per row.
  for (int n = 0; n <= kKvMaxOutlierChannels; ++n) {
    const KvStorage t = kv_storage(KvFormat::Int4, n);
    EXPECT_EQ(t.k.total() % 8, 0u) << n;
    EXPECT_EQ(t.v.total() % 8, 0u) << n;
    EXPECT_EQ(t.bank % 8, 0u) << n;
  }
}

TEST(KvFormat, LargestContextCountsTheBankAndCaps) {
  const KvStorage s = kv_storage(KvFormat::Int4, 0);
  // 2 layer-heads, 10,000 free bytes: banks 384, then 9,616 / 208 = 46 positions.
  EXPECT_EQ(largest_context(s, 2, 10'000, 4096), 46);
  EXPECT_EQ(largest_context(s, 2, 10'000, 40), 40);  // capped
  EXPECT_EQ(largest_context(s, 2, 300, 4096), 0);    // not even the banks
  EXPECT_EQ(largest_context(kv_storage(KvFormat::Int8, 0), 2, 10'000, 4096), 26);  // 10,000 / 384
}

TEST(KvFormat, BadValuesNameTheKey) {
  try {
    kv_format_of("int2");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kv.format"), std::string::npos);
  }
  EXPECT_EQ(kv_format_of("int4"), KvFormat::Int4);
  EXPECT_THROW(kv_storage(KvFormat::Int4, 9), Error);
  EXPECT_THROW(kv_storage(KvFormat::Int4, -1), Error);
  try {
    kv_storage(KvFormat::Int8, 2);
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
  encode_k_int4(k, sk, nullptr, 0, row);
  EXPECT_EQ(row[0], 0xD2);
  EXPECT_EQ(row[1], 0x87);
  EXPECT_EQ(row[2], 0x20);
  for (int i = 3; i < 48; ++i) EXPECT_EQ(row[i], 0) << i;
  float back[96];
  decode_k_int4(row, sk, nullptr, 0, back);
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
  encode_k_int4(k, sk, out, 2, row);
  EXPECT_EQ(row[0], 0x02);
  EXPECT_EQ(row[1], 0x07);
  EXPECT_EQ(row[48] | (row[49] << 8), 0xBD33);
  EXPECT_EQ(row[50] | (row[51] << 8), 0xC900);
  for (int i = 52; i < 56; ++i) EXPECT_EQ(row[i], 0) << i;
  EXPECT_EQ(row[56], 0xAA);  // nothing past the row's 56 bytes
  decode_k_int4(row, sk, out, 2, back);
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
  encode_v_int4(v, row);
  EXPECT_EQ(row[0], 0xD7);
  EXPECT_EQ(row[32], 0x29);
  EXPECT_EQ(row[48] | (row[49] << 8), 0x3C00);  // 1.0
  EXPECT_EQ(row[50] | (row[51] << 8), 0x0018);  // group 1 all zero: 1e-5 / 7
  EXPECT_EQ(row[52] | (row[53] << 8), 0x3800);  // 0.5
  EXPECT_EQ(row[54], 0);
  EXPECT_EQ(row[55], 0);
  float back[96];
  decode_v_int4(row, back);
  EXPECT_EQ(back[0], 7.0f);
  EXPECT_EQ(back[1], -3.0f);
  EXPECT_EQ(back[64], -3.5f);
  EXPECT_EQ(back[65], 1.0f);
  EXPECT_EQ(back[40], 0.0f);
}

}  // namespace
}  // namespace bitsim::model
