#pragma once
// TIP, the KV cache's precision tiers (docs/tip.md is the contract): the settings (kv.tip.*
// keys), the whole-storage accounting at a context, the KVQ8 rows and the re-encoding of a
// demoted row, and the tier rule with its region bookkeeping. The golden reference
// (golden::BoardReference with kv_format = Tip) reads the rows with plain loops.
#include <cstdint>
#include <string>
#include <vector>

#include "model/board_shape.h"
#include "model/kv_format.h"

namespace bitsim::model {

// The tiers, from the most precise down (a region only ever moves down).
enum class TipTier : uint8_t { Kvq8, Kvq4Lanes, Kvq4 };
const char* tip_tier_name(TipTier t);

struct TipSettings {
  int region = 64;        // kv.tip.region: positions per region, a power of two 16..256
  int sink = 64;          // kv.tip.sink: the first positions kept at KVQ8, a multiple of region
  int recent = 256;       // kv.tip.recent: the last positions kept at KVQ8, a multiple of region
  int kvq8_regions = 3;   // kv.tip.kvq8_regions: regions past the window that keep KVQ8
  int lane_regions = 8;   // kv.tip.lane_regions: regions that hold KVQ4 with lanes
  int lanes = 4;          // kv.tip.lanes: fp16 outlier lanes of a KVQ4+L row, 4 or 8
  // Throws bitsim::Error naming `who` and the kv.tip key out of range.
  void validate(const std::string& who) const;
};

// The named settings eval's rows and inspect's table use (docs/tip.md): every region at KVQ8
// (an unlimited KVQ8 budget: the int8 reference up to 2,048 positions) and a leaner setting
// than the defaults.
inline constexpr TipSettings kTipAllKvq8{.region = 64, .sink = 0, .recent = 64, .kvq8_regions = 2048,
                                         .lane_regions = 0, .lanes = 4};
inline constexpr TipSettings kTipLean{.region = 32, .sink = 32, .recent = 128, .kvq8_regions = 2,
                                      .lane_regions = 8, .lanes = 4};

// Bytes per position of each tier's row (K + V) of d channels, and the bank's bytes.
uint64_t tip_row_bytes(TipTier t, int lanes, int d);
uint64_t tip_bank_bytes(int lanes, int d);
constexpr uint64_t kTipRegionEntryBytes = 8;  // tag 2 + I 24 + Q 16 + slot 12 bits, in 8 bytes
constexpr int kTipImportanceBits = 24, kTipQueryBits = 16;

// The storage of one (layer, head)'s area at a context of `positions` positions.
struct TipStorage {
  int regions = 0, kvq8 = 0, lanes = 0, kvq4 = 0;  // region slots per pool
  uint64_t rows = 0;    // payload, scales, lanes and padding of the slots
  uint64_t table = 0;   // the region table
  uint64_t bank = 0;
  uint64_t total() const { return rows + table + bank; }
  double per_position(int positions) const { return double(total()) / positions; }
};
TipStorage tip_storage(const TipSettings& s, int positions, int d);
// The largest context T <= limit whose areas for `layer_heads` fit `free_bytes`.
int tip_largest_context(const TipSettings& s, uint64_t layer_heads, uint64_t free_bytes, int limit, int d);

// ---- The rows (docs/tip.md "Tiers and their rows") -----------------------------------

// The bank: the INT4 bank (sk, `lanes` outlier channels; its size the head dimension d) and
// the V scale sv.
struct TipBank {
  KvInt4Bank k;
  uint16_t sv = 0;
  int head_dim() const { return k.head_dim(); }
};
TipBank tip_bank(const float* kmax, float v_scale, int lanes, int d);

// A KVQ8 row (K d bytes then V d bytes, 96 each at d = 96): k8_d = clamp(rne(16 K_d / sk_d), -127, 127),
// v8 = clamp(rne(V / sv), -127, 127).
void encode_kvq8(const float* k, const float* v, const TipBank& bank, uint8_t* row);
// The stored row of a tier, re-encoded one tier down (docs/tip.md "Re-encoding"): from KVQ8
// to KVQ4+L or KVQ4, or from KVQ4+L to KVQ4. Rows are K then V at the tier's sizes.
std::vector<uint8_t> tip_demote(const uint8_t* row, TipTier from, TipTier to, const TipBank& bank);

// ---- The stream (docs/tip.md "Stream") ---------------------------------------------

// Region sizes a header names: R = 2^region_log2, region_log2 4..8.
constexpr int kTipMinRegionLog2 = 4, kTipMaxRegionLog2 = 8;
// A head's regions N = ceil(T / R), its tag beats ceil(N / 32) and its mass beats ceil(N / 4).
constexpr int tip_regions(int T, int region_log2) { return (T + (1 << region_log2) - 1) >> region_log2; }
constexpr int tip_tag_beats(int regions) { return (regions + 31) / 32; }
constexpr int tip_mass_beats(int regions) { return (regions + 3) / 4; }
constexpr int kTipMaxRegions = 2048 / 16;  // T 2,048 at R 16
// The tag table (tip_tag_beats(tiers.size()) beats): 2 bits a region, 0 KVQ8, 1 KVQ4+L, 2 KVQ4.
void write_tip_tags(const std::vector<TipTier>& tiers, uint8_t* out);
// And back: false for a tag 3, or a bit set past region `regions` - 1 (reserved bits).
bool read_tip_tags(const uint8_t* in, int regions, std::vector<TipTier>* tiers);
// The bank as streamed (tip_bank_bytes(lanes, d)): sk_d at byte 2d, lane channel j at 2 d + j,
// sv at 2 d + lanes (192 + j, 192 + lanes at d = 96), zeros to the beat; and back (Error for a
// lane channel >= d or repeated).
void write_tip_bank(const TipBank& bank, uint8_t* out);
TipBank read_tip_bank(const uint8_t* in, int lanes, int d);
// A row's K and V bytes at its tier (K then V: tip_row_bytes = k + v).
uint64_t tip_k_bytes(TipTier t, int lanes, int d);

// The unit's read path of a row (docs/tip.md "Tiers and their rows"), shared by the clocked
// unit and the fast kernel: K in the bank's fixed point sk_d / 16 (KVQ8 k8_d, a nibble 16 k,
// a lane kv_outlier_fixed), and the row's V added to the 62-bit accumulators at weight p
// (KVQ8 kv_v_weight(p, sv) v8_d; KVQ4(+L) per group as the INT4 unit).
// Both over the d = bank.head_dim() channels (tip_accumulate_v's d given: rows of d channels).
void tip_k12(const uint8_t* k_row, TipTier t, const KvInt4Bank& bank, int32_t* k12);
void tip_accumulate_v(const uint8_t* v_row, TipTier t, uint16_t sv, uint32_t p, int d, int64_t* acc);
// A region's attention mass in UQ0.16 at the head's end: min(65535, (l_r e_r rr + 2^44) >> 45),
// e_r = exp_interp(online_index8(M - m_r, m, S)), rr = floor(2^46 / total).
uint32_t tip_region_mass(uint32_t l_r, int32_t m_r, int32_t M, uint32_t total, uint32_t m, int shift);

// ---- The rule (docs/tip.md "Regions and the rule") ----------------------------------

// One (layer, head)'s region table: tiers, importance and query counts.
class TipRegions {
 public:
  explicit TipRegions(const TipSettings& s);
  // The region that leaves the recent window before the row of `pos` is written, or -1.
  int leaving(int pos) const;
  // Places the leaving region r; returns the regions whose tier changed (at most two), in
  // the order to apply.
  struct Change {
    int region;
    TipTier from, to;
  };
  std::vector<Change> place(int r);
  // A query's masses a_r (UQ0.16) for regions 0 .. masses.size() - 1.
  void add_masses(const std::vector<uint32_t>& masses);
  TipTier tier(int r) const { return r < int(tier_.size()) ? tier_[size_t(r)] : TipTier::Kvq8; }
  uint32_t importance(int r) const { return imp_[size_t(r)]; }
  uint32_t queries(int r) const { return q_[size_t(r)]; }
  // a's mean mass exceeds b's: I_a Q_b > I_b Q_a.
  bool beats(int a, int b) const;

 private:
  void grow(int regions);
  int minimum(TipTier t) const;  // among the placed regions of tier t; -1 if none
  int count(TipTier t) const;
  TipSettings s_;
  std::vector<TipTier> tier_;
  std::vector<uint32_t> imp_, q_;
  std::vector<bool> placed_;
};

}  // namespace bitsim::model
