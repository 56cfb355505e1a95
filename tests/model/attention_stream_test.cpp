// The attention stream format (model/attention_stream.h, CIRCUITS.md 3): header encode and
// parse round trip, every header check in its order, the sizes, the board shape constants.
#include "model/attention_stream.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/error.h"

namespace bitsim::model {
namespace {

TEST(AttentionStream, ShapeConstants) {
  EXPECT_EQ(kBoardHeadDim, 96);
  EXPECT_EQ(kKvPositions, 512);
  EXPECT_EQ(kLanes, 2);
  EXPECT_EQ(attention_row_beats(kBoardHeadDim), 12);
  EXPECT_EQ(attention_result_words(kBoardHeadDim), 98);
  EXPECT_EQ(attention_result_beats(kBoardHeadDim), 49);
  EXPECT_EQ(attention_header_q_bytes(1, kBoardHeadDim), 112u);
  EXPECT_EQ(attention_result_bytes(kBoardHeadDim), 392u);
  EXPECT_EQ(attention_head_beats(1, kBoardHeadDim), 2u + 12 + 24);
  EXPECT_EQ(attention_head_bytes(512, kBoardHeadDim), 16u + 96 + 512u * 192);
  EXPECT_EQ(online_normalize_cycles(kBoardHeadDim), 47 + 96);
  EXPECT_EQ(kv_int4_v_tail_cycles(kBoardHeadDim), 6);
}

// A unit built for attention.head_dim = 128 (BitNet b1.58 2B4T's heads): rows of 16 beats,
// a result of 130 words (65 beats), header + q of 144 bytes, and the d-long steps of its
// normalizer and INT4 V tail.
TEST(AttentionStream, ShapeFollowsTheHeadDim) {
  EXPECT_EQ(attention_row_beats(128), 16);
  EXPECT_EQ(attention_sum_word(128), 128);
  EXPECT_EQ(attention_result_words(128), 130);
  EXPECT_EQ(attention_result_beats(128), 65);
  EXPECT_EQ(attention_result_bytes(128), 520u);
  EXPECT_EQ(attention_header_q_bytes(1, 128), 144u);
  EXPECT_EQ(attention_header_q_bytes(2, 128), 144u + 8 + 128);
  EXPECT_EQ(attention_head_beats(3, 128), 2u + 16 + 2 * 16 * 3);
  EXPECT_EQ(attention_head_bytes(512, 128), 16u + 128 + 512u * 256);
  EXPECT_EQ(online_normalize_cycles(128), 47 + 128);
  EXPECT_EQ(kv_int4_v_tail_cycles(128), 8);
  // The range: whole beats, 8..256.
  EXPECT_TRUE(head_dim_in_range(8) && head_dim_in_range(128) && head_dim_in_range(256));
  EXPECT_FALSE(head_dim_in_range(0) || head_dim_in_range(100) || head_dim_in_range(264));
  // A head walked at d = 128: its size as the header says.
  AttentionHeadHeader h;
  h.T = 3;
  h.last = true;
  std::vector<uint8_t> s(attention_head_bytes(3, 128), 0);
  write_attention_header(h, s.data());
  HeadLayout lay;
  ASSERT_EQ(next_head(s.data(), s.size(), 128, &lay), AttentionError::None);
  EXPECT_EQ(lay.bytes, s.size());
  // The same bytes read by a unit built for 96 are a longer stream than there is: truncated
  // is not what it says, it walks 16 + 96 + 3 * 192 = 688 bytes of the 912.
  ASSERT_EQ(next_head(s.data(), s.size(), kBoardHeadDim, &lay), AttentionError::None);
  EXPECT_EQ(lay.bytes, 688u);
}

TEST(AttentionStream, EncodeParseRoundTrip) {
  for (uint32_t T : {1u, 2u, 511u, 512u})
    for (bool legacy : {false, true})
      for (bool last : {false, true}) {
        AttentionHeadHeader h;
        h.T = T;
        h.m = T == 1 ? kAttentionMaxM : 10818 + T;
        h.shift = T == 2 ? kAttentionMaxShift : 24;
        h.legacy = legacy;
        h.last = last;
        uint8_t bytes[kHeaderBytes];
        write_attention_header(h, bytes);
        const auto beats = encode_attention_header(h);
        EXPECT_EQ(std::memcmp(bytes, beats.data(), kHeaderBytes), 0);
        AttentionHeadHeader got;
        ASSERT_EQ(parse_attention_header(beats[0], beats[1], &got), AttentionError::None);
        EXPECT_EQ(got.T, h.T);
        EXPECT_EQ(got.m, h.m);
        EXPECT_EQ(got.shift, h.shift);
        EXPECT_EQ(got.legacy, legacy);
        EXPECT_EQ(got.last, last);
      }
}

TEST(AttentionStream, FieldLayoutAsCircuitsSection3) {
  AttentionHeadHeader h;
  h.T = 0x123;
  h.m = 0x2ABCD;
  h.shift = 0x15;
  h.legacy = true;
  h.last = true;
  const auto b = encode_attention_header(h);
  EXPECT_EQ(b[0], 0x0000'0123'0301'A77Eull);
  EXPECT_EQ(b[1], 0x0000'0000'1502'ABCDull);
}

TEST(AttentionStream, OnlineFlagIsFlagsBit2AndRoundTrips) {
  AttentionHeadHeader h;
  h.T = 7;
  h.m = 1234;
  h.online = true;
  const auto b = encode_attention_header(h);
  EXPECT_EQ((b[0] >> 24) & 0xFF, 4u);  // flags bit 2, nothing else
  AttentionHeadHeader back;
  ASSERT_EQ(parse_attention_header(b[0], b[1], &back), AttentionError::None);
  EXPECT_TRUE(back.online);
  EXPECT_FALSE(back.legacy);
  EXPECT_EQ(back.T, 7u);
  h.online = false;
  const auto b2 = encode_attention_header(h);
  ASSERT_EQ(parse_attention_header(b2[0], b2[1], &back), AttentionError::None);
  EXPECT_FALSE(back.online);
  EXPECT_EQ(model::attention_variant_of("online-softmax"), model::AttentionVariant::OnlineSoftmax);
  EXPECT_EQ(model::attention_variant_of("two-phase"), model::AttentionVariant::TwoPhase);
  EXPECT_THROW(model::attention_variant_of("one-phase"), Error);
}

TEST(AttentionStream, EveryHeaderCheckInItsOrder) {
  const auto good = encode_attention_header(AttentionHeadHeader{});
  AttentionHeadHeader h;
  auto parse = [&](uint64_t b0, uint64_t b1) { return parse_attention_header(b0, b1, &h); };
  EXPECT_EQ(check_attention_beat0(good[0]), AttentionError::None);
  EXPECT_EQ(check_attention_beat0(good[0] ^ 1), AttentionError::BadMagic);
  EXPECT_EQ(check_attention_beat0(good[0] ^ (1ull << 16)), AttentionError::BadVersion);
  // Magic before version, version before everything on beat 1.
  EXPECT_EQ(parse(good[0] ^ 1 ^ (1ull << 16), ~0ull), AttentionError::BadMagic);
  EXPECT_EQ(parse(good[0] ^ (1ull << 16), ~0ull), AttentionError::BadVersion);
  // Reserved bits: flags 7:4, beat 1 bits 31:30 and 63:36, and 35:32 (the INT4 outlier
  // lanes) above 8 or without flags bit 3; before T and m.
  EXPECT_EQ(parse(good[0] | (1ull << 28), good[1]), AttentionError::ReservedBits);
  EXPECT_EQ(parse(good[0], good[1] | (1ull << 32)), AttentionError::ReservedBits);  // lanes without INT4
  EXPECT_EQ(parse(good[0] | (1ull << 27), good[1] | (9ull << 32)), AttentionError::ReservedBits);
  EXPECT_EQ(parse(good[0], good[1] | (1ull << 36)), AttentionError::ReservedBits);
  // Flags bit 3: the INT4 KV rows, with n lanes in beat 1 bits 35:32.
  EXPECT_EQ(parse(good[0] | (1ull << 27), good[1] | (8ull << 32)), AttentionError::None);
  EXPECT_TRUE(h.int4);
  EXPECT_EQ(h.outliers, 8u);
  EXPECT_EQ(parse(good[0] | (1ull << 31), good[1]), AttentionError::ReservedBits);
  EXPECT_EQ(parse(good[0], good[1] | (1ull << 30)), AttentionError::ReservedBits);
  EXPECT_EQ(parse(good[0] & 0xFFFF'FFFF, good[1] | (1ull << 63)), AttentionError::ReservedBits);
  // T outside 1..512, before m.
  EXPECT_EQ(parse(good[0] & 0xFFFF'FFFF, good[1]), AttentionError::BadLength);
  EXPECT_EQ(parse((good[0] & 0xFFFF'FFFF) | (513ull << 32), good[1] | (1ull << 18)), AttentionError::BadLength);
  // The INT4 unit's T range is 1..2048 (docs/variants-attention.md 8.8); any other unit's 1..512.
  const uint64_t int4 = good[0] | (1ull << 26) | (1ull << 27);
  EXPECT_EQ(parse((int4 & 0xFFFF'FFFF) | (513ull << 32), good[1]), AttentionError::None);
  EXPECT_EQ(h.T, 513u);
  EXPECT_EQ(parse((int4 & 0xFFFF'FFFF) | (2048ull << 32), good[1]), AttentionError::None);
  EXPECT_EQ(h.T, 2048u);
  EXPECT_EQ(parse((int4 & 0xFFFF'FFFF) | (2049ull << 32), good[1]), AttentionError::BadLength);
  EXPECT_EQ(parse(((good[0] | (1ull << 26)) & 0xFFFF'FFFF) | (513ull << 32), good[1]), AttentionError::BadLength);
  EXPECT_EQ(attention_max_t(false), 512);
  EXPECT_EQ(attention_max_t(true), 2048);
  // m wider than 18 bits: beat 1 bits 23:18.
  EXPECT_EQ(parse(good[0], good[1] | (1ull << 18)), AttentionError::MultiplierTooWide);
  EXPECT_EQ(parse(good[0], good[1] | (1ull << 23)), AttentionError::MultiplierTooWide);
  EXPECT_EQ(parse(good[0], good[1] | (0x3Full << 24)), AttentionError::None);
  EXPECT_FALSE(h.int4);
  EXPECT_EQ(h.shift, 63u);
}

TEST(AttentionStream, TipHeaderFieldsAndTheirChecks) {
  // Flags bit 4 (TIP rows, with bit 2), beat 1 bits 35:32 = L (4 or 8), bits 39:36 = log2 R
  // (4..8); T 1..2,048 (docs/tip.md "Stream").
  AttentionHeadHeader t;
  t.T = 2048;
  t.m = 12345;
  t.shift = 24;
  t.online = t.tip = true;
  t.outliers = 8;
  t.region_log2 = 6;
  const auto good = encode_attention_header(t);
  EXPECT_EQ((good[0] >> 24) & 0xFF, 0x14u);
  EXPECT_EQ((good[1] >> 32) & 0xFF, 0x68u);
  AttentionHeadHeader h;
  auto parse = [&](uint64_t b0, uint64_t b1) { return parse_attention_header(b0, b1, &h); };
  ASSERT_EQ(parse(good[0], good[1]), AttentionError::None);
  EXPECT_TRUE(h.tip && h.online && !h.int4);
  EXPECT_EQ(h.outliers, 8u);
  EXPECT_EQ(h.region_log2, 6u);
  EXPECT_EQ(h.T, 2048u);
  uint8_t again[16];
  write_attention_header(h, again);
  EXPECT_EQ(std::memcmp(again, good.data(), 16), 0);
  const uint64_t lanes_off = good[1] & ~(0xFull << 32), region_off = good[1] & ~(0xFull << 36);
  for (uint64_t L : {0ull, 3ull, 5ull, 9ull, 15ull})
    EXPECT_EQ(parse(good[0], lanes_off | (L << 32)), AttentionError::ReservedBits) << "L " << L;
  EXPECT_EQ(parse(good[0], lanes_off | (4ull << 32)), AttentionError::None);
  for (uint64_t r : {0ull, 3ull, 9ull, 15ull})
    EXPECT_EQ(parse(good[0], region_off | (r << 36)), AttentionError::ReservedBits) << "log2 R " << r;
  EXPECT_EQ(parse(good[0], region_off | (4ull << 36)), AttentionError::None);
  EXPECT_EQ(parse(good[0], region_off | (8ull << 36)), AttentionError::None);
  // TIP with INT4 is reserved; a region field without TIP too; bits 63:40 reserved.
  EXPECT_EQ(parse(good[0] | (1ull << 27), good[1]), AttentionError::ReservedBits);
  EXPECT_EQ(parse(good[0] & ~(1ull << 28), region_off), AttentionError::ReservedBits);  // L without INT4 or TIP
  EXPECT_EQ(parse((good[0] & ~(1ull << 28)) | (1ull << 27), good[1]), AttentionError::ReservedBits);  // INT4, log2 R 6
  EXPECT_EQ(parse(good[0], good[1] | (1ull << 40)), AttentionError::ReservedBits);
  EXPECT_EQ(parse(good[0] | (1ull << 29), good[1]), AttentionError::ReservedBits);  // flags bit 5
  // T past 2,048.
  EXPECT_EQ(parse((good[0] & 0xFFFF'FFFF) | (2049ull << 32), good[1]), AttentionError::BadLength);
}

TEST(AttentionStream, WalkerReadsTipTagsAndSizesEachRowAtItsTier) {
  // T 40 at R 16: 3 regions (16 + 16 + 8 rows) at KVQ4+L (L 4), KVQ8, KVQ4: 112 + 8 (tags) +
  // 200 (bank) + 16 x 112 + 16 x 192 + 8 x 104 = 6,016 bytes.
  AttentionHeadHeader t;
  t.T = 40;
  t.online = t.tip = true;
  t.outliers = 4;
  t.region_log2 = 4;
  t.last = true;
  const std::vector<TipTier> tiers = {TipTier::Kvq4Lanes, TipTier::Kvq8, TipTier::Kvq4};
  std::vector<uint8_t> s(6016, 0);
  write_attention_header(t, s.data());
  write_tip_tags(tiers, s.data() + 112);
  EXPECT_EQ(attention_head_bytes(t, kBoardHeadDim, tiers.data()), 6016u);
  EXPECT_THROW(attention_head_bytes(t, kBoardHeadDim), Error);
  HeadLayout lay;
  ASSERT_EQ(next_head(s.data(), s.size(), kBoardHeadDim, &lay), AttentionError::None);
  EXPECT_EQ(lay.bytes, 6016u);
  EXPECT_EQ(lay.tiers, tiers);
  EXPECT_EQ(next_head(s.data(), s.size() - 1, kBoardHeadDim, &lay), AttentionError::Truncated);
  EXPECT_EQ(next_head(s.data(), 119, kBoardHeadDim, &lay), AttentionError::Truncated);  // the tag beat cut
  s[112] |= 3 << 4;  // region 2's tag 3
  EXPECT_EQ(next_head(s.data(), s.size(), kBoardHeadDim, &lay), AttentionError::ReservedBits);
  // An INT4 head after a TIP layout: no tiers left over.
  AttentionHeadHeader i4;
  i4.online = i4.int4 = true;
  std::vector<uint8_t> s4(attention_head_bytes(i4, kBoardHeadDim), 0);
  write_attention_header(i4, s4.data());
  ASSERT_EQ(next_head(s4.data(), s4.size(), kBoardHeadDim, &lay), AttentionError::None);
  EXPECT_TRUE(lay.tiers.empty());
}

// A shared-stream pass (flags bit 5, beat 1 bits 43:40 = G; docs/variants-attention.md 9):
// member 0's m and S in the header, q_0, then per further member a beat of (m, S) and its q;
// the rows once. The walker reads each member's (m, S) and sizes the pass.
TEST(AttentionStream, SharedStreamPassHeaderMembersAndSize) {
  AttentionHeadHeader t;
  t.T = 5;
  t.m = 1000;
  t.shift = 24;
  t.group = 3;
  t.last = true;
  const auto good = encode_attention_header(t);
  EXPECT_EQ((good[0] >> 24) & 0xFF, 0x21u);
  EXPECT_EQ((good[1] >> 40) & 0xF, 3u);
  AttentionHeadHeader h;
  ASSERT_EQ(parse_attention_header(good[0], good[1], &h), AttentionError::None);
  EXPECT_EQ(h.group, 3u);
  for (uint64_t G : {0ull, 1ull, 9ull, 15ull})
    EXPECT_EQ(parse_attention_header(good[0], (good[1] & ~(0xFull << 40)) | (G << 40), &h), AttentionError::ReservedBits)
        << "G " << G;
  EXPECT_EQ(parse_attention_header(good[0], good[1] | (1ull << 44), &h), AttentionError::ReservedBits);  // 63:44
  // 16 + 96 + 2 x (8 + 96) header and queries, then 5 K and 5 V rows.
  EXPECT_EQ(attention_header_q_bytes(3, kBoardHeadDim), 320u);
  EXPECT_EQ(attention_head_bytes(t, kBoardHeadDim), 320u + 10u * 96);
  std::vector<uint8_t> s(attention_head_bytes(t, kBoardHeadDim), 0);
  write_attention_header(t, s.data());
  const uint64_t m1 = encode_attention_member(2000, 30), m2 = encode_attention_member(3000, 63);
  std::memcpy(s.data() + 112, &m1, 8);
  std::memcpy(s.data() + 216, &m2, 8);
  HeadLayout lay;
  ASSERT_EQ(next_head(s.data(), s.size(), kBoardHeadDim, &lay), AttentionError::None);
  EXPECT_EQ(lay.bytes, s.size());
  ASSERT_EQ(lay.members.size(), 3u);
  EXPECT_EQ(lay.members[0], (std::array<uint32_t, 2>{1000, 24}));
  EXPECT_EQ(lay.members[1], (std::array<uint32_t, 2>{2000, 30}));
  EXPECT_EQ(lay.members[2], (std::array<uint32_t, 2>{3000, 63}));
  EXPECT_EQ(next_head(s.data(), 319, kBoardHeadDim, &lay), AttentionError::Truncated);  // the queries cut
  // A member beat's m wider than 18 bits, or its reserved bits.
  uint32_t m = 0, sh = 0;
  EXPECT_EQ(parse_attention_member(encode_attention_member(1u << 18, 0), &m, &sh), AttentionError::MultiplierTooWide);
  EXPECT_EQ(parse_attention_member(encode_attention_member(5, 64), &m, &sh), AttentionError::ReservedBits);
  EXPECT_EQ(parse_attention_member(m1 | (1ull << 63), &m, &sh), AttentionError::ReservedBits);
  const uint64_t bad = m2 | (1ull << 20);
  std::memcpy(s.data() + 216, &bad, 8);
  EXPECT_EQ(next_head(s.data(), s.size(), kBoardHeadDim, &lay), AttentionError::MultiplierTooWide);
  // Per head (G = 1): no member fields, the sizes as before.
  AttentionHeadHeader one;
  one.T = 5;
  EXPECT_EQ(attention_head_bytes(one, kBoardHeadDim), attention_head_bytes(5, kBoardHeadDim));
  EXPECT_EQ(attention_header_q_bytes(1, kBoardHeadDim), 112u);
}

TEST(AttentionStream, ErrorNames) {
  EXPECT_STREQ(attention_error_name(AttentionError::None), "ok");
  EXPECT_STREQ(attention_error_name(AttentionError::BadLength), "context length T out of range");
  EXPECT_STREQ(attention_error_name(AttentionError::TrailingData), "data after the last head");
  EXPECT_STREQ(attention_error_name(AttentionError(99)), "unknown attention error");
}

}  // namespace
}  // namespace bitsim::model
