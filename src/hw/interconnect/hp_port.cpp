#include "hw/interconnect/hp_port.h"

#include "hw/parts/fingerprint.h"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::hw {

namespace {
constexpr uint64_t kBeatBytes = 8;
constexpr size_t kMaxMasters = 64;    // one bit each in the request masks
}  // namespace

HpPort::HpPort(sc_core::sc_module_name name, Clock& clock, const HpPortConfig& config, DdrPortLink& ddr)
    : sc_core::sc_module(name), clock_(clock), config_(config), ddr_(ddr) {
  const std::string me = this->name();
  config_.validate(me);
  reads_.reset(size_t(config_.max_outstanding_reads));
  write_data_.reset(size_t(config_.max_outstanding_writes));
  writes_.reset(size_t(config_.max_outstanding_writes));
  stats_.read_burst_beats.assign(size_t(config_.max_burst_beats) + 1, 0);
  stats_.write_burst_beats.assign(size_t(config_.max_burst_beats) + 1, 0);

  SC_METHOD(tick);
  sensitive << clock_.listen();
  dont_initialize();
}

void HpPort::attach(AxiMmLink& master) {
  if (elaborated_)
    throw Error(std::string(name()) + ": attach(" + master.name() + ") after the simulation was elaborated");
  if (masters_.size() == kMaxMasters)
    throw Error(fmt::format("{}: attach({}): at most {} masters per port", name(), master.name(), kMaxMasters));
  Master m;
  m.link = &master;
  masters_.push_back(m);
}

void HpPort::end_of_elaboration() {
  elaborated_ = true;
  for (size_t i = 0; i < masters_.size(); ++i) {
    AxiMmLink& l = *masters_[i].link;
    wake_ |= l.ar.written_event();
    wake_ |= l.aw.written_event();
    l.ar.watch_valid(&ar_valid_, uint64_t(1) << i);
    l.aw.watch_valid(&aw_valid_, uint64_t(1) << i);
  }
  if (masters_.empty()) wake_ |= ddr_.r.written_event();  // never fires: a port without masters sleeps
}

// The first master at or after `start` (wrapping) whose bit is set in `candidates` (non-zero):
// the round-robin turn.
size_t HpPort::first_master(uint64_t candidates, size_t start) const {
  const uint64_t from_start = candidates & (~uint64_t(0) << start);
  return size_t(std::countr_zero(from_start != 0 ? from_start : candidates));
}

uint32_t HpPort::burst_beats(uint64_t addr, uint32_t left) const {
  const uint64_t to_boundary = (kAxiBoundaryBytes - axi_boundary_offset(addr)) / kBeatBytes;
  return uint32_t(std::min<uint64_t>({uint64_t(config_.max_burst_beats), uint64_t(left), to_boundary}));
}

void HpPort::check_request(const MemRequest& r, size_t master, const char* dir) const {
  if (r.bytes == 0 || r.bytes % kBeatBytes != 0 || r.addr % kBeatBytes != 0)
    throw Error(fmt::format("{}: {} request of master {} ({}) at {:#x} for {} bytes: address and length must be "
                            "non-zero multiples of 8",
                            name(), dir, master, masters_[master].link->name(), r.addr, r.bytes));
}

// Read beats from the DDR go to the master that owns the oldest read burst in flight.
[[gnu::always_inline]] inline void HpPort::return_reads() {
  if (!ddr_.r.valid()) return;
  if (reads_.empty()) throw Error(std::string(name()) + ": read beat from the DDR with no burst in flight");
  ReadInFlight& f = reads_.front();
  RegFifo<ReadBeat>& out = masters_[f.master].link->r;
  if (!out.ready()) return;
  const DdrReadBeat in = ddr_.r.pop();
  if (in.tag != f.master)
    throw Error(fmt::format("{}: read beat tag {} does not match the burst in flight (master {})", name(), in.tag,
                            f.master));
  const bool burst_end = --f.beats_left == 0;
  if (burst_end != in.last)
    throw Error(fmt::format("{}: read burst of master {} ended out of step with the DDR", name(), f.master));
  ReadBeat beat;
  beat.data = in.data;
  beat.error = in.error;
  beat.last = burst_end && f.last_of_request;
  out.push(beat);
  ++stats_.read_beats;
  if (in.error) ++stats_.read_errors;
  if (burst_end) reads_.pop_front();
}

// Write responses from the DDR: one per burst, in order; the master sees one per request.
[[gnu::always_inline]] inline void HpPort::return_responses() {
  if (!ddr_.b.valid()) return;
  if (writes_.empty()) throw Error(std::string(name()) + ": write response from the DDR with no burst in flight");
  const WriteInFlight& f = writes_.front();
  Master& m = masters_[f.master];
  if (f.last_of_request && !m.link->b.ready()) return;
  const DdrWriteResponse in = ddr_.b.pop();
  m.wr_error |= in.error;
  if (f.last_of_request) {
    WriteResponse resp;
    resp.error = m.wr_error;
    m.link->b.push(resp);
    if (m.wr_error) ++stats_.write_errors;
    m.wr_error = false;
  }
  writes_.pop_front();
}

// The first master (round-robin) with a burst to issue decides: it issues, or the edge
// counts as a stall when the outstanding limit is reached.
[[gnu::always_inline]] inline void HpPort::issue_read() {
  const uint64_t candidates = ar_valid_ | rd_split_;
  if (candidates == 0) return;
  const size_t i = first_master(candidates, rd_rr_);
  Master& m = masters_[i];
  if (reads_.full()) {
    ++stats_.read_stall_cycles;
    return;
  }
  if (!ddr_.ar.ready()) return;
  if (m.rd_left == 0) {
    const MemRequest r = m.link->ar.pop();
    check_request(r, i, "read");
    m.rd_addr = r.addr;
    m.rd_left = r.bytes / uint32_t(kBeatBytes);
    ++stats_.read_requests;
  }
  const uint32_t beats = burst_beats(m.rd_addr, m.rd_left);
  ddr_.ar.push(DdrBurst{m.rd_addr, beats, uint32_t(i)});
  m.rd_addr += beats * kBeatBytes;
  m.rd_left -= beats;
  if (m.rd_left != 0)
    rd_split_ |= uint64_t(1) << i;
  else
    rd_split_ &= ~(uint64_t(1) << i);
  reads_.push_back(ReadInFlight{uint32_t(i), beats, m.rd_left == 0});
  ++stats_.read_bursts;
  ++stats_.read_burst_beats[beats];
  rd_rr_ = i + 1 == masters_.size() ? 0 : i + 1;
}

[[gnu::always_inline]] inline void HpPort::issue_write() {
  const uint64_t candidates = aw_valid_ | wr_split_;
  if (candidates == 0) return;
  const size_t i = first_master(candidates, wr_rr_);
  Master& m = masters_[i];
  if (writes_.full()) {
    ++stats_.write_stall_cycles;
    return;
  }
  if (!ddr_.aw.ready()) return;
  if (m.wr_left == 0) {
    const MemRequest r = m.link->aw.pop();
    check_request(r, i, "write");
    m.wr_addr = r.addr;
    m.wr_left = r.bytes / uint32_t(kBeatBytes);
    ++stats_.write_requests;
  }
  const uint32_t beats = burst_beats(m.wr_addr, m.wr_left);
  ddr_.aw.push(DdrBurst{m.wr_addr, beats, uint32_t(i)});
  m.wr_addr += beats * kBeatBytes;
  m.wr_left -= beats;
  if (m.wr_left != 0)
    wr_split_ |= uint64_t(1) << i;
  else
    wr_split_ &= ~(uint64_t(1) << i);
  const WriteInFlight f{uint32_t(i), beats, m.wr_left == 0};
  writes_.push_back(f);
  write_data_.push_back(f);
  ++stats_.write_bursts;
  ++stats_.write_burst_beats[beats];
  wr_rr_ = i + 1 == masters_.size() ? 0 : i + 1;
}

// Write beats go to the DDR in the order of the issued bursts.
[[gnu::always_inline]] inline void HpPort::forward_write_data() {
  if (write_data_.empty() || !ddr_.w.ready()) return;
  WriteInFlight& f = write_data_.front();
  RegFifo<WriteBeat>& in = masters_[f.master].link->w;
  if (!in.valid()) return;
  WriteBeat beat = in.pop();
  const bool burst_end = --f.beats_left == 0;
  if (beat.last != (burst_end && f.last_of_request))
    throw Error(fmt::format("{}: write beat from master {} ({}) has last = {} where the request {}", name(),
                            f.master, masters_[f.master].link->name(), beat.last,
                            burst_end && f.last_of_request ? "ends" : "goes on"));
  beat.last = burst_end;  // toward the DDR, last marks the end of the burst
  ddr_.w.push(beat);
  ++stats_.write_beats;
  if (burst_end) write_data_.pop_front();
}

bool HpPort::idle() const {
  return reads_.empty() && writes_.empty() && write_data_.empty() &&
         (ar_valid_ | aw_valid_ | rd_split_ | wr_split_) == 0;
}

void HpPort::tick() {
  if (sleeping_) {  // woken by a master request: act from the next rising edge on
    sleeping_ = false;
    clock_.wake();
    return;
  }
  if (clock_.stop_requested()) return;
  if (edge(clock_.cycle())) {
    sleeping_ = true;
    clock_.sleep();
    next_trigger(wake_);
  }
}

bool HpPort::edge(uint64_t) {
  if (masters_.empty()) return true;
  // Returns first, so that a burst whose last beat returns this edge frees its slot for
  // an issue in the same edge; issue before forwarding, so that a write burst's first
  // beat can follow its address in the same edge.
  return_reads();
  return_responses();
  issue_read();
  issue_write();
  forward_write_data();
  if (!idle()) return false;
  // An idle port's arbiters restart at master 0 (model): every call from an idle board then
  // sees the same arbitration, whatever ran before (docs/hw-timing.md).
  rd_rr_ = wr_rr_ = 0;
  return true;
}

uint64_t HpPort::state_fingerprint() const {
  Fingerprint f;
  f.add(reads_.size()).add(write_data_.size()).add(writes_.size()).add(rd_rr_).add(wr_rr_);
  f.add(ar_valid_).add(aw_valid_).add(rd_split_).add(wr_split_);
  for (const Master& m : masters_) f.add(m.rd_left).add(m.wr_left).add(m.wr_error);
  return f.value();
}

}  // namespace bitsim::hw
