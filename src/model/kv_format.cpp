#include "model/kv_format.h"

#include <fmt/format.h>

#include "model/error.h"

namespace bitsim::model {

namespace {
uint64_t pad_to_beat(uint64_t b) { return (b + kBeatBytes - 1) / kBeatBytes * kBeatBytes; }
}  // namespace

KvFormat kv_format_of(const std::string& name) {
  if (name == "int8") return KvFormat::Int8;
  if (name == "int4") return KvFormat::Int4;
  throw Error(fmt::format("kv.format = '{}' is not one of: int8, int4", name));
}

KvStorage kv_storage(KvFormat format, int n) {
  if (n < 0 || n > kKvMaxOutlierChannels)
    throw Error(fmt::format("kv.outlier_channels = {} is out of range [0, {}]", n, kKvMaxOutlierChannels));
  KvStorage s;
  s.format = format;
  s.outlier_channels = n;
  if (format == KvFormat::Int8) {
    if (n != 0) throw Error(fmt::format("kv.outlier_channels = {}: outlier lanes exist in kv.format = int4 only", n));
    s.k.payload = s.v.payload = kHeadDim;  // 96 int8, a whole number of beats
    return s;
  }
  // K: 96 nibbles (48 bytes), the n outlier channels' nibbles unused (padding), their values
  // as fp16 lanes behind the payload; the row padded to a beat.
  const uint64_t nibbles = uint64_t(kHeadDim) * kKvInt4Bits / 8;  // 48
  s.k.payload = uint64_t(kHeadDim - n) * kKvInt4Bits / 8;
  s.k.outliers = uint64_t(n) * kKvFp16Bytes;
  s.k.padding = (nibbles - s.k.payload) + pad_to_beat(nibbles + s.k.outliers) - (nibbles + s.k.outliers);
  // V: 48 bytes of nibbles, one fp16 scale per group of 32 values, padded to a beat.
  s.v.payload = nibbles;
  s.v.scales = uint64_t(kHeadDim / kKvVGroup) * kKvFp16Bytes;
  s.v.padding = pad_to_beat(s.v.payload + s.v.scales) - (s.v.payload + s.v.scales);
  // The bank: 96 fp16 K channel scales, then (with outliers) one byte per outlier channel
  // index, padded to a beat.
  s.bank = pad_to_beat(uint64_t(kHeadDim) * kKvFp16Bytes + uint64_t(n));
  return s;
}

int largest_context(const KvStorage& s, uint64_t layer_heads, uint64_t free_bytes, int limit) {
  if (layer_heads == 0 || s.per_position() == 0) return limit;
  const uint64_t fixed = layer_heads * s.bank;
  if (fixed > free_bytes) return 0;
  const uint64_t t = (free_bytes - fixed) / (layer_heads * s.per_position());
  return t < uint64_t(limit) ? int(t) : limit;
}

}  // namespace bitsim::model
