#include "hw/circuits/attention_unit.h"

#include <fmt/format.h>

#include "hw/board.h"
#include "model/packed_image.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <string>

#include "base/error.h"
#include "numerics/numerics.h"

namespace bitsim::hw {

static_assert(std::endian::native == std::endian::little, "beats are unpacked with memcpy");

namespace {

void fail(EngineLane& lane, AttentionError e, int row, bool tlast, uint64_t c) {
  lane.fail(uint32_t(e), row, tlast, c);
}

EngineLaneConfig checked_lane_config(const AttentionUnitConfig& config, const std::string& name) {
  config.validate(name);
  return EngineLaneConfig{config.drain, config.input_fifo_beats, config.output_fifo_beats, config.reg_base};
}
}  // namespace

void AttentionUnitConfig::check_head_dim(const std::string& who) const {
  try {
    model::check_head_dim(kv(), head_dim);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", who, e.what()));
  }
}

// ---- AttentionUnit -------------------------------------------------------------------------

AttentionUnit::AttentionUnit(sc_core::sc_module_name name, Clock& clock, const AttentionUnitConfig& config)
    : EngineLanes(name, clock, checked_lane_config(config, std::string(name)),
                  [d = config.head_dim, kind = config.kind(), int4 = config.int4(), tip = config.tip_rows(),
                   group = config.group()] { return std::make_unique<AttentionDatapath>(d, kind, int4, tip, group); }),
      config_(config) {}

uint64_t AttentionUnit::multiplies(int lane) const {
  return static_cast<const AttentionDatapath&>(datapath(lane)).multiplies();
}

// ---- AttentionDatapath ---------------------------------------------------------------------

uint32_t AttentionDatapath::queue_entries(int result_delay) const {
  // A pass's result beats (G heads'), then (as in the matmul engine) at most two items per
  // edge while they wait: the bank is loaded only into an empty queue. TIP: the masses after
  // each result.
  const uint32_t head = uint32_t(model::attention_result_beats(d_)) +
                        (tip_ ? uint32_t(model::tip_mass_beats(model::kTipMaxRegions)) : 0u);
  return uint32_t(group_max_) * head + 2u * uint32_t(result_delay + 2) + 8u;
}

uint32_t AttentionDatapath::room_for_next_beat(uint32_t capacity) const {
  // A head's last V beat loads the result bank: only when every earlier beat has left.
  const bool final_v = phase_ == Phase::V && t_ + 1 == T_ && beat_ + 1 == row_beats();
  return final_v ? capacity : 2;
}

void AttentionDatapath::take(EngineLane& lane, const StreamBeat& b, uint64_t c) {
  switch (phase_) {
    case Phase::Header0: {
      header0_ = b.data;
      const AttentionError e = model::check_attention_beat0(b.data);
      if (e != AttentionError::None) return fail(lane, e, -1, b.last, c);
      phase_ = Phase::Header1;
      return;
    }
    case Phase::Header1: return header1(lane, b, c);
    case Phase::Q: return q_beat(b);
    case Phase::Member: return member_beat(lane, b, c);
    case Phase::Tags: return tip_tag_beat(lane, b, c);
    case Phase::Bank: return int4_bank_beat(lane, b, c);
    case Phase::K: return int4_ || tip_ ? wide_k_beat(lane, b) : k_beat(lane, b);
    case Phase::V:
      return int4_ || tip_ ? wide_v_beat(lane, b, c) : online_ ? online_v_beat(lane, b, c) : v_beat(lane, b, c);
  }
}

void AttentionDatapath::header1(EngineLane& lane, const StreamBeat& b, uint64_t c) {
  const AttentionError e = model::parse_attention_header(header0_, b.data, &h_);
  if (e != AttentionError::None) return fail(lane, e, -1, b.last, c);
  if (h_.online != online_ || (h_.online && h_.legacy) || h_.int4 != int4_ || h_.tip != tip_ ||
      (h_.group > 1) != (group_max_ > 1) || int(h_.group) > group_max_)
    return fail(lane, AttentionError::VariantMismatch, -1, b.last, c);
  if (int4_) int4_st_ = model::kv_storage(model::KvFormat::Int4, int(h_.outliers), d_);
  T_ = int(h_.T);
  G_ = int(h_.group);
  members_[0].m = h_.m;
  members_[0].shift = h_.shift;
  qm_ = 0;
  beat_ = 0;
  t_ = 0;
  phase_ = Phase::Q;
}

void AttentionDatapath::q_beat(const StreamBeat& b) {
  Member& mb = members_[size_t(qm_)];
  if (!collect_beat(mb.q.data(), &beat_, row_beats_, b.data)) return;
  mb.s_cur = 0;
  if (++qm_ < G_) {
    phase_ = Phase::Member;
    return;
  }
  phase_ = tip_ ? Phase::Tags : int4_ ? Phase::Bank : Phase::K;
}

// A shared-stream pass: member qm_'s (m, S) before its q.
void AttentionDatapath::member_beat(EngineLane& lane, const StreamBeat& b, uint64_t c) {
  Member& mb = members_[size_t(qm_)];
  const AttentionError e = model::parse_attention_member(b.data, &mb.m, &mb.shift);
  if (e != AttentionError::None) return fail(lane, e, -1, b.last, c);
  phase_ = Phase::Q;
}

void AttentionDatapath::k_beat(EngineLane& lane, const StreamBeat& b) {
  int8_t k[8];
  std::memcpy(k, &b.data, 8);
  for (int g = 0; g < G_; ++g) {  // each member's 8 MACs, the same K beat
    Member& mb = members_[size_t(g)];
    const int8_t* q = mb.q.data() + 8 * beat_;
    int32_t s = mb.s_cur;
    for (int i = 0; i < 8; ++i) s += int32_t(q[i]) * int32_t(k[i]);  // 8 MACs
    mb.s_cur = s;
  }
  if (++beat_ == row_beats_ && online_) return online_k_done(lane);
  if (beat_ == row_beats_) {
    for (int g = 0; g < G_; ++g) {
      Member& mb = members_[size_t(g)];
      mb.s[size_t(t_)] = mb.s_cur;
      mb.s_max = t_ == 0 ? mb.s_cur : std::max(mb.s_max, mb.s_cur);
      mb.s_cur = 0;
    }
    beat_ = 0;
    lane.row_done();
    if (++t_ == T_) {
      t_ = 0;
      for (int g = 0; g < G_; ++g) {
        members_[size_t(g)].sum = 0;
        members_[size_t(g)].acc.fill(0);
      }
      phase_ = Phase::V;
    }
  }
}

void AttentionDatapath::v_beat(EngineLane& lane, const StreamBeat& b, uint64_t c) {
  int8_t v[8];
  std::memcpy(v, &b.data, 8);
  for (int g = 0; g < G_; ++g) {
    Member& mb = members_[size_t(g)];
    if (beat_ == 0) {
      // p_t from the member's m multiplier (or the legacy shift) and the EXP ROM.
      mb.p = int32_t(num::attention_weight(uint32_t(int64_t(mb.s_max) - mb.s[size_t(t_)]), mb.m, int(mb.shift),
                                           h_.legacy));
      multiplies_ += h_.legacy ? 0 : 1;
      mb.sum += uint32_t(mb.p);
    }
    int32_t* acc = mb.acc.data() + 8 * beat_;
    const int32_t p = mb.p;
    for (int i = 0; i < 8; ++i) acc[i] += p * int32_t(v[i]);  // 8 MACs
  }
  if (++beat_ == row_beats_) {
    beat_ = 0;
    lane.row_done();
    if (++t_ == T_) finish_head(lane, b.last, c);
  }
}

// Online: s_t is complete (for every member). p for row t, and alpha when the maximum grows.
void AttentionDatapath::online_k_done(EngineLane& lane) {
  beat_ = 0;
  lane.row_done();
  for (int g = 0; g < G_; ++g) {
    Member& mb = members_[size_t(g)];
    const int32_t s = mb.s_cur;
    mb.s_cur = 0;
    mb.rescale = false;
    if (t_ == 0) {
      mb.s_max = s;
      mb.sum = 0;
      mb.acc.fill(0);
      mb.p = num::exp_table()[0];
    } else if (s <= mb.s_max) {
      mb.p = num::exp_interp(num::online_index8(uint32_t(int64_t(mb.s_max) - s), mb.m, int(mb.shift)));
      ++multiplies_;
    } else {
      mb.alpha = num::exp_interp(num::online_index8(uint32_t(int64_t(s) - mb.s_max), mb.m, int(mb.shift)));
      ++multiplies_;
      mb.rescale = true;
      mb.s_max = s;
      mb.p = num::exp_table()[0];
    }
  }
  phase_ = Phase::V;
}

// Online: one V beat; the rescale of the beat's 8 accumulators and the p.V products in the
// same clock (each member's).
void AttentionDatapath::online_v_beat(EngineLane& lane, const StreamBeat& b, uint64_t c) {
  int8_t v[8];
  std::memcpy(v, &b.data, 8);
  for (int g = 0; g < G_; ++g) {
    Member& mb = members_[size_t(g)];
    if (beat_ == 0) {
      if (mb.rescale) mb.sum = uint32_t(num::online_rescale(mb.sum, mb.alpha));
      mb.sum += uint32_t(mb.p);
    }
    int32_t* acc = mb.acc.data() + 8 * beat_;
    for (int i = 0; i < 8; ++i) {
      const int64_t a = mb.rescale ? num::online_rescale(acc[i], mb.alpha) : acc[i];
      acc[i] = int32_t(a + int64_t(mb.p) * v[i]);
    }
  }
  if (++beat_ == row_beats_) online_v_row_done(lane, b.last, c);
}

// Online and INT4: a V row is in: the next row's K, or after the last row the head's result.
void AttentionDatapath::online_v_row_done(EngineLane& lane, bool tlast, uint64_t c) {
  beat_ = 0;
  lane.row_done();
  if (++t_ == T_) {
    finish_head(lane, tlast, c);
  } else {
    phase_ = Phase::K;
  }
}

int AttentionDatapath::row_beats() const {
  if (tip_) {
    const model::TipTier t = tip_tier();
    const uint64_t k = model::tip_k_bytes(t, int(h_.outliers), d_);
    return int((phase_ == Phase::V ? model::tip_row_bytes(t, int(h_.outliers), d_) - k : k) / model::kBeatBytes);
  }
  if (!int4_) return row_beats_;
  return int((phase_ == Phase::V ? int4_st_.v.total() : int4_st_.k.total()) / model::kBeatBytes);
}

// INT4: the bank's beats (the K channel scales, the outlier list) into the unit's registers.
// An outlier index that is not a channel, or repeats, is the header's error (reserved bits).
void AttentionDatapath::int4_bank_beat(EngineLane& lane, const StreamBeat& b, uint64_t c) {
  const int beats = int((tip_ ? model::tip_bank_bytes(int(h_.outliers), d_) : int4_st_.bank) / model::kBeatBytes);
  std::memcpy(bank_bytes_.data() + size_t(beat_) * 8, &b.data, 8);
  if (++beat_ < beats) return;
  try {
    if (tip_) {
      const model::TipBank tb = model::read_tip_bank(bank_bytes_.data(), int(h_.outliers), d_);
      bank_ = tb.k;
      sv_ = tb.sv;
    } else {
      bank_ = model::read_kv_bank(bank_bytes_.data(), int(h_.outliers), d_);
    }
  } catch (const Error&) {
    return fail(lane, AttentionError::ReservedBits, -1, b.last, c);
  }
  beat_ = 0;
  phase_ = Phase::K;
}

// INT4 and TIP: a K row's beats (INT4: 16 nibbles a beat, then the outlier lanes; TIP: at its
// region's tier); the score at its last beat in the bank's fixed point sk_d / 16
// (model::tip_k12: an INT4 row is a KVQ4 row, or a KVQ4+L row with n lanes). The row's 12-bit
// K values are decoded once for every member.
void AttentionDatapath::wide_k_beat(EngineLane& lane, const StreamBeat& b) {
  std::memcpy(row_.data() + size_t(beat_) * 8, &b.data, 8);
  if (++beat_ < row_beats()) return;
  const model::TipTier tier = tip_             ? tip_tier()
                              : bank_.outliers.empty() ? model::TipTier::Kvq4
                                                       : model::TipTier::Kvq4Lanes;
  int32_t k12[model::kMaxHeadDim];
  model::tip_k12(row_.data(), tier, bank_, k12);
  for (int g = 0; g < G_; ++g) {
    Member& mb = members_[size_t(g)];
    int32_t s = 0;
    for (int d = 0; d < d_; ++d) s += int32_t(mb.q[size_t(d)]) * k12[d];
    mb.s_cur = s;
  }
  const bool first = t_ == 0;
  online_k_done(lane);
  if (first)
    for (int g = 0; g < G_; ++g) members_[size_t(g)].acc64.fill(0);
}

// INT4 and TIP: a V row's beats; at its last (INT4: the scale beat) the rescale (acc, sum
// and TIP's region part l), the row's accumulations (INT4 as a KVQ4 row: the group weights
// times the nibbles), and at a TIP region's last row the latch of (l_r, m_r); each member's.
void AttentionDatapath::wide_v_beat(EngineLane& lane, const StreamBeat& b, uint64_t c) {
  std::memcpy(row_.data() + size_t(beat_) * 8, &b.data, 8);
  if (++beat_ < row_beats()) return;
  const int R = 1 << h_.region_log2;
  for (int g = 0; g < G_; ++g) {
    Member& mb = members_[size_t(g)];
    if (tip_ && t_ % R == 0) mb.l = 0;
    if (mb.rescale) {
      mb.sum = uint32_t(num::online_rescale(mb.sum, mb.alpha));
      if (tip_) mb.l = uint32_t(num::online_rescale(mb.l, mb.alpha));
      for (int d = 0; d < d_; ++d) mb.acc64[size_t(d)] = model::kv_rescale(mb.acc64[size_t(d)], mb.alpha);
    }
    mb.sum += uint32_t(mb.p);
    if (tip_) mb.l += uint32_t(mb.p);
    model::tip_accumulate_v(row_.data(), tip_ ? tip_tier() : model::TipTier::Kvq4, sv_, uint32_t(mb.p), d_,
                            mb.acc64.data());
    if (tip_ && (t_ % R == R - 1 || t_ + 1 == T_)) {
      mb.l_r[size_t(t_ >> h_.region_log2)] = mb.l;
      mb.m_r[size_t(t_ >> h_.region_log2)] = mb.s_max;
    }
  }
  online_v_row_done(lane, b.last, c);
}

// TIP: the region tag beats after the queries (docs/tip.md "Stream"); a tag 3, or a bit past
// the last region, is the header's error (reserved bits).
void AttentionDatapath::tip_tag_beat(EngineLane& lane, const StreamBeat& b, uint64_t c) {
  const int regions = model::tip_regions(T_, int(h_.region_log2));
  std::memcpy(tag_bytes_.data() + size_t(beat_) * 8, &b.data, 8);
  if (++beat_ < model::tip_tag_beats(regions)) return;
  if (!model::read_tip_tags(tag_bytes_.data(), regions, &tip_tiers_))
    return fail(lane, AttentionError::ReservedBits, -1, b.last, c);
  beat_ = 0;
  phase_ = Phase::Bank;
}

void AttentionDatapath::finish_head(EngineLane& lane, bool tlast, uint64_t c) {
  // The result bank: per member, acc_0..acc_{d-1} two per beat, then sum and one zero word. The
  // online unit normalizes first (o_d in place of acc_d) and queues them after its normalizer
  // (INT4: after its last row's V accumulations too); each member has its own normalizer, so
  // the G results are ready at the same clock and leave member by member.
  // TIP: the last row's V tail only for a KVQ4(+L) row (a KVQ8 V beat accumulates as it
  // comes), then the masses one region a clock after the normalizer (docs/tip.md "Stream").
  const int regions = tip_ ? model::tip_regions(T_, int(h_.region_log2)) : 0;
  const bool tail = int4_ || (tip_ && tip_tiers_[size_t(regions - 1)] != model::TipTier::Kvq8);
  const uint64_t ready = c + uint64_t(lane.result_delay()) +
                         (online_ ? uint64_t(model::online_normalize_cycles(d_)) : 0) +
                         (tail ? uint64_t(model::kv_int4_v_tail_cycles(d_)) : 0) + uint64_t(regions);
  const bool last_pass = h_.last && tlast;
  for (int g = 0; g < G_; ++g) {
    Member& mb = members_[size_t(g)];
    const bool last = last_pass && g + 1 == G_;
    if (int4_ || tip_) model::kv_normalize(mb.acc64.data(), mb.sum, d_, mb.acc.data());
    else if (online_) num::online_normalize(mb.acc.data(), mb.sum, d_, mb.acc.data());
    for (int i = 0; i < d_ / 2; ++i)
      lane.queue(uint64_t(uint32_t(mb.acc[size_t(2 * i)])) | (uint64_t(uint32_t(mb.acc[size_t(2 * i + 1)])) << 32),
                 false, ready);
    lane.queue(uint64_t(mb.sum), last && !tip_, ready);
    if (tip_) {
      uint64_t beat = 0;
      for (int r = 0; r < regions; ++r) {
        const uint32_t a =
            model::tip_region_mass(mb.l_r[size_t(r)], mb.m_r[size_t(r)], mb.s_max, mb.sum, mb.m, int(mb.shift));
        beat |= uint64_t(a) << (16 * (r % 4));
        if (r % 4 == 3 || r + 1 == regions) {
          lane.queue(beat, last && r + 1 == regions, ready);
          beat = 0;
        }
      }
      multiplies_ += uint64_t(regions);
    }
  }
  lane.unit_done();
  t_ = 0;
  phase_ = Phase::Header0;
  if (h_.last) lane.end_transfer(tlast, c);
}

int AttentionDatapath::error_row() const {
  // K row t is t (after a K row's last beat: the next one), V row t is T + t; -1 in the
  // header or q (q just complete included). Online (rows interleaved): K row t is 2t, V row
  // t is 2t + 1.
  if (online_) {
    if (phase_ == Phase::V) return 2 * t_ + 1;
    return phase_ == Phase::K && (t_ > 0 || beat_ > 0) ? 2 * t_ : -1;
  }
  if (phase_ == Phase::V) return T_ + t_;
  return phase_ == Phase::K && (t_ > 0 || beat_ > 0) ? t_ : -1;
}

EngineKind attention_unit_kind() {
  EngineKind k;
  k.name = "attention";
  k.regs = 0x43C1'0000;
  k.dma_names = {"at0", "at1"};
  k.dma_bases = {0x4042'0000, 0x4043'0000};
  k.stream = "the attention stream's heads (model/attention_stream.h)";
  k.unit = "head";
  k.dma_sg = [](const BoardConfig& c) { return c.attention_dma_sg; };
  set_faces<AttentionUnit, AttentionFastEngine>(k, [](const BoardConfig& c) { return c.attention; });
  k.error_name = [](uint32_t code) { return std::string(attention_error_name(AttentionError(code))); };
  k.output_keys = [](const BoardConfig& c) {
    return std::vector<std::string>{fmt::format("attention.output_fifo_beats = {}", c.attention.output_fifo_beats)};
  };
  return k;
}

}  // namespace bitsim::hw
