// KV storage formats (model/kv_format.h, docs/variants-attention.md section 8): the whole
// storage of the board's int8 rows and of the INT4 codec, against hand counts.
#include "model/kv_format.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace bitsim::model
