// MatmulEngine (CIRCUITS.md 2, docs/hw-timing.md last section): bit-exact against
// golden::ternary_matvec, the documented cycle counts, back-pressure, both lanes, every
// malformed stream, the status registers, and the simulation speed.
#include "support/stream_bench.h"
#include "hw/circuits/matmul_engine.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <tlm_utils/simple_initiator_socket.h>

#include "golden/board_reference.h"
#include "hw/parts/sim_context.h"

namespace bitsim::hw {
namespace {

using model::StreamError;

// ---- Test benches ----------------------------------------------------------------------

std::vector<StreamBeat> to_beats(const std::vector<uint8_t>& bytes) {
  std::vector<StreamBeat> beats((bytes.size() + 7) / 8);
  for (size_t i = 0; i < beats.size(); ++i) {
    uint8_t b[8] = {};
    std::memcpy(b, bytes.data() + 8 * i, std::min<size_t>(8, bytes.size() - 8 * i));
    std::memcpy(&beats[i].data, b, 8);
  }
  if (!beats.empty()) beats.back().last = true;
  return beats;
}

using test_bench::RegMaster;
using test_bench::Sink;
using test_bench::Source;

struct Bench : test_bench::EngineBench<MatmulEngine, MatmulEngineConfig, 2'000'000> {
  explicit Bench(const MatmulEngineConfig& cfg = {}) : EngineBench("matmul", cfg) {}
};

// ---- Streams ---------------------------------------------------------------------------

struct Group {
  model::TernaryMatrix m;
  std::vector<int8_t> x;
};

model::TernaryMatrix random_matrix(int rows, int cols, std::mt19937& rng) {
  model::TernaryMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.scale = 1.0f;
  m.trits.resize(size_t(rows) * size_t(cols));
  std::uniform_int_distribution<int> d(-1, 1);
  for (auto& t : m.trits) t = int8_t(d(rng));
  return m;
}

Group random_group(int rows, int n, std::mt19937& rng) {
  Group g{random_matrix(rows, n, rng), std::vector<int8_t>(size_t(n))};
  std::uniform_int_distribution<int> d(-128, 127);
  for (auto& v : g.x) v = int8_t(d(rng));
  return g;
}

std::vector<uint8_t> stream_of(const std::vector<Group>& groups) {
  std::vector<model::GroupSpec> specs;
  for (const auto& g : groups) specs.push_back({g.x.data(), g.m.cols, &g.m, 0, g.m.rows});
  return model::build_stream(specs);
}

// The expected result beats of a transfer: per group the golden results, two per beat,
// zero-padded per group, TLAST on the final beat.
std::vector<StreamBeat> expected_beats(const std::vector<Group>& groups) {
  std::vector<StreamBeat> out;
  for (const auto& g : groups) {
    std::vector<int32_t> acc(size_t(g.m.rows));
    golden::ternary_matvec(g.m, 0, g.m.rows, g.x.data(), acc.data());
    if (acc.size() % 2) acc.push_back(0);
    for (size_t i = 0; i < acc.size(); i += 2)
      out.push_back({uint64_t(uint32_t(acc[i])) | (uint64_t(uint32_t(acc[i + 1])) << 32), false});
  }
  out.back().last = true;
  return out;
}

void expect_beats_eq(const std::vector<StreamBeat>& got, const std::vector<StreamBeat>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].data, want[i].data) << "beat " << i;
    ASSERT_EQ(got[i].last, want[i].last) << "beat " << i;
  }
}

// Beat indices (within the transfer) of each row's last beat, per output beat: the row
// whose result completes that output beat.
std::vector<uint64_t> completing_row_beat(const std::vector<Group>& groups) {
  std::vector<uint64_t> out;
  uint64_t pos = 0;
  for (const auto& g : groups) {
    const int n = g.m.cols;
    pos += 2 + model::packed_x_bytes(n) / 8;
    const uint64_t rb = model::packed_row_bytes(n) / 8;
    for (int r = 0; r < g.m.rows; ++r) {
      pos += rb;
      if (r % 2 == 1 || r + 1 == g.m.rows) out.push_back(pos - 1);
    }
  }
  return out;
}

// ---- Bit-exact results -----------------------------------------------------------------

TEST(MatmulEngine, RandomGroupsInOneTransferEqualGolden) {
  bitsim::hw::FreshSimContext ctx;
  Bench b;
  std::mt19937 rng(20240501);
  // n not a multiple of 5 or 8, the extremes 1 and 4096, odd and even R.
  const std::vector<std::pair<int, int>> shapes = {{1, 1},    {3, 7},    {6, 13},   {5, 37},
                                                   {9, 41},   {4, 1536}, {3, 4093}, {2, 4096},
                                                   {17, 203}, {1, 40},   {8, 999}};
  std::vector<Group> groups;
  for (auto [rows, n] : shapes) groups.push_back(random_group(rows, n, rng));
  b.src[0]->append(to_beats(stream_of(groups)));
  ASSERT_TRUE(b.run_tlasts(0, 1));
  expect_beats_eq(b.sink[0]->beats, expected_beats(groups));
  const auto& s = b.engine.stats(0);
  EXPECT_EQ(s.units, shapes.size());
  uint64_t rows = 0;
  for (auto [r, n] : shapes) rows += uint64_t(r);
  EXPECT_EQ(s.rows, rows);
  EXPECT_EQ(s.beats_in, b.src[0]->beats.size());
  EXPECT_EQ(s.beats_out, b.sink[0]->beats.size());
  EXPECT_EQ(s.transfers, 1u);
  EXPECT_EQ(s.errors, 0u);
  EXPECT_FALSE(b.engine.busy(0));
  EXPECT_EQ(b.reg(0, engine_reg::kStatus), 0u);
  EXPECT_EQ(b.reg(0, engine_reg::kUnitsDone), shapes.size());
  EXPECT_EQ(b.reg(0, engine_reg::kRowsDone), rows);
  EXPECT_EQ(b.reg(0, engine_reg::kBeatsIn), b.src[0]->beats.size());
  EXPECT_EQ(b.reg(0, engine_reg::kBeatsOut), b.sink[0]->beats.size());
}

// The per-call format (matmul.format = per-call, docs/variants-host.md): no header, x of L,
// fixed rows of L until TLAST; each transfer's results are the segment's partial sums, and
// the partial sums of all segments add up to golden::ternary_matvec.
TEST(MatmulEngine, PerCallFormatSegmentsAddUpToGolden) {
  bitsim::hw::FreshSimContext ctx;
  MatmulEngineConfig cfg;
  cfg.format = "per-call";
  cfg.per_call_row_trits = 37;  // not a multiple of 5 or 8
  Bench b(cfg);
  std::mt19937 rng(77);
  for (auto [rows, n] : std::vector<std::pair<int, int>>{{5, 100}, {2, 37}, {1, 1}, {4, 74}}) {
    const Group g = random_group(rows, n, rng);
    const int segments = model::per_call_segments(n, 37);
    std::vector<int32_t> sum(size_t(rows), 0);
    for (int seg = 0; seg < segments; ++seg) {
      const int before = b.sink[0]->tlasts;
      const size_t beats_before = b.sink[0]->beats.size();
      const auto stream = model::build_per_call_stream(g.x.data(), g.m, 0, rows, seg, 37);
      ASSERT_EQ(stream.size(), model::packed_x_bytes(37) + size_t(rows) * model::packed_row_bytes(37));
      b.src[0]->append(to_beats(stream));
      ASSERT_TRUE(b.run_tlasts(0, before + 1));
      const auto& got = b.sink[0]->beats;
      ASSERT_EQ(got.size() - beats_before, size_t(rows + 1) / 2) << "n " << n << " segment " << seg;
      for (int r = 0; r < rows; ++r) {
        const uint64_t beat = got[beats_before + size_t(r / 2)].data;
        sum[size_t(r)] += int32_t(uint32_t(r % 2 ? beat >> 32 : beat));
      }
      EXPECT_TRUE(got.back().last);
    }
    std::vector<int32_t> want(static_cast<size_t>(rows)), plain(static_cast<size_t>(rows));
    golden::ternary_matvec_per_call(g.m, 0, rows, g.x.data(), 37, want.data());
    golden::ternary_matvec(g.m, 0, rows, g.x.data(), plain.data());
    EXPECT_EQ(sum, want) << "n " << n;
    EXPECT_EQ(want, plain) << "n " << n;
  }
  EXPECT_EQ(b.engine.stats(0).errors, 0u);
}

// Per-call framing errors: TLAST inside x or inside a row is Truncated; a bad trit byte is
// InvalidTrit with its row.
TEST(MatmulEngine, PerCallFormatErrors) {
  for (int which = 0; which < 3; ++which) {
    bitsim::hw::FreshSimContext ctx;
    MatmulEngineConfig cfg;
    cfg.format = "per-call";
    cfg.per_call_row_trits = 50;  // x 7 beats, a row 2 beats (10 data bytes)
    Bench b(cfg);
    std::mt19937 rng(5);
    const Group g = random_group(3, 50, rng);
    auto bytes = model::build_per_call_stream(g.x.data(), g.m, 0, 3, 0, 50);
    ASSERT_EQ(bytes.size(), 56u + 3 * 16);
    if (which == 0) bytes.resize(16);              // TLAST inside x
    if (which == 1) bytes.resize(56 + 2 * 16 + 8);  // TLAST on the first beat of row 2
    if (which == 2) bytes[56 + 16 + 2] = 0xF7;      // row 1, an invalid trit byte
    b.src[0]->append(to_beats(bytes));
    ASSERT_TRUE(b.run_tlasts(0, 1));
    const auto code = b.reg(0, engine_reg::kErrorCode);
    if (which == 0) {
      EXPECT_EQ(code, uint32_t(StreamError::Truncated));
      EXPECT_EQ(b.reg(0, engine_reg::kErrorRow), engine_reg::kNone);
    } else if (which == 1) {
      EXPECT_EQ(code, uint32_t(StreamError::Truncated));
      EXPECT_EQ(b.reg(0, engine_reg::kErrorRow), 2u);
    } else {
      EXPECT_EQ(code, uint32_t(StreamError::InvalidTrit));
      EXPECT_EQ(b.reg(0, engine_reg::kErrorRow), 1u);
    }
  }
}

TEST(MatmulEngine, ManyRandomTransfersBackToBack) {
  bitsim::hw::FreshSimContext ctx;
  Bench b;
  std::mt19937 rng(7);
  const int transfers = 12;
  auto random = [](std::mt19937& rng) { return random_group(1 + int(rng() % 9), 1 + int(rng() % 700), rng); };
  auto encode = [](const std::vector<Group>& groups) { return to_beats(stream_of(groups)); };
  ASSERT_TRUE(b.run_random_transfers(transfers, rng, random, encode, expected_beats));
  expect_beats_eq(b.sink[0]->beats, b.expected);
  EXPECT_EQ(b.engine.stats(0).transfers, uint64_t(transfers));
}

TEST(MatmulEngine, BothLanesIndependentAndBackPressureChangesOnlyTiming) {
  std::mt19937 rng(99);
  std::vector<Group> g0, g1;
  for (int i = 0; i < 4; ++i) g0.push_back(random_group(5 + i, 300 + 37 * i, rng));
  for (int i = 0; i < 3; ++i) g1.push_back(random_group(7 + 2 * i, 1000 + 11 * i, rng));
  const auto s0 = to_beats(stream_of(g0)), s1 = to_beats(stream_of(g1));

  uint64_t free_end[2] = {}, bp_end[2] = {};
  std::vector<StreamBeat> free_beats[2];
  {
    bitsim::hw::FreshSimContext ctx;
    Bench b;
    ASSERT_TRUE(b.run_both_lanes(s0, s1));
    expect_beats_eq(b.sink[0]->beats, expected_beats(g0));
    expect_beats_eq(b.sink[1]->beats, expected_beats(g1));
    for (int l = 0; l < 2; ++l) {
      free_end[l] = b.sink[size_t(l)]->pop_cycle.back();
      free_beats[l] = b.sink[size_t(l)]->beats;
      EXPECT_EQ(b.engine.stats(l).stall_cycles, 0u);
    }
  }
  {
    bitsim::hw::FreshSimContext ctx;
    MatmulEngineConfig cfg;
    cfg.output_fifo_beats = 2;
    Bench b(cfg);
    b.src[0]->append(s0);
    b.src[1]->append(s1);
    // Lane 0: the S2MM takes one beat in 40; lane 1: bursts of readiness; the sources also
    // pause now and then.
    b.sink[0]->ready = [](uint64_t c) { return c % 40 == 3; };
    b.sink[1]->ready = [](uint64_t c) { return (c / 50) % 3 == 0; };
    b.src[1]->allow = [](uint64_t c) { return c % 13 != 0; };
    ASSERT_TRUE(b.run([&] { return b.sink[0]->tlasts == 1 && b.sink[1]->tlasts == 1; }));
    for (int l = 0; l < 2; ++l) {
      expect_beats_eq(b.sink[size_t(l)]->beats, free_beats[l]);
      bp_end[l] = b.sink[size_t(l)]->pop_cycle.back();
      EXPECT_GT(bp_end[l], free_end[l]);
    }
    EXPECT_GT(b.engine.stats(0).stall_cycles, 0u);
  }
}

TEST(MatmulEngine, PaddingIsIgnored) {
  // x padding bytes, padding digits of a row's last data byte and row padding bytes (even
  // bytes >= 243 there) never change a result and are not errors: the engine flags only
  // data bytes >= 243 (model/packed_image.h).
  bitsim::hw::FreshSimContext ctx;
  Bench b;
  std::mt19937 rng(5);
  std::vector<Group> groups = {random_group(3, 7, rng)};  // x: 1 beat, 7 used; row: 2 data bytes
  auto bytes = stream_of(groups);
  bytes[16 + 7] = 0x55;           // x padding
  for (int r = 0; r < 3; ++r) {
    uint8_t* row = bytes.data() + 24 + 8 * r;
    // digits 2..4 of byte 1 are padding: make them +1 (digit value 2) instead of 0
    row[1] = uint8_t(row[1] % 9 + 2 * 9 + 2 * 27 + 2 * 81);
    row[5] = 0xFF;                // row padding byte
  }
  b.src[0]->append(to_beats(bytes));
  ASSERT_TRUE(b.run_tlasts(0, 1));
  expect_beats_eq(b.sink[0]->beats, expected_beats(groups));
  EXPECT_EQ(StreamError(b.engine.error(0).code), StreamError::None);
}

// ---- Cycle counts ----------------------------------------------------------------------
// The source pushes beat i at edge i (always ready), so the engine takes beat i at edge
// i + 1; a row whose last beat has index L is done at edge L + 1, its output beat is pushed
// at L + 1 + pipeline_depth and the always-ready sink pops it one edge later.

void check_timing(const std::vector<Group>& groups, int depth) {
  MatmulEngineConfig cfg;
  cfg.pipeline_depth = depth;
  Bench b(cfg);
  const auto beats = to_beats(stream_of(groups));
  b.src[0]->append(beats);
  ASSERT_TRUE(b.run_tlasts(0, 1));
  expect_beats_eq(b.sink[0]->beats, expected_beats(groups));
  for (size_t i = 0; i < beats.size(); ++i) ASSERT_EQ(b.src[0]->push_cycle[i], i);
  const auto rows = completing_row_beat(groups);
  ASSERT_EQ(b.sink[0]->pop_cycle.size(), rows.size());
  for (size_t k = 0; k < rows.size(); ++k)
    EXPECT_EQ(b.sink[0]->pop_cycle[k], rows[k] + 1 + uint64_t(depth) + 1) << "output beat " << k;
  // Busy: from taking beat 0 (edge 1) to pushing the TLAST beat, inclusive.
  EXPECT_EQ(b.engine.stats(0).busy_cycles, (rows.back() + 1 + uint64_t(depth)) - 1 + 1);
}

TEST(MatmulEngine, CyclesSingleGroupHandWorked) {
  // n = 13: x 2 beats, a row ceil(13/5) = 3 bytes -> 1 beat; R = 3.
  // The source pushes beat i at edge i, the engine takes it at edge i + 1: beats 0-1 header,
  // 2-3 x, 4, 5, 6 rows, so rows are done at edges 5, 6, 7. Output beat 0 (rows 0, 1) is
  // complete with row 1 (edge 6), pushed depth edges later and popped one edge after that;
  // beat 1 (row 2 + pad) completes at edge 7. Busy from edge 1 to the TLAST push.
  //   depth 4: pops at 6 + 4 + 1 = 11 and 7 + 4 + 1 = 12; busy edges 1..11 = 11.
  //   depth 0: pops at 7 and 8; busy edges 1..7 = 7.
  struct Case {
    int depth;
    uint64_t pop0, pop1, busy;
  };
  for (const Case c : {Case{4, 11, 12, 11}, Case{0, 7, 8, 7}}) {
    bitsim::hw::FreshSimContext ctx;
    std::mt19937 rng(1);
    MatmulEngineConfig cfg;
    cfg.pipeline_depth = c.depth;
    Bench b(cfg);
    std::vector<Group> g = {random_group(3, 13, rng)};
    b.src[0]->append(to_beats(stream_of(g)));
    ASSERT_TRUE(b.run_tlasts(0, 1));
    expect_beats_eq(b.sink[0]->beats, expected_beats(g));
    ASSERT_EQ(b.sink[0]->pop_cycle.size(), 2u);
    EXPECT_EQ(b.sink[0]->pop_cycle[0], c.pop0) << "depth " << c.depth;
    EXPECT_EQ(b.sink[0]->pop_cycle[1], c.pop1) << "depth " << c.depth;
    EXPECT_EQ(b.engine.stats(0).busy_cycles, c.busy) << "depth " << c.depth;
  }
}

TEST(MatmulEngine, CyclesMultiGroupAndOtherDepths) {
  bitsim::hw::FreshSimContext ctx;
  std::mt19937 rng(2);
  // Long rows (n = 1536: 39 beats a row), a wide group (n = 4096: 103 beats a row), odd R.
  std::vector<Group> g = {random_group(5, 1536, rng), random_group(2, 4096, rng), random_group(1, 41, rng)};
  check_timing(g, 0);
}

TEST(MatmulEngine, CyclesDeepPipeline) {
  bitsim::hw::FreshSimContext ctx;
  std::mt19937 rng(3);
  std::vector<Group> g = {random_group(9, 40, rng), random_group(4, 80, rng)};  // 1- and 2-beat rows
  check_timing(g, 11);
}

TEST(MatmulEngine, CyclesWithInputGapsAndSleep) {
  // The source stalls now and then (and for 300 edges once, so the engine sleeps): a beat
  // pushed at edge p is taken at p + 1 all the same, and each output beat is popped at
  // (push edge of its completing row's last beat) + 1 + pipeline_depth + 1.
  bitsim::hw::FreshSimContext ctx;
  MatmulEngineConfig cfg;
  cfg.pipeline_depth = 4;  // the 4 in the expected edges below
  Bench b(cfg);
  std::mt19937 rng(8);
  std::vector<Group> g = {random_group(7, 90, rng), random_group(4, 17, rng)};
  b.src[0]->append(to_beats(stream_of(g)));
  b.src[0]->allow = [](uint64_t c) { return (c % 9 < 4) && !(c >= 30 && c < 330); };
  ASSERT_TRUE(b.run_tlasts(0, 1));
  expect_beats_eq(b.sink[0]->beats, expected_beats(g));
  const auto rows = completing_row_beat(g);
  ASSERT_EQ(b.sink[0]->pop_cycle.size(), rows.size());
  for (size_t k = 0; k < rows.size(); ++k)
    EXPECT_EQ(b.sink[0]->pop_cycle[k], b.src[0]->push_cycle[rows[k]] + 1 + 4 + 1) << "output beat " << k;
  EXPECT_EQ(b.engine.stats(0).stall_cycles, 0u);
}

TEST(MatmulEngine, FullOutputFifoStopsInput) {
  // n = 8: header 2 beats, x 1 beat, each row 1 beat. Beat i is taken at edge i + 1, row r
  // (beat 3 + r) is done at edge 4 + r, output beat k (rows 2k, 2k+1) is pushed at
  // 5 + 2k + 4 = 9 + 2k. With a sink that never pops and a 2-beat output FIFO, pushes happen
  // at edges 9 and 11; from edge 12 the FIFO is full and no beat is taken: beats 0..10 are
  // taken (edges 1..11), rows 0..7 are done, two output beats wait in the pipeline.
  bitsim::hw::FreshSimContext ctx;
  MatmulEngineConfig cfg;
  cfg.output_fifo_beats = 2;
  cfg.pipeline_depth = 4;  // the + 4 in the edges above
  Bench b(cfg);
  std::mt19937 rng(4);
  std::vector<Group> g = {random_group(64, 8, rng)};
  b.src[0]->append(to_beats(stream_of(g)));
  ASSERT_TRUE(b.run_with_sink_held(500, [&] {
    EXPECT_EQ(b.engine.stats(0).beats_in, 11u);
    EXPECT_EQ(b.engine.stats(0).rows, 8u);
    EXPECT_EQ(b.engine.stats(0).beats_out, 2u);
    EXPECT_EQ(b.engine.out(0).size(), 2);
    EXPECT_TRUE(b.engine.busy(0));
    EXPECT_EQ(b.reg(0, engine_reg::kStatus), engine_reg::kStatusBusy);
  }));
  expect_beats_eq(b.sink[0]->beats, expected_beats(g));
}

// ---- Errors ----------------------------------------------------------------------------

struct BadCase {
  const char* what;
  StreamError code;
  int group, row;
  std::function<void(std::vector<uint8_t>&)> corrupt;  // on a 3-group stream
  bool drop_tlast = false;  // clear TLAST of the final beat and append junk beats (+TLAST)
  size_t cut_at = 0;        // if > 0: the transfer ends (TLAST) after this many beats
};

TEST(MatmulEngine, EveryMalformedStreamGivesItsErrorNotAHang) {
  std::mt19937 rng(11);
  // Group 0: R 4, n 13 (x 2 beats, rows 1 beat); group 1: R 3, n 50 (x 7 beats, rows
  // 2 beats); group 2: R 2, n 9.
  const std::vector<Group> groups = {random_group(4, 13, rng), random_group(3, 50, rng), random_group(2, 9, rng)};
  const auto good = stream_of(groups);
  const size_t g1 = (2 + 2 + 4) * 8;  // byte offset of group 1's header
  const size_t g1_rows = g1 + (2 + 7) * 8;
  auto put32 = [](std::vector<uint8_t>& s, size_t off, uint32_t v) { std::memcpy(s.data() + off, &v, 4); };
  const std::vector<BadCase> cases = {
      {"bad magic", StreamError::BadMagic, 1, -1, [&](auto& s) { s[g1] ^= 0x01; }},
      {"bad version", StreamError::BadVersion, 1, -1, [&](auto& s) { s[g1 + 2] = 3; }},
      {"reserved flag bits", StreamError::ReservedBits, 1, -1, [&](auto& s) { s[g1 + 3] |= 0x80; }},
      {"reserved high word", StreamError::ReservedBits, 1, -1, [&](auto& s) { s[g1 + 15] = 1; }},
      {"n = 0", StreamError::BadLength, 1, -1, [&](auto& s) { put32(s, g1 + 8, 0); }},
      {"n = 4097", StreamError::BadLength, 1, -1, [&](auto& s) { put32(s, g1 + 8, 4097); }},
      {"R = 0", StreamError::ZeroRows, 1, -1, [&](auto& s) { put32(s, g1 + 4, 0); }},
      {"invalid trit 243", StreamError::InvalidTrit, 1, 2, [&](auto& s) { s[g1_rows + 2 * 16 + 9] = 243; }},
      {"invalid trit 255", StreamError::InvalidTrit, 0, 0, [&](auto& s) { s[4 * 8 + 0] = 255; }},
      {"bad magic in group 0", StreamError::BadMagic, 0, -1, [&](auto& s) { s[1] = 0; }},
      {"TLAST after group 0", StreamError::Truncated, 1, -1, {}, false, 8},
      {"TLAST inside x", StreamError::Truncated, 1, -1, {}, false, 8 + 3},
      {"TLAST inside a row", StreamError::Truncated, 1, 1, {}, false, 8 + 9 + 2 + 1},
      {"TLAST on the header", StreamError::Truncated, 1, -1, {}, false, 8 + 1},
      {"no TLAST after the last group", StreamError::TrailingData, 3, -1, {}, true},
  };
  const int R0 = groups[0].m.rows;
  for (const auto& bc : cases) {
    SCOPED_TRACE(bc.what);
    bitsim::hw::FreshSimContext ctx;
    Bench b;
    const auto bytes = test_bench::changed(good, bc.corrupt);
    const auto beats = test_bench::malformed(to_beats(bytes), bc.cut_at, bc.drop_tlast, 5, 0x1234);
    ASSERT_TRUE(b.run_one_transfer(beats)) << "hang";
    sc_core::sc_start(b.clock.period() * 50.0);
    // Every beat was taken (discarded up to TLAST), a single zero beat with TLAST ends the
    // output, preceded by the results of the rows done before the error.
    ASSERT_NO_FATAL_FAILURE(test_bench::expect_discarded_to_tlast(*b.src[0], *b.sink[0]));
    const auto& out = b.sink[0]->beats;
    if (bc.group >= 1) {
      // Group 0 completed: its results are the first beats.
      const auto want0 = expected_beats({groups[0]});
      ASSERT_GE(out.size(), want0.size() + 1);
      for (size_t i = 0; i < want0.size(); ++i) EXPECT_EQ(out[i].data, want0[i].data);
    } else {
      EXPECT_EQ(out.size(), 1u);
    }
    const EngineLaneError e = b.engine.error(0);
    EXPECT_EQ(StreamError(e.code), bc.code);
    EXPECT_EQ(e.unit, bc.group);
    EXPECT_EQ(e.row, bc.row);
    EXPECT_EQ(b.engine.stats(0).errors, 1u);
    EXPECT_TRUE(b.engine.stopped(0));
    EXPECT_EQ(b.reg(0, engine_reg::kStatus), engine_reg::kStatusError | engine_reg::kStatusStopped);
    EXPECT_EQ(b.reg(0, engine_reg::kErrorCode), uint32_t(bc.code));
    EXPECT_EQ(b.reg(0, engine_reg::kErrorUnit), uint32_t(bc.group));
    EXPECT_EQ(b.reg(0, engine_reg::kErrorRow), bc.row < 0 ? engine_reg::kNone : uint32_t(bc.row));
    (void)R0;

    // The stopped lane takes nothing until the error is cleared; then a good transfer runs.
    b.src[0]->append(to_beats(good));
    sc_core::sc_start(b.clock.period() * 200.0);
    EXPECT_EQ(b.sink[0]->tlasts, 1);
    const uint64_t taken = b.engine.stats(0).beats_in;
    EXPECT_EQ(taken, beats.size());
    b.regs.write(b.engine.config().reg_base + engine_reg::kControl, engine_reg::kControlClear);
    EXPECT_EQ(b.reg(0, engine_reg::kStatus) & engine_reg::kStatusError, 0u);
    EXPECT_EQ(b.reg(0, engine_reg::kErrorCode), 0u);
    const size_t before = out.size();
    ASSERT_TRUE(b.run_tlasts(0, 2, b.clock.cycle() + 20'000));
    const std::vector<StreamBeat> second(b.sink[0]->beats.begin() + long(before), b.sink[0]->beats.end());
    expect_beats_eq(second, expected_beats(groups));
    EXPECT_EQ(StreamError(b.engine.error(0).code), StreamError::None);
  }
}

TEST(MatmulEngine, ErrorZeroBeatTimingAndOtherLaneUnaffected) {
  // A bad magic on beat 0 with TLAST: the zero beat is pushed pipeline_depth edges after the
  // beat is taken (edge 1): pushed at 5, popped at 6. Lane 1 runs a good transfer meanwhile.
  bitsim::hw::FreshSimContext ctx;
  Bench b;
  b.src[0]->append({StreamBeat{0xDEAD, true}});
  std::mt19937 rng(12);
  std::vector<Group> g = {random_group(6, 77, rng)};
  b.src[1]->append(to_beats(stream_of(g)));
  ASSERT_TRUE(b.run([&] { return b.sink[0]->tlasts == 1 && b.sink[1]->tlasts == 1; }, 10'000));
  ASSERT_EQ(b.sink[0]->pop_cycle.size(), 1u);
  EXPECT_EQ(b.sink[0]->pop_cycle[0], 6u);
  EXPECT_EQ(StreamError(b.engine.error(0).code), StreamError::BadMagic);
  EXPECT_EQ(StreamError(b.engine.error(1).code), StreamError::None);
  expect_beats_eq(b.sink[1]->beats, expected_beats(g));
  EXPECT_EQ(b.reg(1, engine_reg::kStatus), 0u);
}

TEST(MatmulEngine, ClearDuringDiscardAppliesAtTlast) {
  bitsim::hw::FreshSimContext ctx;
  Bench b;
  std::vector<StreamBeat> bad(100, StreamBeat{0xBAD, false});
  bad.back().last = true;
  b.src[0]->allow = [](uint64_t c) { return c >= 20; };
  b.src[0]->append({StreamBeat{0xBAD, false}});
  b.src[0]->append(bad);
  sc_core::sc_start(b.clock.period() * 30.0);
  EXPECT_EQ(StreamError(b.engine.error(0).code), StreamError::BadMagic);
  EXPECT_FALSE(b.engine.stopped(0));
  EXPECT_EQ(b.reg(0, engine_reg::kStatus), engine_reg::kStatusBusy | engine_reg::kStatusError);
  b.regs.write(b.engine.config().reg_base + engine_reg::kControl, 1);
  EXPECT_EQ(StreamError(b.engine.error(0).code), StreamError::BadMagic);  // still discarding
  ASSERT_TRUE(b.run_tlasts(0, 1, 10'000));
  sc_core::sc_start(b.clock.period() * 20.0);
  EXPECT_EQ(StreamError(b.engine.error(0).code), StreamError::None);
  EXPECT_FALSE(b.engine.stopped(0));
  std::mt19937 rng(13);
  std::vector<Group> g = {random_group(3, 21, rng)};
  b.src[0]->append(to_beats(stream_of(g)));
  ASSERT_TRUE(b.run_tlasts(0, 2, b.clock.cycle() + 10'000));
  const std::vector<StreamBeat> second(b.sink[0]->beats.begin() + 1, b.sink[0]->beats.end());
  expect_beats_eq(second, expected_beats(g));
}

// ---- Registers -------------------------------------------------------------------------

TEST(MatmulEngine, RegisterDecode) {
  bitsim::hw::FreshSimContext ctx;
  Bench b;
  const uint64_t base = b.engine.config().reg_base;
  uint32_t v = 0;
  EXPECT_EQ(b.response(tlm::TLM_READ_COMMAND, 0x200), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(b.response(tlm::TLM_READ_COMMAND, -4), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(b.response(tlm::TLM_READ_COMMAND, 0x24), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(b.response(tlm::TLM_READ_COMMAND, 0x102), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(b.response(tlm::TLM_READ_COMMAND, 0, 8), tlm::TLM_BURST_ERROR_RESPONSE);
  EXPECT_EQ(b.regs.access(tlm::TLM_READ_COMMAND, base + 0x100 + engine_reg::kErrorUnit, &v), tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(v, engine_reg::kNone);
  v = 0xFFFFFFFF;
  EXPECT_EQ(b.regs.access(tlm::TLM_WRITE_COMMAND, base + engine_reg::kStatus, &v), tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(b.reg(0, engine_reg::kStatus), 0u);  // read-only: ignored
  EXPECT_EQ(b.reg(0, engine_reg::kControl), 0u);
}

TEST(MatmulEngine, ConfigValidation) {
  bitsim::hw::FreshSimContext ctx;
  Clock clk("clock", ClockConfig{});
  MatmulEngineConfig c;
  // Bad input names the config key (bitsim::Error, exit 2 through the CLI).
  const auto error_of = [&](const MatmulEngineConfig& bad, const char* name) -> std::string {
    try {
      MatmulEngine e(name, clk, bad);
    } catch (const bitsim::Error& e) {
      return e.what();
    }
    return "";
  };
  c = {};
  c.pipeline_depth = -1;
  EXPECT_NE(error_of(c, "b").find("matmul.pipeline_depth"), std::string::npos);
  c.pipeline_depth = 1025;
  EXPECT_NE(error_of(c, "b2").find("matmul.pipeline_depth"), std::string::npos);
  c = {};
  c.output_fifo_beats = 0;
  EXPECT_NE(error_of(c, "c").find("matmul.output_fifo_beats"), std::string::npos);
  c = {};
  c.reg_base = 0x43C0'0010;
  EXPECT_NE(error_of(c, "d").find("matmul.reg_base"), std::string::npos);
  for (int p : {0, model::kMaxVectors + 1}) {
    c = {};
    c.max_vectors = p;
    EXPECT_NE(error_of(c, p == 0 ? "e" : "e2").find("matmul.max_vectors"), std::string::npos) << p;
  }
}

// ---- Prefill groups (docs/prefill.md) --------------------------------------------------

struct PrefillGroup {
  model::TernaryMatrix m;
  std::vector<int8_t> x;  // V vectors of n
  int vectors = 1;
};

PrefillGroup random_prefill_group(int rows, int n, int vectors, std::mt19937& rng) {
  PrefillGroup g{random_matrix(rows, n, rng), std::vector<int8_t>(size_t(n) * size_t(vectors)), vectors};
  std::uniform_int_distribution<int> d(-128, 127);
  for (auto& v : g.x) v = int8_t(d(rng));
  return g;
}

std::vector<uint8_t> prefill_stream(const std::vector<PrefillGroup>& groups) {
  std::vector<model::GroupSpec> specs;
  for (const auto& g : groups) specs.push_back({g.x.data(), g.m.cols, &g.m, 0, g.m.rows, g.vectors});
  return model::build_stream(specs);
}

// Per group its R x V sums row-major (golden::prefill_matvec, one position at a time), two
// per beat, zero-padded per group, TLAST on the final beat; and the input beat index whose
// row completes each output beat.
std::vector<StreamBeat> prefill_beats(const std::vector<PrefillGroup>& groups, std::vector<uint64_t>* completing) {
  std::vector<StreamBeat> out;
  uint64_t pos = 0;
  for (const auto& g : groups) {
    const int n = g.m.cols, V = g.vectors;
    std::vector<int32_t> acc(size_t(g.m.rows) * size_t(V));
    golden::prefill_matvec(g.m, 0, g.m.rows, g.x.data(), V, acc.data());
    pos += 2 + uint64_t(V) * model::packed_x_bytes(n) / 8;
    const uint64_t rb = model::packed_row_bytes(n) / 8;
    for (size_t i = 0; i < acc.size(); i += 2) {
      const int32_t hi = i + 1 < acc.size() ? acc[i + 1] : 0;
      out.push_back({uint64_t(uint32_t(acc[i])) | (uint64_t(uint32_t(hi)) << 32), false});
      const size_t done = std::min(i + 1, acc.size() - 1) / size_t(V);  // the row of the beat's last result
      completing->push_back(pos + (done + 1) * rb - 1);
    }
    pos += uint64_t(g.m.rows) * rb;
  }
  out.back().last = true;
  return out;
}

TEST(MatmulEngine, PrefillGroupsEqualGoldenPerPositionWithTheirCycles) {
  // V vectors per group (1, 2, 5, 8; odd and even R x V): each row's V sums are the board's
  // sums for each position, in vector order; x takes V x ceil(n/8) beats; a row's results
  // are ready pipeline_depth edges after its last beat and leave one beat per edge.
  bitsim::hw::FreshSimContext ctx;
  MatmulEngineConfig cfg;
  cfg.max_vectors = 8;
  Bench b(cfg);
  std::mt19937 rng(37);
  const std::vector<PrefillGroup> groups = {random_prefill_group(3, 1536, 8, rng), random_prefill_group(5, 203, 5, rng),
                                            random_prefill_group(4, 999, 1, rng), random_prefill_group(1, 4096, 2, rng),
                                            random_prefill_group(7, 1536, 3, rng)};
  const auto beats = to_beats(prefill_stream(groups));
  b.src[0]->append(beats);
  ASSERT_TRUE(b.run_tlasts(0, 1));
  std::vector<uint64_t> completing;
  const auto want = prefill_beats(groups, &completing);
  expect_beats_eq(b.sink[0]->beats, want);
  for (size_t i = 0; i < beats.size(); ++i) ASSERT_EQ(b.src[0]->push_cycle[i], i) << "input beat " << i;
  const uint64_t depth = uint64_t(cfg.pipeline_depth);
  uint64_t prev = 0;
  for (size_t k = 0; k < completing.size(); ++k) {
    const uint64_t pop = std::max(completing[k] + 1 + depth + 1, k == 0 ? 0 : prev + 1);
    EXPECT_EQ(b.sink[0]->pop_cycle[k], pop) << "output beat " << k;
    prev = pop;
  }
  uint64_t rows = 0;
  for (const auto& g : groups) rows += uint64_t(g.m.rows);
  EXPECT_EQ(b.engine.stats(0).rows, rows);
  EXPECT_EQ(b.engine.stats(0).units, groups.size());
  EXPECT_EQ(b.engine.stats(0).errors, 0u);
}

TEST(MatmulEngine, ABoardEngineRefusesPrefillGroupsAndAPrefillEngineMoreVectorsThanItHolds) {
  // V - 1 sits in bits 39:32 of header beat 1, reserved on the board: ReservedBits, group 0.
  std::mt19937 rng(5);
  for (const auto& [built, sent] : {std::pair{1, 2}, std::pair{4, 5}}) {
    SCOPED_TRACE(fmt::format("engine of {} vectors, group of {}", built, sent));
    bitsim::hw::FreshSimContext ctx;
    MatmulEngineConfig cfg;
    cfg.max_vectors = built;
    Bench b(cfg);
    ASSERT_TRUE(b.run_one_transfer(to_beats(prefill_stream({random_prefill_group(2, 13, sent, rng)}))));
    sc_core::sc_start(b.clock.period() * 50.0);
    EXPECT_EQ(StreamError(b.engine.error(0).code), StreamError::ReservedBits);
    EXPECT_EQ(b.engine.error(0).unit, 0);
    EXPECT_EQ(b.engine.error(0).row, -1);
  }
}

// ---- Speed -----------------------------------------------------------------------------

TEST(MatmulEngine, SimulationSpeedOneMiBPerLane) {
  bitsim::hw::FreshSimContext ctx;
  Bench b;
  std::mt19937 rng(31);
  // A 1 MiB transfer per lane (n = 1536, 312 bytes a row, 3,361 rows in 4 groups), sent
  // 8 times back to back on both lanes: about 1.06 M cycles.
  const int reps = 8;
  std::vector<Group> g[2];
  for (int l = 0; l < 2; ++l) {
    for (int i = 0; i < 4; ++i) g[l].push_back(random_group(840 + (i == 0), 1536, rng));
    const auto beats = to_beats(stream_of(g[l]));
    for (int r = 0; r < reps; ++r) b.src[size_t(l)]->append(beats);
  }
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(b.run([&] { return b.sink[0]->tlasts == reps && b.sink[1]->tlasts == reps; }, 4'000'000));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cycles = double(b.clock.cycle());
  std::printf("[ speed    ] matmul, 8 x 1 MiB per lane, both lanes, engine + test source/sink: %.0f cycles in"
              " %.3f s = %.2f M cycles/s\n",
              cycles, s, cycles / s / 1e6);
  for (int l = 0; l < 2; ++l) {
    std::vector<StreamBeat> want;
    const auto one = expected_beats(g[l]);
    for (int r = 0; r < reps; ++r) want.insert(want.end(), one.begin(), one.end());
    expect_beats_eq(b.sink[size_t(l)]->beats, want);
  }
}

}  // namespace
}  // namespace bitsim::hw
