#include "hw/interconnect/axi_dma.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "hw/parts/fingerprint.h"
#include "base/error.h"

namespace bitsim::hw {

using namespace dma_reg;

namespace {
constexpr uint64_t kBeatBytes = 8;
}  // namespace

AxiDma::AxiDma(sc_core::sc_module_name name, Clock& clock, const AxiDmaConfig& config)
    : sc_core::sc_module(name),
      ctrl("ctrl"),
      m_axi_mm2s("m_axi_mm2s"),
      m_axi_s2mm("m_axi_s2mm"),
      m_axi_sg("m_axi_sg"),
      mm2s_introut("mm2s_introut", false),
      s2mm_introut("s2mm_introut", false),
      clock_(clock),
      config_(config) {
  const std::string me = this->name();
  config_.validate(me);
  max_length_ = uint32_t((1ull << config_.length_bits) - 1);

  for (int i = 0; i < 2; ++i) {
    Channel& c = ch_[i];
    c.s2mm = i == 1;
    c.reg_base = c.s2mm ? kS2mmOffset : 0;
    c.regs = DmaChannelRegisters(c.s2mm, config_.has_sg);
  }
  ch_[0].mm2s_fifo.reset(size_t(config_.mm2s_fifo_beats));
  ch_[1].s2mm_fifo.reset(size_t(config_.s2mm_fifo_beats));
  ch_[1].write_reqs.reset(size_t(config_.s2mm_fifo_beats) + 1);
  sg_reads_.reset(4);
  sg_writes_.reset(4);

  ctrl.register_b_transport(this, &AxiDma::b_transport);

  SC_METHOD(tick);
  sensitive << clock_.listen();
  dont_initialize();
}

void AxiDma::end_of_elaboration() {
  idle_list_ |= wake_event_;
  s2mm_wait_list_ |= wake_event_;
  if (s2mm_in) s2mm_wait_list_ |= s2mm_in->written_event();
}

bool AxiDma::drained(const Channel& c) const {
  return c.discard_beats == 0 && c.w_owed == 0 && c.b_owed == 0 && c.sg_outstanding == 0;
}

bool AxiDma::quiescent(const Channel& c) const {
  const DmaState st = c.regs.state();
  return (st == DmaState::kHalted || st == DmaState::kIdle) && c.step == Step::kNone && !c.regs.reset_pending() &&
         drained(c);
}

bool AxiDma::active(DmaChannel ch) const { return !quiescent(ch_[int(ch)]); }

void AxiDma::restore_registers(DmaChannel ch, const DmaChannelRegisters& regs) {
  Channel& c = ch_[int(ch)];
  if (!quiescent(c) || regs.state() == DmaState::kBusy || regs.state() == DmaState::kStarting)
    throw Error(std::string(name()) + ": registers can be restored only on a quiet channel, to a quiet state");
  c.regs = regs;
  observed_[int(ch)] = regs;
}

uint64_t AxiDma::state_fingerprint() const {
  Fingerprint f;
  for (const Channel& c : ch_) {
    f.add(uint64_t(c.step)).add(c.mm2s_fifo.size()).add(c.reserved).add(c.discard_beats).add(c.s2mm_fifo.size());
    f.add(c.write_reqs.size()).add(c.w_owed).add(c.b_owed).add(c.w_left_in_req).add(uint64_t(c.sg_outstanding));
    f.add(c.packet_open);  // (aborted, ended and tlast are set afresh when a transfer's data starts)
  }
  for (const AxiMmLink* l : {&m_axi_mm2s, &m_axi_s2mm, &m_axi_sg})
    f.add(uint64_t(l->ar.size())).add(uint64_t(l->r.size())).add(uint64_t(l->aw.size())).add(uint64_t(l->w.size()))
        .add(uint64_t(l->b.size()));
  f.add(sg_reads_.size()).add(sg_writes_.size()).add(uint64_t(sg_read_rr_)).add(uint64_t(sg_write_rr_));
  return f.value();
}

void AxiDma::report_changes(uint64_t cycle) {
  for (int i = 0; i < 2; ++i)
    if (!(ch_[i].regs == observed_[i])) {
      observed_[i] = ch_[i].regs;
      observer_(DmaChannel(i), cycle);
    }
}

void AxiDma::set_register_observer(std::function<void(DmaChannel, uint64_t)> observer) {
  observer_ = std::move(observer);
  observed_[0] = ch_[0].regs;
  observed_[1] = ch_[1].regs;
}

// A data request of `beats` has left: the next one starts after it.
void AxiDma::request_issued(Channel& c, uint32_t beats) {
  c.xfer_addr += beats * kBeatBytes;
  c.req_beats += beats;
  c.next_req = request_beats(c.xfer_addr, c.xfer_beats - c.req_beats);
}

uint32_t AxiDma::request_beats(uint64_t addr, uint32_t left) const {
  const uint64_t to_boundary = (kAxiBoundaryBytes - axi_boundary_offset(addr)) / kBeatBytes;
  return uint32_t(std::min<uint64_t>({uint64_t(config_.max_burst_beats), uint64_t(left), to_boundary}));
}

// ---- AXI-Lite register file -------------------------------------------------------------

void AxiDma::b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  if (trans.get_command() == tlm::TLM_IGNORE_COMMAND) {
    trans.set_response_status(tlm::TLM_OK_RESPONSE);
    return;
  }
  if (trans.get_data_length() != 4 || trans.get_streaming_width() < 4) {
    trans.set_response_status(tlm::TLM_BURST_ERROR_RESPONSE);
    return;
  }
  if (trans.get_byte_enable_ptr() != nullptr && trans.get_byte_enable_length() != 0) {
    trans.set_response_status(tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
    return;
  }
  const uint64_t a = trans.get_address();
  if (a < config_.base_address || a - config_.base_address >= kWindowBytes) {
    trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return;
  }
  const uint32_t offset = uint32_t(a - config_.base_address);
  const uint32_t rel = offset >= kS2mmOffset ? offset - kS2mmOffset : offset;
  if (offset >= 2 * kS2mmOffset || !DmaChannelRegisters::is_register(rel)) {
    trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return;
  }
  if (trans.is_read()) {
    const uint32_t v = read_register(offset);
    std::memcpy(trans.get_data_ptr(), &v, 4);
  } else {
    uint32_t v = 0;
    std::memcpy(&v, trans.get_data_ptr(), 4);
    // The write is registered by the PL clock: it takes effect at the first rising edge
    // strictly after the access (time + annotated delay).
    const uint64_t t = (sc_core::sc_time_stamp() + delay).value();
    write_register(offset, v, t / clock_.period().value() + 1);
    wake_event_.notify(sc_core::SC_ZERO_TIME);
    if (observer_) report_changes(UINT64_MAX);
  }
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
}

uint32_t AxiDma::read_register(uint32_t offset) const {
  const Channel& c = ch_[offset >= kS2mmOffset ? 1 : 0];
  return c.regs.read(offset - c.reg_base);
}

void AxiDma::write_register(uint32_t offset, uint32_t value, uint64_t effective_cycle) {
  Channel& c = ch_[offset >= kS2mmOffset ? 1 : 0];
  switch (c.regs.write(offset - c.reg_base, value)) {
    case DmaWriteEffect::kStart:
      c.start_cycle = effective_cycle;
      break;
    case DmaWriteEffect::kReset:
      drop_transfer(c);
      if (drained(c)) c.regs.drain_complete();
      break;
    case DmaWriteEffect::kHalt:
    case DmaWriteEffect::kNone:
      break;
  }
}

// The channel's data stops: read beats still to come will be dropped, the data FIFO
// emptied; write beats already owed to a write request are still sent.
void AxiDma::drain_data(Channel& c) {
  if (!c.s2mm) {
    c.discard_beats += c.reserved;
    c.reserved = 0;
    c.mm2s_fifo.clear();
  } else {
    c.s2mm_fifo.truncate(c.w_owed);
  }
}

// A reset drops the channel's transfer. Traffic already on the bus drains.
void AxiDma::drop_transfer(Channel& c) {
  drain_data(c);
  const uint8_t idx = c.s2mm ? 1 : 0;
  for (size_t i = 0; i < sg_reads_.size(); ++i)
    if (sg_reads_.at(i).ch == idx) sg_reads_.at(i).discard = true;
  for (size_t i = 0; i < sg_writes_.size(); ++i)
    if (sg_writes_.at(i).ch == idx) sg_writes_.at(i).discard = true;
  c.step = Step::kNone;
  c.aborted = false;
  c.packet_open = false;
  c.wb_issued = c.wb_error = false;
}

// ---- clocked behaviour ------------------------------------------------------------------

void AxiDma::tick() {
  if (sleeping_) {  // woken by a register write or a stream beat: act from the next edge on
    sleeping_ = false;
    clock_.wake();
    return;
  }
  if (clock_.stop_requested()) return;
  switch (edge(clock_.cycle())) {
    case Rest::kAwake:
      break;
    case Rest::kIdle:
      sleeping_ = true;
      clock_.sleep();
      next_trigger(idle_list_);
      break;
    case Rest::kStreamWait:
      sleeping_ = true;
      clock_.sleep();
      next_trigger(s2mm_wait_list_);
      break;
  }
}

AxiDma::Rest AxiDma::edge(uint64_t now) {
  for (Channel& c : ch_)
    if (c.regs.state() == DmaState::kStarting && now >= c.start_cycle) begin(c, now);
  // Without the SG engine nothing ever travels on the SG link.
  if (config_.has_sg) sg_returns(now);
  mm2s_data(ch_[0], now);
  s2mm_data(ch_[1], now);
  if (config_.has_sg) sg_issue(now);

  for (Channel& c : ch_)
    if (c.regs.reset_pending() && drained(c)) c.regs.drain_complete();
  // (IOC_Irq and IOC_IrqEn) or (Err_Irq and Err_IrqEn): the enables sit at the status bits.
  static_assert(kSrIocIrq == kCrIocIrqEn && kSrErrIrq == kCrErrIrqEn);
  const bool mm2s_irq = ch_[0].regs.irq(), s2mm_irq = ch_[1].regs.irq();
  if (mm2s_introut.read() != mm2s_irq) mm2s_introut.write(mm2s_irq);
  if (s2mm_introut.read() != s2mm_irq) s2mm_introut.write(s2mm_irq);
  if (observer_) report_changes(now);

  // Sleep while nothing can happen without a register write (or, for an S2MM transfer
  // waiting for its stream, a stream beat).
  const Channel& m = ch_[0];
  const Channel& s = ch_[1];
  const bool m_quiet = quiescent(m), s_quiet = quiescent(s);
  if (!m_quiet || !s_quiet) last_active_cycle_ = now;
  if (!m_quiet) return Rest::kAwake;
  if (s_quiet) {
    // An idle SG engine restarts its turns at the MM2S channel, as the arbiters do
    // (docs/hw-timing.md, "idle board").
    sg_read_rr_ = sg_write_rr_ = 0;
    return Rest::kIdle;
  }
  if (s2mm_in && s.step == Step::kData && !s.aborted && !s.ended && now >= s.action_cycle && s.s2mm_fifo.empty() &&
      s.w_owed == 0 && s.b_owed == 0 && s.sg_outstanding == 0 && !s2mm_in->valid())
    return Rest::kStreamWait;
  return Rest::kAwake;
}

void AxiDma::begin(Channel& c, uint64_t now) {
  AxiDmaChannelStats& st = stats_of(c);
  st.last_start_cycle = now;
  c.first_request_done = c.first_beat_done = false;
  if (!c.s2mm && !mm2s_out)
    throw Error(std::string(name()) + ": MM2S transfer started but mm2s_out is not bound");
  if (c.s2mm && !s2mm_in) throw Error(std::string(name()) + ": S2MM transfer started but s2mm_in is not bound");
  c.regs.begin();
  if (config_.has_sg) {
    c.step = Step::kFetchWait;
    c.action_cycle = now + uint64_t(config_.sg_tail_to_fetch);
    c.desc_addr = c.regs.next_desc();
    return;
  }
  const uint32_t length = c.regs.length(), addr = c.regs.addr();
  if (length > max_length_ || length % kBeatBytes != 0 || addr % kBeatBytes != 0) {
    raise_error(c, kSrDmaIntErr, now);
    return;
  }
  start_data(c, addr, length, true, now + uint64_t(config_.datamover_cmd_to_read));
}

void AxiDma::start_data(Channel& c, uint64_t addr, uint32_t bytes, bool last_on_end, uint64_t action) {
  c.step = Step::kData;
  c.action_cycle = action;
  c.xfer_addr = addr;
  c.xfer_beats = bytes / uint32_t(kBeatBytes);
  c.req_beats = c.done_beats = 0;
  c.next_req = request_beats(addr, c.xfer_beats);
  c.last_on_end = last_on_end;
  c.aborted = false;
  c.ended = c.tlast = false;
  c.first_beat_cycle = 0;
  c.data_first_beat = false;
}

[[gnu::always_inline]] inline void AxiDma::mm2s_data(Channel& c, uint64_t now) {
  AxiMmLink& l = m_axi_mm2s;
  if (l.r.valid()) {
    if (c.discard_beats > 0) {
      l.r.pop();
      --c.discard_beats;
    } else if (c.step == Step::kData && c.reserved > 0) {
      const ReadBeat b = l.r.pop();
      --c.reserved;
      if (b.error) {
        data_error(c, now);
        return;
      }
      c.mm2s_fifo.push_back(Mm2sBeat{b.data, now + uint64_t(config_.read_to_stream)});
    } else {
      throw Error(std::string(name()) + ": MM2S read beat with no request in flight");
    }
  }
  if (c.step != Step::kData) return;
  AxiDmaChannelStats& st = stats_.mm2s;
  if (!c.mm2s_fifo.empty() && c.mm2s_fifo.front().ready <= now && mm2s_out->ready()) {
    StreamBeat s;
    s.data = c.mm2s_fifo.front().data;
    s.last = c.last_on_end && c.done_beats + 1 == c.xfer_beats;
    mm2s_out->push(s);
    c.mm2s_fifo.pop_front();
    if (!c.first_beat_done) {
      c.first_beat_done = true;
      st.last_first_beat_cycle = now;
    }
    if (++c.done_beats == c.xfer_beats) {
      data_done(c, now);
      return;
    }
  }
  if (now >= c.action_cycle && c.req_beats < c.xfer_beats && l.ar.ready()) {
    const uint32_t beats = c.next_req;
    if (c.mm2s_fifo.size() + c.reserved + beats <= c.mm2s_fifo.capacity()) {
      l.ar.push(MemRequest{c.xfer_addr, beats * uint32_t(kBeatBytes)});
      request_issued(c, beats);
      c.reserved += beats;
      if (!c.first_request_done) {
        c.first_request_done = true;
        st.last_first_request_cycle = now;
      }
    }
  }
}

[[gnu::always_inline]] inline void AxiDma::s2mm_data(Channel& c, uint64_t now) {
  AxiMmLink& l = m_axi_s2mm;
  if (l.b.valid()) {
    if (c.b_owed == 0) throw Error(std::string(name()) + ": S2MM write response with no request in flight");
    const WriteResponse r = l.b.pop();
    --c.b_owed;
    if (r.error && c.step == Step::kData && !c.aborted) data_error(c, now);
  }
  if (c.step == Step::kData && !c.aborted) {
    if (now >= c.action_cycle && !c.ended && !c.s2mm_fifo.full() && s2mm_in->valid()) s2mm_take_beat(c, now);
    s2mm_write_request(c, now);
  }
  if (c.w_owed > 0 && l.w.ready()) s2mm_write_beat(c);
  if (c.step == Step::kData && !c.aborted && c.ended && c.req_beats == c.done_beats && c.w_owed == 0 &&
      c.b_owed == 0)
    data_done(c, now);
}

// S2MM: one stream beat into the channel's FIFO; TLAST or the buffer's last beat ends the
// transfer's input.
[[gnu::always_inline]] inline void AxiDma::s2mm_take_beat(Channel& c, uint64_t now) {
  const StreamBeat s = s2mm_in->pop();
  c.s2mm_fifo.push_back(s.data);
  ++c.done_beats;
  if (!c.data_first_beat) {
    c.data_first_beat = true;
    c.first_beat_cycle = now;
  }
  if (!c.first_beat_done) {
    c.first_beat_done = true;
    stats_.s2mm.last_first_beat_cycle = now;
  }
  if (s.last)
    c.tlast = c.ended = true;
  else if (c.done_beats == c.xfer_beats)
    c.ended = true;
}

// S2MM: a write request takes its whole burst (next_req beats) once they are in, or what is
// left when the packet or the buffer has ended.
[[gnu::always_inline]] inline void AxiDma::s2mm_write_request(Channel& c, uint64_t now) {
  AxiMmLink& l = m_axi_s2mm;
  const uint32_t unrequested = c.done_beats - c.req_beats;  // received beats without a write request
  if (unrequested > 0 && (unrequested >= c.next_req || c.ended) && c.data_first_beat &&
      now >= c.first_beat_cycle + uint64_t(config_.s2mm_beat_to_write) && l.aw.ready() && !c.write_reqs.full()) {
    const uint32_t beats = std::min(c.next_req, unrequested);
    l.aw.push(MemRequest{c.xfer_addr, beats * uint32_t(kBeatBytes)});
    request_issued(c, beats);
    c.w_owed += beats;
    ++c.b_owed;
    c.write_reqs.push_back(beats);
    if (!c.first_request_done) {
      c.first_request_done = true;
      stats_.s2mm.last_first_request_cycle = now;
    }
  }
}

// S2MM: one write beat from the FIFO, in the bursts of the requests issued.
[[gnu::always_inline]] inline void AxiDma::s2mm_write_beat(Channel& c) {
  if (c.w_left_in_req == 0) {
    c.w_left_in_req = c.write_reqs.front();
    c.write_reqs.pop_front();
  }
  --c.w_left_in_req;
  --c.w_owed;
  WriteBeat w;
  w.data = c.s2mm_fifo.front();
  w.strobe = 0xFF;
  w.last = c.w_left_in_req == 0;
  m_axi_s2mm.w.push(w);
  c.s2mm_fifo.pop_front();
}

[[gnu::always_inline]] inline void AxiDma::sg_returns(uint64_t now) {
  AxiMmLink& l = m_axi_sg;
  if (l.r.valid()) {
    if (sg_reads_.empty()) throw Error(std::string(name()) + ": SG read beat with no fetch in flight");
    SgRead& f = sg_reads_.front();
    const ReadBeat b = l.r.pop();
    Channel& c = ch_[f.ch];
    if (!f.discard) {
      c.desc_words[f.beats] = b.data;
      c.desc_error |= b.error;
    }
    ++f.beats;
    if (b.last) {
      const bool discard = f.discard;
      sg_reads_.pop_front();
      --c.sg_outstanding;
      if (!discard) on_descriptor(c, now);
    }
  }
  if (l.b.valid()) {
    if (sg_writes_.empty()) throw Error(std::string(name()) + ": SG write response with no write-back in flight");
    const SgWrite f = sg_writes_.front();
    const WriteResponse r = l.b.pop();
    sg_writes_.pop_front();
    Channel& c = ch_[f.ch];
    --c.sg_outstanding;
    if (!f.discard) on_writeback(c, r.error, now);
  }
}

[[gnu::always_inline]] inline void AxiDma::sg_issue(uint64_t now) {
  const auto fetch_due = [&](const Channel& c) { return c.step == Step::kFetchWait && now >= c.action_cycle; };
  const auto write_back_due = [](const Channel& c) { return c.step == Step::kWriteBack && !c.wb_issued; };
  if (!fetch_due(ch_[0]) && !fetch_due(ch_[1]) && !write_back_due(ch_[0]) && !write_back_due(ch_[1])) return;
  AxiMmLink& l = m_axi_sg;
  for (int k = 0; k < 2; ++k) {  // one descriptor fetch per edge, the channels taking turns
    const int i = (sg_read_rr_ + k) & 1;
    Channel& c = ch_[i];
    if (c.step != Step::kFetchWait || now < c.action_cycle) continue;
    if (!l.ar.ready() || sg_reads_.full()) break;
    l.ar.push(MemRequest{c.desc_addr, kDescBytes});
    sg_reads_.push_back(SgRead{uint8_t(i), 0, false});
    ++c.sg_outstanding;
    c.step = Step::kFetching;
    c.desc_error = false;
    sg_read_rr_ = i ^ 1;
    break;
  }
  for (int k = 0; k < 2; ++k) {  // one status write-back per edge
    const int i = (sg_write_rr_ + k) & 1;
    Channel& c = ch_[i];
    if (c.step != Step::kWriteBack || c.wb_issued) continue;
    if (!l.aw.ready() || !l.w.ready() || sg_writes_.full()) break;
    // STATUS is the upper word of the descriptor's beat at 0x18.
    l.aw.push(MemRequest{c.desc_addr + kDescControl, uint32_t(kBeatBytes)});
    WriteBeat w;
    w.data = uint64_t(c.wb_status) << 32;
    w.strobe = 0xF0;
    w.last = true;
    l.w.push(w);
    sg_writes_.push_back(SgWrite{uint8_t(i), false});
    ++c.sg_outstanding;
    c.wb_issued = true;
    sg_write_rr_ = i ^ 1;
    break;
  }
}

void AxiDma::on_descriptor(Channel& c, uint64_t now) {
  c.regs.descriptor_fetched(uint32_t(c.desc_addr));
  if (c.desc_error) {  // the descriptor itself is outside the DDR
    raise_error(c, kSrSgDecErr, now);
    return;
  }
  const uint32_t control = uint32_t(c.desc_words[3]);
  const uint32_t status = uint32_t(c.desc_words[3] >> 32);
  if (status & kStsCmplt) {  // fetched a descriptor that is already complete
    raise_error(c, kSrSgIntErr, now);
    return;
  }
  c.desc_next = uint32_t(c.desc_words[0]) & ~(kDescAlign - 1);
  c.desc_control = control;
  const uint64_t buffer = uint32_t(c.desc_words[1]);
  const uint32_t length = control & kCtrlLengthMask;
  if (length == 0 || length > max_length_ || length % kBeatBytes != 0 || buffer % kBeatBytes != 0) {
    raise_error(c, kSrDmaIntErr, now);
    c.step = Step::kWriteBack;
    c.wb_status = kStsIntErr;
    c.wb_issued = false;
    c.wb_error = true;
    return;
  }
  if (c.s2mm) {
    c.rx_sof = !c.packet_open;
    c.packet_open = true;
  }
  start_data(c, buffer, length, (control & kCtrlEof) != 0, now + uint64_t(config_.desc_to_data));
}

void AxiDma::data_done(Channel& c, uint64_t now) {
  const uint32_t bytes = c.done_beats * uint32_t(kBeatBytes);
  stats_of(c).bytes += bytes;
  if (!config_.has_sg) {
    finish_transfer(c, now);
    return;
  }
  c.wb_status = kStsCmplt | (bytes & kStsLengthMask);
  if (c.s2mm) c.wb_status |= (c.rx_sof ? kStsRxSof : 0) | (c.tlast ? kStsRxEof : 0);
  c.step = Step::kWriteBack;
  c.wb_issued = false;
  c.wb_error = false;
}

void AxiDma::data_error(Channel& c, uint64_t now) {
  c.aborted = true;
  drain_data(c);
  const uint32_t bytes = c.done_beats * uint32_t(kBeatBytes);
  stats_of(c).bytes += bytes;
  raise_error(c, kSrDmaDecErr, now);
  if (config_.has_sg) {
    c.step = Step::kWriteBack;
    c.wb_status = kStsDecErr | (bytes & kStsLengthMask);
    c.wb_issued = false;
    c.wb_error = true;
  }
}

void AxiDma::on_writeback(Channel& c, bool error, uint64_t now) {
  if (error && !c.wb_error) raise_error(c, kSrSgDecErr, now);
  if (error || c.wb_error) {  // the errored descriptor's status is written: stay halted
    c.step = Step::kNone;
    return;
  }
  ++stats_of(c).descriptors;
  const bool end_of_packet = c.s2mm ? c.tlast : (c.desc_control & kCtrlEof) != 0;
  if (c.s2mm && c.tlast) c.packet_open = false;
  c.regs.descriptor_done(end_of_packet, uint32_t(c.desc_next));
  if (uint32_t(c.desc_addr) == c.regs.taildesc()) {
    finish_transfer(c, now);
  } else if (c.regs.halt_if_stop_requested()) {
    c.step = Step::kNone;
  } else {
    c.step = Step::kFetchWait;
    c.action_cycle = now;  // the next fetch leaves in the edge the write-back completes
    c.desc_addr = c.regs.next_desc();
  }
}

void AxiDma::finish_transfer(Channel& c, uint64_t now) {
  AxiDmaChannelStats& st = stats_of(c);
  ++st.transfers;
  st.busy_cycles += now - st.last_start_cycle;
  st.last_completion_cycle = now;
  c.step = Step::kNone;
  c.regs.finish(c.done_beats * uint32_t(kBeatBytes));
}

void AxiDma::raise_error(Channel& c, uint32_t dmasr_bit, uint64_t now) {
  AxiDmaChannelStats& st = stats_of(c);
  ++st.errors;
  st.busy_cycles += now - st.last_start_cycle;
  c.regs.error(dmasr_bit);
  c.step = Step::kNone;
}

}  // namespace bitsim::hw
