#pragma once
// Random heads of TIP's rows (docs/tip.md) for the unit and kernel tests: q, the bank (random
// fp16 channel scales, L distinct lane channels in any order, a V scale), a tier per region
// (drawn, or given), and rows at their tiers (KVQ8: random int8; KVQ4(+L): random nibbles,
// fp16 lanes and group scales as in int4_head.h). The golden reads them in fixed 192-byte
// slots; the stream holds them packed at their tiers' sizes (docs/tip.md "Stream").
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "golden/board_reference.h"
#include "model/attention_stream.h"
#include "model/kv_tip.h"

namespace bitsim::tip_test {

struct TipHead {
  int T = 1, region_log2 = 6, lanes = 4, d = model::kBoardHeadDim;
  size_t slot() const { return 2 * size_t(d); }  // the golden's row slot: a KVQ8 row
  golden::AttentionParams p;
  std::vector<int8_t> q;
  model::TipBank bank;
  std::vector<model::TipTier> tiers;  // per region
  std::vector<uint8_t> slots;         // T rows of kSlot bytes, each at its region's tier
  int regions() const { return model::tip_regions(T, region_log2); }
  model::TipTier tier(int t) const { return tiers[size_t(t >> region_log2)]; }
  // The header (flags bits 2 and 4, L, log2 R).
  model::AttentionHeadHeader header(bool last) const {
    model::AttentionHeadHeader h;
    h.T = uint32_t(T);
    h.m = p.m;
    h.shift = uint32_t(p.shift);
    h.online = h.tip = true;
    h.outliers = uint32_t(lanes);
    h.region_log2 = uint32_t(region_log2);
    h.last = last;
    return h;
  }
  // The whole head as streamed: header, q, tags, bank, then K_t V_t at their tiers.
  std::vector<uint8_t> stream(bool last) const {
    std::vector<uint8_t> s(model::attention_header_q_bytes(1, d));
    model::write_attention_header(header(last), s.data());
    std::memcpy(s.data() + model::kHeaderBytes, q.data(), size_t(d));
    std::vector<uint8_t> tags(size_t(model::tip_tag_beats(regions())) * model::kBeatBytes);
    model::write_tip_tags(tiers, tags.data());
    s.insert(s.end(), tags.begin(), tags.end());
    std::vector<uint8_t> b(model::tip_bank_bytes(lanes, d));
    model::write_tip_bank(bank, b.data());
    s.insert(s.end(), b.begin(), b.end());
    for (int t = 0; t < T; ++t) {
      const uint8_t* r = slots.data() + size_t(t) * slot();
      s.insert(s.end(), r, r + model::tip_row_bytes(tier(t), lanes, d));
    }
    return s;
  }
  // golden::attention_head_tip over the slots.
  void golden(int32_t* o, uint32_t* sum, std::vector<uint32_t>* masses) const {
    golden::attention_head_tip(q.data(), bank, slots.data(), slot(), tiers.data(), 1 << region_log2, T, p, o, sum,
                               masses);
  }
};

// A head with the given tiers per region (empty: drawn at random, all three), rows of d
// channels (the unit's attention.head_dim; a multiple of 32).
inline TipHead random_tip_head(int T, int region_log2, int lanes, std::mt19937& rng,
                               std::vector<model::TipTier> tiers = {}, int d = model::kBoardHeadDim) {
  TipHead h;
  h.d = d;
  h.T = T;
  h.region_log2 = region_log2;
  h.lanes = lanes;
  std::uniform_int_distribution<int> byte(0, 255), i8(-128, 127);
  std::uniform_real_distribution<float> scale(0.002f, 1.0f), lane(-40.0f, 40.0f);
  h.p = {uint32_t(std::uniform_int_distribution<uint32_t>(0, (1u << 18) - 1)(rng)), 16 + int(rng() % 12), false};
  h.q.resize(size_t(d));
  for (auto& x : h.q) x = int8_t(i8(rng));
  h.bank.k.sk.resize(size_t(d));
  for (int c = 0; c < d; ++c) h.bank.k.sk[size_t(c)] = model::fp16_from_float(scale(rng));
  std::vector<int> ch(static_cast<size_t>(d));
  std::iota(ch.begin(), ch.end(), 0);
  std::shuffle(ch.begin(), ch.end(), rng);
  h.bank.k.outliers.assign(ch.begin(), ch.begin() + lanes);
  h.bank.sv = model::fp16_from_float(scale(rng));
  if (tiers.empty())
    for (int r = 0; r < h.regions(); ++r) tiers.push_back(model::TipTier(rng() % 3));
  h.tiers = tiers;
  h.slots.assign(size_t(T) * h.slot(), 0);
  const size_t nib = size_t(model::kv_nibble_bytes(d));
  for (int t = 0; t < T; ++t) {
    uint8_t* r = h.slots.data() + size_t(t) * h.slot();
    const model::TipTier tier = h.tier(t);
    const size_t kb = model::tip_k_bytes(tier, lanes, d), n = model::tip_row_bytes(tier, lanes, d);
    for (size_t i = 0; i < n; ++i) r[i] = uint8_t(byte(rng));
    if (tier == model::TipTier::Kvq8) continue;
    const int lanes_here = tier == model::TipTier::Kvq4Lanes ? lanes : 0;
    for (int j = 0; j < lanes_here; ++j) {
      const uint16_t v = model::fp16_from_float(lane(rng));
      std::memcpy(r + nib + 2 * size_t(j), &v, 2);
    }
    for (int g = 0; g < d / model::kKvVGroup; ++g) {
      const uint16_t v = model::fp16_from_float(scale(rng));
      std::memcpy(r + kb + nib + 2 * size_t(g), &v, 2);
    }
  }
  return h;
}

}  // namespace bitsim::tip_test
