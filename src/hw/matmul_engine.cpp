#include "hw/matmul_engine.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <string>

namespace bitsim::hw {

namespace {
static_assert(std::endian::native == std::endian::little, "beats are unpacked with memcpy");
// ERROR_CODE carries model::StreamError's numeric value; the register map fixes them.
using model::StreamError;
static_assert(int(StreamError::None) == 0 && int(StreamError::BadMagic) == 1 &&
              int(StreamError::BadVersion) == 2 && int(StreamError::ReservedBits) == 3 &&
              int(StreamError::BadLength) == 4 && int(StreamError::ZeroRows) == 5 &&
              int(StreamError::InvalidTrit) == 6 && int(StreamError::Truncated) == 7 &&
              int(StreamError::TrailingData) == 9,
              "ERROR_CODE values are documented in matmul_engine.h and docs/hw-timing.md");

uint32_t pow2_at_least(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}
}  // namespace

MatmulEngine::MatmulEngine(sc_core::sc_module_name name, const Clock& clock,
                           const MatmulEngineConfig& config)
    : sc_core::sc_module(name),
      ctrl("ctrl"),
      clock_(clock),
      config_(config),
      trits_{} {
  const std::string me = this->name();
  if (config_.lanes < 1 || config_.lanes > 8)
    throw std::invalid_argument(me + ": lanes must be in 1..8");
  config_.validate(me);

  // At most two items are queued per edge (a flushed half beat and the error zero beat),
  // each waits at most pipeline_depth edges plus the edges the FIFO is full, during which
  // no input is taken: 2 * (depth + 2) + 8 entries never fill.
  const model::TritDecodeTable& table = model::trit_decode_table();
  for (int b = 0; b < 256; ++b)
    if (table.valid[b])
      for (int i = 0; i < 5; ++i) trits_[b][i] = table.trits[b][i];

  const uint32_t cap = pow2_at_least(2u * uint32_t(config_.pipeline_depth + 2) + 8u);
  pend_mask_ = cap - 1;
  lanes_.resize(size_t(config_.lanes));
  for (int i = 0; i < config_.lanes; ++i) {
    Lane& l = lanes_[size_t(i)];
    l.in = std::make_unique<AxiStream>(("in" + std::to_string(i)).c_str(), config_.input_fifo_beats);
    l.out = std::make_unique<AxiStream>(("out" + std::to_string(i)).c_str(), config_.output_fifo_beats);
    l.pending.resize(cap);
    l.x_by_byte.assign(size_t(kMaxDataBytes + 8) * 8, 0);
    wake_list_ |= l.in->written_event();
  }
  wake_list_ |= wake_;

  ctrl.register_b_transport(this, &MatmulEngine::b_transport);
  ctrl.register_transport_dbg(this, &MatmulEngine::transport_dbg);

  SC_METHOD(on_clock);
  sensitive << clock_.posedge();
  dont_initialize();
}

AxiStream& MatmulEngine::in(int lane) {
  if (lane < 0 || lane >= lanes()) throw std::out_of_range(std::string(name()) + ": no such lane");
  return *lanes_[size_t(lane)].in;
}

AxiStream& MatmulEngine::out(int lane) {
  if (lane < 0 || lane >= lanes()) throw std::out_of_range(std::string(name()) + ": no such lane");
  return *lanes_[size_t(lane)].out;
}

const MatmulEngine::Lane& MatmulEngine::lane_ref(int lane) const {
  if (lane < 0 || lane >= lanes()) throw std::out_of_range(std::string(name()) + ": no such lane");
  return lanes_[size_t(lane)];
}

const MatmulLaneStats& MatmulEngine::stats(int lane) const { return lane_ref(lane).stats; }
MatmulLaneError MatmulEngine::error(int lane) const { return lane_ref(lane).err; }
bool MatmulEngine::stopped(int lane) const { return lane_ref(lane).phase == Phase::Stopped; }

bool MatmulEngine::busy(int lane) const {
  const Lane& l = lane_ref(lane);
  return l.in_transfer || l.half_valid || l.pend_count > 0 || l.out->size() > 0;
}

LaneRegisterView MatmulEngine::registers(int lane) const {
  const Lane& l = lane_ref(lane);
  LaneRegisterView v;
  v.busy = busy(lane);
  v.error = l.err.code != StreamError::None;
  v.stopped = l.phase == Phase::Stopped;
  v.error_code = uint32_t(l.err.code);
  v.error_unit = l.err.group < 0 ? engine_reg::kNone : uint32_t(l.err.group);
  v.error_row = l.err.row < 0 ? engine_reg::kNone : uint32_t(l.err.row);
  v.units_done = l.stats.groups;
  v.rows_done = l.stats.rows;
  v.beats_in = l.stats.beats_in;
  v.beats_out = l.stats.beats_out;
  return v;
}

void MatmulEngine::clear_error(int lane) {
  lane_ref(lane);
  Lane& l = lanes_[size_t(lane)];
  if (l.err.code == StreamError::None) return;
  if (l.phase == Phase::Stopped) {
    l.err = {};
    l.phase = Phase::Header0;
    wake_.notify(sc_core::SC_ZERO_TIME);
  } else {
    l.clear_requested = true;  // applied when the error sequence ends (end_of_error)
  }
}

// ---- Clocked behaviour -------------------------------------------------------------------

void MatmulEngine::on_clock() {
  if (sleeping_) {
    // Woken by an event between edges: act from the next rising edge, exactly as if the
    // module had been polling (docs/hw-timing.md, Clock and channels).
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

[[gnu::always_inline]] inline bool MatmulEngine::step_lane(Lane& l, uint64_t c) {
  AxiStream& in = *l.in;
  AxiStream& out = *l.out;
  bool more_input = false;
  if (in.valid() && l.phase != Phase::Stopped) {
    if (out.ready() && l.pend_count + 2 <= pend_mask_ + 1) {
      const StreamBeat b = in.pop();
      ++l.stats.beats_in;
      if (l.phase == Phase::Rows && l.in_transfer)
        row_beat(l, b.data, b.last, c);  // the common case, straight to the MACs
      else
        take_beat(l, b, c);
      more_input = true;  // more beats likely follow: poll rather than sleep and wake
    } else {
      ++l.stats.stall_cycles;
      more_input = true;
    }
  }
  if (l.pend_count > 0) {
    const OutItem& it = l.pending[l.pend_head];
    if (it.ready <= c && out.ready()) {
      out.push(StreamBeat{it.data, it.last});
      ++l.stats.beats_out;
      if (it.last) ++l.stats.transfers;
      l.pend_head = (l.pend_head + 1) & pend_mask_;
      --l.pend_count;
      if (l.busy_open && !l.in_transfer && l.pend_count == 0 && !l.half_valid) {
        // The lane falls idle: close the busy interval opened by the transfer's first beat.
        l.stats.busy_cycles += c - l.transfer_start + 1;
        l.busy_open = false;
      }
    }
  }
  return l.pend_count > 0 || more_input;
}

void MatmulEngine::queue(Lane& l, uint64_t data, bool last, uint64_t ready) {
  OutItem& it = l.pending[(l.pend_head + l.pend_count) & pend_mask_];
  it.data = data;
  it.last = last;
  it.ready = ready;
  ++l.pend_count;
}

void MatmulEngine::take_beat(Lane& l, const StreamBeat& b, uint64_t c) {
  if (!l.in_transfer) {
    l.in_transfer = true;
    l.group = 0;
    if (!l.busy_open) {
      l.busy_open = true;
      l.transfer_start = c;
    }
  }
  switch (l.phase) {
    case Phase::Header0: {
      l.header0 = b.data;
      const uint16_t magic = uint16_t(b.data & 0xFFFF);
      const uint8_t version = uint8_t((b.data >> 16) & 0xFF);
      if (magic != model::kMatmulMagic) return fail(l, StreamError::BadMagic, -1, b.last, c);
      if (version != model::kMatmulVersion) return fail(l, StreamError::BadVersion, -1, b.last, c);
      if (b.last) return fail(l, StreamError::Truncated, -1, true, c);
      l.phase = Phase::Header1;
      return;
    }
    case Phase::Header1: {
      uint8_t bytes[model::kHeaderBytes];
      std::memcpy(bytes, &l.header0, 8);
      std::memcpy(bytes + 8, &b.data, 8);
      model::GroupHeader h;
      const StreamError e = model::parse_group_header(bytes, &h);
      if (e != StreamError::None) return fail(l, e, -1, b.last, c);
      l.n = h.n;
      l.rows = h.rows;
      l.last_group = h.last;
      l.x_beats = int((h.n + 7) / 8);
      l.data_bytes = int((h.n + 4) / 5);
      l.row_beats = int(model::packed_row_bytes(int(h.n)) / 8);
      l.beat = 0;
      l.row = 0;
      l.acc = 0;
      l.phase = Phase::X;
      if (b.last) return fail(l, StreamError::Truncated, -1, true, c);
      return;
    }
    case Phase::X: {
      std::memcpy(l.x.data() + 8 * l.beat, &b.data, 8);
      if (++l.beat == l.x_beats) {
        // x_j = 0 for j >= n: the stream's x padding and the row's padding digits never count.
        std::fill(l.x.begin() + l.n, l.x.end(), int8_t(0));
        spread_x(l);
        l.beat = 0;
        l.phase = Phase::Rows;
      }
      if (b.last) return fail(l, StreamError::Truncated, -1, true, c);
      return;
    }
    case Phase::Rows: return row_beat(l, b.data, b.last, c);
    case Phase::Discard:
      if (b.last) end_of_error(l, c);
      return;
    case Phase::Stopped: return;  // not reached: a stopped lane takes no input
  }
}

void MatmulEngine::spread_x(Lane& l) {
  // Byte positions up to 7 past the last data byte are read (the last beat's padding bytes).
  int16_t* out = l.x_by_byte.data();
  for (int k = 0; k < l.data_bytes + 8; ++k, out += 8)
    for (int i = 0; i < 8; ++i) out[i] = k < l.data_bytes && i < 5 ? l.x[size_t(5 * k + i)] : int16_t(0);
}

void MatmulEngine::row_beat(Lane& l, uint64_t data, bool tlast, uint64_t c) {
  const int first = l.beat * 8;                         // byte index within the row
  const int count = std::min(8, l.data_bytes - first);  // data bytes in this beat (>= 1)
  // Any data byte >= 243 (0xF3) is an invalid trit byte: all 8 bytes checked at once (a byte
  // is >= 0xF3 when its top bit is set and its low 7 bits plus 0x0D carry into bit 7).
  constexpr uint64_t kLow7 = 0x7F7F7F7F7F7F7F7Full, kTop = 0x8080808080808080ull, k0D = 0x0D0D0D0D0D0D0D0Dull;
  const uint64_t data_mask = count == 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * count)) - 1;
  if ((((data & kLow7) + k0D) & data & kTop & data_mask) != 0)
    return fail(l, StreamError::InvalidTrit, int(l.row), tlast, c);
  // The 5 MACs of each byte: its trits against x at its position, 8 lanes wide (the compiler
  // vectorises this); padding bytes meet zeros. Exact in int16: a lane adds 8 products of a
  // trit and an int8, within +-1024.
  const int16_t* x = l.x_by_byte.data() + size_t(first) * 8;
  int16_t lanes[8] = {};
  for (int k = 0; k < 8; ++k, x += 8) {
    const int16_t* t = trits_[uint8_t(data >> (8 * k))];
    for (int i = 0; i < 8; ++i) lanes[i] = int16_t(lanes[i] + t[i] * x[i]);
  }
  int32_t sum = 0;
  for (int16_t v : lanes) sum += v;
  l.acc += sum;
  if (++l.beat == l.row_beats) return finish_row(l, tlast, c);
  if (tlast) fail(l, StreamError::Truncated, int(l.row), true, c);
}

void MatmulEngine::finish_row(Lane& l, bool tlast, uint64_t c) {
  const int32_t r = l.acc;
  l.acc = 0;
  l.beat = 0;
  ++l.stats.rows;
  const bool group_end = l.row + 1 == l.rows;
  const bool transfer_end = group_end && l.last_group;
  const bool last_out = transfer_end && tlast;
  const uint64_t ready = c + uint64_t(config_.pipeline_depth);
  if (l.half_valid) {
    queue(l, uint64_t(uint32_t(l.half)) | (uint64_t(uint32_t(r)) << 32), last_out, ready);
    l.half_valid = false;
  } else if (group_end) {
    queue(l, uint64_t(uint32_t(r)), last_out, ready);  // odd R: the high word is padding
  } else {
    l.half = r;
    l.half_valid = true;
  }
  ++l.row;
  if (!group_end) {
    if (tlast) fail(l, StreamError::Truncated, int(l.row), true, c);
    return;
  }
  ++l.stats.groups;
  ++l.group;
  l.phase = Phase::Header0;
  if (transfer_end) {
    if (tlast) {
      l.in_transfer = false;
      l.group = 0;
    } else {
      fail(l, StreamError::TrailingData, -1, false, c);  // group = groups done, as decode_stream
    }
    return;
  }
  if (tlast) fail(l, StreamError::Truncated, -1, true, c);
}

void MatmulEngine::fail(Lane& l, StreamError e, int row, bool tlast, uint64_t c) {
  l.err = MatmulLaneError{e, l.group, row, c};
  ++l.stats.errors;
  if (l.half_valid) {  // a completed row's result still waiting for its pair leaves alone
    queue(l, uint64_t(uint32_t(l.half)), false, c + uint64_t(config_.pipeline_depth));
    l.half_valid = false;
  }
  l.phase = Phase::Discard;
  if (tlast) end_of_error(l, c);
}

void MatmulEngine::end_of_error(Lane& l, uint64_t c) {
  queue(l, 0, true, c + uint64_t(config_.pipeline_depth));  // the S2MM completes on it
  l.in_transfer = false;
  l.group = 0;
  if (l.clear_requested) {
    l.clear_requested = false;
    l.err = {};
    l.phase = Phase::Header0;
  } else {
    l.phase = Phase::Stopped;
  }
}

// ---- Registers ---------------------------------------------------------------------------

void MatmulEngine::b_transport(tlm::tlm_generic_payload& p, sc_core::sc_time&) {
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

unsigned int MatmulEngine::transport_dbg(tlm::tlm_generic_payload& p) {
  if (p.get_command() != tlm::TLM_READ_COMMAND) return 0;
  RegAccess a;
  if (!decode_reg_access(p, config_.reg_base, lanes(), &a)) return 0;
  uint32_t v = 0;
  read_lane_register(registers(a.lane), a.offset, &v);
  complete_read(p, v);
  return 4;
}

}  // namespace bitsim::hw
