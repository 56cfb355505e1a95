// MemoryMap: the DDR layout of every DMA buffer and the contiguous-memory budget.
#include "host/memory_map.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>

#include "base/error.h"
#include "model/packed_image.h"

namespace bitsim::host {
namespace {

MemoryMapConfig roomy() {
  MemoryMapConfig c;
  c.cma_bytes = 256ull << 20;
  return c;
}

TEST(MemoryMap, BitnetLargeImageMatchesTheBoardFigure) {
  const MemoryMap m(model::ModelConfig::bitnet_large(), roomy());
  uint64_t image = 0;
  for (const auto& g : m.groups())
    for (const auto& c : g.calls)
      for (const auto& s : c.lane) image += s.bytes;
  // Rows + per-call header and x slots: docs/packed-image.md's reading of 141.3 MiB.
  EXPECT_EQ(image, 148132496u);
  EXPECT_NEAR(double(image) / 1048576.0, 141.3, 0.05);
}

TEST(MemoryMap, LanesSplitRowsAndStreamsAreContiguous) {
  const MemoryMap m(model::ModelConfig::bitnet_large(), roomy());
  const auto& qkv = m.qkv(0);
  ASSERT_EQ(qkv.calls.size(), 1u);
  const auto& l0 = qkv.calls[0].lane[0];
  const auto& l1 = qkv.calls[0].lane[1];
  EXPECT_EQ(l0.rows, 2304);
  EXPECT_EQ(l1.rows, 2304);
  EXPECT_EQ(l1.row_begin, 2304);
  EXPECT_EQ(l0.rows_addr, l0.addr + 16 + 1536);
  EXPECT_EQ(l0.bytes, 16u + 1536u + 2304u * 312u);
  EXPECT_EQ(m.down(3).calls[0].lane[0].bytes, 16u + 4096u + 768u * 824u);
  const auto& lm = m.lm_head();
  ASSERT_EQ(lm.calls.size(), 1u);  // 16001 rows x 312 B per lane fits 23 bits
  EXPECT_EQ(lm.calls[0].lane[0].rows + lm.calls[0].lane[1].rows, 32002);
}

// The down projection of a 6912-wide FFN (2B4T's) is longer than the engine's 4096: its calls
// come in two segments of 3456, each call's stream a header, x of 3456 and the lane's rows of
// 3456 trits; the other groups stay one segment of their own row length. With prefill the slot
// holds P vectors of the segment.
TEST(MemoryMap, RowsLongerThanTheEngineTakesGoInSegmentCalls) {
  for (const int P : {1, 4}) {
    SCOPED_TRACE(P);
    auto c = roomy();
    c.tokens_per_pass = P;
    const model::ModelConfig cfg = model::ModelConfig::tiny_ffn6912();
    const MemoryMap m(cfg, c);
    const MatmulGroup& down = m.down(1);
    EXPECT_EQ(down.n, 6912);
    EXPECT_EQ(down.segments, 2);
    EXPECT_EQ(down.row_trits, 3456);
    EXPECT_FALSE(down.per_call);
    ASSERT_EQ(down.calls.size(), 2u);
    for (int seg = 0; seg < 2; ++seg) {
      const MatmulCall& call = down.calls[size_t(seg)];
      EXPECT_EQ(call.segment, seg);
      int rows = 0;
      for (const LaneStream& s : call.lane) {
        EXPECT_EQ(s.rows_addr - s.addr, 16u + uint64_t(P) * 3456u);
        EXPECT_EQ(s.bytes, 16u + uint64_t(P) * 3456u + uint64_t(s.rows) * model::packed_row_bytes(3456));
        rows += s.rows;
      }
      EXPECT_EQ(rows, cfg.hidden_size);
    }
    // A call of V vectors moves the stream's start back to hold V segments of x.
    if (P > 1) {
      const MatmulCall two = m.with_vectors(down, down.calls[1], 2);
      EXPECT_EQ(two.lane[0].rows_addr - two.lane[0].addr, 16u + 2u * 3456u);
    }
    for (const MatmulGroup* g : {&m.qkv(0), &m.o(0), &m.gate_up(0), &m.lm_head()}) {
      EXPECT_EQ(g->segments, 1) << g->name;
      EXPECT_EQ(g->row_trits, g->n) << g->name;
    }
  }
}

TEST(MemoryMap, NarrowLengthRegisterSplitsTheLmHead) {
  auto c = roomy();
  c.max_transfer_bytes = (1u << 22) - 1;  // 22 bits
  const MemoryMap m(model::ModelConfig::bitnet_large(), c);
  const auto& lm = m.lm_head();
  ASSERT_EQ(lm.calls.size(), 2u);
  int rows = 0;
  for (const auto& call : lm.calls)
    for (const auto& s : call.lane) {
      EXPECT_LE(s.bytes, c.max_transfer_bytes);
      rows += s.rows;
    }
  EXPECT_EQ(rows, 32002);
}

TEST(MemoryMap, RegionsDoNotOverlapAndStayInsideTheCma) {
  const auto c = roomy();
  const MemoryMap m(model::ModelConfig::bitnet_large(), c);
  auto r = m.regions();
  std::sort(r.begin(), r.end(), [](const Region& a, const Region& b) { return a.addr < b.addr; });
  for (size_t i = 1; i < r.size(); ++i) EXPECT_LE(r[i - 1].addr + r[i - 1].bytes, r[i].addr) << r[i].name;
  EXPECT_GE(r.front().addr, c.cma_base);
  EXPECT_LE(r.back().addr + r.back().bytes, c.cma_base + c.cma_bytes);
  EXPECT_EQ(m.descriptors(0) % 64, 0u);
  EXPECT_EQ(m.v_area(0, 0) - m.k_area(0, 0), 512u * 96u);
}

TEST(MemoryMap, Int8LmHeadIsRefusedWithTheSizes) {
  auto c = roomy();
  c.cma_bytes = 192ull << 20;
  EXPECT_NO_THROW(MemoryMap(model::ModelConfig::bitnet_large(), c));
  c.int8_lm_head = true;
  try {
    MemoryMap m(model::ModelConfig::bitnet_large(), c);
    FAIL() << "an INT8 lm_head fitted";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("INT8 lm_head"), std::string::npos) << w;
    EXPECT_NE(w.find("KV cache 36.0 MiB"), std::string::npos) << w;
    EXPECT_NE(w.find("cma.mib is 192.0 MiB"), std::string::npos) << w;
  }
}

TEST(MemoryMap, CmaPastTheEndOfDdrIsAnError) {
  auto c = roomy();
  c.cma_base = 0x1F000000;
  EXPECT_THROW(MemoryMap(model::ModelConfig::tiny(), c), Error);
}

// The KV context limit follows the format: the largest T <= 512 whose areas fit the CMA.
TEST(MemoryMap, KvContextLimitFollowsTheFormat) {
  const auto bl = model::ModelConfig::bitnet_large();
  MemoryMapConfig i8, i4;
  i8.kv_interleaved = i4.kv_interleaved = true;
  i4.kv_format = model::KvFormat::Int4;
  // The shipped 192 MiB: int8 holds the unit's 512 (715 would fit); the INT4 unit takes T up
  // to 2048 (docs/variants-attention.md 8.8), so int4 holds what fits: 1,319 positions, 1,143
  // with 8 outlier lanes; tiny's cache is small, so the unit's 2048 (its max_position_embeddings).
  EXPECT_EQ(kv_context_limit(bl, i8), 512);
  EXPECT_EQ(kv_context_limit(bl, i4), 1319);
  MemoryMapConfig lanes = i4;
  lanes.kv_outlier_channels = 8;
  EXPECT_EQ(kv_context_limit(bl, lanes), 1143);
  EXPECT_EQ(kv_context_limit(model::ModelConfig::tiny(), i4), 2048);
  EXPECT_EQ(kv_context_limit(model::ModelConfig::tiny(), i8), 512);
  model::ModelConfig short_model = model::ModelConfig::tiny();
  short_model.max_position_embeddings = 700;  // the model's positions cap it too
  EXPECT_EQ(kv_context_limit(short_model, i4), 700);
  MemoryMapConfig at4 = i4;
  at4.kv_positions = 1319;
  EXPECT_LE(MemoryMap(bl, at4).used_bytes(), at4.cma_bytes);
  at4.kv_positions = 1320;
  EXPECT_THROW(MemoryMap(bl, at4), Error);  // the largest that fits
  // 170 MiB: int8 rows (73,728 bytes a position at 384 layer-heads) fit fewer than 512.
  i8.cma_bytes = i4.cma_bytes = 170ull << 20;
  const int t8 = kv_context_limit(bl, i8);
  EXPECT_GT(t8, 0);
  EXPECT_LT(t8, 512);
  EXPECT_GT(kv_context_limit(bl, i4), 512);
  MemoryMapConfig at = i8;
  at.kv_positions = t8;
  const MemoryMap fits(bl, at);
  EXPECT_LE(fits.used_bytes(), at.cma_bytes);
  at.kv_positions = t8 + 1;
  EXPECT_THROW(MemoryMap(bl, at), Error);  // the largest that fits
  // The cache's bytes: per (layer, head) the bank and T positions of the format.
  at.kv_positions = 100;
  at.kv_format = model::KvFormat::Int4;
  at.kv_outlier_channels = 8;
  const MemoryMap m4(bl, at);
  for (const auto& r : m4.regions())
    if (r.name == "kv cache") EXPECT_EQ(r.bytes, 384u * (200 + 100 * 120));
  // Not even the weights: 0.
  i8.cma_bytes = 128ull << 20;
  EXPECT_EQ(kv_context_limit(bl, i8), 0);
}

// Grouped-query attention: the qkv group has q's 1536 rows and k's and v's 4 x 96 each; the
// KV cache one area per (layer, K/V head), so its bytes fall by the group size (4) in every
// KV format, and the context that fits the CMA grows (int8 stays at the unit's 512).
TEST(MemoryMap, GroupedQueryKvAreasPerKvHead) {
  const auto mha = model::ModelConfig::bitnet_large(), gqa = model::ModelConfig::bitnet_large_gqa4();
  const MemoryMap m(gqa, roomy());
  EXPECT_EQ(m.qkv(0).rows, 1536 + 2 * 384);
  EXPECT_EQ(m.qkv(0).calls[0].lane[0].rows + m.qkv(0).calls[0].lane[1].rows, 2304);
  auto kv_bytes = [](const MemoryMap& map) {
    for (const auto& r : map.regions())
      if (r.name == "kv cache") return r.bytes;
    return uint64_t(0);
  };
  for (const auto format : {model::KvFormat::Int8, model::KvFormat::Int4, model::KvFormat::Tip}) {
    MemoryMapConfig c = roomy();
    c.kv_interleaved = true;
    c.kv_format = format;
    const MemoryMap a(mha, c), b(gqa, c);
    EXPECT_EQ(kv_bytes(a), 4 * kv_bytes(b)) << int(format);  // 384 areas against 96
    EXPECT_EQ(b.k_area(1, 0), b.k_area(0, 3) + (b.k_area(0, 1) - b.k_area(0, 0)));  // layer 1 after 4 K/V heads
    EXPECT_LT(b.used_bytes(), a.used_bytes());
  }
  MemoryMapConfig i8, i4;
  i8.kv_interleaved = i4.kv_interleaved = true;
  i4.kv_format = model::KvFormat::Int4;
  EXPECT_EQ(kv_context_limit(gqa, i8), 512);    // the unit's T range binds
  EXPECT_EQ(kv_context_limit(gqa, i4), 2048);   // 1,319 with 16 K/V heads
  // 140 MiB: bitnet-large's image alone (141.3 MiB) does not fit; with 4 K/V heads k_proj and
  // v_proj are 2 x 1152 x 312 bytes a layer smaller (16.5 MiB in all) and positions fit.
  i8.cma_bytes = 140ull << 20;
  EXPECT_EQ(kv_context_limit(mha, i8), 0);
  EXPECT_GT(kv_context_limit(gqa, i8), 0);
}

// attention.gqa = shared-stream (docs/variants-attention.md 9): a lane takes whole groups, so
// heads per lane are ceil(K/V heads / lanes) x G (bitnet-large-gqa4: 8 as per head; 2B4T's 5
// K/V heads of 4: 12, lane 1 taking the last 2 groups); a model without groups, or with a G
// above the unit's attention.gqa_group, is refused naming the keys.
TEST(MemoryMap, SharedStreamLanesTakeWholeGroupsAndRefuseWhatTheUnitCannot) {
  MemoryMapConfig c = roomy();
  c.attention_shared = true;
  c.attention_group_max = 4;
  EXPECT_EQ(MemoryMap(model::ModelConfig::bitnet_large_gqa4(), c).heads_per_lane(), 8);
  EXPECT_EQ(MemoryMap(model::ModelConfig::tiny_gqa(), c).heads_per_lane(), 2);
  const auto b2 = model::ModelConfig::bitnet_2b4t();
  ASSERT_EQ(b2.group(), 4);
  c.ddr_bytes = 2ull << 30;  // 2B4T's 462 MiB of weights: a larger board's memory
  c.cma_bytes = 1ull << 30;
  c.head_dim = 128;          // and a unit built for its heads of 128 (attention.head_dim)
  EXPECT_EQ(MemoryMap(b2, c).heads_per_lane(), 12);
  c.lanes = 1;
  EXPECT_EQ(MemoryMap(b2, c).heads_per_lane(), 20);
  c.lanes = 2;
  c.head_dim = model::kBoardHeadDim;
  auto refusal = [&](const model::ModelConfig& m) {
    try {
      (void)MemoryMap(m, c);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no refusal");
  };
  const std::string mha = refusal(model::ModelConfig::bitnet_large());
  EXPECT_NE(mha.find("attention.gqa = shared-stream"), std::string::npos) << mha;
  EXPECT_NE(mha.find("num_key_value_heads"), std::string::npos) << mha;
  c.attention_group_max = 2;
  const std::string big = refusal(model::ModelConfig::bitnet_large_gqa4());
  EXPECT_NE(big.find("attention.gqa_group = 2"), std::string::npos) << big;
  EXPECT_NE(big.find("group of 4"), std::string::npos) << big;
  c.attention_shared = false;  // per head: any model
  EXPECT_EQ(MemoryMap(model::ModelConfig::bitnet_large(), c).heads_per_lane(), 8);
}

// The account adds up to the layout: rows + activation slots + alignment is the weights
// image, and with the KV cache and the call buffers it is what the map used.
TEST(MemoryMap, AccountAddsUpToTheLayout) {
  const auto bl = model::ModelConfig::bitnet_large();
  MemoryMapConfig c = roomy();
  c.cma_bytes = 192ull << 20;
  const MemoryMap m(bl, c);
  const MemoryAccount& a = m.account();
  EXPECT_EQ(a.used(), m.used_bytes());
  // The KV cache starts on the first page after the weights image.
  EXPECT_GE(m.k_area(0, 0), a.cma_base + a.weights_image());
  EXPECT_LT(m.k_area(0, 0), a.cma_base + a.weights_image() + 4096);
  EXPECT_EQ(a.weight_rows + a.activation_slots, 148132496u);  // the stream bytes of the board's image
  EXPECT_EQ(a.lm_head_rows, uint64_t(bl.vocab_size) * model::packed_row_bytes(bl.hidden_size));
  EXPECT_GE(a.kv_cache, 24u * 16u * 512u * 192u);  // 36 MiB: int8 K and V rows of 96 bytes ...
  EXPECT_LT(a.kv_cache, 24u * 16u * 512u * 192u + 4096u);  // ... and the page alignment before them
  EXPECT_EQ(a.kv_position_bytes, 24u * 16u * 192u);
  EXPECT_EQ(a.positions, 512);
  EXPECT_TRUE(a.fits());
  EXPECT_EQ(a.ddr_bytes, 512ull << 20);
  EXPECT_NE(a.text().find("fits"), std::string::npos) << a.text();
  EXPECT_EQ(a.text().find("over by"), std::string::npos) << a.text();
}

// A layout that does not fit is counted, not refused, by memory_account; check_model_fits
// refuses it with the account at one position: what takes how much, and by how much it is over.
TEST(MemoryMap, ModelThatDoesNotFitIsRefusedWithTheAccount) {
  const auto bl = model::ModelConfig::bitnet_large();
  MemoryMapConfig c;
  c.cma_bytes = 100ull << 20;
  const MemoryAccount a = memory_account(bl, c, 1);
  EXPECT_FALSE(a.fits());
  EXPECT_EQ(a.positions, 1);
  EXPECT_GE(a.kv_cache, 24u * 16u * 192u);  // one position per K/V area (and its page alignment)
  EXPECT_LT(a.kv_cache, 24u * 16u * 192u + 4096u);
  EXPECT_NE(a.text().find("over by"), std::string::npos) << a.text();
  try {
    check_model_fits(bl, c);
    FAIL() << "bitnet-large fitted in 100 MiB";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("cma.mib is 100.0 MiB"), std::string::npos) << w;
    EXPECT_NE(w.find(fmt::format("{:.1f} MiB do not fit", double(a.used() - a.cma_bytes) / 1048576.0)),
              std::string::npos)
        << w;
    EXPECT_NE(w.find("this DDR allows cma.mib <= 384"), std::string::npos) << w;  // 512 less cma.base's 128
  }
  // A model larger than the whole DDR is counted too (the account never throws).
  auto big = bl;
  big.num_layers = 96;
  EXPECT_GT(memory_account(big, c, 1).used(), c.ddr_bytes);
  EXPECT_NO_THROW(check_model_fits(bl, roomy()));
}

// The DDR size is the config's: the region must end inside it, and the context limit is
// bounded by the CMA, not by a fixed 512 MiB.
TEST(MemoryMap, DdrSizeIsTheConfigs) {
  MemoryMapConfig c = roomy();
  c.cma_base = 600ull << 20;  // past the end of a 512 MiB DDR
  EXPECT_THROW(MemoryMap(model::ModelConfig::tiny(), c), Error);
  c.ddr_bytes = 1ull << 30;
  EXPECT_NO_THROW(MemoryMap(model::ModelConfig::tiny(), c));
  MemoryMapConfig big;
  big.ddr_bytes = 1ull << 30;
  big.cma_bytes = 640ull << 20;
  big.kv_interleaved = true;
  big.kv_format = model::KvFormat::Int4;
  EXPECT_EQ(kv_context_limit(model::ModelConfig::bitnet_large(), big), 2048);  // 1,319 in 192 MiB
}

// A unit built for head dimension d (attention.head_dim, docs/variants-attention.md 10): the
// KV rows, the header + q slots and the results follow d; a model of another head_dim is
// refused naming the key, the model's head_dim and the --set that fits it.
TEST(MemoryMap, HeadDimSizesTheKvRowsAndTheHeadBuffersAndRefusesAnotherModel) {
  MemoryMapConfig c = roomy();
  const model::ModelConfig hd128 = model::ModelConfig::tiny_2b4t_hd128();
  const MemoryMap board(model::ModelConfig::tiny(), c);
  EXPECT_EQ(board.kv_row_stride(), 96u);
  EXPECT_EQ(board.head_buffer_bytes(), 128u);
  EXPECT_EQ(board.v_area(0, 0) - board.k_area(0, 0), uint64_t(c.kv_positions) * 96);
  try {
    (void)MemoryMap(hd128, c);
    ADD_FAILURE() << "a model of head_dim 128 on a unit built for 96";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "attention.head_dim");
    EXPECT_NE(std::string(e.what()).find("head_dim 128"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--set attention.head_dim=128"), std::string::npos) << e.what();
  }
  c.head_dim = 128;
  const MemoryMap m(hd128, c);
  EXPECT_EQ(m.kv_row_stride(), 128u);
  EXPECT_EQ(m.head_buffer_bytes(), 192u);  // 16 + 128 = 144, padded to 64
  EXPECT_EQ(m.v_area(0, 0) - m.k_area(0, 0), uint64_t(c.kv_positions) * 128);
  c.kv_interleaved = true;
  c.kv_format = model::KvFormat::Int4;
  c.kv_outlier_channels = 4;
  const MemoryMap i4(hd128, c);
  EXPECT_EQ(i4.kv_storage().k.total(), 64u + 8);  // 128 nibbles less 4, then 4 fp16 lanes, to a beat
  EXPECT_EQ(i4.kv_storage().v.total(), 64u + 8);  // 128 nibbles, 4 group scales
  EXPECT_EQ(i4.kv_row_stride(), 144u);
}

}  // namespace
}  // namespace bitsim::host
