#include "model/kv_tip.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "base/error.h"
#include "model/attention_stream.h"
#include "numerics/numerics.h"

namespace bitsim::model {

namespace {
constexpr int kMaxPositions = kAttentionInt4MaxT;
int q8(float x, float scale) {
  const float q = num::rne(x / scale);
  return q != q ? 0 : q < -127.0f ? -127 : q > 127.0f ? 127 : int(q);
}
int nibble_of(float x16) {  // clamp(rne(x / 16), -8, 7)
  const float q = num::rne(x16 * 0.0625f);
  return q < -8.0f ? -8 : q > 7.0f ? 7 : int(q);
}
bool is_lane(const KvInt4Bank& b, int d) { return std::find(b.outliers.begin(), b.outliers.end(), d) != b.outliers.end(); }
}  // namespace

const char* tip_tier_name(TipTier t) {
  return t == TipTier::Kvq8 ? "KVQ8" : t == TipTier::Kvq4Lanes ? "KVQ4+L" : "KVQ4";
}

void TipSettings::validate(const std::string& who) const {
  auto bad = [&](const char* key, int v, const std::string& why) {
    throw Error(fmt::format("{}: kv.tip.{} = {} {}", who, key, v, why));
  };
  if (region < 16 || region > 256 || (region & (region - 1)) != 0)
    bad("region", region, "is not a power of two in [16, 256]");
  if (sink < 0 || sink > kMaxPositions || sink % region != 0)
    bad("sink", sink, fmt::format("is not a multiple of kv.tip.region ({}) in [0, {}]", region, kMaxPositions));
  if (recent < region || recent > kMaxPositions || recent % region != 0)
    bad("recent", recent, fmt::format("is not a multiple of kv.tip.region ({}) in [{}, {}]", region, region, kMaxPositions));
  if (kvq8_regions < 0 || kvq8_regions > kMaxPositions) bad("kvq8_regions", kvq8_regions, fmt::format("is out of range [0, {}]", kMaxPositions));
  if (lane_regions < 0 || lane_regions > kMaxPositions) bad("lane_regions", lane_regions, fmt::format("is out of range [0, {}]", kMaxPositions));
  if (lanes != 4 && lanes != 8) bad("lanes", lanes, "is not 4 or 8");
}

uint64_t tip_row_bytes(TipTier t, int lanes, int d) {
  if (t == TipTier::Kvq8) return 2 * uint64_t(d);
  const KvStorage s = kv_storage(KvFormat::Int4, t == TipTier::Kvq4Lanes ? lanes : 0, d);
  return s.per_position();
}

uint64_t tip_bank_bytes(int lanes, int d) {
  return kv_pad_to_beat(uint64_t(d) * kKvFp16Bytes + kKvFp16Bytes + uint64_t(lanes));
}

TipStorage tip_storage(const TipSettings& s, int positions, int d) {
  TipStorage st;
  st.regions = (positions + s.region - 1) / s.region;
  // The most regions each tier holds at once: sinks, the recent window's regions (one more
  // while the newest is partial) and the KVQ8 budget; then the lanes' budget; the rest.
  st.kvq8 = std::min(st.regions, s.sink / s.region + s.recent / s.region + 1 + s.kvq8_regions);
  st.lanes = std::min(st.regions - st.kvq8, s.lane_regions);
  st.kvq4 = st.regions - st.kvq8 - st.lanes;
  st.rows = uint64_t(s.region) * (uint64_t(st.kvq8) * tip_row_bytes(TipTier::Kvq8, s.lanes, d) +
                                  uint64_t(st.lanes) * tip_row_bytes(TipTier::Kvq4Lanes, s.lanes, d) +
                                  uint64_t(st.kvq4) * tip_row_bytes(TipTier::Kvq4, s.lanes, d));
  st.table = uint64_t(st.regions) * kTipRegionEntryBytes;
  st.bank = tip_bank_bytes(s.lanes, d);
  return st;
}

int tip_largest_context(const TipSettings& s, uint64_t layer_heads, uint64_t free_bytes, int limit, int d) {
  int best = 0;
  for (int t = 1; t <= limit; ++t) {
    if (layer_heads * tip_storage(s, t, d).total() > free_bytes) break;
    best = t;
  }
  return best;
}

TipBank tip_bank(const float* kmax, float v_scale, int lanes, int d) {
  TipBank b;
  b.k = kv_int4_bank(kmax, lanes, d);
  b.sv = fp16_from_float(v_scale);
  return b;
}

void encode_kvq8(const float* k, const float* v, const TipBank& bank, uint8_t* row) {
  const float sv = float_from_fp16(bank.sv);
  const int D = bank.head_dim();
  for (int d = 0; d < D; ++d) {
    row[d] = uint8_t(int8_t(q8(k[d], float_from_fp16(bank.k.sk[size_t(d)]) * 0.0625f)));
    row[D + d] = uint8_t(int8_t(q8(v[d], sv)));
  }
}

std::vector<uint8_t> tip_demote(const uint8_t* row, TipTier from, TipTier to, const TipBank& bank) {
  const int lanes = int(bank.k.outliers.size()), D = bank.head_dim();
  if (int(from) >= int(to)) throw Error(fmt::format("TIP: {} cannot move to {} (no promotion)", tip_tier_name(from), tip_tier_name(to)));
  const int n = to == TipTier::Kvq4Lanes ? lanes : 0;
  const KvStorage out = kv_storage(KvFormat::Int4, n, D);
  std::vector<uint8_t> r(out.per_position(), 0);
  uint8_t* K = r.data();
  uint8_t* V = r.data() + out.k.total();
  if (from == TipTier::Kvq8) {
    for (int d = 0; d < D; ++d) {
      const int k8 = int8_t(row[d]);
      if (n > 0 && is_lane(bank.k, d)) continue;
      kv_set_nibble(K, d, nibble_of(float(k8)));
    }
    for (int j = 0; j < n; ++j) {
      const int d = bank.k.outliers[size_t(j)];
      const uint16_t h = fp16_from_float(float(int8_t(row[d])) * float_from_fp16(bank.k.sk[size_t(d)]) * 0.0625f);
      std::memcpy(K + kv_nibble_bytes(D) + 2 * j, &h, 2);
    }
    float v[kMaxHeadDim];
    const float sv = float_from_fp16(bank.sv);
    for (int d = 0; d < D; ++d) v[d] = float(int8_t(row[D + d])) * sv;
    encode_v_int4(v, D, V);
    return r;
  }
  // KVQ4+L -> KVQ4: the lanes become nibbles; V is unchanged.
  const KvStorage in = kv_storage(KvFormat::Int4, lanes, D);
  std::memcpy(K, row, size_t(kv_nibble_bytes(D)));
  for (int j = 0; j < lanes; ++j) {
    uint16_t h;
    std::memcpy(&h, row + kv_nibble_bytes(D) + 2 * j, 2);
    const int d = bank.k.outliers[size_t(j)];
    kv_set_nibble(K, d, nibble_of(float(kv_outlier_fixed(h, bank.k.sk[size_t(d)]))));
  }
  std::memcpy(V, row + in.k.total(), in.v.total());
  return r;
}

// ---- The stream ------------------------------------------------------------------------

void write_tip_tags(const std::vector<TipTier>& tiers, uint8_t* out) {
  const int beats = tip_tag_beats(int(tiers.size()));
  std::memset(out, 0, size_t(beats) * kBeatBytes);
  for (size_t r = 0; r < tiers.size(); ++r) out[r / 4] |= uint8_t(uint8_t(tiers[r]) << (2 * (r % 4)));
}

bool read_tip_tags(const uint8_t* in, int regions, std::vector<TipTier>* tiers) {
  tiers->assign(size_t(regions), TipTier::Kvq8);
  const int bytes = tip_tag_beats(regions) * kBeatBytes;
  for (int i = 0; i < bytes * 4; ++i) {
    const int tag = (in[i / 4] >> (2 * (i % 4))) & 3;
    if (i >= regions ? tag != 0 : tag == 3) return false;
    if (i < regions) (*tiers)[size_t(i)] = TipTier(tag);
  }
  return true;
}

void write_tip_bank(const TipBank& bank, uint8_t* out) {
  const int lanes = int(bank.k.outliers.size()), D = bank.head_dim();
  std::memset(out, 0, tip_bank_bytes(lanes, D));
  write_kv_bank(bank.k, out);  // sk_d at 2d, the lanes' channels at 2 D + j
  std::memcpy(out + D * kKvFp16Bytes + lanes, &bank.sv, 2);
}

TipBank read_tip_bank(const uint8_t* in, int lanes, int d) {
  TipBank b;
  b.k = read_kv_bank(in, lanes, d);
  std::memcpy(&b.sv, in + d * kKvFp16Bytes + lanes, 2);
  return b;
}

uint64_t tip_k_bytes(TipTier t, int lanes, int d) {
  if (t == TipTier::Kvq8) return uint64_t(d);
  return kv_storage(KvFormat::Int4, t == TipTier::Kvq4Lanes ? lanes : 0, d).k.total();
}

void tip_k12(const uint8_t* k_row, TipTier t, const KvInt4Bank& bank, int32_t* k12) {
  const int D = bank.head_dim();
  if (t == TipTier::Kvq8) {
    for (int d = 0; d < D; ++d) k12[d] = int8_t(k_row[d]);
    return;
  }
  for (int d = 0; d < D; ++d) k12[d] = kv_nibble(k_row, d) << kKvFixedShift;
  if (t == TipTier::Kvq4) return;
  for (size_t j = 0; j < bank.outliers.size(); ++j) {
    uint16_t h;
    std::memcpy(&h, k_row + kv_nibble_bytes(D) + 2 * j, 2);
    const int d = bank.outliers[j];
    k12[d] = kv_outlier_fixed(h, bank.sk[size_t(d)]);
  }
}

void tip_accumulate_v(const uint8_t* v_row, TipTier t, uint16_t sv, uint32_t p, int D, int64_t* acc) {
  if (t == TipTier::Kvq8) {
    const int64_t w = kv_v_weight(p, sv);
    for (int d = 0; d < D; ++d) acc[d] += w * int8_t(v_row[d]);
    return;
  }
  for (int g = 0; g < D / kKvVGroup; ++g) {
    uint16_t s;
    std::memcpy(&s, v_row + kv_nibble_bytes(D) + 2 * g, 2);
    const int64_t w = kv_v_weight(p, s);
    for (int i = 0; i < kKvVGroup; ++i) acc[g * kKvVGroup + i] += w * kv_nibble(v_row, g * kKvVGroup + i);
  }
}

uint32_t tip_region_mass(uint32_t l_r, int32_t m_r, int32_t M, uint32_t total, uint32_t m, int shift) {
  const uint64_t e = num::exp_interp(num::online_index8(uint32_t(int64_t(M) - m_r), m, shift));
  const uint64_t rr = (uint64_t(1) << 46) / uint64_t(total);
  const unsigned __int128 a = (static_cast<unsigned __int128>(uint64_t(l_r) * e) * rr + (uint64_t(1) << 44)) >> 45;
  return uint32_t(std::min<unsigned __int128>(a, 65535));
}

TipRegions::TipRegions(const TipSettings& s) : s_(s) { s_.validate("TIP"); }

void TipRegions::grow(int regions) {
  if (regions <= int(tier_.size())) return;
  tier_.resize(size_t(regions), TipTier::Kvq8);
  imp_.resize(size_t(regions), 0);
  q_.resize(size_t(regions), 0);
  placed_.resize(size_t(regions), false);
}

int TipRegions::leaving(int pos) const {
  const int x = pos + 1 - s_.recent;
  if (x <= 0 || x % s_.region != 0) return -1;
  const int r = x / s_.region - 1;
  return r < s_.sink / s_.region ? -1 : r;
}

bool TipRegions::beats(int a, int b) const {
  return uint64_t(imp_[size_t(a)]) * q_[size_t(b)] > uint64_t(imp_[size_t(b)]) * q_[size_t(a)];
}

int TipRegions::count(TipTier t) const {
  int n = 0;
  for (size_t r = 0; r < tier_.size(); ++r) n += placed_[r] && tier_[r] == t;
  return n;
}

int TipRegions::minimum(TipTier t) const {
  int m = -1;
  for (int r = 0; r < int(tier_.size()); ++r)
    if (placed_[size_t(r)] && tier_[size_t(r)] == t && (m < 0 || beats(m, r))) m = r;
  return m;
}

std::vector<TipRegions::Change> TipRegions::place(int r) {
  grow(r + 1);
  std::vector<Change> changes;
  int z = r;  // the region to place below KVQ8
  if (count(TipTier::Kvq8) < s_.kvq8_regions) {
    z = -1;
  } else if (s_.kvq8_regions > 0) {
    const int y = minimum(TipTier::Kvq8);
    if (beats(r, y)) z = y;
  }
  placed_[size_t(r)] = true;
  if (z < 0) return changes;
  auto set = [&](int region, TipTier t) {
    changes.push_back(Change{region, tier_[size_t(region)], t});
    tier_[size_t(region)] = t;
  };
  if (count(TipTier::Kvq4Lanes) < s_.lane_regions) {
    set(z, TipTier::Kvq4Lanes);
  } else {
    const int u = s_.lane_regions > 0 ? minimum(TipTier::Kvq4Lanes) : -1;
    if (u >= 0 && beats(z, u)) {
      set(u, TipTier::Kvq4);
      set(z, TipTier::Kvq4Lanes);
    } else {
      set(z, TipTier::Kvq4);
    }
  }
  return changes;
}

void TipRegions::add_masses(const std::vector<uint32_t>& masses) {
  grow(int(masses.size()));
  constexpr uint32_t imax = (1u << kTipImportanceBits) - 1, qmax = (1u << kTipQueryBits) - 1;
  for (size_t r = 0; r < masses.size(); ++r) {
    imp_[r] = std::min<uint64_t>(imax, uint64_t(imp_[r]) + masses[r]);
    q_[r] = std::min(qmax, q_[r] + 1);
  }
}

}  // namespace bitsim::model
