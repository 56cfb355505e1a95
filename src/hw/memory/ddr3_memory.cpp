#include "hw/memory/ddr3_memory.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/error.h"
#include "hw/parts/fingerprint.h"

namespace bitsim::hw {

namespace {
constexpr uint64_t kWriteBit = 1ull << 47;
constexpr uint64_t kSeqMask = kWriteBit - 1;
uint64_t burst_id(size_t port, bool write, uint64_t seq) { return uint64_t(port) << 48 | (write ? kWriteBit : 0) | (seq & kSeqMask); }

// The edge from which the answer of a DRAM burst the engine served at edge `now` (completing
// at device cycle `end`) is due: read beats may leave, a write response may be sent.
uint64_t due_edge(const Ddr3Crossing& x, uint64_t now, uint64_t end) { return std::max(now + 1, x.edge(end)); }

// The ledger of the commands of a board opened in a restored state (Ddr3Memory::restore_state
// and a replay): its device cycle 0, the rows open at the start, and the head a refresh or a
// PRE of the run before can reach into.
DramLedger opened_ledger(const Ddr3Config& c, const Ddr3Timing& t, const Ddr3Crossing& x) {
  DramLedger l(c.banks, c.trfc, x.device(0));
  l.open_at_start(t.snapshot().open_row);
  l.keep_head(2 * t.horizon());
  return l;
}

// The commands up to quiet edge `cycle` (the engine caught up to it first), and the tail.
DramActivity close_ledger(Ddr3Timing& t, DramLedger& l, const Ddr3Crossing& x, uint64_t cycle,
                          std::vector<uint64_t>* tail) {
  const uint64_t device = x.device(cycle);
  t.catch_up(device);
  const DramActivity a = l.close(device);
  if (tail) *tail = l.record(x.device(0));
  return a;
}

constexpr uint64_t kTraceTag = 0xDD3'7ACE;
constexpr uint64_t kAddrBits = 34, kAddrMask = (uint64_t(1) << kAddrBits) - 1;
}  // namespace

uint32_t Ddr3TraceBuilder::request(uint64_t edge, uint32_t port, bool write, uint64_t addr, uint32_t bytes) {
  if (spoiled) return 0;
  const uint32_t index = uint32_t(requests.size() / 2);
  requests.push_back(edge);
  requests.push_back((addr & kAddrMask) | uint64_t(bytes & 0x1FFF) << kAddrBits | uint64_t(write) << 47 |
                     uint64_t(port) << 48);
  return index;
}

void Ddr3TraceBuilder::answer(uint32_t request, uint64_t due, uint64_t refreshes) {
  if (spoiled) return;
  if (refreshes != refreshes_before) {  // the trace will be given up: stop keeping it now
    spoiled = true;
    requests = {};
    answers = {};
    return;
  }
  answers.push_back(uint64_t(request) << 32 | (due - requests[2 * size_t(request)]));
}

MemoryTrace Ddr3TraceBuilder::take() {
  MemoryTrace t;
  if (spoiled) {
    spoiled = false;
    return t;
  }
  t.words.reserve(2 + requests.size() + answers.size());
  t.words.push_back(kTraceTag);
  t.words.push_back(requests.size() / 2);
  t.words.insert(t.words.end(), requests.begin(), requests.end());
  t.words.insert(t.words.end(), answers.begin(), answers.end());
  requests.clear();
  answers.clear();
  return t;
}

MemoryTrace Ddr3Memory::take_trace() { return trace_.take(); }

void Ddr3Memory::submit(Burst& b, size_t port, bool write, uint64_t now) {
  const uint32_t cport = controller_port(config_.ddr3, int(port)), bytes = b.beats * uint32_t(kBusBeatBytes);
  if (tracing_) b.trace = trace_.request(now, cport, write, b.addr, bytes);
  timing_.submit(Ddr3Request{crossing_.device(now), cport, write, b.addr, bytes}, burst_id(port, write, b.seq));
}

uint32_t Ddr3Memory::controller_port(const Ddr3Config& c, int i) { return std::min<uint32_t>(c.ports - 1, 2 + uint32_t(i)); }

Ddr3Memory::Ddr3Memory(sc_core::sc_module_name name, Clock& clock, const DdrConfig& config)
    : Memory(name, clock, config),
      crossing_(ddr3_board_clock(config_.ddr3, uint64_t(std::llround(clock.period().to_seconds() * 1e12)))),
      timing_(ddr3_board_engine(config_.ddr3, crossing_)),
      ledger_(config_.ddr3.banks, config_.ddr3.trfc, crossing_.device(0)) {
  listen();
  ports_.resize(size_t(config_.ports));
  for (int i = 0; i < config_.ports; ++i) ports_[size_t(i)].link = links_[size_t(i)].get();
  SC_METHOD(tick);
  sensitive << clock_.listen();
  dont_initialize();
}

bool Ddr3Memory::idle() const {
  if (in_flight_ > 0) return false;
  for (const auto& p : ports_)
    if (p.link->ar.valid() || p.link->aw.valid()) return false;
  return true;
}

// The next burst of an AR or AW channel, checked, and told to the request listener.
DdrBurst Ddr3Memory::take_burst(RegFifo<DdrBurst>& channel, int index, bool write, uint64_t now) {
  const DdrBurst b = channel.pop();
  if (b.beats == 0 || b.beats > 256 || b.addr % kBusBeatBytes != 0)
    throw Error(fmt::format("{}: port {} {} burst at {:#x} of {} beats is malformed", name(), index,
                            write ? "write" : "read", b.addr, b.beats));
  heard(now, index, write, b);
  return b;
}

// A port's queue holds ddr3.queue_depth requests per direction; a full one stops AR / AW.
void Ddr3Memory::accept(PortState& p, int index, uint64_t now) {
  DdrPortLink& l = *p.link;
  const size_t depth = config_.ddr3.queue_depth;
  // A burst taken from AR or AW: its address, length and tag, its place in its direction's
  // order, and DECERR when it lies outside the DDR.
  auto open = [&](Burst& x, const DdrBurst& b, uint64_t& seq) {
    x.addr = b.addr;
    x.beats = b.beats;
    x.tag = b.tag;
    x.seq = seq++;
    x.error = outside(b.addr, uint64_t(b.beats) * kBusBeatBytes);
  };
  if (l.ar.valid() && p.reads.size() < depth) {
    const DdrBurst b = take_burst(l.ar, index, false, now);
    Read r;
    open(r, b, p.read_seq);
    r.due.assign(b.beats, 0);
    if (r.error) {  // DECERR: answered from the next edge on, the DRAM not involved
      std::fill(r.due.begin(), r.due.end(), now + 1);
      r.known = b.beats;
    } else {
      submit(r, size_t(index), false, now);
    }
    p.reads.push_back(std::move(r));
    ++in_flight_;
  }
  if (l.aw.valid() && p.writes.size() < depth) {
    Write w;
    open(w, take_burst(l.aw, index, true, now), p.write_seq);
    p.writes.push_back(w);
    ++in_flight_;
  }
}

// One write beat from the W FIFO into the controller's write data buffer; the burst's last
// beat submits it to the DRAM.
bool Ddr3Memory::take_write_beat(PortState& p, int index, uint64_t now) {
  if (p.data_next >= p.writes.size() || !p.link->w.valid()) return false;
  Write& w = p.writes[p.data_next];
  const WriteBeat beat = p.link->w.pop();
  const bool last = w.done + 1 == w.beats;
  if (beat.last != last)
    throw Error(fmt::format("{}: port {} write beat {} of the burst at {:#x} ({} beats) has last = {}", name(), index,
                            w.done, w.addr, w.beats, beat.last));
  DdrPortStats& ps = stats_.ports[size_t(index)];
  if (!w.error) {
    bus_write_beat(w.addr + uint64_t(w.done) * kBusBeatBytes, beat.data, beat.strobe);
    ps.bytes_written += kBusBeatBytes;
  }
  if (++w.done < w.beats) return true;
  ++p.data_next;
  if (w.error) {
    w.response_due = now + 1;
    return true;
  }
  mem_.notify(w.addr, size_t(w.beats) * kBusBeatBytes);
  submit(w, size_t(index), true, now);
  return true;
}

// The controller chooses a burst at each decision time up to the device cycle of `now`: by
// then every request that could compete has arrived. Completions become the edges at which
// read beats may leave and write responses may be sent.
void Ddr3Memory::schedule(uint64_t now) {
  const uint64_t device_now = crossing_.device(now);
  while (const auto s = timing_.step(device_now)) {
    const size_t pi = size_t(s->id >> 48);
    const bool write = s->id & kWriteBit;
    const uint64_t seq = s->id & kSeqMask;
    const uint64_t edge = due_edge(crossing_, now, s->end);
    PortState& p = ports_[pi];
    if (write) {
      Write& w = p.writes[size_t(seq - p.writes.front().seq)];
      if (tracing_) trace_.answer(w.trace, edge, timing_.command_counts().ref);
      if (s->last) w.response_due = edge;
      continue;
    }
    Read& r = p.reads[size_t(seq - p.reads.front().seq)];
    if (tracing_) trace_.answer(r.trace, edge, timing_.command_counts().ref);
    // DRAM burst `served` holds beats [2 served - first, 2 served + 2 - first) of the AXI burst
    // (first = 1 when it starts in the second half of a 16-byte DRAM burst).
    const uint32_t per = uint32_t(config_.ddr3.bus_bytes * config_.ddr3.burst_length / kBusBeatBytes);
    const uint32_t first = uint32_t(r.addr % (per * kBusBeatBytes) / kBusBeatBytes);
    const uint32_t upto = std::min<uint32_t>(r.beats, (r.served + 1) * per - first);
    for (; r.known < upto; ++r.known) r.due[r.known] = edge;
    ++r.served;
  }
}

uint64_t Ddr3Memory::state_fingerprint(uint64_t) const {
  Fingerprint f;
  f.add(in_flight_);
  for (const PortState& p : ports_) f.add(p.reads.size()).add(p.writes.size()).add(p.data_next);
  return f.value();
}

MemoryState Ddr3Memory::carried_state(uint64_t cycle) const {
  if (in_flight_ > 0 || !timing_.idle())
    throw Error(fmt::format("{}: the carried state was asked for at edge {} while {} bursts are in flight", name(),
                            cycle, in_flight_));
  return MemoryState{ddr3_carry(timing_, crossing_, cycle)};
}

void Ddr3Memory::restore_state(const MemoryState& state) {
  crossing_ = ddr3_restore(timing_, crossing_, state.words, name());
  ledger_ = opened_ledger(config_.ddr3, timing_, crossing_);
}

void Ddr3Memory::listen() {
  timing_.set_command_listener([this](uint64_t cycle, Ddr3Command command, uint32_t bank) {
    ledger_.command(cycle, command, bank);
    if (command_listener_) command_listener_(cycle, command, bank);
  });
}

DramActivity Ddr3Memory::close_dram_activity(uint64_t cycle, std::vector<uint64_t>* tail) {
  if (in_flight_ > 0 || !timing_.idle())
    throw Error(fmt::format("{}: the DRAM activity was asked for at edge {} while {} bursts are in flight", name(),
                            cycle, in_flight_));
  return close_ledger(timing_, ledger_, crossing_, cycle, tail);
}

void Ddr3Memory::tick() {
  if (!awake_at_edge()) return;
  if (edge(clock_.cycle())) sleep_until_request();
}

bool Ddr3Memory::edge(uint64_t now) {
  uint32_t wrote = 0;  // ports that took a write beat
  for (size_t i = 0; i < ports_.size(); ++i) {
    PortState& p = ports_[i];
    if (p.link->ar.valid() || p.link->aw.valid()) accept(p, int(i), now);
    if (take_write_beat(p, int(i), now)) wrote |= 1u << i;
  }
  schedule(now);

  bool any = false;
  for (size_t i = 0; i < ports_.size(); ++i) {
    PortState& p = ports_[i];
    DdrPortStats& ps = stats_.ports[i];
    bool moved = wrote & (1u << i);
    // A write response, in order, once its last DRAM burst has completed.
    if (!p.writes.empty() && p.data_next > 0 && p.writes.front().response_due <= now && p.link->b.ready()) {
      const Write& w = p.writes.front();
      p.link->b.push(DdrWriteResponse{w.tag, w.error});
      completed(now, int(i), true);
      if (w.error) ++ps.decerr_bursts;
      ++ps.write_bursts;
      p.writes.pop_front();
      --p.data_next;
      --in_flight_;
    }
    // A read beat, in order, once the DRAM burst that holds it has completed.
    if (!p.reads.empty()) {
      Read& r = p.reads.front();
      if (r.done < r.known && r.due[r.done] <= now && p.link->r.ready()) {
        moved = true;
        if (emit_read_beat(*this, r, *p.link, ps)) {
          completed(now, int(i), false);
          p.reads.pop_front();
          --in_flight_;
        }
      }
    }
    if (moved) {
      note_busy(ps, now);
      any = true;
    }
  }
  if (any) {
    if (stats_.busy_cycles == 0) stats_.first_busy_cycle = now;
    stats_.last_busy_cycle = now;
    ++stats_.busy_cycles;
  }
  return idle();
}

namespace {

// ddr.model = ddr3's fast side: the same words as Ddr3Memory::carried_state (a tag, the
// clock crossing's phase, Ddr3Timing::save), advanced over a gap by the engine itself, and
// every buffer's address in the key (its banks and rows set the timing).
class Ddr3MemoryTiming : public MemoryTiming {
 public:
  Ddr3MemoryTiming(const Ddr3Config& c, uint64_t pl_period_ps)
      : config_(c), crossing_(ddr3_board_clock(c, pl_period_ps)) {}
  void key_facts(uint64_t addr, uint64_t, std::string& key) const override { key += fmt::format("@{:x}", addr); }
  // Approximate (ddr3.fast_reuse): a mark instead of the state, so that a record is reused
  // whatever state its batch opens in, unchecked; the mark keeps such keys apart from every
  // exact key (docs/ddr3.md, "Approximate reuse").
  // Exact: a mark with the clock crossing's phase (of 5 at 125 MHz; a batch opened at another
  // phase meets its answers an edge earlier or later almost always, so its records are kept
  // apart), and every reuse checked by replay() (docs/hw-timing.md, "Checked reuse under a
  // memory with state").
  void key_state(const MemoryState& state, std::string& key) const override {
    if (config_.approximate_reuse()) key += "m~;";
    else key += fmt::format("m={};", state.words.size() > 1 ? state.words[1] : 0);
  }
  bool checks_reuse() const override { return !config_.approximate_reuse(); }
  std::optional<MemoryReplay> replay(const MemoryState& opening, const MemoryTrace& trace,
                                     uint64_t quiet_edge) const override;
  MemoryState initial_state() const override { return MemoryState{ddr3_carry(ddr3_board_engine(config_, crossing_), crossing_, 0)}; }
  MemoryState advance(const MemoryState& state, uint64_t idle_cycles) const override {
    Ddr3Timing t = ddr3_board_engine(config_, crossing_);
    const Ddr3Crossing x = ddr3_restore(t, crossing_, state.words, "memory model");
    return idle_cycles == 0 ? state : MemoryState{ddr3_carry(t, x, idle_cycles)};
  }
  std::optional<DramLedger> ledger() const override { return DramLedger(config_.banks, config_.trfc, crossing_.device(0)); }
  uint64_t device_cycle(uint64_t edge) const override { return crossing_.device(edge); }
  // The gap's refreshes performed by the engine itself (not by save()'s copy), each told to
  // the ledger in the run's device cycles: the restored crossing's device cycle 0 is the
  // run's device cycle of edge `from` (the carried phase is that edge's).
  MemoryState advance_counted(const MemoryState& state, uint64_t idle_cycles, uint64_t from,
                              DramLedger& ledger) const override {
    if (idle_cycles == 0) return state;
    Ddr3Timing t = ddr3_board_engine(config_, crossing_);
    const Ddr3Crossing x = ddr3_restore(t, crossing_, state.words, "memory model");
    const uint64_t run0 = crossing_.device(from), own0 = x.device(0);
    t.set_command_listener([&](uint64_t cycle, Ddr3Command command, uint32_t bank) {
      ledger.command(cycle - own0 + run0, command, bank);
    });
    t.catch_up(x.device(idle_cycles));
    t.set_command_listener(nullptr);
    return MemoryState{ddr3_carry(t, x, idle_cycles)};
  }

 private:
  Ddr3Config config_;
  Ddr3Crossing crossing_;
};

// The trace's requests given to an engine opened in `opening`, edge by edge as
// Ddr3Memory::tick gives them (the requests of an edge in their order, then the engine asked
// for every burst it can serve by that edge's device cycle), visiting only the edges at which
// a request arrives or the engine's next decision falls; every answer compared with the
// trace's as it comes.
std::optional<MemoryReplay> Ddr3MemoryTiming::replay(const MemoryState& opening, const MemoryTrace& trace,
                                                     uint64_t quiet_edge) const {
  const std::vector<uint64_t>& w = trace.words;
  if (w.size() < 2 || w[0] != kTraceTag || w[1] > (w.size() - 2) / 2) return std::nullopt;
  const size_t n = size_t(w[1]), answers = w.size() - 2 - 2 * n;
  const uint64_t* req = w.data() + 2;
  const uint64_t* ans = req + 2 * n;
  Ddr3Timing t = ddr3_board_engine(config_, crossing_);
  const Ddr3Crossing x = ddr3_restore(t, crossing_, opening.words, "memory model");
  DramLedger ledger = opened_ledger(config_, t, x);
  t.set_command_listener([&](uint64_t cycle, Ddr3Command command, uint32_t bank) { ledger.command(cycle, command, bank); });
  // The first edge after `after` whose device cycle reaches `d` (device() does not decrease).
  auto first_edge = [&](uint64_t d, uint64_t after) {
    uint64_t e = std::max(after + 1, x.edge(d));
    while (e > after + 1 && x.device(e - 1) >= d) --e;
    while (x.device(e) < d) ++e;
    return e;
  };
  size_t next = 0, served = 0;
  uint64_t edge = n > 0 ? req[0] : 0;
  try {
    for (;;) {
      for (; next < n && req[2 * next] == edge; ++next) {
        const uint64_t v = req[2 * next + 1];
        t.submit(Ddr3Request{x.device(edge), uint32_t(v >> 48), bool(v >> 47 & 1), v & kAddrMask,
                             uint32_t(v >> kAddrBits & 0x1FFF)},
                 next);
      }
      while (const auto s = t.step(x.device(edge))) {
        if (served == answers) return std::nullopt;
        const uint64_t want = ans[served++];
        if (want >> 32 != s->id || (want & 0xFFFF'FFFF) != due_edge(x, edge, s->end) - req[2 * s->id]) return std::nullopt;
      }
      uint64_t to = next < n ? req[2 * next] : UINT64_MAX;
      if (const auto d = t.next_decision()) to = std::min(to, first_edge(*d, edge));
      if (to == UINT64_MAX) break;
      if (to <= edge) return std::nullopt;  // a trace whose requests are not in edge order
      edge = to;
    }
  } catch (const Error&) {
    return std::nullopt;  // the clocked run from this opening says what went wrong
  }
  if (served != answers || quiet_edge < edge) return std::nullopt;
  MemoryReplay r;
  r.dram = close_ledger(t, ledger, x, quiet_edge, &r.dram_tail);
  t.set_command_listener(nullptr);
  r.after = MemoryState{ddr3_carry(t, x, quiet_edge)};
  return r;
}

}  // namespace

MemoryKind ddr3_memory_kind() {
  MemoryKind k;
  k.name = "ddr3";
  k.clocked = [](sc_core::sc_module_name n, Clock& clock, const DdrConfig& c) {
    return std::unique_ptr<Memory>(std::make_unique<Ddr3Memory>(n, clock, c));
  };
  k.fast = [](const DdrConfig& c, uint64_t pl_period_ps) {
    return std::unique_ptr<MemoryTiming>(std::make_unique<Ddr3MemoryTiming>(c.ddr3, pl_period_ps));
  };
  // The one figure the DRAM model does not take from the device's data (docs/ddr3.md); the
  // host's costs stay the wall calibration's ("Validated without refitting").
  k.calibration = {"ddr3.ctrl_latency_ns", "DDR3 controller and interconnect latency added to each burst's completion",
                   1000, 12, false};
  k.watchdog_keys = [](const DdrConfig& c) {
    return std::vector<std::string>{fmt::format("ddr3.queue_depth = {}", c.ddr3.queue_depth),
                                    fmt::format("ddr3.trfc = {}", c.ddr3.trfc),
                                    fmt::format("ddr3.trefi = {}", c.ddr3.trefi)};
  };
  return k;
}

}  // namespace bitsim::hw
