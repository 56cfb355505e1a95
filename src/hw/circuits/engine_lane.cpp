#include "hw/circuits/engine_lane.h"

#include "hw/parts/fingerprint.h"

#include <stdexcept>
#include <string>

namespace bitsim::hw {

namespace {
uint32_t pow2_at_least(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}
}  // namespace

// ---- EngineLane ----------------------------------------------------------------------------

EngineLane::EngineLane(int index, const EngineLaneConfig& config, std::unique_ptr<LaneDatapath> datapath)
    : in_(std::make_unique<AxiStream>(("in" + std::to_string(index)).c_str(), config.input_fifo_beats)),
      out_(std::make_unique<AxiStream>(("out" + std::to_string(index)).c_str(), config.output_fifo_beats)),
      datapath_(std::move(datapath)),
      result_delay_(config.result_delay) {
  const uint32_t cap = pow2_at_least(datapath_->queue_entries(result_delay_));
  queue_.resize(cap);
  mask_ = cap - 1;
}

bool EngineLane::busy() const {
  return in_transfer_ || count_ > 0 || datapath_->holds_result() || out_->size() > 0;
}

LaneRegisterView EngineLane::registers() const {
  LaneRegisterView v;
  v.busy = busy();
  v.error = err_.code != 0;
  v.stopped = stopped();
  v.error_code = err_.code;
  v.error_unit = err_.unit < 0 ? engine_reg::kNone : uint32_t(err_.unit);
  v.error_row = err_.row < 0 ? engine_reg::kNone : uint32_t(err_.row);
  v.units_done = stats_.units;
  v.rows_done = stats_.rows;
  v.beats_in = stats_.beats_in;
  v.beats_out = stats_.beats_out;
  return v;
}

bool EngineLane::clear_error() {
  if (err_.code == 0) return false;
  if (mode_ == Mode::Stopped) {
    err_ = {};
    mode_ = Mode::Run;
    return true;
  }
  clear_requested_ = true;  // applied when the error sequence ends (end_of_error)
  return false;
}

void EngineLane::queue(uint64_t data, bool last, uint64_t ready) {
  Item& it = queue_[(head_ + count_) & mask_];
  it.data = data;
  it.last = last;
  it.ready = ready;
  ++count_;
}

void EngineLane::end_transfer(bool tlast, uint64_t c) {
  if (!tlast) return fail(datapath_->trailing_data_code(), -1, false, c);  // unit = units done
  close_transfer();
}

void EngineLane::close_transfer() {
  in_transfer_ = false;
  unit_ = 0;
}

void EngineLane::fail(uint32_t code, int row, bool tlast, uint64_t c) {
  err_ = EngineLaneError{code, unit_, row, c};
  ++stats_.errors;
  datapath_->abort(*this, c);
  mode_ = Mode::Discard;
  if (tlast) end_of_error(c);
}

void EngineLane::end_of_error(uint64_t c) {
  queue(0, true, c + uint64_t(result_delay_));  // the S2MM completes on it
  close_transfer();
  if (clear_requested_) {
    clear_requested_ = false;
    err_ = {};
    mode_ = Mode::Run;
  } else {
    mode_ = Mode::Stopped;
  }
}

// ---- Clocked behaviour ---------------------------------------------------------------------

[[gnu::always_inline]] inline bool EngineLane::step(uint64_t c) {
  AxiStream& in = *in_;
  bool more_input = false;
  if (in.valid() && mode_ != Mode::Stopped) {
    more_input = true;  // more beats likely follow: poll rather than sleep and wake
    if (out_->ready() && count_ + datapath_->room_for_next_beat(mask_ + 1) <= mask_ + 1) {
      const StreamBeat b = in.pop();
      ++stats_.beats_in;
      take(b, c);
    } else {
      ++stats_.stall_cycles;
    }
  }
  if (count_ > 0) push_result(c);
  return count_ > 0 || more_input;
}

void EngineLane::take(const StreamBeat& b, uint64_t c) {
  if (!in_transfer_) {
    in_transfer_ = true;
    unit_ = 0;
    if (!busy_open_) {
      busy_open_ = true;
      transfer_start_ = c;
    }
  }
  if (mode_ != Mode::Run) {
    if (b.last) end_of_error(c);  // discarding
    return;
  }
  datapath_->take(*this, b, c);
  // TLAST on a beat that neither ended the transfer nor failed: truncated.
  if (b.last && mode_ == Mode::Run && in_transfer_)
    fail(datapath_->truncated_code(), datapath_->error_row(), true, c);
}

void EngineLane::push_result(uint64_t c) {
  const Item& it = queue_[head_];
  if (it.ready > c || !out_->ready()) return;
  out_->push(StreamBeat{it.data, it.last});
  ++stats_.beats_out;
  if (it.last) ++stats_.transfers;
  head_ = (head_ + 1) & mask_;
  --count_;
  if (busy_open_ && !in_transfer_ && count_ == 0 && !datapath_->holds_result()) {
    // The lane falls idle: close the busy interval opened by the transfer's first beat.
    stats_.busy_cycles += c - transfer_start_ + 1;
    busy_open_ = false;
  }
}

// ---- EngineLanes ---------------------------------------------------------------------------

EngineLanes::EngineLanes(sc_core::sc_module_name name, Clock& clock, const EngineLaneConfig& config,
                         const DatapathFactory& datapath)
    : sc_core::sc_module(name), ctrl("ctrl"), clock_(clock), config_(config) {
  const std::string me = this->name();
  if (config_.input_fifo_beats < 1 || config_.output_fifo_beats < 1)
    throw std::invalid_argument(me + ": FIFO depths must be >= 1");
  if (config_.reg_base % engine_reg::kLaneStride != 0)
    throw std::invalid_argument(me + ": reg_base must be 0x100-aligned");
  lanes_.reserve(kLanes);
  for (int i = 0; i < kLanes; ++i) {
    lanes_.emplace_back(i, config_, datapath());
    wake_list_ |= lanes_.back().in().written_event();
  }
  wake_list_ |= wake_;

  ctrl.register_b_transport(this, &EngineLanes::b_transport);
  ctrl.register_transport_dbg(this, &EngineLanes::transport_dbg);

  SC_METHOD(on_clock);
  sensitive << clock_.listen();
  dont_initialize();
}

const EngineLane& EngineLanes::lane_ref(int lane) const {
  if (lane < 0 || lane >= kLanes) throw std::out_of_range(std::string(name()) + ": no such lane");
  return lanes_[size_t(lane)];
}

EngineLane& EngineLanes::lane_ref(int lane) {
  return const_cast<EngineLane&>(static_cast<const EngineLanes*>(this)->lane_ref(lane));
}

AxiStream& EngineLanes::in(int lane) { return lane_ref(lane).in(); }
AxiStream& EngineLanes::out(int lane) { return lane_ref(lane).out(); }

void EngineLanes::clear_error(int lane) {
  if (lane_ref(lane).clear_error()) wake_.notify(sc_core::SC_ZERO_TIME);
}

void EngineLanes::on_clock() {
  if (sleeping_) {
    // Woken by an event between edges: act from the next rising edge, exactly as if the
    // module had been polling (docs/hw-timing.md, Clock and channels).
    sleeping_ = false;
    clock_.wake();
    next_trigger();
    return;
  }
  if (clock_.stop_requested()) return;
  if (edge(clock_.cycle())) {
    sleeping_ = true;
    clock_.sleep();
    next_trigger(wake_list_);
  }
}

bool EngineLanes::edge(uint64_t c) {
  bool active = false;
  for (EngineLane& l : lanes_) active |= l.step(c);
  return !active;
}

bool EngineLanes::input_waiting() const {
  for (const EngineLane& l : lanes_)
    if (l.in().valid()) return true;
  return false;
}

// ---- Registers -----------------------------------------------------------------------------

void EngineLanes::b_transport(tlm::tlm_generic_payload& p, sc_core::sc_time&) {
  RegAccess a;
  if (!decode_reg_access(p, config_.reg_base, kLanes, &a)) return;
  if (a.write) {
    if (a.offset == engine_reg::kControl && (a.value & engine_reg::kControlClear)) clear_error(a.lane);
    complete_write(p);
    return;
  }
  uint32_t v = 0;
  read_lane_register(registers(a.lane), a.offset, &v);
  complete_read(p, v);
}

unsigned int EngineLanes::transport_dbg(tlm::tlm_generic_payload& p) {
  if (p.get_command() != tlm::TLM_READ_COMMAND) return 0;
  RegAccess a;
  if (!decode_reg_access(p, config_.reg_base, kLanes, &a)) return 0;
  uint32_t v = 0;
  read_lane_register(registers(a.lane), a.offset, &v);
  complete_read(p, v);
  return 4;
}

uint64_t EngineLane::state_fingerprint() const {
  Fingerprint f;
  f.add(uint64_t(mode_)).add(in_transfer_).add(uint64_t(unit_)).add(clear_requested_).add(count_);
  f.add(uint64_t(in_->size())).add(uint64_t(out_->size()));
  return f.value();
}

uint64_t EngineLanes::state_fingerprint() const {
  Fingerprint f;
  for (const EngineLane& l : lanes_) f.add(l.state_fingerprint());
  return f.value();
}

}  // namespace bitsim::hw
