// TokenLoop (CIRCUITS.md 5): the token step on the board. On a tiny random model and a real
// FastBoard: the logits equal the golden BoardReference's bit for bit, each step appends
// the K and V rows the CPU quantized at the step's position, set_position moves the context,
// the step's timing components add up to the simulated time it took, and bad input is
// refused.
#include "host/token_loop.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "golden/board_reference.h"
#include "host/fast_platform.h"
#include "hw/fast/fast_board.h"
#include "base/error.h"
#include "numerics/numerics.h"
#include "support/random_model.h"

namespace bitsim::host {
namespace {

MemoryMapConfig map_config(bool online) {
  MemoryMapConfig c;
  c.kv_interleaved = online;
  return c;
}
hw::BoardConfig online_board() {
  hw::BoardConfig c;
  c.attention.variant = "online-softmax";
  return c;
}
// The memory map of a board config (the per-call format's row length follows the engine's;
// the online-softmax unit's K/V rows are interleaved).
MemoryMapConfig memory_of(const hw::BoardConfig& b) {
  MemoryMapConfig c;
  c.kv_interleaved = b.attention.kind() == model::AttentionVariant::OnlineSoftmax;
  c.per_call_row_trits = b.matmul.per_call() ? b.matmul.per_call_row_trits : 0;
  c.kv_format = b.attention.kv();
  c.kv_outlier_channels = b.attention.kv_outlier_channels;
  c.tip = b.attention.tip;
  c.attention_shared = b.attention.shared_stream();
  c.attention_group_max = b.attention.gqa_group;
  return c;
}
TokenLoopOptions options_of(const hw::BoardConfig& b) {
  TokenLoopOptions o{false, b.attention.kind()};
  o.kv_format = b.attention.kv();
  o.kv_outlier_channels = b.attention.kv_outlier_channels;
  o.tip = b.attention.tip;
  o.attention_shared = b.attention.shared_stream();
  return o;
}

struct Rig {
  // bc: the board (attention.variant, matmul.format, knobs), its memory map and the loop's options follow it.
  // kv_heads: grouped-query attention's K/V heads (0: heads).
  explicit Rig(uint32_t seed, int heads = 3, const CpuModelConfig& cpu = {}, const hw::BoardConfig& bc = {},
               const DriverConfig& driver = {}, int kv_heads = 0)
      : g(seed),
        m(testing::random_model(g, heads, 160 + int(seed % 5), 2, 400, kv_heads)),
        scales(testing::fixed_scales(m)),
        map(m.config, memory_of(bc)),
        board(bc, hw::FastBoardOptions{false, 1}),
        platform(board),
        loop(platform, map, m, scales, cpu, driver, options_of(bc)) {
    loop.load_weights();
    loop.init();
  }
  std::vector<int8_t> kv_row(uint64_t area, int pos) {
    std::vector<int8_t> row(model::kBoardHeadDim);
    board.memory().read(area + uint64_t(pos) * model::kBoardHeadDim, row.data(), row.size());
    return row;
  }
  std::mt19937 g;
  model::TernaryModel m;
  model::KvScales scales;
  MemoryMap map;
  hw::FastBoard board;
  FastPlatform platform;
  TokenLoop loop;
};

TEST(TokenLoop, LogitsEqualTheGoldenReferenceAndThePositionAdvances) {
  Rig r(5);
  golden::BoardReference ref(r.m, r.scales);
  const int tokens[] = {1, 399, 17, 17, 250};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r.loop.position(), i);
    TokenTiming t;
    const std::vector<float> got = r.loop.step(tokens[i], &t);
    const std::vector<float> want = ref.step(tokens[i]);
    ASSERT_EQ(got.size(), size_t(r.m.config.vocab_size));
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << "token " << i;
    EXPECT_EQ(r.loop.position(), i + 1);
  }
}

// matmul.format = per-call (docs/variants-host.md): every row cut into fixed rows of L = 50
// (hidden 192: 4 segments, ffn 160..164: 4 segments), one call per segment, the partial
// sums added by the CPU: the logits still equal the golden reference's bit for bit, the
// calls are segments x length splits, and each segment's partial sums cost PartialSum.
TEST(TokenLoop, PerCallFormatLogitsEqualGoldenAndCallsPerSegment) {
  hw::BoardConfig bc;
  bc.matmul.format = "per-call";
  bc.matmul.per_call_row_trits = 50;
  Rig r(5, 3, {}, bc);
  golden::BoardReference ref(r.m, r.scales);
  uint64_t want_calls = 0;
  for (const auto& grp : r.map.groups()) {
    EXPECT_TRUE(grp.per_call);
    EXPECT_EQ(grp.segments, model::per_call_segments(grp.n, 50)) << grp.name;
    EXPECT_EQ(grp.calls.size(), size_t(grp.segments)) << grp.name;  // no length split at this size
    want_calls += grp.calls.size();
  }
  const int tokens[] = {1, 399, 17};
  for (int i = 0; i < 3; ++i) {
    TokenTiming t;
    const std::vector<float> got = r.loop.step(tokens[i], &t);
    const std::vector<float> want = ref.step(tokens[i]);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << "token " << i;
    EXPECT_EQ(t.matmul_calls, want_calls);
  }
}

// The fixed call cost, counted by hand: with every register access and every cache
// maintenance free, it is the call overhead times the calls; with only the fixed part of a
// cache clean charged, two cleans per call (matmul: each lane's header + x; attention: the
// CPU's rows and headers, then the descriptors).
TEST(TokenLoop, FixedCallCostCountedByHand) {
  DriverConfig d;
  d.reg_access_ns = 0;
  d.poll_gap_ns = 50;  // polls take time (waiting, not fixed cost) so that a wait ends
  d.flush_fixed_ns = d.invalidate_fixed_ns = 0;
  d.call_overhead_ns = 1000;
  Rig a(6, 3, {}, {}, d);
  TokenTiming t;
  a.loop.step(3, &t);
  const uint64_t calls = t.matmul_calls + t.attention_calls;
  EXPECT_EQ(t.fixed_call_ps, calls * 1000 * 1000);
  d.call_overhead_ns = 0;
  d.flush_fixed_ns = 700;
  Rig b(6, 3, {}, {}, d);
  b.loop.step(3, &t);
  EXPECT_EQ(t.fixed_call_ps, 2 * calls * 700 * 1000);
  // Register accesses: one poll per wait counts, the other polls (waiting) do not, so the
  // fixed cost is below the accesses' whole time whenever a wait polled more than once.
  d.flush_fixed_ns = 0;
  d.poll_gap_ns = 0;
  d.reg_access_ns = 100;
  Rig c(6, 3, {}, {}, d);
  c.loop.step(3, &t);
  const uint64_t per_access = 100 * 1000;
  EXPECT_EQ(t.fixed_call_ps % per_access, 0u);
  // At least, per matmul call, 8 register writes and per lane a wait on S2MM and MM2S and
  // one LENGTH read; per attention call, 2 TAILDESC writes and 2 waits per lane.
  EXPECT_GE(t.fixed_call_ps, (t.matmul_calls * (8 + 2 * 3) + t.attention_calls * (2 + 2 * 2)) * per_access);
  EXPECT_LT(t.fixed_call_ps, t.matmul_ps + t.attention_ps);
}

TEST(TokenLoop, IntermediateTensorsMatchTheGoldenProbes) {
  // The same steps in the same order with the same values (the probe of each side).
  Rig r(6);
  golden::BoardReference ref(r.m, r.scales);
  struct Seen {
    int layer;
    std::string step;
    std::vector<uint8_t> bytes;
  };
  auto recorder = [](std::vector<Seen>& out) {
    return [&out](const model::StepProbe& p) {
      const void* d = p.data ? static_cast<const void*>(p.data) : static_cast<const void*>(p.idata);
      const auto* b = static_cast<const uint8_t*>(d);
      out.push_back({p.layer, p.step, std::vector<uint8_t>(b, b + size_t(p.n) * 4)});
    };
  };
  for (int tok : {3, 44}) {
    std::vector<Seen> board, gold;
    r.loop.step(tok, nullptr, recorder(board));
    ref.step(tok, recorder(gold));
    ASSERT_EQ(board.size(), gold.size());
    ASSERT_GT(board.size(), 10u);
    for (size_t k = 0; k < board.size(); ++k) {
      EXPECT_EQ(board[k].layer, gold[k].layer) << k;
      EXPECT_EQ(board[k].step, gold[k].step) << k;
      EXPECT_TRUE(board[k].bytes == gold[k].bytes) << "layer " << board[k].layer << " " << board[k].step;
    }
  }
}

TEST(TokenLoop, EachStepAppendsTheQuantizedKvRowsAtItsPosition) {
  Rig r(7);
  const int heads = r.m.config.num_heads;
  std::vector<float> k_rope[2], v[2];
  auto probe = [&](const model::StepProbe& p) {
    if (p.layer < 0 || !p.data) return;
    if (std::string(p.step) == "k_rope") k_rope[p.layer].assign(p.data, p.data + p.n);
    if (std::string(p.step) == "v") v[p.layer].assign(p.data, p.data + p.n);
  };
  for (int pos = 0; pos < 3; ++pos) {
    r.loop.step(10 + pos, nullptr, probe);
    for (int l = 0; l < 2; ++l)
      for (int hd = 0; hd < heads; ++hd) {
        std::vector<int8_t> want_k(model::kBoardHeadDim), want_v(model::kBoardHeadDim);
        num::quantize_fixed(k_rope[l].data() + hd * model::kBoardHeadDim, model::kBoardHeadDim, r.scales.k_scale(l, hd, heads),
                            want_k.data());
        num::quantize_fixed(v[l].data() + hd * model::kBoardHeadDim, model::kBoardHeadDim, r.scales.v_scale(l, hd, heads),
                            want_v.data());
        EXPECT_EQ(r.kv_row(r.map.k_area(l, hd), pos), want_k) << "layer " << l << " head " << hd << " pos " << pos;
        EXPECT_EQ(r.kv_row(r.map.v_area(l, hd), pos), want_v) << "layer " << l << " head " << hd << " pos " << pos;
        // The next row is not written yet.
        EXPECT_EQ(r.kv_row(r.map.k_area(l, hd), pos + 1), std::vector<int8_t>(model::kBoardHeadDim, 0));
      }
  }
}

TEST(TokenLoop, OnlineSoftmaxInterleavesKvRowsAndEqualsItsGolden) {
  Rig r(9, 3, {}, online_board());
  golden::BoardReference ref(r.m, r.scales, {.attention_variant = model::AttentionVariant::OnlineSoftmax});
  const int heads = r.m.config.num_heads;
  const int tokens[] = {1, 399, 17, 250};
  for (int i = 0; i < 4; ++i) {
    const uint64_t desc0 = r.loop.driver().stats().descriptors;
    const std::vector<float> got = r.loop.step(tokens[i], nullptr);
    const std::vector<float> want = ref.step(tokens[i]);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << "token " << i;
    // Per layer and lane: 2 descriptors per head (header + q, the T interleaved rows) and
    // one for the results; 3 heads on 2 lanes (2 + 1).
    EXPECT_EQ(r.loop.driver().stats().descriptors - desc0, uint64_t(2) * (2 * heads + 2)) << "token " << i;
  }
  // Row t of (layer, head): K_t at area + 192 t, V_t right behind it; the golden's rows.
  for (int l = 0; l < 2; ++l)
    for (int hd = 0; hd < heads; ++hd)
      for (int pos = 0; pos < 4; ++pos) {
        EXPECT_EQ(r.map.k_row(l, hd, pos), r.map.k_area(l, hd) + uint64_t(pos) * 192);
        EXPECT_EQ(r.map.v_row(l, hd, pos), r.map.k_area(l, hd) + uint64_t(pos) * 192 + 96);
        const std::vector<int8_t> k(ref.k_rows(l, hd) + pos * 96, ref.k_rows(l, hd) + pos * 96 + 96);
        const std::vector<int8_t> v(ref.v_rows(l, hd) + pos * 96, ref.v_rows(l, hd) + pos * 96 + 96);
        EXPECT_EQ(r.kv_row(r.map.k_area(l, hd), 2 * pos), k) << l << " " << hd << " " << pos;
        EXPECT_EQ(r.kv_row(r.map.k_area(l, hd), 2 * pos + 1), v) << l << " " << hd << " " << pos;
      }
}

TEST(TokenLoop, Int4KvWritesTheBankAndRowsOnceAndEqualsItsGolden) {
  for (int n : {0, 5}) {
    SCOPED_TRACE(n);
    hw::BoardConfig bc = online_board();
    bc.attention.kv_format = "int4";
    bc.attention.kv_outlier_channels = n;
    Rig r(9, 3, {}, bc), online(9, 3, {}, online_board());
    golden::BoardReference ref(r.m, r.scales,
                               {.attention_variant = model::AttentionVariant::OnlineSoftmax,
                                .kv_format = model::KvFormat::Int4,
                                .kv_outlier_channels = n});
    const int heads = r.m.config.num_heads, layers = r.m.config.num_layers;
    const model::KvStorage st = model::kv_storage(model::KvFormat::Int4, n, model::kBoardHeadDim);
    const int tokens[] = {1, 399, 17, 250};
    for (int i = 0; i < 4; ++i) {
      const uint64_t desc0 = r.loop.driver().stats().descriptors;
      TokenTiming t4, t8;
      const std::vector<float> got = r.loop.step(tokens[i], &t4);
      const std::vector<float> want = ref.step(tokens[i]);
      online.loop.step(tokens[i], &t8);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << "token " << i;
      // 2 descriptors per head (header + q; the bank and the T rows) and one for the results.
      EXPECT_EQ(r.loop.driver().stats().descriptors - desc0, uint64_t(2) * (2 * heads + 2)) << "token " << i;
      // DDR bytes follow the whole storage: per (layer, head) the bank and T rows of
      // st.per_position() bytes instead of T rows of 192.
      const uint64_t T = uint64_t(i) + 1, lh = uint64_t(layers) * heads;
      EXPECT_EQ(t8.attention_bytes - t4.attention_bytes, lh * (T * (192 - st.per_position()) - st.bank)) << i;
    }
    // The bank at the head of each area, the rows behind it: the golden's bytes.
    for (int l = 0; l < layers; ++l)
      for (int hd = 0; hd < heads; ++hd) {
        std::vector<uint8_t> bank(st.bank);
        r.board.memory().read(r.map.k_area(l, hd), bank.data(), bank.size());
        EXPECT_EQ(0, std::memcmp(bank.data(), ref.int4_bank(l, hd), st.bank)) << l << " " << hd;
        for (int pos = 0; pos < 4; ++pos) {
          EXPECT_EQ(r.map.k_row(l, hd, pos), r.map.k_area(l, hd) + st.bank + uint64_t(pos) * st.per_position());
          EXPECT_EQ(r.map.v_row(l, hd, pos), r.map.k_row(l, hd, pos) + st.k.total());
          std::vector<uint8_t> k(st.k.total()), v(st.v.total());
          r.board.memory().read(r.map.k_row(l, hd, pos), k.data(), k.size());
          r.board.memory().read(r.map.v_row(l, hd, pos), v.data(), v.size());
          EXPECT_EQ(0, std::memcmp(k.data(), ref.int4_k_rows(l, hd) + pos * st.k.total(), k.size()));
          EXPECT_EQ(0, std::memcmp(v.data(), ref.int4_v_rows(l, hd) + pos * st.v.total(), v.size()));
        }
      }
    // The KV cache region shrinks with the format.
    EXPECT_EQ(r.map.kv_storage().per_position(), st.per_position());
  }
}

// kv.format = tip (docs/tip.md) with regions of 16 and a recent window of one region, so that
// regions leave the window from position 31 on: the host places them by the masses the unit
// returns, re-encodes the demoted rows into slots of their new tier, and streams each region
// at its tier. Every token's logits equal the golden counterpart's; at the end the region
// tables (tiers, importance, queries) and every stored row are the golden's; the attention
// reads, against TIP with every region at KVQ8, exactly the bytes the demotions saved.
TEST(TokenLoop, TipPlacesRegionsReencodesTheirRowsAndEqualsItsGolden) {
  for (const int lanes : {4, 8}) {
    SCOPED_TRACE(lanes);
    const model::TipSettings tip{.region = 16, .sink = lanes == 4 ? 16 : 0, .recent = 16, .kvq8_regions = 1,
                                 .lane_regions = 1, .lanes = lanes};
    model::TipSettings all8 = tip;
    all8.kvq8_regions = 2048;
    hw::BoardConfig bc = online_board(), bc8 = online_board();
    bc.attention.kv_format = bc8.attention.kv_format = "tip";
    bc.attention.tip = tip;
    bc8.attention.tip = all8;
    Rig r(11, 3, {}, bc), r8(11, 3, {}, bc8);
    golden::BoardReferenceOptions go{.attention_variant = model::AttentionVariant::OnlineSoftmax,
                                     .kv_format = model::KvFormat::Tip};
    go.tip = tip;
    golden::BoardReference ref(r.m, r.scales, go);
    const int heads = r.m.config.num_heads, layers = r.m.config.num_layers, R = tip.region;
    const int n = 5 * R + 3;  // regions 0..5; the last partial
    TokenTiming t, t8;
    for (int i = 0; i < n; ++i) {
      const int token = int((i * 37 + 11) % r.m.config.vocab_size);
      const uint64_t desc0 = r.loop.driver().stats().descriptors;
      const std::vector<float> got = r.loop.step(token, &t);
      const std::vector<float> want = ref.step(token);
      r8.loop.step(token, &t8);
      ASSERT_EQ(got.size(), want.size());
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << "token " << i;
      // Per layer's call, per head: header + q + tags, the bank, one per region; per lane one
      // for the results.
      const uint64_t regions = uint64_t(i / R + 1);
      EXPECT_EQ(r.loop.driver().stats().descriptors - desc0, uint64_t(layers) * (uint64_t(heads) * (2 + regions) + 2))
          << "token " << i;
    }
    // The tables and the rows: the golden's. Some regions left KVQ8 (both lower tiers used).
    int demoted[3] = {};
    uint64_t saved = 0;
    for (int l = 0; l < layers; ++l)
      for (int hd = 0; hd < heads; ++hd) {
        const std::vector<model::TipTier> tiers = r.loop.tip_cache().tiers(l, hd, n);
        const model::TipRegions& want = ref.tip_regions(l, hd);
        for (int g = 0; g < int(tiers.size()); ++g) {
          EXPECT_EQ(tiers[size_t(g)], want.tier(g)) << l << " " << hd << " region " << g;
          EXPECT_EQ(r.loop.tip_cache().regions(l, hd).importance(g), want.importance(g)) << l << " " << hd << " " << g;
          EXPECT_EQ(r.loop.tip_cache().regions(l, hd).queries(g), want.queries(g)) << l << " " << hd << " " << g;
          ++demoted[int(tiers[size_t(g)])];
          if (g < int(tiers.size()) - 1)
            saved += uint64_t(R) * (192 - model::tip_row_bytes(tiers[size_t(g)], lanes, model::kBoardHeadDim));
        }
        const std::vector<TipCache::Segment> segs = r.loop.tip_cache().segments(l, hd, n);
        for (int pos = 0; pos < n; ++pos) {
          const model::TipTier tier = tiers[size_t(pos / R)];
          std::vector<uint8_t> row(model::tip_row_bytes(tier, lanes, model::kBoardHeadDim));
          r.board.memory().read(segs[size_t(pos / R)].addr + uint64_t(pos % R) * row.size(), row.data(), row.size());
          EXPECT_EQ(0, std::memcmp(row.data(), ref.tip_row(l, hd, pos), row.size())) << l << " " << hd << " " << pos;
        }
        std::vector<uint8_t> bank(model::tip_bank_bytes(lanes, model::kBoardHeadDim)), want_bank(bank.size());
        r.board.memory().read(r.map.k_area(l, hd), bank.data(), bank.size());
        model::write_tip_bank(model::tip_bank(&r.scales.k_channel[(size_t(l) * heads + hd) * model::kBoardHeadDim],
                                              r.scales.v[size_t(l) * heads + hd], lanes, model::kBoardHeadDim),
                              want_bank.data());
        EXPECT_EQ(bank, want_bank) << l << " " << hd;
      }
    EXPECT_GT(demoted[int(model::TipTier::Kvq4Lanes)], 0);
    EXPECT_GT(demoted[int(model::TipTier::Kvq4)], 0);
    EXPECT_EQ(t8.attention_bytes - t.attention_bytes, saved);
  }
}

// Timing-only runs at a context T (set_position): the tables and slots as a run from 0 with no
// attention mass leaves them, the oldest regions demoted first.
TEST(TokenLoop, TipSetPositionReplaysThePlacementsWithoutMass) {
  hw::BoardConfig bc = online_board();
  bc.attention.kv_format = "tip";
  bc.attention.tip = {.region = 16, .sink = 16, .recent = 32, .kvq8_regions = 1, .lane_regions = 2, .lanes = 4};
  Rig r(12, 2, {}, bc);
  r.loop.set_position(150);
  // Regions 0 (sink), then 1..6 left the window (at 47, 63, ..., 127): 1 keeps KVQ8, 2 and 3
  // take the lanes, 4..6 drop to KVQ4 (no mass: a leaving region never beats an older one);
  // 7..9 are in the window.
  const std::vector<model::TipTier> tiers = r.loop.tip_cache().tiers(0, 1, 150);
  using T = model::TipTier;
  EXPECT_EQ(tiers, (std::vector<T>{T::Kvq8, T::Kvq8, T::Kvq4Lanes, T::Kvq4Lanes, T::Kvq4, T::Kvq4, T::Kvq4, T::Kvq8,
                                   T::Kvq8, T::Kvq8}));
  TokenTiming t;
  r.loop.step(5, &t);
  EXPECT_EQ(r.loop.position(), 151);
  // A second set_position starts the tables again.
  r.loop.set_position(20);
  EXPECT_EQ(r.loop.tip_cache().tiers(0, 1, 20), (std::vector<T>{T::Kvq8, T::Kvq8}));
}

TEST(TokenLoop, RefusesAnAttentionVariantWithoutItsKvLayout) {
  Rig r(10);
  for (bool interleaved : {false, true}) {
    const MemoryMap map(r.m.config, map_config(interleaved));
    const auto v = interleaved ? model::AttentionVariant::TwoPhase : model::AttentionVariant::OnlineSoftmax;
    EXPECT_THROW(TokenLoop(r.platform, map, r.m, r.scales, {}, DriverConfig{}, TokenLoopOptions{false, v}), Error);
  }
  const MemoryMap map(r.m.config, map_config(true));
  EXPECT_THROW(TokenLoop(r.platform, map, r.m, r.scales, {}, DriverConfig{},
                         TokenLoopOptions{true, model::AttentionVariant::OnlineSoftmax}),
               Error);
}

TEST(TokenLoop, SetPositionMovesTheContext) {
  Rig r(8);
  r.loop.set_position(200);
  EXPECT_EQ(r.loop.position(), 200);
  TokenTiming t;
  r.loop.step(5, &t);
  EXPECT_EQ(r.loop.position(), 201);
  // The row went to position 200; nothing before it was written.
  EXPECT_NE(r.kv_row(r.map.k_area(0, 0), 200), std::vector<int8_t>(model::kBoardHeadDim, 0));
  EXPECT_EQ(r.kv_row(r.map.k_area(0, 0), 0), std::vector<int8_t>(model::kBoardHeadDim, 0));
  EXPECT_EQ(r.kv_row(r.map.k_area(0, 0), 199), std::vector<int8_t>(model::kBoardHeadDim, 0));
  // The attention reads T = 201 rows per head: a longer call than at position 0.
  Rig r0(8);
  TokenTiming t0;
  r0.loop.step(5, &t0);
  EXPECT_GT(t.attention_ps, t0.attention_ps);
  EXPECT_GT(t.attention_bytes, t0.attention_bytes);
  // Out of the KV cache.
  EXPECT_THROW(r.loop.set_position(-1), Error);
  EXPECT_THROW(r.loop.set_position(model::kKvPositions), Error);
  r.loop.set_position(model::kKvPositions - 1);
  r.loop.step(5, nullptr);
  EXPECT_EQ(r.loop.position(), model::kKvPositions);
  EXPECT_THROW(r.loop.step(5, nullptr), Error);  // the context is full
}

TEST(TokenLoop, Int4ContextPast512EqualsItsGoldenAndEndsAtTheMapsPositions) {
  // docs/variants-attention.md 8.8: the KV areas of 700 positions (the INT4 unit's T range
  // goes to 2048); every token's logits are the golden's, and the context ends at the
  // memory map's positions.
  hw::BoardConfig bc = online_board();
  bc.attention.kv_format = "int4";
  std::mt19937 g(13);
  const model::TernaryModel m = testing::random_model(g, 2, 160, 2, 400);
  const model::KvScales scales = testing::fixed_scales(m);
  MemoryMapConfig mc = memory_of(bc);
  mc.kv_positions = 700;
  const MemoryMap map(m.config, mc);
  hw::FastBoard board(bc, hw::FastBoardOptions{false, 1});
  FastPlatform platform(board);
  TokenLoop loop(platform, map, m, scales, {}, {}, options_of(bc));
  loop.load_weights();
  loop.init();
  golden::BoardReferenceOptions go{.attention_variant = model::AttentionVariant::OnlineSoftmax,
                                   .kv_format = model::KvFormat::Int4};
  go.context = 700;
  golden::BoardReference ref(m, scales, go);
  TokenTiming t511, t699;
  for (int i = 0; i < 700; ++i) {
    const int token = 1 + (i * 37) % 399;
    const std::vector<float> got = loop.step(token, i == 511 ? &t511 : i == 699 ? &t699 : nullptr);
    const std::vector<float> want = ref.step(token);
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << "token " << i;
  }
  EXPECT_GT(t699.attention_bytes, t511.attention_bytes);  // T = 700 rows against 512
  EXPECT_THROW(loop.step(5, nullptr), Error);  // the context is full
  EXPECT_THROW(loop.set_position(700), Error);
  loop.set_position(699);
  EXPECT_EQ(loop.position(), 699);
}

// The fast platform without its quiet-time hint: every poll is made.
class PollEveryTime : public Platform {
 public:
  explicit PollEveryTime(FastPlatform& p) : p_(p) {}
  uint32_t read32(uint64_t a, uint64_t ps) override { return p_.read32(a, ps); }
  void write32(uint64_t a, uint32_t v, uint64_t ps) override { p_.write32(a, v, ps); }
  void spend(uint64_t ps) override { p_.spend(ps); }
  uint64_t now_ps() const override { return p_.now_ps(); }
  void mem_read(uint64_t a, void* d, size_t n) override { p_.mem_read(a, d, n); }
  void mem_write(uint64_t a, const void* s, size_t n) override { p_.mem_write(a, s, n); }
  uint64_t pl_bytes_read() const override { return p_.pl_bytes_read(); }
  hw::DramActivity dram_activity() override { return p_.dram_activity(); }
  bool dma_has_sg(int id) const override { return p_.dma_has_sg(id); }
  const std::vector<TransferRecord>& transfers() const override { return p_.transfers(); }

 private:
  FastPlatform& p_;
};

TEST(TokenLoop, PollsSkippedWhileTheFastBoardIsQuietAreCountedExactly) {
  // DmaDriver::wait_idle counts the polls the fast board says would read the same status
  // (FastBoard::quiet_until_ps) instead of making them: the same times, poll counts,
  // transfers and logits as making every poll, on both attention units.
  for (const hw::BoardConfig& bc : {hw::BoardConfig{}, online_board()}) {
    std::mt19937 g(21);
    const model::TernaryModel m = testing::random_model(g, 3, 200, 2, 400);
    const model::KvScales scales = testing::fixed_scales(m);
    const MemoryMap map(m.config, memory_of(bc));
    hw::FastBoard b1(bc, hw::FastBoardOptions{false, 1}), b2(bc, hw::FastBoardOptions{false, 1});
    FastPlatform skipping(b1), f2(b2);
    PollEveryTime polling(f2);
    TokenLoop a(skipping, map, m, scales, {}, {}, options_of(bc)), b(polling, map, m, scales, {}, {}, options_of(bc));
    for (TokenLoop* l : {&a, &b}) {
      l->load_weights();
      l->init();
    }
    for (int i = 0; i < 12; ++i) {
      TokenTiming ta, tb;
      const int token = 1 + (i * 53) % 399;
      const std::vector<float> la = a.step(token, &ta), lb = b.step(token, &tb);
      ASSERT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * 4)) << "token " << i;
      EXPECT_EQ(ta.total_ps(), tb.total_ps()) << "token " << i;
      EXPECT_EQ(ta.matmul_ps, tb.matmul_ps) << "token " << i;
      EXPECT_EQ(ta.attention_ps, tb.attention_ps) << "token " << i;
      EXPECT_EQ(ta.fixed_call_ps, tb.fixed_call_ps) << "token " << i;
    }
    EXPECT_EQ(skipping.now_ps(), polling.now_ps());
    EXPECT_EQ(a.driver().stats().polls, b.driver().stats().polls);
    EXPECT_GT(a.driver().stats().polls, 1000u);  // the waits poll many times
    EXPECT_TRUE(skipping.transfers() == polling.transfers());
  }
}

TEST(TokenLoop, RefusesATokenOutsideTheVocabulary) {
  Rig r(9);
  EXPECT_THROW(r.loop.step(-1, nullptr), Error);
  EXPECT_THROW(r.loop.step(r.m.config.vocab_size, nullptr), Error);
  EXPECT_EQ(r.loop.position(), 0);
}

TEST(TokenLoop, RefusesAModelWhoseHeadDimIsNotTheUnits) {
  std::mt19937 g(1);
  model::TernaryModel m = testing::random_model(g, 2, 160, 1, 300);
  m.config.num_heads = m.config.num_kv_heads = 3;  // head_dim 64
  const auto s = testing::fixed_scales(m);
  const MemoryMap map(testing::random_model(g, 2, 160, 1, 300).config, MemoryMapConfig{});
  hw::FastBoard board(hw::BoardConfig{});
  FastPlatform p(board);
  EXPECT_THROW(TokenLoop(p, map, m, s, CpuModelConfig{}, DriverConfig{}), Error);
}

// Sums what the observer sees.
struct Tally : StepObserver {
  uint64_t cpu_ps = 0, matmul_ps = 0, attention_ps = 0, cpu_steps = 0, matmul_calls = 0, attention_calls = 0;
  uint64_t token_begin = 0, token_end = 0, last_end = 0;
  bool ordered = true;
  void token(int, int, uint64_t b, uint64_t e) override {
    token_begin = b;
    token_end = e;
  }
  void cpu_step(CpuStep, uint64_t, uint64_t, int, int, uint64_t b, uint64_t e) override {
    cpu_ps += e - b;
    ++cpu_steps;
    ordered &= b >= last_end;
    last_end = e;
  }
  void call(const char* kind, const std::string&, int, int, int, uint64_t b, uint64_t e) override {
    (std::string(kind) == "matmul" ? matmul_ps : attention_ps) += e - b;
    ++(std::string(kind) == "matmul" ? matmul_calls : attention_calls);
    ordered &= b >= last_end;
    last_end = e;
  }
};

TEST(TokenLoop, TimingComponentsAddUpToTheSimulatedTime) {
  Rig r(10);
  Tally tally;
  r.loop.set_observer(&tally);
  r.loop.step(1, nullptr);  // first token: the fast board's oracle runs
  for (int i = 0; i < 2; ++i) {
    tally = Tally{};
    const uint64_t t0 = r.platform.now_ps();
    const uint64_t read0 = r.board.bytes_read();
    TokenTiming t;
    r.loop.step(20 + i, &t);
    const uint64_t t1 = r.platform.now_ps();
    EXPECT_EQ(t.total_ps(), t.matmul_ps + t.attention_ps + t.cpu_ps);
    // Everything the step spends is in one of the three columns.
    EXPECT_EQ(t.total_ps(), t1 - t0);
    EXPECT_EQ(tally.token_begin, t0);
    EXPECT_EQ(tally.token_end, t1);
    EXPECT_TRUE(tally.ordered);
    EXPECT_EQ(tally.cpu_ps, t.cpu_ps);
    EXPECT_EQ(tally.matmul_ps, t.matmul_ps);
    EXPECT_EQ(tally.attention_ps, t.attention_ps);
    // Calls: 4 matrix groups a layer (each one call here) and the lm_head; one attention call a layer.
    size_t matmul_calls = 0;
    for (const auto& grp : r.map.groups()) matmul_calls += grp.calls.size();
    EXPECT_EQ(t.matmul_calls, matmul_calls);
    EXPECT_EQ(tally.matmul_calls, matmul_calls);
    EXPECT_EQ(t.attention_calls, uint64_t(r.m.config.num_layers));
    EXPECT_EQ(tally.attention_calls, uint64_t(r.m.config.num_layers));
    EXPECT_EQ(t.dma_transfers, 4 * (t.matmul_calls + t.attention_calls));
    EXPECT_EQ(t.bytes_read, r.board.bytes_read() - read0);
    EXPECT_GT(t.attention_bytes, 0u);
    EXPECT_LT(t.attention_bytes, t.bytes_read);
    // The CPU column: the cost model over the steps the loop ran (every one at least its
    // fixed cost).
    EXPECT_GE(t.cpu_ps, tally.cpu_steps * uint64_t(CpuModelConfig{}.step_overhead_ns * 1000));
  }
}

TEST(TokenLoop, CpuColumnFollowsTheCostModel) {
  // Doubling every CPU coefficient doubles the CPU column and changes no value the loop
  // computes. Whole-ns coefficients, so that no step's picoseconds are rounded.
  CpuModelConfig once;
  once.step_overhead_ns = 2000;
  for (int i = 0; i < kCpuSteps; ++i) once.ns_per_element[size_t(i)] = double(1 + i);
  once.write_ns_per_byte = 1;
  CpuModelConfig twice = once;
  twice.step_overhead_ns *= 2;
  for (auto& v : twice.ns_per_element) v *= 2;
  twice.write_ns_per_byte *= 2;
  Rig a(11, 3, once), b(11, 3, twice);
  TokenTiming ta, tb;
  const auto la = a.loop.step(3, &ta);
  const auto lb = b.loop.step(3, &tb);
  EXPECT_GT(ta.cpu_ps, 0u);
  EXPECT_EQ(tb.cpu_ps, 2 * ta.cpu_ps);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * 4));
}

// load_weights packs the rows on any number of host threads: the DDR image is the same
// bytes, page for page, in the board's stream and in the per-call format's.
TEST(TokenLoop, WeightsImageIsTheSameBytesOnAnyNumberOfPackingThreads) {
  for (const char* format : {"header", "per-call"}) {
    hw::BoardConfig bc;
    bc.matmul.format = format;
    std::mt19937 g(11);
    const model::TernaryModel m = testing::random_model(g, 3, 162, 2, 400);
    const model::KvScales scales = testing::fixed_scales(m);
    const MemoryMap map(m.config, memory_of(bc));
    std::vector<std::vector<uint8_t>> images;
    for (int threads : {1, 3}) {
      hw::FastBoard board(bc, hw::FastBoardOptions{false, 1});
      FastPlatform platform(board);
      TokenLoop loop(platform, map, m, scales, {}, {}, options_of(bc));
      loop.load_weights(threads);
      std::vector<uint8_t> image;
      board.memory().for_each_page([&](uint64_t addr, size_t n) {
        const size_t at = image.size();
        image.resize(at + 8 + n);
        std::memcpy(image.data() + at, &addr, 8);
        board.memory().read(addr, image.data() + at + 8, n);
      });
      images.push_back(std::move(image));
    }
    EXPECT_GT(images[0].size(), 0u) << format;
    EXPECT_TRUE(images[0] == images[1]) << format << ": the image differs between 1 and 3 packing threads";
  }
}

// Grouped-query attention (4 query heads, 2 K/V heads): in every attention variant and KV
// format the loop's logits equal the golden reference's bit for bit over tokens that take TIP
// past its first placements; the cache holds one area per (layer, K/V head), written once a
// position; every query head's descriptors read its group's K/V area.
TEST(TokenLoop, GroupedQueryHeadsReadTheirGroupsKvAreaAndEqualTheGolden) {
  hw::BoardConfig online = online_board(), int4 = online_board(), tip = online_board();
  int4.attention.kv_format = "int4";
  int4.attention.kv_outlier_channels = 3;
  tip.attention.kv_format = "tip";
  tip.attention.tip = {.region = 16, .sink = 0, .recent = 16, .kvq8_regions = 1, .lane_regions = 1, .lanes = 4};
  for (const hw::BoardConfig& bc : {hw::BoardConfig{}, online, int4, tip}) {
    SCOPED_TRACE(bc.attention.variant + " " + bc.attention.kv_format);
    Rig r(11, 4, {}, bc, {}, 2);
    ASSERT_EQ(r.m.config.group(), 2);
    golden::BoardReference ref(r.m, r.scales,
                               {.attention_variant = bc.attention.kind(), .kv_format = bc.attention.kv(),
                                .kv_outlier_channels = bc.attention.kv_outlier_channels, .tip = bc.attention.tip});
    const int n = bc.attention.kv() == model::KvFormat::Tip ? 40 : 5;
    for (int i = 0; i < n; ++i) {
      const int tok = (i * 37 + 1) % 400;
      const std::vector<float> got = r.loop.step(tok, nullptr), want = ref.step(tok);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << "token " << i;
    }
    for (const auto& region : r.map.regions())  // 2 layers x 2 K/V heads
      if (region.name == "kv cache") EXPECT_EQ(region.bytes, 4 * (r.map.k_area(0, 1) - r.map.k_area(0, 0)));
    if (bc.attention.kv() != model::KvFormat::Int8 || bc.attention.kind() != model::AttentionVariant::TwoPhase) continue;
    for (int l = 0; l < 2; ++l)
      for (int g = 0; g < 2; ++g)
        for (int pos = 0; pos < n; ++pos) {
          std::vector<int8_t> want(model::kBoardHeadDim);
          std::memcpy(want.data(), ref.k_rows(l, g) + pos * model::kBoardHeadDim, model::kBoardHeadDim);
          EXPECT_EQ(r.kv_row(r.map.k_area(l, g), pos), want) << l << " " << g << " " << pos;
        }
  }
}

// The shared-stream unit (docs/variants-attention.md 9) on 4 query heads and 2 K/V heads: in
// every attention variant and KV format the loop's logits are the golden reference's bit for
// bit (the golden runs each query head as for one pass per head: the same function), one pass
// per K/V head (one per lane) instead of one per query head, so fewer descriptors, fewer
// attention bytes and less attention time than per head.
TEST(TokenLoop, SharedStreamPassesEqualTheGoldenAndReadEachKvRowOnce) {
  hw::BoardConfig online = online_board(), int4 = online_board(), tip = online_board();
  int4.attention.kv_format = "int4";
  int4.attention.kv_outlier_channels = 3;
  tip.attention.kv_format = "tip";
  tip.attention.tip = {.region = 16, .sink = 0, .recent = 16, .kvq8_regions = 1, .lane_regions = 1, .lanes = 4};
  for (const hw::BoardConfig& per_head : {hw::BoardConfig{}, online, int4, tip}) {
    hw::BoardConfig bc = per_head;
    bc.attention.gqa = "shared-stream";
    bc.attention.gqa_group = 2;
    SCOPED_TRACE(bc.attention.variant + " " + bc.attention.kv_format);
    Rig r(11, 4, {}, bc, {}, 2), p(11, 4, {}, per_head, {}, 2);
    golden::BoardReference ref(r.m, r.scales,
                               {.attention_variant = bc.attention.kind(), .kv_format = bc.attention.kv(),
                                .kv_outlier_channels = bc.attention.kv_outlier_channels, .tip = bc.attention.tip});
    const int n = bc.attention.kv() == model::KvFormat::Tip ? 40 : 5;
    for (int i = 0; i < n; ++i) {
      const int tok = (i * 37 + 1) % 400;
      TokenTiming ts, tp;
      const std::vector<float> got = r.loop.step(tok, &ts), want = ref.step(tok), per = p.loop.step(tok, &tp);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << "token " << i;
      ASSERT_EQ(0, std::memcmp(per.data(), want.data(), per.size() * 4)) << "token " << i;
      EXPECT_EQ(ts.attention_calls, tp.attention_calls);
      EXPECT_LT(ts.attention_bytes, tp.attention_bytes) << "token " << i;
      EXPECT_LT(ts.attention_ps, tp.attention_ps) << "token " << i;
    }
    EXPECT_LT(r.loop.driver().stats().descriptors, p.loop.driver().stats().descriptors);
  }
}

// An odd number of K/V heads (6 query heads on 3 K/V heads, G = 2): lane 0 takes 2 groups (4
// query heads), lane 1 one; the per-head layout's 3 heads a lane would split a group. The
// logits are the golden reference's on both the two-phase and the INT4 unit.
TEST(TokenLoop, SharedStreamOddKvHeadsGiveLaneZeroTheExtraGroup) {
  hw::BoardConfig two, int4 = online_board();
  int4.attention.kv_format = "int4";
  for (hw::BoardConfig bc : {two, int4}) {
    bc.attention.gqa = "shared-stream";
    SCOPED_TRACE(bc.attention.kv_format);
    Rig r(5, 6, {}, bc, {}, 3);
    ASSERT_EQ(r.m.config.group(), 2);
    EXPECT_EQ(r.map.heads_per_lane(), 4);
    golden::BoardReference ref(r.m, r.scales,
                               {.attention_variant = bc.attention.kind(), .kv_format = bc.attention.kv(),
                                .kv_outlier_channels = bc.attention.kv_outlier_channels, .tip = bc.attention.tip});
    for (int i = 0; i < 4; ++i) {
      const int tok = (i * 53 + 7) % 400;
      const std::vector<float> got = r.loop.step(tok, nullptr), want = ref.step(tok);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << "token " << i;
    }
  }
}

}  // namespace
}  // namespace bitsim::host
