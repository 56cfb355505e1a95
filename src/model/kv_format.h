#pragma once
// The KV cache's storage formats and their whole-storage accounting
// (docs/variants-attention.md section 8): the board's int8 rows and the INT4 codec after
// APEX's KVQ (K per channel, V per token in groups with fp16 scales, optional fp16 outlier
// lanes for the hardest K channels). Every byte the format stores in DDR is counted:
// payload, scales, outlier lanes, padding to a whole beat, tags, and the per-(layer, head)
// scale bank, as APEX insists ("a ratio computed from the payload alone is wrong").
//
// This is the accounting (and the context that fits the contiguous memory) and the rows'
// encoder and decoder; the INT4 format's attention datapath is specified in
// docs/variants-attention.md but not built.
#include <cstdint>
#include <string>

#include "model/board_shape.h"

namespace bitsim::model {

enum class KvFormat : uint8_t { Int8, Int4 };
constexpr int kKvMaxOutlierChannels = 8;  // kv.outlier_channels 0..8
constexpr int kKvInt4Bits = 4;
constexpr int kKvVGroup = 32;             // V: one fp16 scale per 32 values of a token's row
constexpr int kKvFp16Bytes = 2;

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

// "int8" / "int4" -> the format; bitsim::Error naming kv.format otherwise.
KvFormat kv_format_of(const std::string& name);
// The accounting of a format. Throws bitsim::Error for outlier_channels outside 0..8, or
// not 0 for int8 (naming kv.outlier_channels).
KvStorage kv_storage(KvFormat format, int outlier_channels);

// The largest context T whose cache fits `free_bytes` (what the contiguous memory leaves
// after everything else), capped at `limit` (the model's max_position_embeddings, or the
// unit's T range): the largest T with cache_bytes(layer_heads, T) <= free_bytes.
int largest_context(const KvStorage& s, uint64_t layer_heads, uint64_t free_bytes, int limit);

// ---- The INT4 rows, encoded and decoded (the format's golden definition, section 8) ----

// IEEE binary16 from binary32, round to nearest even (overflow -> inf, NaN -> a quiet NaN,
// tiny values -> subnormals or zero); and back (exact).
uint16_t fp16_from_float(float x);
float float_from_fp16(uint16_t h);

// A K row: k_td = clamp(rne(K_d / sk_d), -8, 7) as a two's complement nibble, channel 2i in
// the low nibble of byte i, sk_d = float_from_fp16(sk[d]); the outlier channels' nibbles 0
// and their values as fp16 lanes at byte 48 + 2j (j-th entry of `outliers`); the rest of the
// row (kv_storage(Int4, n).k.total() bytes) zero.
void encode_k_int4(const float* k, const uint16_t* sk, const int* outliers, int n, uint8_t* row);
// K_d = k_td * sk_d (outlier channels: their fp16 lane).
void decode_k_int4(const uint8_t* row, const uint16_t* sk, const int* outliers, int n, float* k);
// A V row: per group g of 32 values, s_g = fp16(max(max|V_g|, 1e-5) / 7) at byte 48 + 2g,
// v = clamp(rne(V / float_from_fp16(s_g)), -8, 7) as nibbles (value 2i low); the row
// (56 bytes) zero-padded.
void encode_v_int4(const float* v, uint8_t* row);
void decode_v_int4(const uint8_t* row, float* v);

}  // namespace bitsim::model
