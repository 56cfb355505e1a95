#pragma once
// AttentionUnit: the integer attention unit of CIRCUITS.md section 3, clocked as in
// docs/hw-timing.md (last section): the shared engine lanes (engine_lane.h: streams, result
// queue, busy, error latch, discard, clear, status registers) with the attention datapath.
// One head at a time per lane, 8 MACs per lane (one 8-byte beat per clock) shared by the K
// phase and the V phase, and one m multiplier shared by the lanes. Built for a head dimension
// d (attention.head_dim, the board's 96). Per head: header (2 beats), q (d / 8), T K rows
// (d / 8 beats each), T V rows (d / 8 each) in; acc_0..acc_{d-1}, sum, 0 (d + 2 words,
// d / 2 + 1 beats; 98 words, 49 beats at d = 96) out, TLAST on the last beat of the head
// flagged last. The stream format is model/attention_stream.h; the arithmetic equals
// golden::attention_head bit for bit (both modes), the weight step being num::attention_weight.
//
// The datapath, per lane, per beat taken at edge c:
//   - s_t is complete with row t's last K beat; p_t is computed when row t's first V beat is
//     taken (the shared multiplier is asked once per d / 8 cycles per lane, at most 2
//     multiplies per d / 8 >= 1 cycles in all: it never stalls, so the model does not
//     arbitrate it);
//   - a head whose last V beat is taken at c queues its d / 2 + 1 result beats for edge c + drain
//     (they leave one per edge, as the result stream has room). The result bank holds one
//     head: a head's last V beat is taken only at an edge where the lane's queue is empty
//     (all earlier beats pushed at earlier edges); only heads shorter than d / 2 + 1 + drain beats
//     (T = 1) can wait for it when the output is not back-pressured.
//   - TLAST must be on exactly the last beat of the head flagged last (else Truncated, or
//     TrailingData when it is missing there);
//   - errors (model::AttentionError): the lane does the rest (engine_lane.h). Details:
//     docs/hw-timing.md.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <systemc>

#include "hw/parts/clock.h"
#include "hw/circuits/engine_lane.h"
#include "hw/circuits/engine_registry.h"
#include "hw/fast/fast_engine.h"
#include "model/attention_stream.h"
#include "model/kv_format.h"
#include "model/kv_tip.h"

namespace bitsim::hw {

// The unit's ERROR_CODE values, by their hw name (the host's driver decodes them).
using model::AttentionError;
using model::attention_error_name;

// attention.gqa's values (docs/variants-attention.md 9).
inline constexpr const char* kAttentionGqaNames[] = {"per-head", "shared-stream"};

// The shipped default is the board's attention unit as bitsim runs it (the board sets
// reg_base); visit() gives each field's key, range, unit, evidence label and meaning
// (base/config_field.h).
struct AttentionUnitConfig {
  int drain = 4;               // cycles from a head's last V beat to the push of its first
                               // result beat (model, no board figure). Default 4: the MAC
                               // pipeline's last accumulate plus the output register
  int input_fifo_beats = 2;    // depth of each lane's input stream FIFO (beats)
  int output_fifo_beats = 16;  // depth of each lane's output stream FIFO (beats); when it is
                               // full the lane takes no input
  uint64_t reg_base = 0x43C1'0000;  // byte address of the status register block (lane l at
                                    // reg_base + l * 0x100); transactions on `ctrl` carry
                                    // absolute addresses (0 behind an offset-passing router)
  std::string variant = "two-phase";  // the circuit: the board's two-phase unit, or the
                                      // online-softmax unit (docs/variants-attention.md)
  std::string kv_format = "int8";     // the KV rows it reads: the board's int8, or the INT4
                                      // codec (docs/variants-attention.md 8; online-softmax only)
  int kv_outlier_channels = 0;        // int4: K channels kept as fp16 outlier lanes (0..8)
  std::string gqa = "per-head";       // grouped-query attention: one pass per query head, or
                                      // the shared-stream unit (docs/variants-attention.md 9)
  int gqa_group = 4;                  // shared-stream: the G (query heads a pass) it is built for
  int head_dim = model::kBoardHeadDim;  // d: the q, K and V rows' int8 values it is built for
                                        // (the board's 96; rows of d / 8 beats)
  model::TipSettings tip;             // kv.format = tip: the precision tiers (docs/tip.md)

  template <typename Self, typename Visitor>
  static void visit(Self& c, Visitor&& v) {
    v(c.drain, FieldInfo{"attention.drain", 0, 1024, "cycles", Evidence::kSimulated,
                         "attention unit: head's last V beat -> first result beat (CIRCUITS.md 3)"});
    visit_engine_ports(c, "attention", "attention unit", v);
    v(c.variant, FieldInfo{"attention.variant", 0, 0, "", Evidence::kSimulated,
                           "attention circuit: two-phase (the board's: K phase, V phase, division on the CPU) "
                           "or online-softmax (APEX: one pass, running max, interpolated exp, division on the "
                           "PL; docs/variants-attention.md)",
                           1, true, {model::kAttentionVariantNames[0], model::kAttentionVariantNames[1]}});
    v(c.kv_format, FieldInfo{"kv.format", 0, 0, "", Evidence::kSimulated,
                             "KV cache format: int8 (the board's, fixed per-(layer, head) scales) or int4 (APEX's "
                             "KVQ: K per channel, V per token in groups of 32 with fp16 scales; needs "
                             "attention.variant = online-softmax; docs/variants-attention.md 8)",
                             1, true, {"int8", "int4", "tip"}});
    v(c.kv_outlier_channels, FieldInfo{"kv.outlier_channels", 0, model::kKvMaxOutlierChannels, "channels",
                                       Evidence::kSimulated,
                                       "kv.format = int4: the K channels with the largest calibration max|K| kept "
                                       "as fp16 outlier lanes (0..8; must be 0 with int8)"});
    v(c.gqa, FieldInfo{"attention.gqa", 0, 0, "", Evidence::kSimulated,
                       "grouped-query attention: per-head (one pass per query head, each streaming its group's "
                       "K/V rows) or shared-stream (one pass of a K/V head's rows for the G query heads of its "
                       "group, G score and V datapaths a lane; docs/variants-attention.md 9)",
                       1, true, {kAttentionGqaNames[0], kAttentionGqaNames[1]}});
    v(c.gqa_group, FieldInfo{"attention.gqa_group", 2, model::kAttentionMaxGroup, "query heads", Evidence::kSimulated,
                             "attention.gqa = shared-stream: the largest G (query heads per K/V head) the unit is "
                             "built for: its member datapaths per lane (resources follow it)"});
    v(c.head_dim, FieldInfo{"attention.head_dim", model::kHeadDimStep, model::kMaxHeadDim, "values",
                            Evidence::kSimulated,
                            "the head dimension d the unit is built for: q, K and V rows of d int8 (d / 8 beats, 8 "
                            "MACs a lane), a result of d + 2 words; a multiple of 8 (int4 and tip: of 32); the "
                            "board's is 96; a model's head_dim must equal it (docs/variants-attention.md 10)"});
    v(c.tip.region, FieldInfo{"kv.tip.region", 16, 256, "positions", Evidence::kSimulated,
                              "kv.format = tip: positions per region, a power of two (docs/tip.md)"});
    v(c.tip.sink, FieldInfo{"kv.tip.sink", 0, model::kAttentionInt4MaxT, "positions", Evidence::kSimulated,
                            "kv.format = tip: the first positions always kept at KVQ8, a multiple of kv.tip.region"});
    v(c.tip.recent, FieldInfo{"kv.tip.recent", 16, model::kAttentionInt4MaxT, "positions", Evidence::kSimulated,
                              "kv.format = tip: the last positions kept at KVQ8, a multiple of kv.tip.region"});
    v(c.tip.kvq8_regions, FieldInfo{"kv.tip.kvq8_regions", 0, model::kAttentionInt4MaxT, "regions", Evidence::kSimulated,
                                    "kv.format = tip: regions past the recent window that keep KVQ8 (the most "
                                    "attended, by mean attention mass)"});
    v(c.tip.lane_regions, FieldInfo{"kv.tip.lane_regions", 0, model::kAttentionInt4MaxT, "regions", Evidence::kSimulated,
                                    "kv.format = tip: regions held at KVQ4 with fp16 outlier lanes (the next most "
                                    "attended); the rest are KVQ4"});
    v(c.tip.lanes, FieldInfo{"kv.tip.lanes", 4, 8, "lanes", Evidence::kSimulated,
                             "kv.format = tip: fp16 outlier lanes of a KVQ4+L row, 4 or 8"});
  }
  model::AttentionVariant kind() const { return model::attention_variant_of(variant); }
  model::KvFormat kv() const { return model::kv_format_of(kv_format); }
  bool int4() const { return kv() == model::KvFormat::Int4; }
  bool tip_rows() const { return kv() == model::KvFormat::Tip; }
  bool shared_stream() const { return gqa == kAttentionGqaNames[1]; }
  // The query heads a pass takes: 1 per head, the built G for the shared-stream unit.
  int group() const { return shared_stream() ? gqa_group : 1; }
  // Throws bitsim::Error naming `who` and the key of the first field out of range.
  void validate(const std::string& who) const {
    check_engine_fields(*this, "attention", engine_reg::kLaneStride, who);
    check_head_dim(who);
    tip.validate(who);
  }
  // Throws bitsim::Error naming `who` and attention.head_dim when head_dim is not a multiple
  // of 8 in 8..256, or (int4, tip) not a multiple of 32 (model::check_head_dim).
  void check_head_dim(const std::string& who) const;
};

// The attention arithmetic of one lane (CIRCUITS.md 3), built for head dimension `head_dim`
// (rows of head_dim / 8 beats; arrays sized for model::kMaxHeadDim) and for `group` query heads a pass
// (1: one pass per head; 2..: the shared-stream unit of docs/variants-attention.md 9, whose G
// members each have the per-head unit's registers and operators and take every K and V beat in
// the same clock).
class AttentionDatapath final : public LaneDatapath {
 public:
  AttentionDatapath(int head_dim, model::AttentionVariant variant, bool int4 = false, bool tip = false, int group = 1)
      : online_(variant == model::AttentionVariant::OnlineSoftmax), int4_(int4 && online_), tip_(tip && online_ && !int4),
        group_max_(group), d_(head_dim), row_beats_(model::attention_row_beats(head_dim)), members_(size_t(group)) {}
  uint32_t truncated_code() const override { return uint32_t(AttentionError::Truncated); }
  uint32_t trailing_data_code() const override { return uint32_t(AttentionError::TrailingData); }
  int error_row() const override;
  uint32_t queue_entries(int result_delay) const override;
  uint32_t room_for_next_beat(uint32_t capacity) const override;
  void take(EngineLane& lane, const StreamBeat& beat, uint64_t c) override;
  void abort(EngineLane&, uint64_t) override { phase_ = Phase::Header0; }
  uint64_t multiplies() const { return multiplies_; }

 private:
  enum class Phase : uint8_t { Header0, Header1, Q, Member, Tags, Bank, K, V };
  // One query head's registers: its q, m and S, its score state, sum and accumulators (the
  // per-head unit has one; the shared-stream unit one per member of the pass).
  struct Member {
    alignas(8) std::array<int8_t, model::kMaxHeadDim> q{};
    uint32_t m = 0, shift = 0;
    int32_t s_cur = 0, s_max = 0, p = 0;
    uint32_t sum = 0;
    bool rescale = false;  // online: the current row grew the maximum (alpha applies)
    uint32_t alpha = 0;    // online: the rescale factor of the current row
    std::array<int32_t, model::kMaxHeadDim> acc{};     // the first d in use
    std::array<int32_t, model::kAttentionMaxT> s{};   // two-phase: the score buffer
    std::array<int64_t, model::kMaxHeadDim> acc64{};  // INT4 and TIP: 60-bit accumulators
    // TIP: the current region's part l of the sum and the register file of (l_r, m_r).
    uint32_t l = 0;
    std::array<uint32_t, model::kTipMaxRegions> l_r{};
    std::array<int32_t, model::kTipMaxRegions> m_r{};
  };
  void header1(EngineLane& lane, const StreamBeat& b, uint64_t c);
  void q_beat(const StreamBeat& b);
  void member_beat(EngineLane& lane, const StreamBeat& b, uint64_t c);
  void k_beat(EngineLane& lane, const StreamBeat& b);
  void v_beat(EngineLane& lane, const StreamBeat& b, uint64_t c);
  void finish_head(EngineLane& lane, bool tlast, uint64_t c);
  // The online-softmax unit (docs/variants-attention.md): rows interleaved K_t V_t.
  void online_k_done(EngineLane& lane);
  void online_v_beat(EngineLane& lane, const StreamBeat& b, uint64_t c);
  void online_v_row_done(EngineLane& lane, bool tlast, uint64_t c);
  // The INT4 KV rows (docs/variants-attention.md 8.3-8.4): the bank, then K_t V_t.
  void int4_bank_beat(EngineLane& lane, const StreamBeat& b, uint64_t c);
  // INT4 and TIP rows (the 62-bit datapath; model::tip_k12, model::tip_accumulate_v).
  void wide_k_beat(EngineLane& lane, const StreamBeat& b);
  void wide_v_beat(EngineLane& lane, const StreamBeat& b, uint64_t c);
  // TIP rows (docs/tip.md "Stream"): the tag beats, the bank, then K_t V_t at each region's
  // tier; the region registers (l_r, m_r) and the masses after the normalizer.
  void tip_tag_beat(EngineLane& lane, const StreamBeat& b, uint64_t c);
  model::TipTier tip_tier() const { return tip_tiers_[size_t(t_ >> h_.region_log2)]; }
  int row_beats() const;  // beats of the current row (K or V)

  bool online_ = false;          // this lane's circuit is the online-softmax unit
  bool int4_ = false;            // online: the unit reads INT4 KV rows (kv.format = int4)
  bool tip_ = false;             // online: the unit reads TIP rows (kv.format = tip)
  int group_max_ = 1;            // G the unit is built for (1: one pass per query head)
  int d_ = model::kBoardHeadDim;  // the head dimension it is built for (attention.head_dim)
  int row_beats_ = model::attention_row_beats(model::kBoardHeadDim);  // q, K and V rows: d / 8 beats

  Phase phase_ = Phase::Header0;
  uint64_t header0_ = 0;
  model::AttentionHeadHeader h_;
  int T_ = 0;
  int G_ = 1;      // the pass's members (the header's G)
  int qm_ = 0;     // the member whose q is coming in
  int beat_ = 0;   // beat within q or within the current row (0..d/8 - 1)
  int t_ = 0;      // current K or V row
  uint64_t multiplies_ = 0;  // uses of the m multipliers (V rows outside legacy mode)
  std::vector<Member> members_;
  // INT4: the head's row sizes, its bank, the row being collected.
  model::KvStorage int4_st_;
  // The largest bank (TIP's: d fp16 scales, sv and 8 lane channels at d = kMaxHeadDim).
  std::array<uint8_t, model::kv_pad_to_beat(2 * model::kMaxHeadDim + 2 + model::kKvMaxOutlierChannels)> bank_bytes_{};
  model::KvInt4Bank bank_;
  std::array<uint8_t, 2 * model::kMaxHeadDim> row_{};
  // TIP: the tag beats and the regions' tiers, the V scale.
  std::array<uint8_t, model::tip_tag_beats(model::kTipMaxRegions) * model::kBeatBytes> tag_bytes_{};
  std::vector<model::TipTier> tip_tiers_;
  uint16_t sv_ = 0;
};

// The attention unit in fast fidelity (hw/fast/fast_engine.h): the chain's buffers as one stream,
// walked head by head with model::next_head; each head's scores, weights and weighted sum by
// the fast kernels of the unit's variant. A header for another variant is the clocked
// unit's error (the batch runs on the clocked board). Key: "h{T},{flags},{outliers};" per head
// (TIP: "h{T},{flags},{L},{log2 R},{tag beats in hex};"), "g{G}," before it for a shared-stream
// pass (its G members computed one after the other against the same rows).
class AttentionFastEngine final : public FastEngine {
 public:
  explicit AttentionFastEngine(const AttentionUnitConfig& config) : config_(config) {}
  bool compute(FastEngineContext& ctx, const std::vector<FastBuffer>& stream, std::string& key,
               std::vector<uint8_t>& results) const override;

 private:
  // One head at s (its layout h; of a shared-stream pass, its member `member`) into the
  // result bytes at `out` (attention_result_bytes(d), TIP's masses after them).
  bool head(const uint8_t* s, const model::HeadLayout& h, int member, uint8_t* out, bool timing_only) const;
  AttentionUnitConfig config_;
};

// The attention unit: the engine lanes with an AttentionDatapath per lane.
class AttentionUnit : public EngineLanes {
 public:
  // Throws std::invalid_argument for a drain outside 0..1024 (and as EngineLanes).
  AttentionUnit(sc_core::sc_module_name name, Clock& clock, const AttentionUnitConfig& config);
  const AttentionUnitConfig& config() const { return config_; }
  // Uses of the shared m multiplier by a lane (V rows outside legacy mode).
  uint64_t multiplies(int lane) const;

 private:
  AttentionUnitConfig config_;
};

// The attention unit's registration (hw/circuits/engine_registry.h): registers at
// 0x43C1_0000, lanes fed by at0 (0x4042_0000) and at1 (0x4043_0000), with the SG engine by
// board.attention_dma_sg (CIRCUITS.md 5: SG chains).
EngineKind attention_unit_kind();

}  // namespace bitsim::hw
