#include "hw/attention_unit.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <string>

#include "numerics/numerics.h"

namespace bitsim::hw {

static_assert(std::endian::native == std::endian::little, "beats are unpacked with memcpy");

std::array<uint64_t, 2> encode_attention_header(const AttentionHeadHeader& h) {
  const uint64_t flags = (h.last ? 1u : 0u) | (h.legacy ? 2u : 0u);
  const uint64_t b0 = uint64_t(h.magic) | (uint64_t(h.version) << 16) | (flags << 24) | (uint64_t(h.T) << 32);
  const uint64_t b1 = uint64_t(h.m) | (uint64_t(h.shift) << 24);
  return {b0, b1};
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
  }
  return "unknown attention error";
}

AttentionUnit::AttentionUnit(sc_core::sc_module_name name, const Clock& clock,
                             const AttentionUnitConfig& config)
    : sc_core::sc_module(name),
      ctrl("ctrl"),
      clock_(clock),
      config_(config),
      exp_(num::exp_table()) {
  const std::string me = this->name();
  if (config_.lanes < 1 || config_.lanes > 8) throw std::invalid_argument(me + ": lanes must be in 1..8");
  config_.validate(me);
  lanes_.resize(size_t(config_.lanes));
  for (int i = 0; i < config_.lanes; ++i) {
    Lane& l = lanes_[size_t(i)];
    l.in = std::make_unique<AxiStream>(("in" + std::to_string(i)).c_str(), config_.input_fifo_beats);
    l.out = std::make_unique<AxiStream>(("out" + std::to_string(i)).c_str(), config_.output_fifo_beats);
    wake_list_ |= l.in->written_event();
  }
  wake_list_ |= wake_;

  ctrl.register_b_transport(this, &AttentionUnit::b_transport);
  ctrl.register_transport_dbg(this, &AttentionUnit::transport_dbg);

  SC_METHOD(on_clock);
  sensitive << clock_.posedge();
  dont_initialize();
}

AxiStream& AttentionUnit::in(int lane) {
  lane_ref(lane);
  return *lanes_[size_t(lane)].in;
}

AxiStream& AttentionUnit::out(int lane) {
  lane_ref(lane);
  return *lanes_[size_t(lane)].out;
}

const AttentionUnit::Lane& AttentionUnit::lane_ref(int lane) const {
  if (lane < 0 || lane >= lanes()) throw std::out_of_range(std::string(name()) + ": no such lane");
  return lanes_[size_t(lane)];
}

const AttentionLaneStats& AttentionUnit::stats(int lane) const { return lane_ref(lane).stats; }
AttentionLaneError AttentionUnit::error(int lane) const { return lane_ref(lane).err; }
bool AttentionUnit::stopped(int lane) const { return lane_ref(lane).phase == Phase::Stopped; }

bool AttentionUnit::busy(int lane) const {
  const Lane& l = lane_ref(lane);
  return l.in_transfer || l.bank_next < l.bank_count || l.zero_pending || l.out->size() > 0;
}

LaneRegisterView AttentionUnit::registers(int lane) const {
  const Lane& l = lane_ref(lane);
  LaneRegisterView v;
  v.busy = busy(lane);
  v.error = l.err.code != AttentionError::None;
  v.stopped = l.phase == Phase::Stopped;
  v.error_code = uint32_t(l.err.code);
  v.error_unit = l.err.head < 0 ? engine_reg::kNone : uint32_t(l.err.head);
  v.error_row = l.err.row < 0 ? engine_reg::kNone : uint32_t(l.err.row);
  v.units_done = l.stats.heads;
  v.rows_done = l.stats.kv_rows;
  v.beats_in = l.stats.beats_in;
  v.beats_out = l.stats.beats_out;
  return v;
}

void AttentionUnit::clear_error(int lane) {
  lane_ref(lane);
  Lane& l = lanes_[size_t(lane)];
  if (l.err.code == AttentionError::None) return;
  if (l.phase == Phase::Stopped) {
    l.err = {};
    l.phase = Phase::Header0;
    wake_.notify(sc_core::SC_ZERO_TIME);
  } else {
    l.clear_requested = true;  // applied when the error sequence ends (end_of_error)
  }
}

// ---- Clocked behaviour -------------------------------------------------------------------

void AttentionUnit::on_clock() {
  if (sleeping_) {
    // Woken between edges: act from the next rising edge (docs/hw-timing.md).
    sleeping_ = false;
    next_trigger();
    return;
  }
  if (clock_.stop_requested()) return;
  const uint64_t c = clock_.cycle();
  bool active = false;
  for (Lane& l : lanes_) active |= step_lane(l, c);
  if (!active) {
    sleeping_ = true;
    next_trigger(wake_list_);
  }
}

[[gnu::always_inline]] inline bool AttentionUnit::step_lane(Lane& l, uint64_t c) {
  AxiStream& in = *l.in;
  AxiStream& out = *l.out;
  bool more_input = false;
  if (in.valid() && l.phase != Phase::Stopped) {
    const bool final_v = l.phase == Phase::V && l.t + 1 == l.T && l.beat + 1 == kAttentionRowBeats;
    const bool bank_free = l.bank_next == l.bank_count && !l.zero_pending;
    if (out.ready() && (!final_v || bank_free)) {
      const StreamBeat b = in.pop();
      ++l.stats.beats_in;
      take_beat(l, b, c);
      more_input = true;  // more beats likely follow: poll rather than sleep and wake
    } else {
      ++l.stats.stall_cycles;
      more_input = true;
    }
  }
  if (out.ready()) {
    if (l.bank_next < l.bank_count) {
      if (l.bank_ready <= c) {
        const bool last = l.bank_last && l.bank_next + 1 == l.bank_count;
        out.push(StreamBeat{l.bank[size_t(l.bank_next)], last});
        ++l.bank_next;
        ++l.stats.beats_out;
        if (last) ++l.stats.transfers;
        close_busy_if_idle(l, c);
      }
    } else if (l.zero_pending && l.zero_ready <= c) {
      out.push(StreamBeat{0, true});
      l.zero_pending = false;
      ++l.stats.beats_out;
      ++l.stats.transfers;
      close_busy_if_idle(l, c);
    }
  }
  return more_input || l.bank_next < l.bank_count || l.zero_pending;
}

void AttentionUnit::close_busy_if_idle(Lane& l, uint64_t c) {
  if (l.busy_open && !l.in_transfer && l.bank_next == l.bank_count && !l.zero_pending) {
    l.stats.busy_cycles += c - l.transfer_start + 1;
    l.busy_open = false;
  }
}

void AttentionUnit::take_beat(Lane& l, const StreamBeat& b, uint64_t c) {
  if (!l.in_transfer) {
    l.in_transfer = true;
    l.head = 0;
    if (!l.busy_open) {
      l.busy_open = true;
      l.transfer_start = c;
    }
  }
  switch (l.phase) {
    case Phase::Header0: {
      l.header0 = b.data;
      if (uint16_t(b.data & 0xFFFF) != kAttentionMagic) return fail(l, AttentionError::BadMagic, -1, b.last, c);
      if (uint8_t(b.data >> 16) != kAttentionVersion) return fail(l, AttentionError::BadVersion, -1, b.last, c);
      if (b.last) return fail(l, AttentionError::Truncated, -1, true, c);
      l.phase = Phase::Header1;
      return;
    }
    case Phase::Header1: {
      const uint32_t flags = uint32_t(l.header0 >> 24) & 0xFF;
      const uint32_t T = uint32_t(l.header0 >> 32);
      if ((flags & 0xFC) != 0 || (b.data >> 30) != 0) return fail(l, AttentionError::ReservedBits, -1, b.last, c);
      if (T < 1 || T > uint32_t(kAttentionMaxT)) return fail(l, AttentionError::BadLength, -1, b.last, c);
      if (((b.data >> 18) & 0x3F) != 0) return fail(l, AttentionError::MultiplierTooWide, -1, b.last, c);
      l.T = int(T);
      l.last_head = (flags & 1) != 0;
      l.legacy = (flags & 2) != 0;
      l.m = uint32_t(b.data) & kAttentionMaxM;
      l.shift = uint32_t(b.data >> 24) & 0x3F;
      l.beat = 0;
      l.t = 0;
      l.phase = Phase::Q;
      if (b.last) return fail(l, AttentionError::Truncated, -1, true, c);
      return;
    }
    case Phase::Q: {
      std::memcpy(l.q.data() + 8 * l.beat, &b.data, 8);
      if (++l.beat == kAttentionRowBeats) {
        l.beat = 0;
        l.s_cur = 0;
        l.phase = Phase::K;
      }
      if (b.last) return fail(l, AttentionError::Truncated, -1, true, c);
      return;
    }
    case Phase::K: {
      int8_t k[8];
      std::memcpy(k, &b.data, 8);
      const int8_t* q = l.q.data() + 8 * l.beat;
      int32_t s = l.s_cur;
      for (int i = 0; i < 8; ++i) s += int32_t(q[i]) * int32_t(k[i]);  // 8 MACs
      l.s_cur = s;
      if (++l.beat == kAttentionRowBeats) {
        l.s[size_t(l.t)] = s;
        l.s_max = l.t == 0 ? s : std::max(l.s_max, s);
        l.s_cur = 0;
        l.beat = 0;
        ++l.stats.kv_rows;
        if (++l.t == l.T) {
          l.t = 0;
          l.sum = 0;
          l.acc.fill(0);
          l.phase = Phase::V;
        }
      }
      if (b.last) return fail(l, AttentionError::Truncated, l.phase == Phase::V ? l.T : l.t, true, c);
      return;
    }
    case Phase::V: {
      if (l.beat == 0) {
        // p_t from the shared multiplier (or the legacy shift) and the EXP ROM.
        const uint64_t diff = uint64_t(int64_t(l.s_max) - int64_t(l.s[size_t(l.t)]));
        uint64_t z;
        if (l.legacy) {
          z = diff >> 8;
        } else {
          z = (diff * l.m) >> l.shift;
          ++l.stats.multiplies;
        }
        l.p = int32_t(exp_[size_t(std::min<uint64_t>(z, 255))]);
        l.sum += uint32_t(l.p);
      }
      int8_t v[8];
      std::memcpy(v, &b.data, 8);
      int32_t* acc = l.acc.data() + 8 * l.beat;
      const int32_t p = l.p;
      for (int i = 0; i < 8; ++i) acc[i] += p * int32_t(v[i]);  // 8 MACs
      if (++l.beat == kAttentionRowBeats) {
        l.beat = 0;
        ++l.stats.kv_rows;
        if (++l.t == l.T) return finish_head(l, b.last, c);
      }
      if (b.last) return fail(l, AttentionError::Truncated, l.T + l.t, true, c);
      return;
    }
    case Phase::Discard:
      if (b.last) end_of_error(l, c);
      return;
    case Phase::Stopped: return;  // not reached: a stopped lane takes no input
  }
}

void AttentionUnit::finish_head(Lane& l, bool tlast, uint64_t c) {
  for (int i = 0; i < kAttentionHeadDim / 2; ++i)
    l.bank[size_t(i)] = uint64_t(uint32_t(l.acc[size_t(2 * i)])) | (uint64_t(uint32_t(l.acc[size_t(2 * i + 1)])) << 32);
  l.bank[kAttentionResultBeats - 1] = uint64_t(l.sum);  // sum, then one zero word
  l.bank_next = 0;
  l.bank_count = kAttentionResultBeats;
  l.bank_ready = c + uint64_t(config_.drain);
  l.bank_last = l.last_head && tlast;
  ++l.stats.heads;
  ++l.head;
  l.t = 0;
  l.phase = Phase::Header0;
  if (l.last_head) {
    if (tlast) {
      l.in_transfer = false;
      l.head = 0;
    } else {
      fail(l, AttentionError::TrailingData, -1, false, c);  // head = heads done
    }
    return;
  }
  if (tlast) fail(l, AttentionError::Truncated, -1, true, c);
}

void AttentionUnit::fail(Lane& l, AttentionError e, int row, bool tlast, uint64_t c) {
  l.err = AttentionLaneError{e, l.head, row, c};
  ++l.stats.errors;
  l.phase = Phase::Discard;
  if (tlast) end_of_error(l, c);
}

void AttentionUnit::end_of_error(Lane& l, uint64_t c) {
  l.zero_pending = true;  // leaves after the bank's beats, then the S2MM completes
  l.zero_ready = c + uint64_t(config_.drain);
  l.in_transfer = false;
  l.head = 0;
  if (l.clear_requested) {
    l.clear_requested = false;
    l.err = {};
    l.phase = Phase::Header0;
  } else {
    l.phase = Phase::Stopped;
  }
}

// ---- Registers ---------------------------------------------------------------------------

void AttentionUnit::b_transport(tlm::tlm_generic_payload& p, sc_core::sc_time&) {
  RegAccess a;
  if (!decode_reg_access(p, config_.reg_base, lanes(), &a)) return;
  if (a.write) {
    if (a.offset == engine_reg::kControl && (a.value & engine_reg::kControlClear)) clear_error(a.lane);
    complete_write(p);
    return;
  }
  uint32_t v = 0;
  read_lane_register(registers(a.lane), a.offset, &v);
  complete_read(p, v);
}

unsigned int AttentionUnit::transport_dbg(tlm::tlm_generic_payload& p) {
  if (p.get_command() != tlm::TLM_READ_COMMAND) return 0;
  RegAccess a;
  if (!decode_reg_access(p, config_.reg_base, lanes(), &a)) return 0;
  uint32_t v = 0;
  read_lane_register(registers(a.lane), a.offset, &v);
  complete_read(p, v);
  return 4;
}

}  // namespace bitsim::hw
