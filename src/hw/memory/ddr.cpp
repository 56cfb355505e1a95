#include "hw/memory/ddr.h"

#include "hw/parts/fingerprint.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::hw {

namespace {
constexpr uint64_t kBeatBytes = 8;
constexpr uint64_t kPicosPerSecond = 1'000'000'000'000ull;

uint64_t ns_to_cycles(double ns, uint64_t period_ps) {
  // Rounded up to whole cycles; a hair of tolerance so that exact multiples stay exact.
  const double cycles = ns * 1000.0 / double(period_ps);
  return uint64_t(std::ceil(cycles - 1e-9));
}
}  // namespace

Ddr::Ddr(sc_core::sc_module_name name, Clock& clock, const DdrConfig& config) : Memory(name, clock, config) {
  const uint64_t period_ps = uint64_t(std::llround(clock_.period().to_seconds() * double(kPicosPerSecond)));
  read_latency_ = ns_to_cycles(config_.read_latency_ns, period_ps);
  write_latency_ = ns_to_cycles(config_.write_latency_ns, period_ps);
  per_port_ = config_.per_port_bandwidth();
  const double bytes_per_s = per_port_ ? config_.port_bytes_per_s : config_.wall_bytes_per_s;
  gain_ = uint64_t(std::llround(bytes_per_s)) * period_ps;
  cost_ = kBeatBytes * kPicosPerSecond;
  cap_ = 4 * cost_;
  buckets_.assign(per_port_ ? size_t(config_.ports) : 1, 0);

  ports_.resize(size_t(config_.ports));
  for (int i = 0; i < config_.ports; ++i) {
    PortState& p = ports_[size_t(i)];
    p.link = links_[size_t(i)].get();
    p.reads.reset(size_t(config_.max_pending_bursts));
    p.writes.reset(size_t(config_.max_pending_bursts));
    p.responses.reset(size_t(config_.max_pending_bursts));
  }

  SC_METHOD(tick);
  sensitive << clock_.listen();
  dont_initialize();
}

// ---- bus side ---------------------------------------------------------------------------

void Ddr::accept(PortState& p, int index, uint64_t now) {
  DdrPortLink& l = *p.link;
  if (l.ar.valid() && !p.reads.full()) {
    const DdrBurst b = l.ar.pop();
    if (b.beats == 0 || b.beats > 256 || b.addr % kBeatBytes != 0)
      throw Error(fmt::format("{}: port {} read burst at {:#x} of {} beats is malformed", name(), index, b.addr,
                              b.beats));
    heard(now, index, false, b);
    p.reads.push_back(PendingRead{b.addr, now + read_latency_, b.beats, 0, b.tag, outside(b.addr, b.beats * kBeatBytes)});
    ++in_flight_;
  }
  if (l.aw.valid() && p.writes.size() + p.responses.size() < p.writes.capacity()) {
    const DdrBurst b = l.aw.pop();
    if (b.beats == 0 || b.beats > 256 || b.addr % kBeatBytes != 0)
      throw Error(fmt::format("{}: port {} write burst at {:#x} of {} beats is malformed", name(), index, b.addr,
                              b.beats));
    heard(now, index, true, b);
    p.writes.push_back(PendingWrite{b.addr, b.beats, 0, b.tag, outside(b.addr, b.beats * kBeatBytes)});
    ++in_flight_;
  }
}

bool Ddr::idle() const {
  if (in_flight_ > 0) return false;
  for (const auto& p : ports_)
    if (p.link->ar.valid() || p.link->aw.valid()) return false;
  return true;
}

// One read beat of port p, when due, with room in its R FIFO and the beat's cost in the bucket.
[[gnu::always_inline]] inline bool Ddr::move_read(PortState& p, DdrPortStats& ps, size_t pi, uint64_t now) {
  if (p.reads.empty()) return false;
  PendingRead& r = p.reads.front();
  if (r.due > now || !p.link->r.ready()) return false;
  uint64_t& bucket = buckets_[per_port_ ? pi : 0];
  if (bucket < cost_) {
    ++ps.wall_stall_beats;
    return false;
  }
  bucket -= cost_;
  if (emit_read_beat(*this, r, *p.link, ps)) {
    completed(now, int(pi), false);
    p.reads.pop_front();
    --in_flight_;
  }
  return true;
}

// One write beat of port p, when its burst is accepted and the beat is in the W FIFO.
[[gnu::always_inline]] inline bool Ddr::move_write(PortState& p, DdrPortStats& ps, size_t pi, uint64_t now) {
  if (p.writes.empty() || !p.link->w.valid()) return false;
  uint64_t& bucket = buckets_[per_port_ ? pi : 0];
  if (bucket < cost_) {
    ++ps.wall_stall_beats;
    return false;
  }
  bucket -= cost_;
  PendingWrite& w = p.writes.front();
  const WriteBeat beat = p.link->w.pop();
  const bool last = w.done + 1 == w.beats;
  if (beat.last != last)
    throw Error(fmt::format("{}: port {} write beat {} of the burst at {:#x} ({} beats) has last = {}", name(), pi,
                            w.done, w.addr, w.beats, beat.last));
  if (!w.error) {
    bus_write_beat(w.addr + uint64_t(w.done) * kBeatBytes, beat.data, beat.strobe);
    ps.bytes_written += kBeatBytes;
  }
  if (++w.done == w.beats) {
    p.responses.push_back(PendingResponse{now + write_latency_, w.tag, w.error});
    if (w.error) ++ps.decerr_bursts;
    ++ps.write_bursts;
    if (!w.error) mem_.notify(w.addr, size_t(w.beats) * kBeatBytes);
    p.writes.pop_front();
  }
  return true;
}

uint64_t Ddr::state_fingerprint(uint64_t cycle) const {
  const uint64_t edges = refilled_once_ ? cycle - last_refill_cycle_ : cycle + 1;
  Fingerprint f;
  f.add(in_flight_).add(uint64_t(rr_start_));
  for (const uint64_t bucket : buckets_) f.add(edges >= (cap_ - bucket) / gain_ + 1 ? cap_ : bucket + gain_ * edges);
  for (const PortState& p : ports_) f.add(p.reads.size()).add(p.writes.size()).add(p.responses.size());
  return f.value();
}

// The buckets: refilled for every edge since the last refill, each capped at four beats.
[[gnu::always_inline]] inline void Ddr::refill(uint64_t now) {
  const uint64_t edges = refilled_once_ ? now - last_refill_cycle_ : 1;
  refilled_once_ = true;
  last_refill_cycle_ = now;
  for (uint64_t& bucket : buckets_) {
    const uint64_t room = cap_ - bucket;
    if (edges == 1)  // the common case, without the division
      bucket = gain_ > room ? cap_ : bucket + gain_;
    else if (edges > room / gain_)
      bucket = cap_;
    else
      bucket += gain_ * edges;
  }
}

void Ddr::tick() {
  if (!awake_at_edge()) return;
  if (edge(clock_.cycle())) sleep_until_request();
}

bool Ddr::edge(uint64_t now) {
  refill(now);

  // Accept new bursts; issue due write responses.
  for (size_t i = 0; i < ports_.size(); ++i) {
    PortState& p = ports_[i];
    if (p.link->ar.valid() || p.link->aw.valid()) accept(p, int(i), now);
    if (!p.responses.empty() && p.responses.front().due <= now && p.link->b.ready()) {
      const PendingResponse& r = p.responses.front();
      p.link->b.push(DdrWriteResponse{r.tag, r.error});
      completed(now, int(i), true);
      p.responses.pop_front();
      --in_flight_;
    }
  }

  // Move beats: one per (port, direction) slot, round-robin, each paying into the wall.
  const int slots = 2 * int(ports_.size());
  PortState* ports = ports_.data();
  DdrPortStats* port_stats = stats_.ports.data();
  int first_served = -1;
  uint32_t moved_mask = 0;
  for (int k = 0, slot = rr_start_; k < slots; ++k, slot = slot + 1 == slots ? 0 : slot + 1) {
    const size_t pi = size_t(slot >> 1);
    DdrPortStats& ps = port_stats[pi];
    const bool moved = (slot & 1) == 0 ? move_read(ports[pi], ps, pi, now) : move_write(ports[pi], ps, pi, now);
    if (!moved) continue;
    if (first_served < 0) first_served = slot;
    if (!(moved_mask & (1u << pi))) note_busy(ps, now);  // once per port and edge
    moved_mask |= 1u << pi;
  }
  if (first_served >= 0) {
    rr_start_ = first_served + 1 == slots ? 0 : first_served + 1;
    if (stats_.busy_cycles == 0) stats_.first_busy_cycle = now;
    stats_.last_busy_cycle = now;
    ++stats_.busy_cycles;
  }

  if (!idle()) return false;
  // An idle DDR's round-robin restarts at slot 0 (model): every call from an idle board then
  // sees the same arbitration, whatever ran before (docs/hw-timing.md).
  rr_start_ = 0;
  return true;
}

namespace {
MemoryKind ddr_kind(const char* name) {
  MemoryKind k;
  k.name = name;
  k.clocked = [](sc_core::sc_module_name n, Clock& clock, const DdrConfig& c) {
    return std::unique_ptr<Memory>(std::make_unique<Ddr>(n, clock, c));
  };
  k.calibration = {"ddr.read_latency_ns", "DDR read latency seen by the PL (burst accepted -> first beat)", 3000, 14,
                   true};
  k.watchdog_keys = [](const DdrConfig& c) {
    return std::vector<std::string>{fmt::format("ddr.max_pending_bursts = {}", c.max_pending_bursts)};
  };
  return k;
}
}  // namespace

MemoryKind wall_memory_kind() { return ddr_kind("wall"); }
MemoryKind latency_bandwidth_memory_kind() { return ddr_kind("latency-bandwidth"); }

}  // namespace bitsim::hw
