#pragma once
// The attention unit's input and result stream format (CIRCUITS.md section 3), beside the
// matmul engine's (model/packed_image.h): the one definition the golden reference, the host
// runtime, the clocked unit and the fast board use.
//
//   head   := header q K V
//   header := 2 beats (16 bytes, little-endian)
//     beat 0: bits 15:0 magic 0xA77E, 23:16 version 1, 31:24 flags (bit 0: last head of the
//             transfer; bit 1: legacy shift mode; bit 2: online-softmax unit; bit 3: INT4
//             KV rows; bit 4: TIP rows (not with bit 3); bit 5: a shared-stream pass of G
//             query heads (grouped-query attention); bits 7:6 reserved, 0), 63:32 T
//             (1..512; with bit 3 or 4 1..2048)
//     beat 1: bits 17:0 m (< 2^18), 23:18 reserved 0 (m too wide), 29:24 S (0..63),
//             31:30 reserved 0, 35:32 INT4 outlier lanes n (0..8; 0 without bit 3) or TIP's
//             KVQ4+L lanes L (4 or 8 with bit 4), 39:36 TIP's log2 R (4..8 with bit 4, else
//             0), 43:40 G (2..kAttentionMaxGroup with bit 5, else 0), 63:44 reserved 0
//   q      := d int8 (d / 8 beats; d = attention.head_dim, the head dimension the unit is
//             built for: the board's 96, 12 beats; the header does not carry it)
// A shared-stream pass (flags bit 5, docs/variants-attention.md 9) carries the G query heads
// of one K/V head's group: q is q_0 (under beat 1's m and S), then for g = 1..G-1 a member
// beat (bits 17:0 m_g, 23:18 reserved 0 (m too wide), 29:24 S_g, the rest reserved 0) and
// q_g; the rest of the head (tags, bank, rows) follows once, and the result is G heads'
// results, member by member (each with its TIP masses).
//   K, V   := T rows of d int8 each (d / 8 beats a row)
// The online-softmax unit (flags bit 2, docs/variants-attention.md) takes the rows
// interleaved instead: K_0 V_0 K_1 V_1 ... (the same beats), and returns o_0..o_{d-1} (int32,
// Q15.16) in place of acc. With INT4 KV rows (flags bit 3, docs/variants-attention.md 8.4)
// the head is header q bank (K_t V_t)..., the rows in model/kv_format.h's format. With TIP
// rows (flags bit 4, docs/tip.md "Stream") header q tags bank (K_t V_t)..., each row at its
// region's tier, and the result is followed by the region masses (ceil(N / 4) beats).
// Result per head: acc_0..acc_{d-1} (int32), sum (uint32), one zero word: d + 2 words,
// d / 2 + 1 beats (98 words, 49 beats at d = 96; model/board_shape.h).
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/board_shape.h"
#include "model/kv_format.h"
#include "model/kv_tip.h"

namespace bitsim::model {

constexpr uint16_t kAttentionMagic = 0xA77E;
constexpr uint8_t kAttentionVersion = 1;
constexpr uint32_t kAttentionFlagLast = 1u << 0;
constexpr uint32_t kAttentionFlagLegacy = 1u << 1;
constexpr uint32_t kAttentionFlagOnline = 1u << 2;
constexpr uint32_t kAttentionFlagInt4 = 1u << 3;
constexpr uint32_t kAttentionFlagTip = 1u << 4;
constexpr uint32_t kAttentionFlagShared = 1u << 5;
// The largest G a header can name (beat 1 bits 43:40); a unit is built for at most its
// attention.gqa_group (docs/variants-attention.md 9).
constexpr int kAttentionMaxGroup = 8;
// The INT4 unit's V accumulations of a head's last row: a V row's d products run 16 per
// clock over the d / 16 clocks after its scale beat (6 at d = 96; docs/variants-attention.md
// 8.4). d is a multiple of kKvVGroup with INT4 and TIP rows (check_head_dim).
constexpr int kKvInt4VProductsPerClock = 16;
constexpr int kv_int4_v_tail_cycles(int d) { return d / kKvInt4VProductsPerClock; }
// The online-softmax unit's normalizer: a head's results are queued drain + this many
// clocks after its last V beat (47 for the reciprocal, d for the products, one a clock;
// 143 at d = 96; docs/variants-attention.md section 4).
constexpr int kOnlineReciprocalCycles = 47;
constexpr int online_normalize_cycles(int d) { return kOnlineReciprocalCycles + d; }
// attention.variant: the board's two-phase unit, or the online-softmax unit.
enum class AttentionVariant : uint8_t { TwoPhase, OnlineSoftmax };
constexpr const char* kAttentionVariantNames[] = {"two-phase", "online-softmax"};
// "two-phase" / "online-softmax" -> the variant; bitsim::Error naming the key otherwise.
AttentionVariant attention_variant_of(const std::string& name);
// q, K and V rows: d / 8 beats (12 at d = 96).
constexpr int attention_row_beats(int d) { return d / kBeatBytes; }
constexpr int kAttentionMaxT = kKvPositions;  // T range 1..512 (board, int8 online)
// The INT4 unit's T range 1..2048 (docs/variants-attention.md 8.8: its 62-bit accumulators
// and 26-bit sum are sized for it).
constexpr int kAttentionInt4MaxT = 2048;
// The T range's end of the unit a header is for: INT4 rows (flags bit 3) kAttentionInt4MaxT,
// any other kAttentionMaxT.
// (TIP rows, flags bit 4, read by the same 62-bit datapath: kAttentionInt4MaxT too.)
constexpr int attention_max_t(bool int4) { return int4 ? kAttentionInt4MaxT : kAttentionMaxT; }
constexpr uint32_t kAttentionMaxM = (1u << 18) - 1;
constexpr uint32_t kAttentionMaxShift = 63;
// A shared-stream pass's member g >= 1: its beat of (m_g, S_g), then q_g.
constexpr size_t attention_member_bytes(int d) { return size_t(kBeatBytes) + size_t(d); }
// The header and the G queries of a pass: the bytes the host writes per pass (G = 1: a
// head's header + q, 16 + d: 112 at d = 96).
constexpr size_t attention_header_q_bytes(int G, int d) {
  return size_t(kHeaderBytes) + size_t(d) + size_t(G - 1) * attention_member_bytes(d);
}
// The result bytes per head (392 at d = 96).
constexpr size_t attention_result_bytes(int d) { return size_t(attention_result_words(d)) * 4; }
static_assert(attention_row_beats(kBoardHeadDim) * kBeatBytes == kBoardHeadDim);
static_assert(attention_header_q_bytes(1, kBoardHeadDim) == 112 && attention_result_bytes(kBoardHeadDim) == 392);

// Input beats / bytes of one head: 2 + d / 8 + 2 (d / 8) T beats (2 + 12 + 24 T at d = 96).
constexpr uint64_t attention_head_beats(int T, int d) {
  return 2 + uint64_t(attention_row_beats(d)) + 2 * uint64_t(attention_row_beats(d)) * uint64_t(T);
}
constexpr uint64_t attention_head_bytes(int T, int d) { return attention_head_beats(T, d) * kBeatBytes; }
// A head's input bytes as its header says, for a unit built for head dimension d (INT4: 16
// + d + bank + T (K row + V row); TIP: 16 + d + tags + bank + each row at its region's tier,
// `tiers` the N regions' tiers from the head's tag beats; a shared-stream pass: its G - 1
// member beats and queries more). Throws bitsim::Error for a TIP header without tiers.
struct AttentionHeadHeader;
uint64_t attention_head_bytes(const AttentionHeadHeader& h, int d, const TipTier* tiers = nullptr);

// Header fields. encode_attention_header writes them as given, without validation (so tests
// can build bad headers): beat 0 = magic | version << 16 | flags << 24 | T << 32; beat 1 =
// m (bits 17:0, wider values spill into 23:18) | shift << 24 (wider values spill into the
// reserved bits).
struct AttentionHeadHeader {
  uint32_t T = 1;       // context length, 1..attention_max_t(int4)
  uint32_t m = 0;       // multiplier, < 2^18
  uint32_t shift = 24;  // S, 0..63
  bool legacy = false;  // legacy shift mode: z = (s_max - s_t) >> 8
  bool online = false;  // the online-softmax unit's stream (rows interleaved)
  bool int4 = false;    // INT4 KV rows (with online): bank, then K_t V_t in the INT4 format
  uint32_t outliers = 0;  // INT4: the K rows' outlier lanes n, 0..8; TIP: KVQ4+L's lanes L, 4 or 8
  bool tip = false;     // TIP rows (with online): tags, bank, then K_t V_t at each region's tier
  uint32_t region_log2 = 0;  // TIP: log2 of the region size R, 4..8 (0 without TIP)
  bool last = false;    // last head of the transfer
  uint32_t group = 1;   // G: 1 for a head; 2..kAttentionMaxGroup for a shared-stream pass (flags bit 5)
  uint16_t magic = kAttentionMagic;
  uint8_t version = kAttentionVersion;
};
std::array<uint64_t, 2> encode_attention_header(const AttentionHeadHeader& h);
// The same as 16 bytes at out16.
void write_attention_header(const AttentionHeadHeader& h, uint8_t* out16);

// The attention unit's error codes (its ERROR_CODE register values).
enum class AttentionError : uint32_t {
  None = 0,
  BadMagic = 1,           // beat 0 bits 15:0 != 0xA77E
  BadVersion = 2,         // beat 0 bits 23:16 != 1
  ReservedBits = 3,       // flags bits 7:6, or beat 1's (or a member beat's) reserved bits, set; a bad TIP tag; G
                          // outside 2..kAttentionMaxGroup with flags bit 5
  BadLength = 4,          // T outside 1..512
  MultiplierTooWide = 5,  // beat 1 bits 23:18 set: m does not fit 18 bits
  Truncated = 6,          // TLAST before the end of the head flagged last
  TrailingData = 7,       // no TLAST on the last beat of the head flagged last
  VariantMismatch = 8,    // flags bit 2 not this unit's variant, or online with legacy; flags bit 5 not
                          // this unit's (attention.gqa), or G above its attention.gqa_group
};
const char* attention_error_name(AttentionError e);

// Header checks, in this order: magic and version (beat 0 alone: check_attention_beat0),
// then reserved bits, T, m (parse_attention_header checks all of them). *h is filled when
// the result is None.
AttentionError check_attention_beat0(uint64_t beat0);
AttentionError parse_attention_header(uint64_t beat0, uint64_t beat1, AttentionHeadHeader* h);
// A shared-stream pass's member beat (m_g, S_g), written as given (wider values spill into the
// reserved bits), and its check: ReservedBits or MultiplierTooWide, else None with *m, *shift.
uint64_t encode_attention_member(uint32_t m, uint32_t shift);
AttentionError parse_attention_member(uint64_t beat, uint32_t* m, uint32_t* shift);

// One head of an attention stream as the unit built for head dimension d walks it: the
// header, then the head's attention_head_bytes(header, d) bytes in all. The one walker of
// the attention stream: the fast fidelity's attention engine and fuzz_attention_stream use it.
struct HeadLayout {
  AttentionHeadHeader header;
  // A shared-stream pass: each member's (m, S), member 0's the header's.
  std::vector<std::array<uint32_t, 2>> members;
  uint64_t bytes = 0;  // the whole head: header, q and rows (and the INT4 bank; TIP's tags and bank)
  std::vector<TipTier> tiers;  // TIP: region r's tier, from the tag beats (empty otherwise)
};
// Parses the header of the head that starts `left` bytes before the end of its stream (in:
// its bytes; none read past `left`; a TIP head's tag beats after q are read too, and a
// shared-stream pass's member beats, whose errors are the header's). Truncated
// when the header (or a TIP head's tags) or the head does not fit in `left`; the header's own
// errors as parse_attention_header gives them, a bad TIP tag as ReservedBits.
AttentionError next_head(const uint8_t* in, uint64_t left, int d, HeadLayout* h);

}  // namespace bitsim::model
