#include "model/attention_stream.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "base/error.h"

namespace bitsim::model {

static_assert(std::endian::native == std::endian::little, "beats are written with memcpy");

namespace {
constexpr uint64_t kFlagsReserved = 0xC0;      // flags bits 7:6
constexpr int kShiftAt = 24, kShiftBits = 6;   // beat 1 bits 29:24
constexpr int kMBits = 18;                     // beat 1 bits 17:0
constexpr int kReservedAt = 30;                // beat 1 bits 31:30 and 63:36
constexpr int kOutliersAt = 32;                // beat 1 bits 35:32: INT4 KV outlier lanes (0..8), TIP's L
constexpr int kRegionAt = 36;                  // beat 1 bits 39:36: TIP's log2 R (4..8)
constexpr int kGroupAt = 40;                   // beat 1 bits 43:40: a shared-stream pass's G
}  // namespace

std::array<uint64_t, 2> encode_attention_header(const AttentionHeadHeader& h) {
  const uint64_t flags = (h.last ? kAttentionFlagLast : 0u) | (h.legacy ? kAttentionFlagLegacy : 0u) |
                         (h.online ? kAttentionFlagOnline : 0u) | (h.int4 ? kAttentionFlagInt4 : 0u) |
                         (h.tip ? kAttentionFlagTip : 0u) | (h.group != 1 ? kAttentionFlagShared : 0u);
  const uint64_t b0 = uint64_t(h.magic) | (uint64_t(h.version) << 16) | (flags << 24) | (uint64_t(h.T) << 32);
  const uint64_t b1 = uint64_t(h.m) | (uint64_t(h.shift) << kShiftAt) | (uint64_t(h.outliers) << kOutliersAt) |
                      (uint64_t(h.region_log2) << kRegionAt) | (h.group != 1 ? uint64_t(h.group) << kGroupAt : 0);
  return {b0, b1};
}

uint64_t encode_attention_member(uint32_t m, uint32_t shift) { return uint64_t(m) | (uint64_t(shift) << kShiftAt); }

AttentionError parse_attention_member(uint64_t beat, uint32_t* m, uint32_t* shift) {
  if ((beat >> kReservedAt) != 0) return AttentionError::ReservedBits;
  if (((beat >> kMBits) & ((1u << (kShiftAt - kMBits)) - 1)) != 0) return AttentionError::MultiplierTooWide;
  *m = uint32_t(beat) & kAttentionMaxM;
  *shift = uint32_t(beat >> kShiftAt) & ((1u << kShiftBits) - 1);
  return AttentionError::None;
}

void write_attention_header(const AttentionHeadHeader& h, uint8_t* out16) {
  const auto beats = encode_attention_header(h);
  std::memcpy(out16, beats.data(), kHeaderBytes);
}

const char* attention_error_name(AttentionError e) {
  switch (e) {
    case AttentionError::None: return "ok";
    case AttentionError::BadMagic: return "bad magic";
    case AttentionError::BadVersion: return "bad version";
    case AttentionError::ReservedBits: return "reserved bits set";
    case AttentionError::BadLength: return "context length T out of range";
    case AttentionError::MultiplierTooWide: return "multiplier m wider than 18 bits";
    case AttentionError::Truncated: return "truncated stream";
    case AttentionError::TrailingData: return "data after the last head";
    case AttentionError::VariantMismatch: return "header for another attention variant";
  }
  return "unknown attention error";
}

AttentionVariant attention_variant_of(const std::string& name) {
  for (int i = 0; i < 2; ++i)
    if (name == kAttentionVariantNames[i]) return AttentionVariant(i);
  throw Error("attention.variant = '" + name + "' is not one of: two-phase, online-softmax");
}

uint64_t attention_head_bytes(const AttentionHeadHeader& h, int d, const TipTier* tiers) {
  const uint64_t members = uint64_t(h.group - 1) * attention_member_bytes(d);  // a shared-stream pass's
  if (h.tip) {
    if (tiers == nullptr) throw Error("attention_head_bytes: a TIP head's size needs its region tags");
    const int lanes = int(h.outliers), R = 1 << h.region_log2, N = tip_regions(int(h.T), int(h.region_log2));
    uint64_t bytes =
        members + attention_header_q_bytes(1, d) + uint64_t(tip_tag_beats(N)) * kBeatBytes + tip_bank_bytes(lanes, d);
    for (int r = 0; r < N; ++r)
      bytes += uint64_t(std::min(R, int(h.T) - r * R)) * tip_row_bytes(tiers[r], lanes, d);
    return bytes;
  }
  if (!h.int4) return members + attention_head_bytes(int(h.T), d);
  const KvStorage st = kv_storage(KvFormat::Int4, int(h.outliers), d);
  return members + attention_header_q_bytes(1, d) + st.bank + uint64_t(h.T) * st.per_position();
}

AttentionError check_attention_beat0(uint64_t beat0) {
  if (uint16_t(beat0 & 0xFFFF) != kAttentionMagic) return AttentionError::BadMagic;
  if (uint8_t(beat0 >> 16) != kAttentionVersion) return AttentionError::BadVersion;
  return AttentionError::None;
}

AttentionError parse_attention_header(uint64_t beat0, uint64_t beat1, AttentionHeadHeader* h) {
  const AttentionError id = check_attention_beat0(beat0);
  if (id != AttentionError::None) return id;
  const uint32_t flags = uint32_t(beat0 >> 24) & 0xFF;
  const uint32_t T = uint32_t(beat0 >> 32);
  const uint32_t outliers = uint32_t(beat1 >> kOutliersAt) & 0xF;
  const uint32_t region_log2 = uint32_t(beat1 >> kRegionAt) & 0xF;
  const bool int4 = (flags & kAttentionFlagInt4) != 0, tip = (flags & kAttentionFlagTip) != 0;
  const bool shared = (flags & kAttentionFlagShared) != 0;
  const uint32_t group = uint32_t(beat1 >> kGroupAt) & 0xF;
  if ((flags & kFlagsReserved) != 0 || ((beat1 >> kReservedAt) & 3) != 0 || (beat1 >> (kGroupAt + 4)) != 0 ||
      (int4 && tip) || (shared ? group < 2 || group > uint32_t(kAttentionMaxGroup) : group != 0))
    return AttentionError::ReservedBits;
  if (tip ? (outliers != 4 && outliers != 8) || region_log2 < uint32_t(kTipMinRegionLog2) ||
                region_log2 > uint32_t(kTipMaxRegionLog2)
          : outliers > uint32_t(kKvMaxOutlierChannels) || (outliers != 0 && !int4) || region_log2 != 0)
    return AttentionError::ReservedBits;
  if (T < 1 || T > uint32_t(attention_max_t(int4 || tip))) return AttentionError::BadLength;
  if (((beat1 >> kMBits) & ((1u << (kShiftAt - kMBits)) - 1)) != 0) return AttentionError::MultiplierTooWide;
  h->T = T;
  h->m = uint32_t(beat1) & kAttentionMaxM;
  h->shift = uint32_t(beat1 >> kShiftAt) & ((1u << kShiftBits) - 1);
  h->legacy = (flags & kAttentionFlagLegacy) != 0;
  h->online = (flags & kAttentionFlagOnline) != 0;
  h->int4 = int4;
  h->tip = tip;
  h->outliers = outliers;
  h->region_log2 = region_log2;
  h->last = (flags & kAttentionFlagLast) != 0;
  h->group = shared ? group : 1;
  h->magic = kAttentionMagic;
  h->version = kAttentionVersion;
  return AttentionError::None;
}

AttentionError next_head(const uint8_t* in, uint64_t left, int d, HeadLayout* h) {
  if (left < uint64_t(kHeaderBytes)) return AttentionError::Truncated;
  uint64_t b0, b1;
  std::memcpy(&b0, in, 8);
  std::memcpy(&b1, in + 8, 8);
  const AttentionError e = parse_attention_header(b0, b1, &h->header);
  if (e != AttentionError::None) return e;
  h->tiers.clear();
  h->members.assign(1, {h->header.m, h->header.shift});
  const int G = int(h->header.group);
  const uint64_t qs = attention_header_q_bytes(G, d);  // the header and the G queries
  if (G > 1 && left < qs) return AttentionError::Truncated;
  for (int g = 1; g < G; ++g) {  // a shared-stream pass's member beats
    uint64_t beat;
    std::memcpy(&beat, in + attention_header_q_bytes(g, d), 8);
    std::array<uint32_t, 2> ms{};
    const AttentionError me = parse_attention_member(beat, &ms[0], &ms[1]);
    if (me != AttentionError::None) return me;
    h->members.push_back(ms);
  }
  if (h->header.tip) {  // the tag beats after the queries
    const int N = tip_regions(int(h->header.T), int(h->header.region_log2));
    if (left < qs + uint64_t(tip_tag_beats(N)) * kBeatBytes) return AttentionError::Truncated;
    if (!read_tip_tags(in + qs, N, &h->tiers)) return AttentionError::ReservedBits;
  }
  h->bytes = attention_head_bytes(h->header, d, h->tiers.data());
  return h->bytes > left ? AttentionError::Truncated : AttentionError::None;
}

}  // namespace bitsim::model
