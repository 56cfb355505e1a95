// AttentionUnit (CIRCUITS.md 3, docs/hw-timing.md last section): bit-exact against
// golden::attention_head in both modes, the documented cycle counts, the result bank,
// back-pressure, both lanes, every malformed stream, the status registers, and the
// simulation speed.
#include "support/stream_bench.h"
#include "hw/circuits/attention_unit.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <tlm_utils/simple_initiator_socket.h>

#include "golden/board_reference.h"
#include "support/int4_head.h"
#include "support/tip_head.h"
#include "hw/parts/sim_context.h"

namespace bitsim::hw {
namespace {

// ---- Test benches ----------------------------------------------------------------------

using model::attention_head_beats;
using model::AttentionHeadHeader;
using model::encode_attention_header;
using model::kAttentionMagic;
using model::kAttentionMaxM;
using test_bench::RegMaster;
using test_bench::Sink;
using test_bench::Source;

struct Bench : test_bench::EngineBench<AttentionUnit, AttentionUnitConfig, 4'000'000> {
  explicit Bench(const AttentionUnitConfig& cfg = {}) : EngineBench("attention", cfg) {}
};

// ---- Heads -----------------------------------------------------------------------------

constexpr int D = model::kBoardHeadDim;

struct Head {
  int T = 1;
  golden::AttentionParams p;
  std::vector<int8_t> q, K, V;
};

Head random_head(int T, std::mt19937& rng, bool legacy, int amplitude = 128) {
  Head h;
  h.T = T;
  std::uniform_int_distribution<int> val(-std::min(amplitude, 128), std::min(amplitude, 127));
  auto fill = [&](std::vector<int8_t>& v, size_t n) {
    v.resize(n);
    for (auto& e : v) e = int8_t(val(rng));
  };
  fill(h.q, D);
  fill(h.K, size_t(T) * D);
  fill(h.V, size_t(T) * D);
  h.p.legacy = legacy;
  const int kind = int(rng() % 4);
  if (kind == 0) {  // board-like: m in the range seen on the real model, S = 24
    h.p.m = 10'818 + uint32_t(rng() % (79'505 - 10'818 + 1));
    h.p.shift = 24;
  } else {
    h.p.m = uint32_t(rng() % (1u << 18));
    h.p.shift = kind == 1 ? int(rng() % 64) : 26 + int(rng() % 14);
  }
  return h;
}

// A head's header with its T, m and S (the flags are the caller's).
AttentionHeadHeader header_of(int T, const golden::AttentionParams& p, bool last) {
  AttentionHeadHeader hdr;
  hdr.T = uint32_t(T);
  hdr.m = p.m;
  hdr.shift = uint32_t(p.shift);
  hdr.last = last;
  return hdr;
}

std::vector<StreamBeat> header_beats(const AttentionHeadHeader& hdr) {
  const auto hb = encode_attention_header(hdr);
  return {{hb[0], false}, {hb[1], false}};
}

// Appends n bytes (a multiple of 8) as beats.
void append_bytes(std::vector<StreamBeat>& beats, const void* v, size_t n) {
  for (size_t i = 0; i < n; i += 8) {
    StreamBeat b;
    std::memcpy(&b.data, static_cast<const uint8_t*>(v) + i, 8);
    beats.push_back(b);
  }
}

std::vector<StreamBeat> head_beats(const Head& h, bool last) {
  AttentionHeadHeader hdr = header_of(h.T, h.p, last);
  hdr.legacy = h.p.legacy;
  std::vector<StreamBeat> beats = header_beats(hdr);
  for (const std::vector<int8_t>* v : {&h.q, &h.K, &h.V}) append_bytes(beats, v->data(), v->size());
  EXPECT_EQ(beats.size(), attention_head_beats(h.T, model::kBoardHeadDim));
  beats.back().last = last;
  return beats;
}

// The heads one after another as one transfer, each as beats_of(head, last) encodes it.
template <class H, class Encode>
std::vector<StreamBeat> transfer_of(const std::vector<H>& heads, Encode beats_of) {
  std::vector<StreamBeat> out;
  for (size_t i = 0; i < heads.size(); ++i) {
    const auto b = beats_of(heads[i], i + 1 == heads.size());
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

// The unit's result beats for the heads, each head's 96 values and sum as golden(head, o,
// &sum) computes them: two values a beat, then the sum; TLAST on the last beat.
template <class H, class Golden>
std::vector<StreamBeat> results_of(const std::vector<H>& heads, Golden golden) {
  std::vector<StreamBeat> out;
  for (const auto& h : heads) {
    int32_t o[D];
    uint32_t sum = 0;
    golden(h, o, &sum);
    for (int i = 0; i < D; i += 2)
      out.push_back({uint64_t(uint32_t(o[i])) | (uint64_t(uint32_t(o[i + 1])) << 32), false});
    out.push_back({uint64_t(sum), false});
  }
  out.back().last = true;
  return out;
}

std::vector<StreamBeat> transfer_beats(const std::vector<Head>& heads) { return transfer_of(heads, head_beats); }

std::vector<StreamBeat> expected_beats(const std::vector<Head>& heads) {
  return results_of(heads, [](const Head& h, int32_t* acc, uint32_t* sum) {
    golden::attention_head(h.q.data(), h.K.data(), h.V.data(), h.T, model::kBoardHeadDim, h.p, acc, sum);
  });
}

void expect_beats_eq(const std::vector<StreamBeat>& got, const std::vector<StreamBeat>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].data, want[i].data) << "beat " << i << " (head " << i / 49 << ", word " << 2 * (i % 49) << ")";
    ASSERT_EQ(got[i].last, want[i].last) << "beat " << i;
  }
}

// ---- Bit-exact results -----------------------------------------------------------------

TEST(AttentionUnit, AllContextLengthsBothModesBothLanesEqualGolden) {
  bitsim::hw::FreshSimContext ctx;
  Bench b;
  std::mt19937 rng(20240502);
  const int Ts[] = {1, 2, 7, 64, 511, 512};
  std::vector<Head> h0, h1;
  for (int T : Ts) {
    h0.push_back(random_head(T, rng, false));
    h1.push_back(random_head(T, rng, true, T % 2 ? 12 : 128));  // legacy: small and full range
  }
  ASSERT_TRUE(b.run_both_lanes(transfer_beats(h0), transfer_beats(h1)));
  expect_beats_eq(b.sink[0]->beats, expected_beats(h0));
  expect_beats_eq(b.sink[1]->beats, expected_beats(h1));
  for (int l = 0; l < 2; ++l) {
    const auto& s = b.engine.stats(l);
    EXPECT_EQ(s.units, 6u);
    EXPECT_EQ(s.rows, 2u * (1 + 2 + 7 + 64 + 511 + 512));
    EXPECT_EQ(s.beats_in, b.src[size_t(l)]->beats.size());
    EXPECT_EQ(s.beats_out, 6u * 49);
    EXPECT_EQ(s.transfers, 1u);
    EXPECT_EQ(s.errors, 0u);
    EXPECT_EQ(s.stall_cycles, 0u);
    EXPECT_EQ(b.reg(l, engine_reg::kStatus), 0u);
    EXPECT_EQ(b.reg(l, engine_reg::kUnitsDone), 6u);
    EXPECT_EQ(b.reg(l, engine_reg::kBeatsOut), 6u * 49);
  }
  EXPECT_EQ(b.engine.multiplies(0), 1u + 2 + 7 + 64 + 511 + 512);
  EXPECT_EQ(b.engine.multiplies(1), 0u);  // legacy mode uses the shift
}

TEST(AttentionUnit, ManyRandomHeadsAndTransfers) {
  bitsim::hw::FreshSimContext ctx;
  Bench b;
  std::mt19937 rng(17);
  auto random = [](std::mt19937& rng) {
    return random_head(1 + int(rng() % 48), rng, rng() % 3 == 0, 1 << (2 + rng() % 6));
  };
  ASSERT_TRUE(b.run_random_transfers(10, rng, random, transfer_beats, expected_beats));
  expect_beats_eq(b.sink[0]->beats, b.expected);
}

TEST(AttentionUnit, ExtremeParameters) {
  // m = 0 (every p = EXP[0]), m = 2^18 - 1 with S = 0 and S = 63, all-equal scores,
  // extreme values (q = K = -128, V = -128: the largest |acc|).
  bitsim::hw::FreshSimContext ctx;
  Bench b;
  std::mt19937 rng(23);
  std::vector<Head> heads;
  Head h = random_head(512, rng, false);
  h.p.m = 0;
  heads.push_back(h);
  h = random_head(33, rng, false);
  h.p.m = kAttentionMaxM;
  h.p.shift = 0;
  heads.push_back(h);
  h.p.shift = 63;
  heads.push_back(h);
  h = random_head(512, rng, false);
  std::fill(h.q.begin(), h.q.end(), int8_t(-128));
  std::fill(h.K.begin(), h.K.end(), int8_t(-128));
  std::fill(h.V.begin(), h.V.end(), int8_t(-128));
  heads.push_back(h);
  h.p.legacy = true;
  heads.push_back(h);
  b.src[0]->append(transfer_beats(heads));
  ASSERT_TRUE(b.run_tlasts(0, 1));
  expect_beats_eq(b.sink[0]->beats, expected_beats(heads));
  // The extreme head: acc_d = 512 * 32767 * -128, sum = 512 * 32767.
  const uint64_t beat = b.sink[0]->beats[3 * 49].data;
  EXPECT_EQ(int32_t(uint32_t(beat)), 512 * 32767 * -128);
  EXPECT_EQ(b.sink[0]->beats[3 * 49 + 48].data, 512u * 32767u);
}

TEST(AttentionUnit, BackPressureChangesOnlyTiming) {
  std::mt19937 rng(29);
  std::vector<Head> heads;
  for (int T : {1, 1, 3, 1, 40, 2}) heads.push_back(random_head(T, rng, T == 3));
  const auto beats = transfer_beats(heads);
  uint64_t free_end = 0;
  {
    bitsim::hw::FreshSimContext ctx;
    Bench b;
    b.src[0]->append(beats);
    ASSERT_TRUE(b.run_tlasts(0, 1));
    expect_beats_eq(b.sink[0]->beats, expected_beats(heads));
    free_end = b.sink[0]->pop_cycle.back();
  }
  {
    bitsim::hw::FreshSimContext ctx;
    AttentionUnitConfig cfg;
    cfg.output_fifo_beats = 3;
    Bench b(cfg);
    b.src[0]->append(beats);
    b.sink[0]->ready = [](uint64_t c) { return c % 5 == 0 || (c / 300) % 2 == 1; };
    b.src[0]->allow = [](uint64_t c) { return c % 11 != 4; };
    ASSERT_TRUE(b.run_tlasts(0, 1));
    expect_beats_eq(b.sink[0]->beats, expected_beats(heads));
    EXPECT_GT(b.sink[0]->pop_cycle.back(), free_end);
    EXPECT_GT(b.engine.stats(0).stall_cycles, 0u);
  }
}

// ---- Cycle counts ----------------------------------------------------------------------
// The source pushes beat i at edge i, the unit takes it at edge i + 1. A head of N = 14 + 24 T
// beats starting at beat index B has its last V beat taken at edge B + N (unless it waits
// for the result bank); its result beat j is pushed at that edge + drain + j and popped by
// the always-ready sink one edge later.

TEST(AttentionUnit, CyclesSingleHeadHandWorked) {
  for (int T : {1, 3}) {
    SCOPED_TRACE(T);
    bitsim::hw::FreshSimContext ctx;
    const uint64_t drain = 4;  // set here: the hand-worked edges below do not rest on a default
    AttentionUnitConfig cfg;
    cfg.drain = int(drain);
    Bench b(cfg);
    std::mt19937 rng{uint32_t(T)};
    const std::vector<Head> heads = {random_head(T, rng, false)};
    b.src[0]->append(transfer_beats(heads));
    ASSERT_TRUE(b.run_tlasts(0, 1));
    expect_beats_eq(b.sink[0]->beats, expected_beats(heads));
    const uint64_t N = 14 + 24 * uint64_t(T);  // T = 1: 38 beats; T = 3: 86
    for (uint64_t j = 0; j < 49; ++j) EXPECT_EQ(b.sink[0]->pop_cycle[j], N + drain + j + 1) << j;
    // T = 1: first result beat popped at edge 43, the last (TLAST) at 91.
    if (T == 1) {
      EXPECT_EQ(b.sink[0]->pop_cycle.back(), 91u);
    }
    // Busy: edges 1 .. N + drain + 48 (the TLAST push).
    EXPECT_EQ(b.engine.stats(0).busy_cycles, N + drain + 48);
  }
}

// A unit built for attention.head_dim = 128 (docs/variants-attention.md 10): rows of 16 beats,
// results of 130 words (65 beats), each head equal to golden::attention_head at d = 128 on
// both lanes, and the timing follows the stream: the last V beat at edge N = 2 + 16 + 32 T,
// the result beats from N + drain + 1, one an edge (the board's unit: 14 + 24 T and 49).
TEST(AttentionUnit, HeadDim128RowsOf16BeatsAndResultsOf65) {
  constexpr int d = 128;
  for (int T : {1, 3, 40}) {
    SCOPED_TRACE(T);
    bitsim::hw::FreshSimContext ctx;
    const uint64_t drain = 4;
    AttentionUnitConfig cfg;
    cfg.drain = int(drain);
    cfg.head_dim = d;
    Bench b(cfg);
    std::mt19937 rng{uint32_t(100 + T)};
    std::uniform_int_distribution<int> val(-128, 127);
    std::vector<int8_t> q(d), K(size_t(T) * d), V(size_t(T) * d);
    for (auto* v : {&q, &K, &V})
      for (auto& e : *v) e = int8_t(val(rng));
    const golden::AttentionParams p{40'000 + uint32_t(rng() % 30'000), 24, false};
    std::vector<StreamBeat> in = header_beats(header_of(T, p, true));
    for (const std::vector<int8_t>* v : {&q, &K, &V}) append_bytes(in, v->data(), v->size());
    ASSERT_EQ(in.size(), attention_head_beats(T, d));
    in.back().last = true;
    b.src[0]->append(in);
    b.src[1]->append(in);
    ASSERT_TRUE(b.run_tlasts(0, 1));
    ASSERT_TRUE(b.run_tlasts(1, 1));
    int32_t acc[d];
    uint32_t sum = 0;
    golden::attention_head(q.data(), K.data(), V.data(), T, d, p, acc, &sum);
    std::vector<StreamBeat> want;
    for (int i = 0; i < d; i += 2) want.push_back({uint64_t(uint32_t(acc[i])) | (uint64_t(uint32_t(acc[i + 1])) << 32), false});
    want.push_back({uint64_t(sum), true});
    ASSERT_EQ(want.size(), size_t(model::attention_result_beats(d)));
    for (int l = 0; l < 2; ++l) {
      ASSERT_EQ(b.sink[size_t(l)]->beats.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(b.sink[size_t(l)]->beats[i].data, want[i].data) << "lane " << l << " beat " << i;
        ASSERT_EQ(b.sink[size_t(l)]->beats[i].last, want[i].last) << "lane " << l << " beat " << i;
      }
      EXPECT_EQ(b.engine.stats(l).rows, 2u * uint64_t(T));
    }
    const uint64_t N = 2 + 16 + 32 * uint64_t(T);
    for (uint64_t j = 0; j < 65; ++j) EXPECT_EQ(b.sink[0]->pop_cycle[j], N + drain + j + 1) << j;
    EXPECT_EQ(b.engine.stats(0).busy_cycles, N + drain + 64);
    EXPECT_EQ(b.reg(0, engine_reg::kBeatsOut), 65u);
  }
}

TEST(AttentionUnit, CyclesTwoHeadsResultBank) {
  // Head 1 (T1) ends at edge N1; its bank pushes at N1 + drain .. N1 + drain + 48, so the
  // bank is free from edge N1 + drain + 49. Head 2's last V beat, due at edge N1 + N2, is
  // taken at max(N1 + N2, N1 + drain + 49). T1 = T2 = 1: 76 vs 91 (waits 15 edges);
  // T2 = 2: 100 vs 91 (no wait).
  for (int drain : {4, 0, 9}) {
    for (int T2 : {1, 2}) {
      SCOPED_TRACE(testing::Message() << "drain " << drain << " T2 " << T2);
      bitsim::hw::FreshSimContext ctx;
      AttentionUnitConfig cfg;
      cfg.drain = drain;
      Bench b(cfg);
      std::mt19937 rng{uint32_t(7 * T2 + drain)};
      const std::vector<Head> heads = {random_head(1, rng, false), random_head(T2, rng, true)};
      b.src[0]->append(transfer_beats(heads));
      ASSERT_TRUE(b.run_tlasts(0, 1));
      expect_beats_eq(b.sink[0]->beats, expected_beats(heads));
      const uint64_t N1 = 38, N2 = 14 + 24 * uint64_t(T2), dr = uint64_t(drain);
      const uint64_t end2 = std::max(N1 + N2, N1 + dr + 49);
      for (uint64_t j = 0; j < 49; ++j) {
        EXPECT_EQ(b.sink[0]->pop_cycle[j], N1 + dr + j + 1) << j;
        EXPECT_EQ(b.sink[0]->pop_cycle[49 + j], end2 + dr + j + 1) << j;
      }
      EXPECT_EQ(b.engine.stats(0).stall_cycles, end2 - (N1 + N2));
    }
  }
}

TEST(AttentionUnit, CyclesWithInputGapsAndSleep) {
  // The source stalls now and then (once for 400 edges, so the unit sleeps): a head's
  // result beat j is popped at (push edge of its last V beat) + 1 + drain + j + 1.
  bitsim::hw::FreshSimContext ctx;
  Bench b;
  std::mt19937 rng(59);
  const std::vector<Head> heads = {random_head(4, rng, false), random_head(9, rng, true)};
  b.src[0]->append(transfer_beats(heads));
  b.src[0]->allow = [](uint64_t c) { return (c % 7 < 5) && !(c >= 50 && c < 450); };
  ASSERT_TRUE(b.run_tlasts(0, 1));
  expect_beats_eq(b.sink[0]->beats, expected_beats(heads));
  const uint64_t last_v[2] = {attention_head_beats(4, model::kBoardHeadDim) - 1, attention_head_beats(4, model::kBoardHeadDim) + attention_head_beats(9, model::kBoardHeadDim) - 1};
  for (int h = 0; h < 2; ++h)
    for (uint64_t j = 0; j < 49; ++j)
      EXPECT_EQ(b.sink[0]->pop_cycle[size_t(49 * h) + j], b.src[0]->push_cycle[last_v[h]] + 1 + 4 + j + 1);
  EXPECT_EQ(b.engine.stats(0).stall_cycles, 0u);
}

TEST(AttentionUnit, FullOutputFifoStopsInput) {
  // A T = 1 head then a T = 2 head; the sink never pops; output FIFO 4 beats. Head 1's
  // bank pushes at edges 42..45 (drain 4), the FIFO is seen full from edge 46 on: beats are
  // taken at edges 1..45, i.e. 45 beats, and no more.
  bitsim::hw::FreshSimContext ctx;
  AttentionUnitConfig cfg;
  cfg.output_fifo_beats = 4;
  Bench b(cfg);
  std::mt19937 rng(41);
  const std::vector<Head> heads = {random_head(1, rng, false), random_head(2, rng, false)};
  b.src[0]->append(transfer_beats(heads));
  ASSERT_TRUE(b.run_with_sink_held(400, [&] {
    EXPECT_EQ(b.engine.stats(0).beats_in, 45u);
    EXPECT_EQ(b.engine.stats(0).beats_out, 4u);
    EXPECT_TRUE(b.engine.busy(0));
  }));
  expect_beats_eq(b.sink[0]->beats, expected_beats(heads));
}

// ---- Errors ----------------------------------------------------------------------------

struct BadCase {
  const char* what;
  AttentionError code;
  int head, row;
  std::function<void(std::vector<StreamBeat>&)> corrupt;
  size_t cut_at = 0;        // if > 0: the transfer ends (TLAST) after this many beats
  bool drop_tlast = false;  // no TLAST on the final beat; junk beats (+TLAST) follow
};

TEST(AttentionUnit, EveryMalformedStreamGivesItsErrorNotAHang) {
  std::mt19937 rng(43);
  // Head 0: T 2 (62 beats); head 1: T 3 (86 beats, from beat 62: header 62-63, q 64-75,
  // K rows 76 + 12 t, V rows 112 + 12 t); head 2: T 1.
  const std::vector<Head> heads = {random_head(2, rng, false), random_head(3, rng, false), random_head(1, rng, true)};
  const auto good = transfer_beats(heads);
  const size_t h1 = 62;
  const std::vector<BadCase> cases = {
      {"bad magic", AttentionError::BadMagic, 1, -1, [&](auto& s) { s[h1].data ^= 1; }},
      {"bad version", AttentionError::BadVersion, 1, -1, [&](auto& s) { s[h1].data += 1ull << 16; }},
      {"reserved flag bit", AttentionError::ReservedBits, 1, -1, [&](auto& s) { s[h1].data |= 1ull << 28; }},
      {"online flag on the two-phase unit", AttentionError::VariantMismatch, 1, -1, [&](auto& s) { s[h1].data |= 1ull << 26; }},
      {"reserved beat 1 bit 30", AttentionError::ReservedBits, 1, -1, [&](auto& s) { s[h1 + 1].data |= 1ull << 30; }},
      {"reserved beat 1 bit 63", AttentionError::ReservedBits, 1, -1, [&](auto& s) { s[h1 + 1].data |= 1ull << 63; }},
      {"T = 0", AttentionError::BadLength, 1, -1, [&](auto& s) { s[h1].data &= 0xFFFF'FFFFull; }},
      {"T = 513", AttentionError::BadLength, 1, -1,
       [&](auto& s) { s[h1].data = (s[h1].data & 0xFFFF'FFFFull) | (513ull << 32); }},
      {"m too wide", AttentionError::MultiplierTooWide, 1, -1, [&](auto& s) { s[h1 + 1].data |= 1ull << 18; }},
      {"m too wide, bit 23", AttentionError::MultiplierTooWide, 1, -1, [&](auto& s) { s[h1 + 1].data |= 1ull << 23; }},
      {"bad magic on head 0", AttentionError::BadMagic, 0, -1, [&](auto& s) { s[0].data = 0; }},
      {"TLAST on the header", AttentionError::Truncated, 1, -1, {}, h1 + 1},
      {"TLAST inside q", AttentionError::Truncated, 1, -1, {}, h1 + 2 + 5},
      {"TLAST inside K row 1", AttentionError::Truncated, 1, 1, {}, 76 + 12 + 4},
      {"TLAST after the last K row", AttentionError::Truncated, 1, 3, {}, 112},
      {"TLAST inside V row 1", AttentionError::Truncated, 1, 3 + 1, {}, 112 + 12 + 6},
      {"TLAST after V row 1", AttentionError::Truncated, 1, 3 + 2, {}, 112 + 24},
      {"TLAST after head 0", AttentionError::Truncated, 1, -1, {}, h1},
      {"no TLAST after the last head", AttentionError::TrailingData, 3, -1, {}, 0, true},
  };
  for (const auto& bc : cases) {
    SCOPED_TRACE(bc.what);
    bitsim::hw::FreshSimContext ctx;
    Bench b;
    const auto beats =
        test_bench::malformed(test_bench::changed(good, bc.corrupt), bc.cut_at, bc.drop_tlast, 7, 0x5555);
    ASSERT_TRUE(b.run_one_transfer(beats)) << "hang";
    sc_core::sc_start(b.clock.period() * 100.0);
    ASSERT_NO_FATAL_FAILURE(test_bench::expect_discarded_to_tlast(*b.src[0], *b.sink[0]));
    const auto& out = b.sink[0]->beats;
    // The heads completed before the error leave their results first, then the zero beat.
    const size_t done = bc.code == AttentionError::TrailingData ? 3 : size_t(bc.head);
    ASSERT_EQ(out.size(), 49 * done + 1);
    if (done > 0) {
      auto want = expected_beats(std::vector<Head>(heads.begin(), heads.begin() + long(done)));
      want.back().last = false;
      want.push_back({0, true});
      expect_beats_eq(out, want);
    }
    const EngineLaneError e = b.engine.error(0);
    EXPECT_EQ(AttentionError(e.code), bc.code) << attention_error_name(AttentionError(e.code));
    EXPECT_EQ(e.unit, bc.head);
    EXPECT_EQ(e.row, bc.row);
    EXPECT_TRUE(b.engine.stopped(0));
    EXPECT_EQ(b.engine.stats(0).errors, 1u);
    EXPECT_EQ(b.reg(0, engine_reg::kStatus), engine_reg::kStatusError | engine_reg::kStatusStopped);
    EXPECT_EQ(b.reg(0, engine_reg::kErrorCode), uint32_t(bc.code));
    EXPECT_EQ(b.reg(0, engine_reg::kErrorUnit), uint32_t(bc.head));
    EXPECT_EQ(b.reg(0, engine_reg::kErrorRow), bc.row < 0 ? engine_reg::kNone : uint32_t(bc.row));

    // Stopped until cleared; then a good transfer runs.
    b.src[0]->append(good);
    sc_core::sc_start(b.clock.period() * 200.0);
    EXPECT_EQ(b.engine.stats(0).beats_in, beats.size());
    b.regs.write(b.engine.config().reg_base + engine_reg::kControl, engine_reg::kControlClear);
    EXPECT_EQ(b.reg(0, engine_reg::kStatus) & (engine_reg::kStatusError | engine_reg::kStatusStopped), 0u);
    const size_t before = out.size();
    ASSERT_TRUE(b.run_tlasts(0, 2, b.clock.cycle() + 20'000));
    const std::vector<StreamBeat> second(b.sink[0]->beats.begin() + long(before), b.sink[0]->beats.end());
    expect_beats_eq(second, expected_beats(heads));
  }
}

TEST(AttentionUnit, ErrorOnOneLaneLeavesTheOtherRunning) {
  // Lane 1: bad version on beat 0 with TLAST: taken at edge 1, zero beat pushed at 1 + drain
  // = 5, popped at 6.
  bitsim::hw::FreshSimContext ctx;
  Bench b;
  std::mt19937 rng(47);
  const std::vector<Head> heads = {random_head(5, rng, false)};
  b.src[0]->append(transfer_beats(heads));
  b.src[1]->append({StreamBeat{uint64_t(kAttentionMagic) | (7ull << 16), true}});
  ASSERT_TRUE(b.run([&] { return b.sink[0]->tlasts == 1 && b.sink[1]->tlasts == 1; }, 10'000));
  expect_beats_eq(b.sink[0]->beats, expected_beats(heads));
  ASSERT_EQ(b.sink[1]->pop_cycle.size(), 1u);
  EXPECT_EQ(b.sink[1]->pop_cycle[0], 6u);
  EXPECT_EQ(AttentionError(b.engine.error(1).code), AttentionError::BadVersion);
  EXPECT_EQ(AttentionError(b.engine.error(0).code), AttentionError::None);
  EXPECT_EQ(b.reg(0, engine_reg::kStatus), 0u);
  EXPECT_EQ(b.reg(1, engine_reg::kErrorCode), uint32_t(AttentionError::BadVersion));
}

TEST(AttentionUnit, RegisterDecodeAndConfig) {
  bitsim::hw::FreshSimContext ctx;
  Bench b;
  EXPECT_EQ(b.response(tlm::TLM_READ_COMMAND, 0x200), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(b.response(tlm::TLM_READ_COMMAND, 0x30), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(b.response(tlm::TLM_WRITE_COMMAND, 0x10, 2), tlm::TLM_BURST_ERROR_RESPONSE);
  const uint64_t base = b.engine.config().reg_base;
  EXPECT_EQ(b.reg(1, engine_reg::kErrorRow), engine_reg::kNone);
  EXPECT_EQ(b.reg(1, engine_reg::kStatus), 0u);
  b.regs.write(base + 0x100 + engine_reg::kControl, 1);  // clearing no error: harmless
  EXPECT_EQ(b.reg(1, engine_reg::kStatus), 0u);
  EXPECT_STREQ(attention_error_name(AttentionError::MultiplierTooWide), "multiplier m wider than 18 bits");

  AttentionUnitConfig c;
  c.drain = 1025;  // bad input names the config key (bitsim::Error, exit 2 through the CLI)
  try {
    AttentionUnit u("bad1", b.clock, c);
    ADD_FAILURE() << "drain 1025 accepted";
  } catch (const bitsim::Error& e) {
    EXPECT_NE(std::string(e.what()).find("attention.drain"), std::string::npos) << e.what();
  }
  c = {};
  c.input_fifo_beats = 0;
  try {
    AttentionUnit u("bad3", b.clock, c);
    ADD_FAILURE() << "an input FIFO of 0 beats accepted";
  } catch (const bitsim::Error& e) {
    EXPECT_NE(std::string(e.what()).find("attention.input_fifo_beats"), std::string::npos) << e.what();
  }
}

// ---- The online-softmax unit (docs/variants-attention.md) --------------------------------

AttentionUnitConfig online_config() {
  AttentionUnitConfig c;
  c.variant = "online-softmax";
  return c;
}

// The online stream of a head: header (flags bit 2), q, then K_t V_t for each row.
std::vector<StreamBeat> online_head_beats(const Head& h, bool last) {
  AttentionHeadHeader hdr = header_of(h.T, h.p, last);
  hdr.online = true;
  std::vector<StreamBeat> beats = header_beats(hdr);
  append_bytes(beats, h.q.data(), D);
  for (int t = 0; t < h.T; ++t) {
    append_bytes(beats, h.K.data() + size_t(t) * D, D);
    append_bytes(beats, h.V.data() + size_t(t) * D, D);
  }
  EXPECT_EQ(beats.size(), attention_head_beats(h.T, model::kBoardHeadDim));
  beats.back().last = last;
  return beats;
}

std::vector<StreamBeat> online_transfer(const std::vector<Head>& heads) {
  return transfer_of(heads, online_head_beats);
}

std::vector<StreamBeat> online_expected(const std::vector<Head>& heads) {
  return results_of(heads, [](const Head& h, int32_t* o, uint32_t* sum) {
    golden::attention_head_online(h.q.data(), h.K.data(), h.V.data(), h.T, model::kBoardHeadDim, h.p, o, sum);
  });
}

TEST(AttentionUnitOnline, AllContextLengthsBothLanesEqualGolden) {
  bitsim::hw::FreshSimContext ctx;
  Bench b(online_config());
  std::mt19937 rng(20261201);
  std::vector<Head> h0, h1;
  for (int T : {1, 2, 7, 64, 511, 512}) {
    h0.push_back(random_head(T, rng, false));
    h1.push_back(random_head(T, rng, false, T % 2 ? 12 : 128));
  }
  // Extremes: m = 0 (every weight EXP[0]), the largest |acc| (q = K = V = -128, T = 512).
  Head x = random_head(512, rng, false);
  x.p.m = 0;
  h0.push_back(x);
  std::fill(x.q.begin(), x.q.end(), int8_t(-128));
  std::fill(x.K.begin(), x.K.end(), int8_t(-128));
  std::fill(x.V.begin(), x.V.end(), int8_t(-128));
  x.p.m = kAttentionMaxM;
  h1.push_back(x);
  ASSERT_TRUE(b.run_both_lanes(online_transfer(h0), online_transfer(h1)));
  expect_beats_eq(b.sink[0]->beats, online_expected(h0));
  expect_beats_eq(b.sink[1]->beats, online_expected(h1));
  // The extreme head: every weight 32767, o_d = -128.0 in Q15.16.
  EXPECT_EQ(int32_t(uint32_t(b.sink[1]->beats[6 * 49].data)), -128 * 65536);
  for (int l = 0; l < 2; ++l) {
    EXPECT_EQ(b.engine.stats(l).units, 7u);
    EXPECT_EQ(b.engine.stats(l).rows, 2u * (1 + 2 + 7 + 64 + 511 + 512 + 512));
    EXPECT_EQ(b.engine.stats(l).errors, 0u);
  }
}

TEST(AttentionUnitOnline, ManyRandomHeadsAndTransfers) {
  bitsim::hw::FreshSimContext ctx;
  Bench b(online_config());
  std::mt19937 rng(61);
  auto random = [](std::mt19937& rng) { return random_head(1 + int(rng() % 48), rng, false, 1 << (2 + rng() % 6)); };
  ASSERT_TRUE(b.run_random_transfers(10, rng, random, online_transfer, online_expected));
  expect_beats_eq(b.sink[0]->beats, b.expected);
}

TEST(AttentionUnitOnline, CyclesHandWorkedNormalizerLatency) {
  // One head of N = 14 + 24 T beats: its last V beat is taken at edge N, the normalizer
  // takes 47 + 96 = 143 clocks, the results are pushed from N + drain + 143 and popped one
  // edge later. T = 1, drain 4: first result popped at 38 + 4 + 143 + 1 = 186.
  for (int T : {1, 3}) {
    SCOPED_TRACE(T);
    bitsim::hw::FreshSimContext ctx;
    AttentionUnitConfig cfg = online_config();
    cfg.drain = 4;
    Bench b(cfg);
    std::mt19937 rng{uint32_t(T)};
    const std::vector<Head> heads = {random_head(T, rng, false)};
    b.src[0]->append(online_transfer(heads));
    ASSERT_TRUE(b.run_tlasts(0, 1));
    expect_beats_eq(b.sink[0]->beats, online_expected(heads));
    const uint64_t N = 14 + 24 * uint64_t(T);
    for (uint64_t j = 0; j < 49; ++j) EXPECT_EQ(b.sink[0]->pop_cycle[j], N + 4 + 143 + j + 1) << j;
    if (T == 1) EXPECT_EQ(b.sink[0]->pop_cycle[0], 186u);
  }
  // Two heads of T = 1: head 2's last V beat (due at 76) waits for the bank, free from
  // 38 + 4 + 143 + 49 = 234; its results leave from 234 + 4 + 143.
  bitsim::hw::FreshSimContext ctx;
  AttentionUnitConfig cfg = online_config();
  cfg.drain = 4;
  Bench b(cfg);
  std::mt19937 rng(3);
  const std::vector<Head> heads = {random_head(1, rng, false), random_head(1, rng, false)};
  b.src[0]->append(online_transfer(heads));
  ASSERT_TRUE(b.run_tlasts(0, 1));
  expect_beats_eq(b.sink[0]->beats, online_expected(heads));
  EXPECT_EQ(b.sink[0]->pop_cycle[49], 234u + 4 + 143 + 1);
  EXPECT_EQ(b.engine.stats(0).stall_cycles, 234u - 76);
}

TEST(AttentionUnitOnline, VariantMismatchAndRowNumbers) {
  std::mt19937 rng(71);
  const std::vector<Head> heads = {random_head(2, rng, false), random_head(3, rng, false)};
  const auto good = online_transfer(heads);
  const size_t h1 = 62;  // head 1: header 62-63, q 64-75, K_t at 76 + 24 t, V_t at 88 + 24 t
  struct Case {
    const char* what;
    AttentionError code;
    int row;
    std::function<void(std::vector<StreamBeat>&)> corrupt;
    size_t cut_at = 0;
  };
  const std::vector<Case> cases = {
      {"two-phase header", AttentionError::VariantMismatch, -1, [&](auto& s) { s[h1].data &= ~(1ull << 26); }},
      {"online with legacy", AttentionError::VariantMismatch, -1, [&](auto& s) { s[h1].data |= 1ull << 25; }},
      {"TLAST inside K row 1", AttentionError::Truncated, 2, {}, 76 + 24 + 3},
      {"TLAST inside V row 1", AttentionError::Truncated, 3, {}, 88 + 24 + 3},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    bitsim::hw::FreshSimContext ctx;
    Bench b(online_config());
    ASSERT_TRUE(b.run_one_transfer(test_bench::malformed(test_bench::changed(good, c.corrupt), c.cut_at))) << "hang";
    const EngineLaneError e = b.engine.error(0);
    EXPECT_EQ(AttentionError(e.code), c.code) << attention_error_name(AttentionError(e.code));
    EXPECT_EQ(e.unit, 1);
    EXPECT_EQ(e.row, c.row);
    // Head 0's results, then the zero beat.
    ASSERT_EQ(b.sink[0]->beats.size(), 50u);
    auto want = online_expected({heads[0]});
    want.back().last = false;
    want.push_back({0, true});
    expect_beats_eq(b.sink[0]->beats, want);
  }
  AttentionUnitConfig bad = online_config();
  bad.variant = "one-pass";
  bitsim::hw::FreshSimContext ctx;
  Clock clock("clock", ClockConfig{});
  try {
    AttentionUnit u("bad", clock, bad);
    ADD_FAILURE() << "variant one-pass accepted";
  } catch (const bitsim::Error& e) {
    EXPECT_NE(std::string(e.what()).find("attention.variant"), std::string::npos) << e.what();
  }
}

// ---- The online-softmax unit reading INT4 KV rows (docs/variants-attention.md 8) ----------

AttentionUnitConfig int4_config() {
  AttentionUnitConfig c = online_config();
  c.kv_format = "int4";
  return c;
}

// An INT4 head's stream: header (flags bits 2 and 3, n), q, the bank, then K_t V_t.
std::vector<StreamBeat> int4_head_beats(const int4_test::Int4Head& h, bool last) {
  AttentionHeadHeader hdr = header_of(h.T, h.p, last);
  hdr.online = hdr.int4 = true;
  hdr.outliers = uint32_t(h.n);
  std::vector<StreamBeat> beats = header_beats(hdr);
  append_bytes(beats, h.q.data(), D);
  append_bytes(beats, h.bank.data(), h.bank.size());
  const auto rows = h.interleaved();
  append_bytes(beats, rows.data(), rows.size());
  EXPECT_EQ(beats.size() * 8, model::attention_head_bytes(hdr, model::kBoardHeadDim));
  beats.back().last = last;
  return beats;
}

std::vector<StreamBeat> int4_transfer(const std::vector<int4_test::Int4Head>& heads) {
  return transfer_of(heads, int4_head_beats);
}

std::vector<StreamBeat> int4_expected(const std::vector<int4_test::Int4Head>& heads) {
  return results_of(heads, [](const int4_test::Int4Head& h, int32_t* o, uint32_t* sum) {
    golden::attention_head_int4(h.q.data(), h.bank.data(), h.K.data(), h.V.data(), h.T, h.n, model::kBoardHeadDim, h.p, o, sum);
  });
}

TEST(AttentionUnitInt4, ContextLengthsAndOutlierCountsBothLanesEqualGolden) {
  bitsim::hw::FreshSimContext ctx;
  Bench b(int4_config());
  std::mt19937 rng(20261202);
  std::vector<int4_test::Int4Head> h0, h1;
  int n = 0;
  for (int T : {1, 2, 7, 64, 511, 512}) {
    h0.push_back(int4_test::random_int4_head(T, n++ % 9, rng));
    h1.push_back(int4_test::random_int4_head(T, (n + 4) % 9, rng));
  }
  ASSERT_TRUE(b.run_both_lanes(int4_transfer(h0), int4_transfer(h1)));
  expect_beats_eq(b.sink[0]->beats, int4_expected(h0));
  expect_beats_eq(b.sink[1]->beats, int4_expected(h1));
  for (int l = 0; l < 2; ++l) {
    EXPECT_EQ(b.engine.stats(l).units, 6u);
    EXPECT_EQ(b.engine.stats(l).rows, 2u * (1 + 2 + 7 + 64 + 511 + 512));
    EXPECT_EQ(b.engine.stats(l).errors, 0u);
  }
}

TEST(AttentionUnitInt4, ContextsPast512EqualGolden) {
  // The INT4 unit's T range goes to 2048 (docs/variants-attention.md 8.8): heads at T = 513,
  // 1319 (bitnet-large's context in the shipped CMA) and 2048 against golden on both lanes.
  bitsim::hw::FreshSimContext ctx;
  Bench b(int4_config());
  std::mt19937 rng(20261203);
  std::vector<int4_test::Int4Head> h0, h1;
  h0.push_back(int4_test::random_int4_head(513, 0, rng));
  h0.push_back(int4_test::random_int4_head(2048, 8, rng));
  h1.push_back(int4_test::random_int4_head(1319, 3, rng));
  ASSERT_TRUE(b.run_both_lanes(int4_transfer(h0), int4_transfer(h1)));
  expect_beats_eq(b.sink[0]->beats, int4_expected(h0));
  expect_beats_eq(b.sink[1]->beats, int4_expected(h1));
  EXPECT_EQ(b.engine.stats(0).rows, 2u * (513 + 2048));
  EXPECT_EQ(b.engine.stats(1).rows, 2u * 1319);
  EXPECT_EQ(b.engine.stats(0).errors + b.engine.stats(1).errors, 0u);
}

TEST(AttentionUnitInt4, CyclesHandWorkedRowsAndTail) {
  // One head of N = 2 + 12 + 24 + 13 T beats (n = 0: K rows 6 beats, V rows 7) or
  // 2 + 12 + 25 + 15 T (n = 8: K rows 8 beats, the bank 25): its last V beat is taken at
  // edge N; results are pushed from N + drain + 6 (the last row's V tail) + 143 and popped
  // one edge later. T = 1, n = 0, drain 4: 51 + 4 + 6 + 143 + 1 = 205.
  for (const auto& [T, n] : {std::pair{1, 0}, std::pair{3, 0}, std::pair{2, 8}}) {
    SCOPED_TRACE(::testing::Message() << "T " << T << " n " << n);
    bitsim::hw::FreshSimContext ctx;
    AttentionUnitConfig cfg = int4_config();
    cfg.drain = 4;
    Bench b(cfg);
    std::mt19937 rng{uint32_t(T * 10 + n)};
    const std::vector<int4_test::Int4Head> heads = {int4_test::random_int4_head(T, n, rng)};
    b.src[0]->append(int4_transfer(heads));
    ASSERT_TRUE(b.run_tlasts(0, 1));
    expect_beats_eq(b.sink[0]->beats, int4_expected(heads));
    const uint64_t N = n == 0 ? 2 + 12 + 24 + 13 * uint64_t(T) : 2 + 12 + 25 + 15 * uint64_t(T);
    for (uint64_t j = 0; j < 49; ++j) EXPECT_EQ(b.sink[0]->pop_cycle[j], N + 4 + 6 + 143 + j + 1) << j;
    if (T == 1 && n == 0) EXPECT_EQ(b.sink[0]->pop_cycle[0], 205u);
  }
}

// A transfer `good` changed by `corrupt`, run on a unit built from `cfg`: the error `code`,
// found before any row (row -1: in the header, the bank or TIP's tags).
struct HeadErrorCase {
  const char* what;
  AttentionUnitConfig cfg;
  AttentionError code;
  std::function<void(std::vector<StreamBeat>&)> corrupt;
};
void expect_head_errors(const std::vector<StreamBeat>& good, const std::vector<HeadErrorCase>& cases) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    bitsim::hw::FreshSimContext ctx;
    Bench b(c.cfg);
    ASSERT_TRUE(b.run_one_transfer(test_bench::changed(good, c.corrupt))) << "hang";
    const EngineLaneError e = b.engine.error(0);
    EXPECT_EQ(AttentionError(e.code), c.code) << attention_error_name(AttentionError(e.code));
    EXPECT_EQ(e.row, -1);
  }
}

TEST(AttentionUnitInt4, VariantMismatchAndBadBank) {
  std::mt19937 rng(81);
  const std::vector<int4_test::Int4Head> heads = {int4_test::random_int4_head(2, 3, rng)};
  const auto good = int4_transfer(heads);
  const std::vector<HeadErrorCase> cases = {
      {"INT4 header to the int8 online unit", online_config(), AttentionError::VariantMismatch, {}},
      {"int8 header to the INT4 unit", int4_config(), AttentionError::VariantMismatch,
       [](auto& s) { s[0].data &= ~(1ull << 27); s[1].data &= ~(0xFull << 32); }},
      {"9 outlier lanes", int4_config(), AttentionError::ReservedBits,
       [](auto& s) { s[1].data = (s[1].data & ~(0xFull << 32)) | (9ull << 32); }},
      {"an outlier channel 96", int4_config(), AttentionError::ReservedBits,
       [](auto& s) { s[14 + 24].data = (s[14 + 24].data & ~0xFFull) | 96; }},
      {"T = 2049, past the INT4 unit's range", int4_config(), AttentionError::BadLength,
       [](auto& s) { s[0].data = (s[0].data & 0xFFFF'FFFFull) | (2049ull << 32); }},
      {"T = 513 to the int8 online unit", online_config(), AttentionError::BadLength,
       [](auto& s) { s[0].data = (s[0].data & ~(1ull << 27) & 0xFFFF'FFFFull) | (513ull << 32); s[1].data &= ~(0xFull << 32); }},
  };
  expect_head_errors(good, cases);
}

// ---- The online-softmax unit reading TIP rows (docs/tip.md "Stream") -------------------

// A head's one tag beat (up to 32 regions) as the stream holds it.
void write_tip_tags_to(const tip_test::TipHead& h, uint64_t* beat) {
  uint8_t b[8];
  model::write_tip_tags(h.tiers, b);
  std::memcpy(beat, b, 8);
}

AttentionUnitConfig tip_config() {
  AttentionUnitConfig c = online_config();
  c.kv_format = "tip";
  return c;
}

// A TIP head's stream: header (flags bits 2 and 4, L, log2 R), q, tags, bank, the rows at
// their tiers.
std::vector<StreamBeat> tip_head_beats(const tip_test::TipHead& h, bool last) {
  const std::vector<uint8_t> bytes = h.stream(last);
  std::vector<StreamBeat> beats;
  append_bytes(beats, bytes.data(), bytes.size());
  EXPECT_EQ(bytes.size(), model::attention_head_bytes(h.header(last), model::kBoardHeadDim, h.tiers.data()));
  beats.back().last = last;
  return beats;
}

std::vector<StreamBeat> tip_transfer(const std::vector<tip_test::TipHead>& heads) {
  return transfer_of(heads, tip_head_beats);
}

// Per head golden::attention_head_tip's o (two a beat), sum, then the masses four a beat.
std::vector<StreamBeat> tip_expected(const std::vector<tip_test::TipHead>& heads) {
  std::vector<StreamBeat> out;
  for (const auto& h : heads) {
    int32_t o[D];
    uint32_t sum = 0;
    std::vector<uint32_t> masses;
    h.golden(o, &sum, &masses);
    EXPECT_EQ(int(masses.size()), h.regions());
    for (int i = 0; i < D; i += 2) out.push_back({uint64_t(uint32_t(o[i])) | (uint64_t(uint32_t(o[i + 1])) << 32), false});
    out.push_back({uint64_t(sum), false});
    for (size_t r = 0; r < masses.size(); r += 4) {
      uint64_t beat = 0;
      for (size_t j = 0; j < 4 && r + j < masses.size(); ++j) beat |= uint64_t(masses[r + j]) << (16 * j);
      out.push_back({beat, false});
    }
  }
  out.back().last = true;
  return out;
}

TEST(AttentionUnitTip, ContextsRegionSizesLanesAndMixedTiersBothLanesEqualGolden) {
  bitsim::hw::FreshSimContext ctx;
  Bench b(tip_config());
  std::mt19937 rng(20261205);
  std::vector<tip_test::TipHead> h0, h1;
  uint64_t rows0 = 0, rows1 = 0;
  int i = 0;
  for (int T : {1, 2, 16, 17, 64, 65, 300, 512}) {
    const int log2r = 4 + i % 5, lanes = i % 2 ? 8 : 4;
    h0.push_back(tip_test::random_tip_head(T, log2r, lanes, rng));
    h1.push_back(tip_test::random_tip_head(T, 8 - i % 5, 12 - lanes, rng));
    rows0 += 2 * uint64_t(T);
    rows1 += 2 * uint64_t(T);
    ++i;
  }
  // One tier throughout, each of the three.
  for (model::TipTier t : {model::TipTier::Kvq8, model::TipTier::Kvq4Lanes, model::TipTier::Kvq4}) {
    h0.push_back(tip_test::random_tip_head(100, 5, 4, rng, std::vector<model::TipTier>(4, t)));
    rows0 += 200;
  }
  ASSERT_TRUE(b.run_both_lanes(tip_transfer(h0), tip_transfer(h1)));
  expect_beats_eq(b.sink[0]->beats, tip_expected(h0));
  expect_beats_eq(b.sink[1]->beats, tip_expected(h1));
  EXPECT_EQ(b.engine.stats(0).rows, rows0);
  EXPECT_EQ(b.engine.stats(1).rows, rows1);
  EXPECT_EQ(b.engine.stats(0).units, h0.size());
  EXPECT_EQ(b.engine.stats(0).errors + b.engine.stats(1).errors, 0u);
}

TEST(AttentionUnitTip, FullContextAtTheSmallestRegionEqualsGolden) {
  // T = 2,048 at R = 16: 128 regions, 4 tag beats, 32 mass beats; and T = 1,319 at R = 64.
  bitsim::hw::FreshSimContext ctx;
  Bench b(tip_config());
  std::mt19937 rng(20261206);
  const std::vector<tip_test::TipHead> h0 = {tip_test::random_tip_head(2048, 4, 4, rng)};
  const std::vector<tip_test::TipHead> h1 = {tip_test::random_tip_head(1319, 6, 8, rng)};
  ASSERT_TRUE(b.run_both_lanes(tip_transfer(h0), tip_transfer(h1)));
  expect_beats_eq(b.sink[0]->beats, tip_expected(h0));
  expect_beats_eq(b.sink[1]->beats, tip_expected(h1));
  EXPECT_EQ(b.sink[0]->beats.size(), 49u + 32u);
  EXPECT_EQ(b.sink[1]->beats.size(), 49u + 6u);
}

TEST(AttentionUnitTip, CyclesFollowTheBytesOfEachRowHandWorked) {
  // A head of N input beats = 2 + 12 + G (tags) + B (bank: 25 at L = 4, 26 at L = 8) + its
  // rows' beats (KVQ8 24, KVQ4+L 14 or 15, KVQ4 13); its last V beat is taken at edge N, its
  // results pushed from N + drain + 143 + 6 (only when the last row is KVQ4(+L)) + regions,
  // popped one edge later, one a beat (docs/tip.md "Stream"). drain 4.
  using model::TipTier;
  struct Case {
    int T, log2r, lanes;
    std::vector<TipTier> tiers;
    uint64_t first_pop;  // by hand
    size_t beats;
  };
  const std::vector<Case> cases = {
      // T 3, one region, KVQ8: N = 2 + 12 + 1 + 25 + 3 x 24 = 112; 112 + 4 + 143 + 0 + 1 + 1.
      {3, 4, 4, {TipTier::Kvq8}, 261, 50},
      // KVQ4: N = 40 + 3 x 13 = 79; 79 + 4 + 143 + 6 + 1 + 1.
      {3, 4, 4, {TipTier::Kvq4}, 234, 50},
      // T 20 at R 16, L 8: KVQ4+L then KVQ8: N = 2 + 12 + 1 + 26 + 16 x 15 + 4 x 24 = 377;
      // 377 + 4 + 143 + 0 + 2 + 1.
      {20, 4, 8, {TipTier::Kvq4Lanes, TipTier::Kvq8}, 527, 50},
      // The reverse, L 4: N = 2 + 12 + 1 + 25 + 16 x 24 + 4 x 14 = 480; 480 + 4 + 143 + 6 + 2 + 1.
      {20, 4, 4, {TipTier::Kvq8, TipTier::Kvq4Lanes}, 636, 50},
      // T 200 at R 32, 7 regions (2 mass beats): KVQ4 x 3, KVQ8 x 2, KVQ4+L (L 4) x 2 (the last
      // of 8 rows): N = 40 + 96 x 13 + 64 x 24 + 40 x 14 = 3,384; 3,384 + 4 + 143 + 6 + 7 + 1.
      {200, 5, 4, {TipTier::Kvq4, TipTier::Kvq4, TipTier::Kvq4, TipTier::Kvq8, TipTier::Kvq8, TipTier::Kvq4Lanes,
                   TipTier::Kvq4Lanes}, 3545, 51},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(::testing::Message() << "T " << k.T << " R " << (1 << k.log2r) << " L " << k.lanes);
    bitsim::hw::FreshSimContext ctx;
    AttentionUnitConfig cfg = tip_config();
    cfg.drain = 4;
    Bench b(cfg);
    std::mt19937 rng{uint32_t(k.T * 10 + k.lanes)};
    const std::vector<tip_test::TipHead> heads = {tip_test::random_tip_head(k.T, k.log2r, k.lanes, rng, k.tiers)};
    b.src[0]->append(tip_transfer(heads));
    ASSERT_TRUE(b.run_tlasts(0, 1));
    expect_beats_eq(b.sink[0]->beats, tip_expected(heads));
    ASSERT_EQ(b.sink[0]->beats.size(), k.beats);
    for (uint64_t j = 0; j < k.beats; ++j) EXPECT_EQ(b.sink[0]->pop_cycle[j], k.first_pop + j) << j;
  }
}

TEST(AttentionUnitTip, VariantMismatchReservedTagsLanesRegionsAndBadBank) {
  std::mt19937 rng(82);
  const std::vector<tip_test::TipHead> heads = {tip_test::random_tip_head(40, 4, 4, rng)};  // 3 regions
  const auto good = tip_transfer(heads);
  const int tags = 14, bank = 15;  // beat indices
  const std::vector<HeadErrorCase> cases = {
      {"TIP header to the INT4 unit", int4_config(), AttentionError::VariantMismatch, {}},
      {"TIP header to the int8 online unit", online_config(), AttentionError::VariantMismatch, {}},
      {"INT4 header to the TIP unit", tip_config(), AttentionError::VariantMismatch,
       [](auto& s) { s[0].data = (s[0].data & ~(1ull << 28)) | (1ull << 27); s[1].data &= ~(0xFull << 36); }},
      {"TIP and INT4 flags together", tip_config(), AttentionError::ReservedBits, [](auto& s) { s[0].data |= 1ull << 27; }},
      {"TIP header without the online flag", tip_config(), AttentionError::VariantMismatch,
       [](auto& s) { s[0].data &= ~(1ull << 26); }},
      {"5 lanes", tip_config(), AttentionError::ReservedBits,
       [](auto& s) { s[1].data = (s[1].data & ~(0xFull << 32)) | (5ull << 32); }},
      {"region log2 9", tip_config(), AttentionError::ReservedBits,
       [](auto& s) { s[1].data = (s[1].data & ~(0xFull << 36)) | (9ull << 36); }},
      {"region log2 3", tip_config(), AttentionError::ReservedBits,
       [](auto& s) { s[1].data = (s[1].data & ~(0xFull << 36)) | (3ull << 36); }},
      {"tag 3", tip_config(), AttentionError::ReservedBits, [&](auto& s) { s[tags].data |= 3ull << 2; }},
      {"a tag past the last region", tip_config(), AttentionError::ReservedBits,
       [&](auto& s) { s[tags].data |= 1ull << 6; }},
      {"a lane channel 96", tip_config(), AttentionError::ReservedBits,
       [&](auto& s) { s[bank + 24].data = (s[bank + 24].data & ~0xFFull) | 96; }},
      {"T = 2049", tip_config(), AttentionError::BadLength,
       [](auto& s) { s[0].data = (s[0].data & 0xFFFF'FFFFull) | (2049ull << 32); }},
  };
  expect_head_errors(good, cases);
}

TEST(AttentionUnitTip, FastFaceEqualsTheClockedUnitAndKeysTheTiers) {
  // The fast face (AttentionFastEngine: model::next_head, fast::attention_head_tip) on the
  // same transfer, split over two DMA buffers mid-head, gives the clocked unit's result
  // bytes; its batch key names each head's T, flags, L, log2 R and tag beats, so that heads
  // whose tiers differ (and so their cycles) never share a timing record.
  std::mt19937 rng(20261207);
  const std::vector<tip_test::TipHead> heads = {tip_test::random_tip_head(70, 4, 8, rng),
                                                tip_test::random_tip_head(1, 8, 4, rng),
                                                tip_test::random_tip_head(600, 4, 4, rng)};  // 38 regions: 2 tag beats
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < heads.size(); ++i) {
    const auto b = heads[i].stream(i + 1 == heads.size());
    bytes.insert(bytes.end(), b.begin(), b.end());
  }
  std::vector<StreamBeat> clocked;
  {
    bitsim::hw::FreshSimContext ctx;
    Bench b(tip_config());
    b.src[0]->append(tip_transfer(heads));
    ASSERT_TRUE(b.run_tlasts(0, 1));
    clocked = b.sink[0]->beats;
  }
  expect_beats_eq(clocked, tip_expected(heads));
  std::vector<uint8_t> want(clocked.size() * 8);
  for (size_t i = 0; i < clocked.size(); ++i) std::memcpy(want.data() + 8 * i, &clocked[i].data, 8);

  auto run = [&](const std::vector<uint8_t>& in, bool timing_only, std::string* key, std::vector<uint8_t>* out) {
    PagedMemory mem(uint64_t(1) << 24);
    const uint64_t a = 0x10'0000, split = 1000;
    mem.write(a, in.data(), split);
    mem.write(a + 0x8'0000, in.data() + split, in.size() - split);
    fast::Workers workers(1);
    FastEngineContext ctx{mem, workers, timing_only, {}};
    const std::vector<FastBuffer> stream = {{a, uint32_t(split)}, {a + 0x8'0000, uint32_t(in.size() - split)}};
    return AttentionFastEngine(tip_config()).compute(ctx, stream, *key, *out);
  };
  std::string key;
  std::vector<uint8_t> got;
  ASSERT_TRUE(run(bytes, false, &key, &got));
  EXPECT_EQ(got, want);
  // Head 0: T 70 at R 16 (5 regions), flags 0x14, L 8; head 1 one region; head 2 38 regions in
  // two tag beats; the last head's flags carry bit 0.
  uint64_t t0 = 0, t2a = 0, t2b = 0;
  write_tip_tags_to(heads[0], &t0);
  std::vector<uint8_t> tags2(16);
  model::write_tip_tags(heads[2].tiers, tags2.data());
  std::memcpy(&t2a, tags2.data(), 8);
  std::memcpy(&t2b, tags2.data() + 8, 8);
  uint64_t t1 = uint64_t(heads[1].tiers[0]);
  EXPECT_EQ(key, fmt::format("h70,20,8,4,{:x}.;h1,20,4,8,{:x}.;h600,21,4,4,{:x}.{:x}.;", t0, t1, t2a, t2b));
  // Timing only: the same key, zero results of the same size.
  std::string key2;
  std::vector<uint8_t> zeros;
  ASSERT_TRUE(run(bytes, true, &key2, &zeros));
  EXPECT_EQ(key2, key);
  EXPECT_EQ(zeros, std::vector<uint8_t>(want.size(), 0));
  // Another tier for one region: another key.
  std::vector<tip_test::TipHead> other = heads;
  other[0].tiers[4] = other[0].tiers[4] == model::TipTier::Kvq8 ? model::TipTier::Kvq4 : model::TipTier::Kvq8;
  std::vector<uint8_t> ob;
  for (size_t i = 0; i < other.size(); ++i) {
    const auto b = other[i].stream(i + 1 == other.size());
    ob.insert(ob.end(), b.begin(), b.end());
  }
  std::string key3;
  std::vector<uint8_t> r3;
  ASSERT_TRUE(run(ob, false, &key3, &r3));
  EXPECT_NE(key3, key);
  // A reserved tag, or a TIP stream to the INT4 unit's fast face: the clocked board's to answer.
  std::vector<uint8_t> bad = bytes;
  bad[model::attention_header_q_bytes(1, model::kBoardHeadDim)] |= 3;
  std::string k4;
  std::vector<uint8_t> r4;
  EXPECT_FALSE(run(bad, false, &k4, &r4));
  PagedMemory mem(uint64_t(1) << 24);
  mem.write(0x1000, bytes.data(), bytes.size());
  fast::Workers workers(1);
  FastEngineContext ctx{mem, workers, false, {}};
  std::string k5;
  std::vector<uint8_t> r5;
  EXPECT_FALSE(AttentionFastEngine(int4_config()).compute(ctx, {{0x1000, uint32_t(bytes.size())}}, k5, r5));
}

// ---- The shared-stream unit (docs/variants-attention.md 9) -----------------------------

AttentionUnitConfig shared(AttentionUnitConfig c, int G = 4) {
  c.gqa = "shared-stream";
  c.gqa_group = G;
  return c;
}

// A group of G query heads on one K/V head: `base` and G - 1 copies with their own q, m and S
// (the rows, the bank and the tags the base's).
template <class H>
std::vector<H> group_of(const H& base, int G, std::mt19937& rng) {
  std::vector<H> g{base};
  for (int i = 1; i < G; ++i) {
    H h = base;
    for (auto& x : h.q) x = int8_t(int(rng() % 256) - 128);
    h.p.m = i % 2 ? 10'818 + uint32_t(rng() % 68'688) : uint32_t(rng() % (1u << 18));
    h.p.shift = i % 2 ? 24 : 20 + int(rng() % 14);
    g.push_back(h);
  }
  return g;
}

// The pass of a group, from its members' per-head streams (each as beats_of encodes it):
// member 0's header with flags bit 5 and G, q_0, then each further member's (m, S) beat and q,
// then member 0's rest (tags, bank, rows).
template <class H, class Encode>
std::vector<StreamBeat> pass_beats(const std::vector<H>& m, bool last, Encode beats_of) {
  const std::vector<StreamBeat> b0 = beats_of(m[0], last);
  const int G = int(m.size());
  std::vector<StreamBeat> out(b0.begin(), b0.begin() + 14);
  out[0].data |= uint64_t(model::kAttentionFlagShared) << 24;
  out[1].data |= uint64_t(G) << 40;
  for (int g = 1; g < G; ++g) {
    const std::vector<StreamBeat> bg = beats_of(m[size_t(g)], last);
    out.push_back({model::encode_attention_member(m[size_t(g)].p.m, uint32_t(m[size_t(g)].p.shift)), false});
    out.insert(out.end(), bg.begin() + 2, bg.begin() + 14);
  }
  out.insert(out.end(), b0.begin() + 14, b0.end());
  return out;
}

// Passes one after another as one transfer.
template <class H, class Encode>
std::vector<StreamBeat> pass_transfer(const std::vector<std::vector<H>>& passes, Encode beats_of) {
  std::vector<StreamBeat> out;
  for (size_t i = 0; i < passes.size(); ++i) {
    const auto b = pass_beats(passes[i], i + 1 == passes.size(), beats_of);
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

template <class H>
std::vector<H> flat(const std::vector<std::vector<H>>& passes) {
  std::vector<H> out;
  for (const auto& p : passes) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Every KV format the unit reads, G = 2..4 members, T = 1 .. 512 (TIP and INT4 past it): each
// member's result is its per-head golden's (the same function as for one pass per head), in
// member order, on both lanes; a pass counts as one unit and its rows once.
TEST(AttentionUnitShared, EveryFormatAndGroupEqualsThePerHeadGolden) {
  std::mt19937 rng(20261208);
  for (const int G : {2, 3, 4}) {
    SCOPED_TRACE(G);
    const std::vector<int> Ts = {1, 7, 64, 512};
    uint64_t rows = 0;
    for (int T : Ts) rows += 2 * uint64_t(T);
    {  // two-phase, both modes
      bitsim::hw::FreshSimContext ctx;
      Bench b(shared(AttentionUnitConfig{}, 4));
      std::vector<std::vector<Head>> p0, p1;
      for (int T : Ts) {
        p0.push_back(group_of(random_head(T, rng, false), G, rng));
        p1.push_back(group_of(random_head(T, rng, true, 12), G, rng));
      }
      ASSERT_TRUE(b.run_both_lanes(pass_transfer(p0, head_beats), pass_transfer(p1, head_beats)));
      expect_beats_eq(b.sink[0]->beats, expected_beats(flat(p0)));
      expect_beats_eq(b.sink[1]->beats, expected_beats(flat(p1)));
      for (int l = 0; l < 2; ++l) {
        EXPECT_EQ(b.engine.stats(l).units, Ts.size());
        EXPECT_EQ(b.engine.stats(l).rows, rows);
        EXPECT_EQ(b.engine.stats(l).errors, 0u);
      }
      EXPECT_EQ(b.engine.multiplies(0), uint64_t(G) * rows / 2);  // one weight per member per V row
    }
    {  // online-softmax, int8 rows
      bitsim::hw::FreshSimContext ctx;
      Bench b(shared(online_config(), G));
      std::vector<std::vector<Head>> p0, p1;
      for (int T : Ts) {
        p0.push_back(group_of(random_head(T, rng, false), G, rng));
        p1.push_back(group_of(random_head(T, rng, false, 12), G, rng));
      }
      ASSERT_TRUE(b.run_both_lanes(pass_transfer(p0, online_head_beats), pass_transfer(p1, online_head_beats)));
      expect_beats_eq(b.sink[0]->beats, online_expected(flat(p0)));
      expect_beats_eq(b.sink[1]->beats, online_expected(flat(p1)));
    }
    {  // INT4 rows, 0 and 5 outlier lanes, past 512
      bitsim::hw::FreshSimContext ctx;
      Bench b(shared(int4_config(), 4));
      std::vector<std::vector<int4_test::Int4Head>> p0, p1;
      for (int T : {1, 7, 600}) {
        p0.push_back(group_of(int4_test::random_int4_head(T, 0, rng), G, rng));
        p1.push_back(group_of(int4_test::random_int4_head(T, 5, rng), G, rng));
      }
      ASSERT_TRUE(b.run_both_lanes(pass_transfer(p0, int4_head_beats), pass_transfer(p1, int4_head_beats)));
      expect_beats_eq(b.sink[0]->beats, int4_expected(flat(p0)));
      expect_beats_eq(b.sink[1]->beats, int4_expected(flat(p1)));
    }
    {  // TIP rows at mixed tiers: each member's masses after its result
      bitsim::hw::FreshSimContext ctx;
      Bench b(shared(tip_config(), 4));
      std::vector<std::vector<tip_test::TipHead>> p0, p1;
      p0.push_back(group_of(tip_test::random_tip_head(70, 4, 8, rng), G, rng));
      p0.push_back(group_of(tip_test::random_tip_head(1, 8, 4, rng), G, rng));
      p1.push_back(group_of(tip_test::random_tip_head(600, 4, 4, rng), G, rng));
      ASSERT_TRUE(b.run_both_lanes(pass_transfer(p0, tip_head_beats), pass_transfer(p1, tip_head_beats)));
      expect_beats_eq(b.sink[0]->beats, tip_expected(flat(p0)));
      expect_beats_eq(b.sink[1]->beats, tip_expected(flat(p1)));
    }
  }
}

// A pass of N = 2 + 12 + 13 (G - 1) + 24 T beats (the two-phase unit, drain 4) has its last V
// beat taken at edge N, and its G x 49 result beats popped at N + drain + 1 + j; the same
// rows cost one pass per head G x (14 + 24 T) beats and G - 1 result-bank waits.
TEST(AttentionUnitShared, CyclesHandWorked) {
  for (const int G : {2, 4}) {
    for (const int T : {1, 3}) {
      SCOPED_TRACE(testing::Message() << "G " << G << " T " << T);
      bitsim::hw::FreshSimContext ctx;
      AttentionUnitConfig cfg = shared(AttentionUnitConfig{}, G);
      cfg.drain = 4;
      Bench b(cfg);
      std::mt19937 rng(uint32_t(31 * G + T));
      const std::vector<std::vector<Head>> passes = {group_of(random_head(T, rng, false), G, rng)};
      b.src[0]->append(pass_transfer(passes, head_beats));
      ASSERT_TRUE(b.run_tlasts(0, 1));
      expect_beats_eq(b.sink[0]->beats, expected_beats(flat(passes)));
      const uint64_t N = 2 + 12 + 13 * uint64_t(G - 1) + 24 * uint64_t(T);
      ASSERT_EQ(b.sink[0]->pop_cycle.size(), 49u * uint64_t(G));
      for (uint64_t j = 0; j < 49u * uint64_t(G); ++j) EXPECT_EQ(b.sink[0]->pop_cycle[j], N + 4 + j + 1) << j;
      EXPECT_EQ(b.engine.stats(0).busy_cycles, N + 4 + 49 * uint64_t(G) - 1);
      EXPECT_EQ(b.engine.stats(0).stall_cycles, 0u);
    }
  }
}

// A pass to the per-head unit, a head to the shared-stream unit, a G above the unit's
// attention.gqa_group: variant mismatch; G outside 2..8 with flags bit 5, a member beat with
// reserved bits or an m wider than 18 bits: the header's errors.
TEST(AttentionUnitShared, VariantMismatchGroupTooLargeAndBadMemberBeat) {
  std::mt19937 rng(83);
  const std::vector<std::vector<Head>> passes = {group_of(random_head(2, rng, false), 4, rng)};
  const auto good = pass_transfer(passes, head_beats);
  const std::vector<HeadErrorCase> cases = {
      {"a pass to the per-head unit", AttentionUnitConfig{}, AttentionError::VariantMismatch, {}},
      {"G = 4 to a unit built for 3", shared(AttentionUnitConfig{}, 3), AttentionError::VariantMismatch, {}},
      {"a head to the shared-stream unit", shared(AttentionUnitConfig{}), AttentionError::VariantMismatch,
       [](auto& s) { s[0].data &= ~(uint64_t(model::kAttentionFlagShared) << 24); s[1].data &= ~(0xFull << 40); }},
      {"G = 1 with flags bit 5", shared(AttentionUnitConfig{}), AttentionError::ReservedBits,
       [](auto& s) { s[1].data = (s[1].data & ~(0xFull << 40)) | (1ull << 40); }},
      {"G = 9", shared(AttentionUnitConfig{}, 8), AttentionError::ReservedBits,
       [](auto& s) { s[1].data = (s[1].data & ~(0xFull << 40)) | (9ull << 40); }},
      {"a member beat's reserved bit", shared(AttentionUnitConfig{}), AttentionError::ReservedBits,
       [](auto& s) { s[14].data |= 1ull << 40; }},
      {"a member's m wider than 18 bits", shared(AttentionUnitConfig{}), AttentionError::MultiplierTooWide,
       [](auto& s) { s[27].data |= 1ull << 18; }},
  };
  expect_head_errors(good, cases);
}

// The fast face on a transfer of passes (INT4 and two-phase) gives the clocked unit's result
// bytes; its key names each pass's G.
TEST(AttentionUnitShared, FastFaceEqualsTheClockedUnit) {
  std::mt19937 rng(20261209);
  auto fast_of = [](const AttentionUnitConfig& cfg, const std::vector<StreamBeat>& beats, std::string* key,
                    std::vector<uint8_t>* out) {
    std::vector<uint8_t> bytes(beats.size() * 8);
    for (size_t i = 0; i < beats.size(); ++i) std::memcpy(bytes.data() + 8 * i, &beats[i].data, 8);
    PagedMemory mem(uint64_t(1) << 24);
    mem.write(0x1000, bytes.data(), bytes.size());
    fast::Workers workers(1);
    FastEngineContext ctx{mem, workers, false, {}};
    return AttentionFastEngine(cfg).compute(ctx, {{0x1000, uint32_t(bytes.size())}}, *key, *out);
  };
  auto clocked_of = [](const AttentionUnitConfig& cfg, const std::vector<StreamBeat>& beats) {
    bitsim::hw::FreshSimContext ctx;
    Bench b(cfg);
    b.src[0]->append(beats);
    EXPECT_TRUE(b.run_tlasts(0, 1));
    std::vector<uint8_t> r(b.sink[0]->beats.size() * 8);
    for (size_t i = 0; i < b.sink[0]->beats.size(); ++i) std::memcpy(r.data() + 8 * i, &b.sink[0]->beats[i].data, 8);
    return r;
  };
  {
    const std::vector<std::vector<Head>> passes = {group_of(random_head(5, rng, false), 4, rng),
                                                   group_of(random_head(9, rng, false), 4, rng)};
    const auto beats = pass_transfer(passes, head_beats);
    std::string key;
    std::vector<uint8_t> got;
    ASSERT_TRUE(fast_of(shared(AttentionUnitConfig{}), beats, &key, &got));
    EXPECT_EQ(got, clocked_of(shared(AttentionUnitConfig{}), beats));
    EXPECT_EQ(key, "g4,h5,32,0;g4,h9,33,0;");
    std::string k2;
    std::vector<uint8_t> r2;
    EXPECT_FALSE(fast_of(AttentionUnitConfig{}, beats, &k2, &r2));              // the per-head unit's error
    EXPECT_FALSE(fast_of(shared(AttentionUnitConfig{}, 3), beats, &k2, &r2));  // G above the unit's
  }
  {
    const std::vector<std::vector<int4_test::Int4Head>> passes = {
        group_of(int4_test::random_int4_head(33, 2, rng), 2, rng)};
    const auto beats = pass_transfer(passes, int4_head_beats);
    std::string key;
    std::vector<uint8_t> got;
    ASSERT_TRUE(fast_of(shared(int4_config()), beats, &key, &got));
    EXPECT_EQ(got, clocked_of(shared(int4_config()), beats));
  }
}

// ---- Speed -----------------------------------------------------------------------------

TEST(AttentionUnit, SimulationSpeedT512) {
  bitsim::hw::FreshSimContext ctx;
  Bench b;
  std::mt19937 rng(53);
  std::vector<Head> heads[2];
  for (int l = 0; l < 2; ++l) {
    for (int i = 0; i < 16; ++i) heads[l].push_back(random_head(512, rng, i % 4 == 3));
    b.src[size_t(l)]->append(transfer_beats(heads[l]));
  }
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(b.run([&] { return b.sink[0]->tlasts == 1 && b.sink[1]->tlasts == 1; }));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cycles = double(b.clock.cycle());
  std::printf("[ speed    ] attention, 16 heads of T=512 per lane, both lanes, unit + test source/sink: "
              "%.0f cycles in %.3f s = %.2f M cycles/s\n",
              cycles, s, cycles / s / 1e6);
  for (int l = 0; l < 2; ++l) expect_beats_eq(b.sink[size_t(l)]->beats, expected_beats(heads[l]));
}

}  // namespace
}  // namespace bitsim::hw
