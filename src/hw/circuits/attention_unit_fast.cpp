// AttentionFastEngine (hw/circuits/attention_unit.h): the attention unit's fast face. Compiled apart
// from the clocked datapath so that the fuzz build keeps compare tracing on it
// (src/CMakeLists.txt).
#include "hw/circuits/attention_unit.h"

#include <cstring>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::hw {

bool AttentionFastEngine::compute(FastEngineContext& ctx, const std::vector<FastBuffer>& stream, std::string& key,
                                  std::vector<uint8_t>& results) const {
  const bool online_unit = config_.kind() == model::AttentionVariant::OnlineSoftmax;
  const bool int4_unit = online_unit && config_.int4();
  const bool tip_unit = online_unit && config_.tip_rows();
  const int group_max = config_.group();  // 1: one pass per query head
  const int d = config_.head_dim;         // the rows' head dimension the unit is built for
  // The chain's buffers, concatenated: the stream the unit sees.
  size_t total = 0;
  for (const auto& g : stream) total += g.bytes;
  std::vector<uint8_t> s(total);
  size_t o = 0;
  for (const auto& g : stream) {
    ctx.memory.read(g.addr, s.data() + o, g.bytes);
    o += g.bytes;
  }
  size_t p = 0;
  for (bool last = false; !last;) {
    model::HeadLayout h;
    if (model::next_head(s.data() + p, s.size() - p, d, &h) != model::AttentionError::None) return false;
    const model::AttentionHeadHeader& hh = h.header;
    // A header for the other variant: the clocked unit's error.
    if (hh.online != online_unit || (hh.online && hh.legacy) || hh.int4 != int4_unit || hh.tip != tip_unit ||
        (hh.group > 1) != (group_max > 1) || int(hh.group) > group_max)
      return false;
    const uint32_t flags = (hh.last ? model::kAttentionFlagLast : 0u) | (hh.legacy ? model::kAttentionFlagLegacy : 0u) |
                           (hh.online ? model::kAttentionFlagOnline : 0u) | (hh.int4 ? model::kAttentionFlagInt4 : 0u) |
                           (hh.tip ? model::kAttentionFlagTip : 0u) |
                           (hh.group > 1 ? model::kAttentionFlagShared : 0u);
    const int G = int(hh.group);
    if (G > 1) key += fmt::format("g{},", G);  // a shared-stream pass: G members' results
    size_t result_bytes = model::attention_result_bytes(d);
    if (hh.tip) {  // the timing follows each region's tier: the tag beats go into the key
      const int regions = model::tip_regions(int(hh.T), int(hh.region_log2));
      key += fmt::format("h{},{},{},{},", hh.T, flags, hh.outliers, hh.region_log2);
      for (int i = 0; i < model::tip_tag_beats(regions); ++i) {
        uint64_t tags;
        std::memcpy(&tags, s.data() + p + model::attention_header_q_bytes(G, d) + 8 * size_t(i), 8);
        key += fmt::format("{:x}.", tags);
      }
      key += ";";
      result_bytes += size_t(model::tip_mass_beats(regions)) * model::kBeatBytes;
    } else {
      key += fmt::format("h{},{},{};", hh.T, flags, hh.outliers);
    }
    const size_t at = results.size();
    results.resize(at + size_t(G) * result_bytes, 0);
    for (int g = 0; g < G; ++g)  // each member against the same rows, its result after the last's
      if (!head(s.data() + p, h, g, results.data() + at + size_t(g) * result_bytes, ctx.timing_only)) return false;
    last = hh.last;
    p += h.bytes;
  }
  return p == s.size();
}

bool AttentionFastEngine::head(const uint8_t* s, const model::HeadLayout& h, int member, uint8_t* out,
                               bool timing_only) const {
  const model::AttentionHeadHeader& hh = h.header;
  const int d = config_.head_dim;
  const size_t qs = model::attention_header_q_bytes(int(hh.group), d);  // where the rows' part begins
  const uint32_t m = h.members[size_t(member)][0];
  const int shift = int(h.members[size_t(member)][1]);
  // INT4: the bank's outlier list must be channels (else the clocked unit's error).
  model::KvInt4Bank bank;
  model::TipBank tip_bank;
  const size_t tag_bytes =
      hh.tip ? size_t(model::tip_tag_beats(int(h.tiers.size()))) * model::kBeatBytes : 0;  // TIP: before the bank
  try {
    if (hh.int4) bank = model::read_kv_bank(s + qs, int(hh.outliers), d);
    if (hh.tip) tip_bank = model::read_tip_bank(s + qs + tag_bytes, int(hh.outliers), d);
  } catch (const Error&) {
    return false;
  }
  if (timing_only) return true;
  // Member 0's q after the header, member g's after its member beat.
  const size_t q_at = member == 0 ? size_t(model::kHeaderBytes)
                                  : model::attention_header_q_bytes(member, d) + size_t(model::kBeatBytes);
  const int8_t* q = reinterpret_cast<const int8_t*>(s + q_at);
  const int8_t* K = reinterpret_cast<const int8_t*>(s + qs);
  uint32_t sum = 0;
  int32_t* acc = reinterpret_cast<int32_t*>(out);
  if (hh.tip) {  // the tags, the bank, then each row at its region's tier; the masses after the sum
    uint32_t masses[2 * model::kTipMaxRegions];
    const int regions = int(h.tiers.size());
    fast::attention_head_tip(q, tip_bank, h.tiers.data(), int(hh.region_log2),
                             s + qs + tag_bytes + model::tip_bank_bytes(int(hh.outliers), d), int(hh.T), m, shift, acc,
                             &sum, masses);
    for (int r = 0; r < regions; ++r) {
      const uint16_t a = uint16_t(masses[r]);
      std::memcpy(out + model::attention_result_bytes(d) + 2 * size_t(r), &a, 2);
    }
  } else if (hh.int4) {  // the bank, then the INT4 rows interleaved
    const size_t bank_bytes = model::kv_storage(model::KvFormat::Int4, int(hh.outliers), d).bank;
    fast::attention_head_int4(q, bank, s + qs + bank_bytes, int(hh.T), m, shift, acc, &sum);
  } else if (hh.online) {  // rows interleaved: K_t V_t
    fast::attention_head_online(q, K, K + d, int(hh.T), d, 2 * size_t(d), m, shift, acc, &sum);
  } else {
    const int8_t* V = K + size_t(hh.T) * size_t(d);
    fast::attention_head(q, K, V, int(hh.T), d, m, shift, hh.legacy, acc, &sum);
  }
  std::memcpy(out + model::attention_sum_word(d) * 4, &sum, 4);
  return true;
}

}  // namespace bitsim::hw
