#include "model/packed_image.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::model {
namespace {

std::vector<int8_t> random_trits(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-1, 1);
  std::vector<int8_t> t(count);
  for (auto& v : t) v = int8_t(d(rng));
  return t;
}

std::vector<int8_t> random_x(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<int8_t> x(static_cast<size_t>(n));
  for (auto& v : x) v = int8_t(d(rng));
  return x;
}

TernaryMatrix random_matrix(int rows, int cols, uint32_t seed) {
  TernaryMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.scale = 0.5f;
  m.trits = random_trits(size_t(rows) * size_t(cols), seed);
  return m;
}

TEST(PackedImage, SizesAndBeats) {
  EXPECT_EQ(beats_for(0), 0u);
  EXPECT_EQ(beats_for(1), 1u);
  EXPECT_EQ(beats_for(8), 1u);
  EXPECT_EQ(beats_for(9), 2u);
  EXPECT_EQ(packed_row_bytes(1), 8u);
  EXPECT_EQ(packed_row_bytes(40), 8u);
  EXPECT_EQ(packed_row_bytes(41), 16u);
  EXPECT_EQ(packed_row_bytes(1536), 312u);  // ceil(1536/5) = 308 -> 312
  EXPECT_EQ(packed_row_bytes(4096), 824u);  // 820 -> 824
  EXPECT_EQ(packed_x_bytes(1536), 1536u);
  EXPECT_EQ(packed_x_bytes(13), 16u);
}

// The per-call format (docs/variants-host.md), worked by hand: n = 7 cut into fixed rows of
// L = 3; x = (1, -2, 3, 0, 5, -6, 7), the row's trits (+1, 0, -1, -1, +1, 0, +1).
TEST(PackedImage, PerCallStreamHandWorked) {
  model::TernaryMatrix m;
  m.rows = 1;
  m.cols = 7;
  m.trits = {1, 0, -1, -1, 1, 0, 1};
  const int8_t x[7] = {1, -2, 3, 0, 5, -6, 7};
  EXPECT_EQ(model::per_call_segments(7, 3), 3);
  // Segment 0: x (1, -2, 3) padded to a beat; trits (+1, 0, -1) + two padding digits
  // encoding 0: 2 + 1*3 + 0*9 + 1*27 + 1*81 = 113.
  EXPECT_EQ(model::build_per_call_stream(x, m, 0, 1, 0, 3),
            (std::vector<uint8_t>{1, 0xFE, 3, 0, 0, 0, 0, 0, 113, 0, 0, 0, 0, 0, 0, 0}));
  // Segment 1: x (0, 5, -6); trits (-1, +1, 0): 0 + 2*3 + 1*9 + 27 + 81 = 123.
  EXPECT_EQ(model::build_per_call_stream(x, m, 0, 1, 1, 3),
            (std::vector<uint8_t>{0, 5, 0xFA, 0, 0, 0, 0, 0, 123, 0, 0, 0, 0, 0, 0, 0}));
  // Segment 2: x (7) and two zeros past n; trits (+1) and zero trits past n: 2 + 3 + 9 + 27 + 81 = 122.
  EXPECT_EQ(model::build_per_call_stream(x, m, 0, 1, 2, 3),
            (std::vector<uint8_t>{7, 0, 0, 0, 0, 0, 0, 0, 122, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_THROW(model::build_per_call_stream(x, m, 0, 1, 3, 3), Error);
  EXPECT_THROW(model::build_per_call_stream(x, m, 0, 0, 0, 3), Error);
  // Rows from the transfer length: x 8 bytes + whole rows of 8 bytes.
  EXPECT_EQ(model::per_call_rows(16, 3), 1);
  EXPECT_EQ(model::per_call_rows(40, 3), 4);
  EXPECT_EQ(model::per_call_rows(8, 3), -1);   // no row
  EXPECT_EQ(model::per_call_rows(20, 3), -1);  // not whole rows
  // bitnet-large's fixed rows of L = 1536: a row of 4096 is three of 312 bytes.
  EXPECT_EQ(model::per_call_segments(4096, 1536), 3);
  EXPECT_EQ(model::packed_row_bytes(1536), 312u);
  EXPECT_EQ(model::parse_matmul_format("per-call"), model::MatmulFormat::PerCall);
  EXPECT_THROW(model::parse_matmul_format("fixed"), Error);
}

TEST(PackedImage, Pack5KnownBytes) {
  const int8_t all_minus[5] = {-1, -1, -1, -1, -1};
  const int8_t all_zero[5] = {0, 0, 0, 0, 0};
  const int8_t all_plus[5] = {1, 1, 1, 1, 1};
  const int8_t mixed[5] = {1, -1, 0, 0, -1};  // 2 + 0*3 + 1*9 + 1*27 + 0*81 = 38
  EXPECT_EQ(pack5(all_minus, 5), 0);
  EXPECT_EQ(pack5(all_zero, 5), 121);
  EXPECT_EQ(pack5(all_plus, 5), 242);
  EXPECT_EQ(pack5(mixed, 5), 38);
  // Missing digits encode 0 (digit value 1): {+1} -> 2 + 3 + 9 + 27 + 81 = 122
  EXPECT_EQ(pack5(all_plus, 1), 122);
  EXPECT_EQ(pack5(all_minus, 2), 0 + 0 + 9 + 27 + 81);
  const int8_t bad[5] = {0, 2, 0, 0, 0};
  EXPECT_THROW(pack5(bad, 5), bitsim::Error);
  EXPECT_THROW(pack5(all_zero, 0), bitsim::Error);
  EXPECT_THROW(pack5(all_zero, 6), bitsim::Error);
}

TEST(PackedImage, EveryValidByteRoundTripsAndInvalidBytesRejected) {
  const TritDecodeTable& tab = trit_decode_table();
  for (int b = 0; b < 243; ++b) {
    ASSERT_TRUE(tab.valid[b]) << b;
    const uint8_t byte = uint8_t(b);
    int8_t t[5];
    ASSERT_TRUE(unpack_row(&byte, 5, t)) << b;
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(t[i], tab.trits[b][i]);
      ASSERT_TRUE(t[i] >= -1 && t[i] <= 1);
    }
    ASSERT_EQ(pack5(t, 5), b);
  }
  for (int b = 243; b < 256; ++b) {
    EXPECT_FALSE(tab.valid[b]) << b;
    const uint8_t byte = uint8_t(b);
    int8_t t[5];
    for (int n = 1; n <= 5; ++n) EXPECT_FALSE(unpack_row(&byte, n, t)) << b << " n " << n;
  }
}

TEST(PackedImage, PaddingDigitsMustEncodeZero) {
  // n = 2: digits 2..4 of the byte are padding and must be 1 (trit 0).
  const int8_t t2[2] = {1, -1};
  const uint8_t good = pack5(t2, 2);  // 2 + 0 + 9 + 27 + 81 = 119
  EXPECT_EQ(good, 119);
  int8_t out[2];
  EXPECT_TRUE(unpack_row(&good, 2, out));
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(out[1], -1);
  const uint8_t bad = uint8_t(good - 9);  // digit 2 = 0 -> padding trit -1
  EXPECT_FALSE(unpack_row(&bad, 2, out));
  int8_t out3[3];  // unpack_row writes n trits
  EXPECT_TRUE(unpack_row(&bad, 3, out3));  // the same byte is fine as 3 real trits
  EXPECT_EQ(out3[0], 1);
  EXPECT_EQ(out3[1], -1);
  EXPECT_EQ(out3[2], -1);
}

TEST(PackedImage, RowRoundTripAndZeroPaddingBytes) {
  std::vector<int> sizes;
  for (int n = 1; n <= 40; ++n) sizes.push_back(n);
  sizes.push_back(1536);
  sizes.push_back(4096);
  for (int n : sizes) {
    const auto t = random_trits(size_t(n), uint32_t(n));
    const size_t rb = packed_row_bytes(n);
    ASSERT_EQ(rb % kBeatBytes, 0u);
    std::vector<uint8_t> buf(rb + 8, 0xEE);  // sentinel after the row
    pack_row(t.data(), n, buf.data());
    const size_t data = size_t((n + 4) / 5);
    for (size_t i = data; i < rb; ++i) ASSERT_EQ(buf[i], 0) << "n " << n << " byte " << i;
    for (size_t i = rb; i < buf.size(); ++i) ASSERT_EQ(buf[i], 0xEE) << "overrun, n " << n;
    std::vector<int8_t> back(size_t(n), 7);
    ASSERT_TRUE(unpack_row(buf.data(), n, back.data())) << n;
    ASSERT_EQ(back, t) << n;
  }
  EXPECT_THROW(pack_row(nullptr, 0, nullptr), bitsim::Error);
  EXPECT_THROW(pack_row(nullptr, 4097, nullptr), bitsim::Error);
}

// pack_row packs whole bytes without pack5's per-digit checks once every trit is valid:
// each byte must still equal pack5 of its five trits, and a bad trit anywhere (in a whole
// byte or in the last, partial one) must still be refused with pack5's message.
TEST(PackedImage, PackRowBytesEqualPack5AndABadTritIsNamed) {
  {  // every one of the 243 five-trit digits, in one row
    std::vector<int8_t> all;
    for (int b = 0; b < 243; ++b)
      for (int i = 0, v = b; i < 5; ++i, v /= 3) all.push_back(int8_t(v % 3 - 1));
    std::vector<uint8_t> buf(packed_row_bytes(int(all.size())), 0xEE);
    pack_row(all.data(), int(all.size()), buf.data());
    for (int b = 0; b < 243; ++b) ASSERT_EQ(int(buf[size_t(b)]), b) << "digit " << b;
  }
  for (int n : {1, 4, 5, 6, 9, 10, 11, 1536, 4095, 4096}) {
    const auto t = random_trits(size_t(n), uint32_t(1000 + n));
    std::vector<uint8_t> buf(packed_row_bytes(n), 0xEE);
    pack_row(t.data(), n, buf.data());
    for (int k = 0; k * 5 < n; ++k)
      ASSERT_EQ(buf[size_t(k)], pack5(t.data() + 5 * k, std::min(5, n - 5 * k))) << "n " << n << " byte " << k;
    for (int bad_at : {0, n / 2, n - 1}) {
      for (int8_t bad : {int8_t(2), int8_t(-2), int8_t(127), int8_t(-128)}) {
        auto tb = t;
        tb[size_t(bad_at)] = bad;
        try {
          pack_row(tb.data(), n, buf.data());
          FAIL() << "n " << n << ": trit " << int(bad) << " at " << bad_at << " accepted";
        } catch (const bitsim::Error& e) {
          EXPECT_NE(std::string(e.what()).find(fmt::format("trit {} at digit {}", int(bad), bad_at % 5)), std::string::npos)
              << e.what();
        }
      }
    }
  }
}

TEST(PackedImage, HeaderLayoutAndRoundTrip) {
  uint8_t h[16];
  write_group_header({4608, 1536, true}, h);
  // beat 0: 44 7e | 02 | 01 | R = 4608 = 0x1200; beat 1: n = 1536 = 0x600, reserved 0
  const uint8_t want[16] = {0x44, 0x7E, 0x02, 0x01, 0x00, 0x12, 0x00, 0x00,
                            0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(h[i], want[i]) << i;
  GroupHeader g;
  ASSERT_EQ(parse_group_header(h, &g), StreamError::None);
  EXPECT_EQ(g.rows, 4608u);
  EXPECT_EQ(g.n, 1536u);
  EXPECT_TRUE(g.last);
  write_group_header({1, 4096, false}, h);
  ASSERT_EQ(parse_group_header(h, &g), StreamError::None);
  EXPECT_EQ(g.rows, 1u);
  EXPECT_EQ(g.n, 4096u);
  EXPECT_FALSE(g.last);
}

TEST(PackedImage, HeaderErrors) {
  uint8_t h[16];
  GroupHeader g;
  auto fresh = [&] { write_group_header({10, 100, false}, h); };
  fresh();
  h[0] = 0x45;
  EXPECT_EQ(parse_group_header(h, &g), StreamError::BadMagic);
  fresh();
  h[2] = 1;
  EXPECT_EQ(parse_group_header(h, &g), StreamError::BadVersion);
  fresh();
  h[3] = 0x02;  // a flag bit other than "last"
  EXPECT_EQ(parse_group_header(h, &g), StreamError::ReservedBits);
  fresh();
  h[15] = 0x80;  // beat 1 bit 63
  EXPECT_EQ(parse_group_header(h, &g), StreamError::ReservedBits);
  write_group_header({10, 0, false}, h);
  EXPECT_EQ(parse_group_header(h, &g), StreamError::BadLength);
  write_group_header({10, 4097, false}, h);
  EXPECT_EQ(parse_group_header(h, &g), StreamError::BadLength);
  write_group_header({0, 100, true}, h);
  EXPECT_EQ(parse_group_header(h, &g), StreamError::ZeroRows);
  EXPECT_STREQ(stream_error_name(StreamError::ZeroRows), "zero rows");
  EXPECT_STREQ(stream_error_name(StreamError::None), "ok");
}

TEST(PackedImage, PackRowsSliceMatchesPackRow) {
  const TernaryMatrix m = random_matrix(7, 13, 5);
  const auto img = pack_rows(m, 2, 6);
  const size_t rb = packed_row_bytes(13);
  ASSERT_EQ(rb, 8u);
  ASSERT_EQ(img.size(), 4 * rb);
  for (int r = 2; r < 6; ++r) {
    std::vector<uint8_t> one(rb);
    pack_row(m.row(r), 13, one.data());
    EXPECT_TRUE(std::equal(one.begin(), one.end(), img.begin() + std::ptrdiff_t((r - 2) * rb))) << r;
  }
  EXPECT_TRUE(pack_rows(m, 3, 3).empty());
  EXPECT_THROW(pack_rows(m, 5, 8), bitsim::Error);
  EXPECT_THROW(pack_rows(m, -1, 2), bitsim::Error);
}

// Three groups with different n (none a multiple of 5 or 8 except where noted).
struct ThreeGroups {
  TernaryMatrix a = random_matrix(9, 13, 1);    // n = 13
  TernaryMatrix b = random_matrix(5, 37, 2);    // n = 37
  TernaryMatrix c = random_matrix(3, 1537, 3);  // n = 1537
  std::vector<int8_t> xa = random_x(13, 11), xb = random_x(37, 12), xc = random_x(1537, 13);
  std::vector<GroupSpec> specs() const {
    return {{xa.data(), 13, &a, 2, 9}, {xb.data(), 37, &b, 0, 5}, {xc.data(), 1537, &c, 1, 2}};
  }
};

TEST(PackedImage, StreamRoundTripSeveralGroups) {
  ThreeGroups t;
  const auto s = build_stream(t.specs());
  const size_t want = (16 + 16 + 7 * 8) + (16 + 40 + 5 * 8) + (16 + 1544 + 1 * 312);
  ASSERT_EQ(s.size(), want);
  ASSERT_EQ(s.size() % kBeatBytes, 0u);
  // last flag only on the final group
  EXPECT_EQ(s[3], 0);
  EXPECT_EQ(s[16 + 16 + 56 + 3], 0);
  EXPECT_EQ(s[16 + 16 + 56 + 16 + 40 + 40 + 3], 1);

  const DecodeResult d = decode_stream(s.data(), s.size());
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_EQ(d.message(), "ok");
  ASSERT_EQ(d.groups.size(), 3u);
  const TernaryMatrix* ms[3] = {&t.a, &t.b, &t.c};
  const std::vector<int8_t>* xs[3] = {&t.xa, &t.xb, &t.xc};
  const int begins[3] = {2, 0, 1}, rows[3] = {7, 5, 1};
  for (int g = 0; g < 3; ++g) {
    const DecodedGroup& dg = d.groups[size_t(g)];
    EXPECT_EQ(dg.n, ms[g]->cols);
    EXPECT_EQ(dg.rows, rows[g]);
    EXPECT_EQ(dg.last, g == 2);
    EXPECT_EQ(dg.x, *xs[g]);
    const std::vector<int8_t> want_trits(ms[g]->row(begins[g]), ms[g]->row(begins[g] + rows[g]));
    EXPECT_EQ(dg.trits, want_trits) << "group " << g;
  }
}

TEST(PackedImage, BuildStreamRejectsBadSpecs) {
  ThreeGroups t;
  EXPECT_THROW(build_stream({}), bitsim::Error);
  EXPECT_THROW(build_stream({{t.xa.data(), 14, &t.a, 0, 1}}), bitsim::Error);  // n != cols
  EXPECT_THROW(build_stream({{t.xa.data(), 13, &t.a, 3, 3}}), bitsim::Error);  // no rows
  EXPECT_THROW(build_stream({{t.xa.data(), 13, &t.a, 0, 10}}), bitsim::Error);  // past the end
}

TEST(PackedImage, TruncatedStreamNamesGroupAndRow) {
  ThreeGroups t;
  const auto s = build_stream(t.specs());
  const size_t g1 = 16 + 16 + 56;                 // group 1 starts here
  const size_t g1_rows = g1 + 16 + 40;            // its rows start here
  // Cut inside group 1's third row.
  DecodeResult d = decode_stream(s.data(), g1_rows + 2 * 8 + 3);
  EXPECT_EQ(d.error, StreamError::Truncated);
  EXPECT_EQ(d.group, 1);
  EXPECT_EQ(d.row, 2);
  EXPECT_EQ(d.groups.size(), 1u);
  EXPECT_NE(d.message().find("group 1, row 2"), std::string::npos) << d.message();
  // Cut inside group 1's header and inside its x.
  d = decode_stream(s.data(), g1 + 5);
  EXPECT_EQ(d.error, StreamError::Truncated);
  EXPECT_EQ(d.group, 1);
  EXPECT_EQ(d.row, -1);
  d = decode_stream(s.data(), g1 + 16 + 8);
  EXPECT_EQ(d.error, StreamError::Truncated);
  EXPECT_EQ(d.group, 1);
  // Cut exactly after group 1: no group was flagged last.
  d = decode_stream(s.data(), g1_rows + 5 * 8);
  EXPECT_EQ(d.error, StreamError::Truncated);
  EXPECT_EQ(d.group, 2);
  EXPECT_EQ(d.groups.size(), 2u);
  // Empty stream.
  d = decode_stream(s.data(), 0);
  EXPECT_EQ(d.error, StreamError::Truncated);
  EXPECT_EQ(d.group, 0);
}

TEST(PackedImage, InvalidTritNamesGroupAndRow) {
  ThreeGroups t;
  auto s = build_stream(t.specs());
  const size_t g2_rows = (16 + 16 + 56) + (16 + 40 + 40) + 16 + 1544;
  s[g2_rows + 100] = 0xF7;  // group 2, row 0, byte 100
  DecodeResult d = decode_stream(s.data(), s.size());
  EXPECT_EQ(d.error, StreamError::InvalidTrit);
  EXPECT_EQ(d.group, 2);
  EXPECT_EQ(d.row, 0);
  EXPECT_EQ(d.offset, g2_rows + 100);
  EXPECT_EQ(d.message(), "invalid trit byte in group 2, row 0 (byte 0xf7 at stream offset " +
                             std::to_string(g2_rows + 100) + ")");
  auto s2 = build_stream(t.specs());
  const size_t g1_rows = (16 + 16 + 56) + 16 + 40;
  s2[g1_rows + 3 * 8 + 1] = 243;  // group 1, row 3
  d = decode_stream(s2.data(), s2.size());
  EXPECT_EQ(d.error, StreamError::InvalidTrit);
  EXPECT_EQ(d.group, 1);
  EXPECT_EQ(d.row, 3);
}

TEST(PackedImage, DecoderStrictnessPaddingHeaderAndTrailingData) {
  ThreeGroups t;
  const auto good = build_stream(t.specs());
  // Non-zero x padding byte of group 0 (x has 13 bytes in a 16-byte slot).
  auto s = good;
  s[16 + 14] = 1;
  DecodeResult d = decode_stream(s.data(), s.size());
  EXPECT_EQ(d.error, StreamError::BadPadding);
  EXPECT_EQ(d.group, 0);
  EXPECT_EQ(d.row, -1);
  // Non-zero row padding byte: group 0 row 1 (13 trits = 3 data bytes in 8).
  s = good;
  s[32 + 8 + 5] = 121;
  d = decode_stream(s.data(), s.size());
  EXPECT_EQ(d.error, StreamError::BadPadding);
  EXPECT_EQ(d.row, 1);
  // Padding digit: group 0 row 0's third byte holds trits 10..12; digits 3,4 are padding.
  s = good;
  s[32 + 2] = uint8_t(s[32 + 2] - 27);  // digit 3 from 1 to 0
  d = decode_stream(s.data(), s.size());
  EXPECT_EQ(d.error, StreamError::BadPadding);
  EXPECT_EQ(d.group, 0);
  EXPECT_EQ(d.row, 0);
  // A bad header in the middle.
  s = good;
  s[16 + 16 + 56 + 2] = 3;
  d = decode_stream(s.data(), s.size());
  EXPECT_EQ(d.error, StreamError::BadVersion);
  EXPECT_EQ(d.group, 1);
  EXPECT_NE(d.message().find("version 3"), std::string::npos) << d.message();
  // Bytes after the last group.
  s = good;
  s.resize(s.size() + 8, 0);
  d = decode_stream(s.data(), s.size());
  EXPECT_EQ(d.error, StreamError::TrailingData);
  EXPECT_EQ(d.groups.size(), 3u);
}

TEST(PackedImage, BitnetLargeImageSize) {
  const ImageSize s = packed_image_size(1536, 4096, 24, 32002, 1536);
  const uint64_t qkvo = 4ull * 1536 * 312;   // 1,916,928
  const uint64_t gate_up = 2ull * 4096 * 312;  // 2,555,904
  const uint64_t down = 1536ull * 824;        // 1,265,664
  EXPECT_EQ(s.layer_bytes, qkvo + gate_up + down);
  EXPECT_EQ(s.layer_bytes, 5738496u);
  EXPECT_EQ(s.lm_head_bytes, 32002ull * 312);
  EXPECT_EQ(s.lm_head_bytes, 9984624u);
  EXPECT_EQ(s.total_bytes, 24 * s.layer_bytes + s.lm_head_bytes);
  EXPECT_EQ(s.total_bytes, 147708528u);
  const double mib = double(s.total_bytes) / (1024.0 * 1024.0);
  std::printf("bitnet-large packed image: layers %llu B + lm_head %llu B = %llu B = %.3f MiB "
              "(board: 141.3 MiB)\n",
              static_cast<unsigned long long>(24 * s.layer_bytes),
              static_cast<unsigned long long>(s.lm_head_bytes),
              static_cast<unsigned long long>(s.total_bytes), mib);
  EXPECT_NEAR(mib, 140.87, 0.01);
  // Lane split: rows are independent, so two halves add up to the whole.
  const TernaryMatrix m = random_matrix(11, 1536, 9);
  EXPECT_EQ(pack_rows(m, 0, 5).size() + pack_rows(m, 5, 11).size(), pack_rows(m, 0, 11).size());
  EXPECT_THROW(packed_image_size(0, 4096, 24, 32002, 1536), bitsim::Error);
  EXPECT_THROW(packed_image_size(1536, 0, 24, 32002, 1536), bitsim::Error);
}

// A row longer than the engine's 4096 goes to it in equal segments of at most 4096: 6912 (2B4T's
// FFN) as 2 x 3456, 4097 as 2 x 2049 (the second one's last trit zero), 8193 as 3 x 2731; a row
// of at most 4096 stays one segment of its own length, and the image counts every segment's
// packed row.
TEST(PackedImage, RowsLongerThanTheEngineTakesAreSplitIntoEqualSegments) {
  struct Case { int n, segments, trits; };
  for (const Case c : {Case{1, 1, 1}, Case{1536, 1, 1536}, Case{4096, 1, 4096}, Case{4097, 2, 2049},
                       Case{6912, 2, 3456}, Case{8192, 2, 4096}, Case{8193, 3, 2731}}) {
    SCOPED_TRACE(c.n);
    EXPECT_EQ(row_segments(c.n), c.segments);
    EXPECT_EQ(segment_trits(c.n), c.trits);
    EXPECT_LE(segment_trits(c.n), kMaxRowLength);
    EXPECT_GE(row_segments(c.n) * segment_trits(c.n), c.n);
    EXPECT_LT((row_segments(c.n) - 1) * segment_trits(c.n), c.n);  // no segment wholly past n
    EXPECT_EQ(image_row_bytes(c.n), uint64_t(c.segments) * packed_row_bytes(c.trits));
  }
  EXPECT_EQ(image_row_bytes(6912), 2u * 696u);  // ceil(3456 / 5) = 692, padded to 696
  EXPECT_THROW(image_row_bytes(0), bitsim::Error);
  // BitNet b1.58 2B4T (hidden 2560, FFN 6912, 30 layers, vocab 128256, 5 K/V heads of 128).
  const ImageSize s = packed_image_size(2560, 6912, 30, 128256, 640);
  const uint64_t row_h = packed_row_bytes(2560);  // 512
  EXPECT_EQ(row_h, 512u);
  EXPECT_EQ(s.layer_bytes, 2 * 2560 * row_h + 2 * 640 * row_h + 2 * 6912 * row_h + 2560 * 1392ull);
  EXPECT_EQ(s.lm_head_bytes, 128256 * row_h);
  // The segments, packed one by one and concatenated, are the row: each decodes to its part
  // of the row and zero trits past n.
  const TernaryMatrix m = random_matrix(3, 4097, 5);
  for (int seg = 0; seg < 2; ++seg) {
    std::vector<uint8_t> packed(packed_row_bytes(2049));
    pack_row_segment(m.row(1), 4097, seg, 2049, packed.data());
    std::vector<int8_t> trits(2049);
    ASSERT_TRUE(unpack_row(packed.data(), 2049, trits.data()));
    for (int j = 0; j < 2049; ++j) {
      const int at = seg * 2049 + j;
      EXPECT_EQ(trits[size_t(j)], at < 4097 ? m.row(1)[at] : 0) << seg << " " << j;
    }
  }
}

// Grouped-query attention: k_proj and v_proj have num_kv_heads x 96 rows, so 4 K/V heads of
// 16 save 2 x 1152 rows of 312 bytes per layer; K/V rows outside 1..hidden are refused.
TEST(PackedImage, GroupedQueryImageSize) {
  const ImageSize mha = packed_image_size(1536, 4096, 24, 32002, 1536);
  const ImageSize gqa = packed_image_size(1536, 4096, 24, 32002, 4 * 96);
  EXPECT_EQ(mha.layer_bytes - gqa.layer_bytes, 2ull * (1536 - 384) * 312);
  EXPECT_EQ(gqa.lm_head_bytes, mha.lm_head_bytes);
  EXPECT_EQ(gqa.total_bytes, 24 * gqa.layer_bytes + gqa.lm_head_bytes);
  EXPECT_THROW(packed_image_size(1536, 4096, 24, 32002, 0), bitsim::Error);
  EXPECT_THROW(packed_image_size(1536, 4096, 24, 32002, 1537), bitsim::Error);
}

}  // namespace
}  // namespace bitsim::model
