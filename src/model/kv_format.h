#pragma once
// The KV cache's storage formats and their whole-storage accounting
// (docs/variants-attention.md section 8): the board's int8 rows and the INT4 codec after
// APEX's KVQ (K per channel, V per token in groups with fp16 scales, optional fp16 outlier
// lanes for the hardest K channels). Every byte the format stores in DDR is counted:
// payload, scales, outlier lanes, padding to a whole beat, tags, and the per-(layer, head)
// scale bank, as APEX insists ("a ratio computed from the payload alone is wrong").
//
// This is the accounting (and the context that fits the contiguous memory), the rows'
// encoder and decoder, the bank, and the integer steps of the unit's read path
// (docs/variants-attention.md 8.3) that the golden reference, the clocked unit and the fast
// board share.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/board_shape.h"

namespace bitsim::model {

// Tip: the precision tiers of model/kv_tip.h (docs/tip.md): the golden reference, the
// attention unit and the host runtime (host/tip_cache.h) use them.
enum class KvFormat : uint8_t { Int8, Int4, Tip };
constexpr int kKvMaxOutlierChannels = 8;  // kv.outlier_channels 0..8
constexpr int kKvInt4Bits = 4;
constexpr int kKvVGroup = 32;             // V: one fp16 scale per 32 values of a token's row
constexpr int kKvFp16Bytes = 2;
// An INT4 row's packed nibbles (d channels, two a byte; 48 at d = 96): its lanes and scales
// start behind them.
constexpr int kv_nibble_bytes(int d) { return d / 2; }
// The head dimensions a format takes (attention.head_dim is a multiple of 8 in 8..256,
// model/board_shape.h): INT4 and TIP rows need whole V groups, d a multiple of kKvVGroup.
bool kv_head_dim_fits(KvFormat format, int d);
// Throws bitsim::Error naming attention.head_dim when d is out of its range or not one
// `format` takes.
void check_head_dim(KvFormat format, int d);
// Bytes padded to a whole 8-byte beat (rows, banks and the TIP bank).
constexpr uint64_t kv_pad_to_beat(uint64_t b) { return (b + kBeatBytes - 1) / kBeatBytes * kBeatBytes; }

// The bytes of one token's row of K or of V of one (layer, head), by kind.
struct KvRowBytes {
  uint64_t payload = 0;   // the quantized values (int8 or packed int4 nibbles) in use
  uint64_t scales = 0;    // per-row scales (V's fp16 group scales)
  uint64_t outliers = 0;  // fp16 outlier lanes
  uint64_t padding = 0;   // to a whole 8-byte beat, and the unused nibbles of outlier channels
  uint64_t tags = 0;      // precision or format tags per row (none in these formats)
  uint64_t total() const { return payload + scales + outliers + padding + tags; }
};

// A format's storage per (layer, head).
struct KvStorage {
  KvFormat format = KvFormat::Int8;
  int outlier_channels = 0;
  int head_dim = 0;        // d, the channels of a row (attention.head_dim)
  KvRowBytes k, v;         // per position
  uint64_t bank = 0;       // once per (layer, head): K's per-channel fp16 scales and the
                           // outlier channel list, padded to a beat (int8: 0, its two
                           // scales live in the header's m and the CPU)
  uint64_t per_position() const { return k.total() + v.total(); }
  // DDR bytes of the whole cache at `positions` positions for `layer_heads` (layer, head)s.
  uint64_t cache_bytes(uint64_t layer_heads, uint64_t positions) const {
    return layer_heads * (bank + positions * per_position());
  }
};

// "int8" / "int4" / "tip" -> the format; bitsim::Error naming kv.format otherwise.
KvFormat kv_format_of(const std::string& name);
// The accounting of a format for rows of d channels. Throws bitsim::Error for outlier_channels
// outside 0..8, or not 0 for int8 (naming kv.outlier_channels), and as check_head_dim.
KvStorage kv_storage(KvFormat format, int outlier_channels, int d);

// The largest context T whose cache fits `free_bytes` (what the contiguous memory leaves
// after everything else), capped at `limit` (the model's max_position_embeddings, or the
// unit's T range): the largest T with cache_bytes(layer_heads, T) <= free_bytes.
int largest_context(const KvStorage& s, uint64_t layer_heads, uint64_t free_bytes, int limit);

// ---- The INT4 rows, encoded and decoded (the format's golden definition, section 8) ----

// IEEE binary16 from binary32, round to nearest even (overflow -> inf, NaN -> a quiet NaN,
// tiny values -> subnormals or zero); and back (exact).
uint16_t fp16_from_float(float x);
float float_from_fp16(uint16_t h);

// Rows of d channels (d a multiple of 32). A K row: k_td = clamp(rne(K_d / sk_d), -8, 7) as a
// two's complement nibble, channel 2i in the low nibble of byte i, sk_d =
// float_from_fp16(sk[d]); the outlier channels' nibbles 0 and their values as fp16 lanes at
// byte d/2 + 2j (48 + 2j at d = 96; j-th entry of `outliers`); the rest of the row
// (kv_storage(Int4, n, d).k.total() bytes) zero.
void encode_k_int4(const float* k, const uint16_t* sk, const int* outliers, int n, int d, uint8_t* row);
// K_d = k_td * sk_d (outlier channels: their fp16 lane).
void decode_k_int4(const uint8_t* row, const uint16_t* sk, const int* outliers, int n, int d, float* k);
// A V row: per group g of 32 values, s_g = fp16(max(max|V_g|, 1e-5) / 7) at byte d/2 + 2g,
// v = clamp(rne(V / float_from_fp16(s_g)), -8, 7) as nibbles (value 2i low); the row
// (56 bytes at d = 96) zero-padded.
void encode_v_int4(const float* v, int d, uint8_t* row);
void decode_v_int4(const uint8_t* row, int d, float* v);

// The two's complement nibble of channel d of a row (channel 2i in the low nibble of byte i).
int kv_nibble(const uint8_t* row, int d);
// Sets channel d's nibble to q (-8..7, two's complement), the other nibble of its byte kept.
void kv_set_nibble(uint8_t* row, int d, int q);

// ---- The bank and the CPU's side (docs/variants-attention.md 8.2) ----------------------

// A (layer, head)'s bank: the d fp16 K channel scales sk_d = fp16(max(kmax_d, 1e-5) / 7)
// (its size is the head dimension) and the n outlier channels (the largest kmax_d, ties to
// the lower d, in increasing d).
struct KvInt4Bank {
  std::vector<uint16_t> sk;
  std::vector<int> outliers;
  int head_dim() const { return int(sk.size()); }
};
// From the calibration's per-channel max|K_d| (d values). Throws bitsim::Error (naming
// kv.outlier_channels) for n outside 0..8.
KvInt4Bank kv_int4_bank(const float* kmax, int n, int d);
// The bank as stored (kv_storage(Int4, n, d).bank bytes): sk_d at byte 2d, outlier j's
// channel at byte 2 d + j (192 + j at d = 96), zeros to the beat.
void write_kv_bank(const KvInt4Bank& bank, uint8_t* out);
// And back; Error if an outlier index is not a channel (>= d) or repeats.
KvInt4Bank read_kv_bank(const uint8_t* in, int n, int d);

// ---- The unit's read path (docs/variants-attention.md 8.3), exact integers -------------

// A binary16's fields: |h| = M 2^(E-25) with E = max(e, 1) and M = f (+1024 if e >= 1);
// exponent 31 (inf, NaN) read as the largest finite value (E = 30, M = 2047).
struct Fp16Fields {
  bool negative = false;
  int E = 1;
  uint32_t M = 0;
};
Fp16Fields fp16_fields(uint16_t h);
constexpr int kKvFixedShift = 4;  // K's fixed point: sk_d / 16 (a nibble k is 16 k)
constexpr int32_t kKvOutlierMin = -2048, kKvOutlierMax = 2047;  // 12 bits
// An outlier lane in K's fixed point: clamp(rne(16 h / sk), -2048, 2047), exact.
int32_t kv_outlier_fixed(uint16_t lane, uint16_t sk);
// The V weight of a row's group: w = p * sv * 2^16 with sv's exponent aligned: P = p * M;
// P << (E - 9) for E >= 9, else (P + 2^(8-E)) >> (9 - E). p <= 32767.
int64_t kv_v_weight(uint32_t p, uint16_t sv);
// The rescale of a 60-bit accumulator: (x * alpha + 2^14) >> 15, 128-bit product.
inline int64_t kv_rescale(int64_t x, uint32_t alpha) {
  return int64_t((__int128(x) * alpha + (__int128(1) << 14)) >> 15);
}
// The normalizer: r = floor(2^46 / sum), o_d = sat32((acc_d * r + 2^45) >> 46). sum >= 1.
void kv_normalize(const int64_t* acc, uint32_t sum, int n, int32_t* o);
// The header's attention scale of K's fixed point: s_k = 1/16.
constexpr float kKvInt4ScoreScale = 0.0625f;

}  // namespace bitsim::model
