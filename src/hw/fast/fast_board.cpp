#include "hw/fast/fast_board.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <type_traits>

#include <fmt/format.h>

#include "hw/circuits/attention_unit.h"
#include "hw/circuits/engine_regs.h"
#include "base/error.h"
#include "base/stop_signal.h"
#include "model/packed_image.h"

namespace bitsim::hw {

namespace R = dma_reg;

// ---- FastMemory --------------------------------------------------------------------------

// ---- FastBoard ---------------------------------------------------------------------------

namespace {
uint32_t rd32(const FastMemory& m, uint64_t a) {
  uint32_t v;
  m.read(a, &v, 4);
  return v;
}
// An engine lane's registers after a batch, from `was` (before it) and `run` (the clocked
// board's run of the batch, which starts from fresh engines): status and error are the
// run's own, the counters the run's counts added to those before.
LaneRegisterView after_batch(const LaneRegisterView& was, LaneRegisterView run) {
  run.units_done += was.units_done;
  run.rows_done += was.rows_done;
  run.beats_in += was.beats_in;
  run.beats_out += was.beats_out;
  return run;
}
}  // namespace

FastBoard::FastBoard(const BoardConfig& config, FastBoardOptions options)
    : config_(config),
      options_(options),
      period_(clock_period_ps(config.clock.mhz)),
      memory_(config.ddr.size_bytes),
      workers_(std::max(1, options.threads)) {
  const EngineRegistry& reg = *config_.engines;
  ch_.resize(size_t(reg.dma_count()));
  live_reported_.resize(ch_.size());
  open_regs_.resize(ch_.size());
  engines_.resize(size_t(reg.count()));
  pending_engines_.resize(engines_.size());
  for (int d = 0; d < reg.dma_count(); ++d)
    for (int c = 0; c < 2; ++c) ch_[d][c].regs = DmaChannelRegisters(c == 1, dma_has_sg(d));
  for (int e = 0; e < reg.count(); ++e) fast_engines_.push_back(reg[e].fast(config_));
  memory_timing_ = make_memory_timing(config_.ddr, period_);
  memory_state_ = memory_timing_->initial_state();
  ledger_ = memory_timing_->ledger();
  // Decoded weights are keyed by their DDR address: any write into them drops the entry.
  memory_.set_write_listener([this](uint64_t a, size_t n) {
    // Entries are disjoint and sorted by address: walk back from the first one past the
    // write until one ends before it.
    auto it = decoded_.lower_bound(a + n);
    while (it != decoded_.begin()) {
      --it;
      if (it->second.end <= a) break;
      stats_.decoded_bytes -= it->second.rows_->bytes();
      it = decoded_.erase(it);
    }
  });
}

namespace {
[[noreturn]] void address_error(const char* what, uint64_t addr) {
  throw Error(fmt::format("AXI-Lite {} of register 0x{:08x} failed: TLM_ADDRESS_ERROR_RESPONSE", what, addr));
}
// The engine whose lanes' registers hold `addr` (within its two lanes), or -1.
int engine_of(const EngineRegistry& reg, uint64_t addr) {
  const int e = reg.engine_at(addr);
  return e >= 0 && addr < reg[e].regs + 2 * engine_reg::kLaneStride ? e : -1;
}
}  // namespace

bool FastBoard::batch_in_flight() const {
  if (!batch_open_) return false;
  if (collecting_ || general_ || advanced_ps_ <= batch_end_edge_ * period_) return true;
  for (const auto& d : ch_)
    for (const auto& c : d)
      if (c.next < c.pending.size()) return true;
  return false;
}

// Applies the in-flight batch's register changes of every edge strictly before t, and
// closes the batch once every channel is quiet.
void FastBoard::advance(uint64_t t_ps) {
  advanced_ps_ = std::max(advanced_ps_, t_ps);
  if (!batch_open_) return;  // a closed batch has nothing left to apply or report
  if (general_) return;      // the live run answers every read (and reports at them)
  if (t_ps < next_event_ps_) return;  // polls between two changes cost nothing
  for (int d = 0; d < int(ch_.size()); ++d)
    for (int c = 0; c < 2; ++c) {
      Channel& ch = ch_[d][c];
      while (ch.next < ch.pending.size() && ch.pending[ch.next].first <= t_ps) ch.regs = ch.pending[ch.next++].second;
      while (ch.reported < ch.transfers.size() && ch.transfers[ch.reported].second * period_ < t_ps) {
        const auto [start, completion] = ch.transfers[ch.reported++];
        completed_.push_back({d, c, start, completion});
      }
    }
  next_event_ps_ = collecting_ ? 0 : next_event();
  if (batch_open_ && !collecting_ && !batch_in_flight()) close_batch();
}

// The earliest access time at which the in-flight batch shows something new: a register
// change, a completed transfer, or its end.
uint64_t FastBoard::next_event() const {
  uint64_t next = batch_end_edge_ * period_ + 1;
  for (const auto& d : ch_)
    for (const auto& c : d) {
      if (c.next < c.pending.size()) next = std::min(next, c.pending[c.next].first);
      if (c.reported < c.transfers.size()) next = std::min(next, c.transfers[c.reported].second * period_ + 1);
    }
  return next;
}

void FastBoard::close_batch() {
  engines_ = pending_engines_;
  batch_open_ = general_ = false;
  batch_actions_.clear();
  undo_.clear();
  live_.reset();
}

void FastBoard::add_action(OracleAction a) {
  if (live_) {
    OracleAction shifted = a;
    shifted.time_ps -= oracle_shift_ps();
    live_->add(std::move(shifted));
  }
  batch_actions_.push_back(std::move(a));
}

void FastBoard::write32(uint64_t addr, uint32_t v, uint64_t t_ps) {
  advance(t_ps);
  const int d = config_.engines->dma_at(addr);
  if (d >= 0) {
    const uint32_t off = uint32_t(addr - config_.engines->dma_base(d));
    const uint32_t rel = off >= R::kS2mmOffset ? off - R::kS2mmOffset : off;
    if (off >= 2 * R::kS2mmOffset || !DmaChannelRegisters::is_register(rel)) address_error("write", addr);
    write_dma(d, off, v, t_ps);
    return;
  }
  const int e = engine_of(*config_.engines, addr);
  if (e < 0 || !is_lane_register(uint32_t((addr - (*config_.engines)[e].regs) % engine_reg::kLaneStride))) address_error("write", addr);
  // On a quiet board no lane holds an error (a batch stays open while one does), so
  // CONTROL.clear has nothing to clear and the other registers read only: nothing changes.
  if (!batch_open_) return;
  add_action({OracleAction::Kind::kWrite, t_ps, addr, v, 0, {}});
  if (!collecting_ && !general_) enter_general();
}

void FastBoard::write_dma(int d, uint32_t off, uint32_t v, uint64_t t_ps) {
  const int c = off >= R::kS2mmOffset ? 1 : 0;
  Channel& ch = ch_[d][c];
  const uint32_t rel = off - (c ? R::kS2mmOffset : 0);
  DmaChannelRegisters after = ch.regs;
  DmaWriteEffect effect = after.write(rel, v);
  // A reset or a stop while the batch is still being collected: a channel the batch started
  // is kStarting here, but on the clocked board it began at its start edge and may have
  // moved data since. Resolve the batch first, so that the write meets the channel as the
  // clocked board has it and the batch runs live with the write in it (before, a
  // reset dropped the started transfer as if it had never begun).
  if (collecting_ && (effect == DmaWriteEffect::kReset || effect == DmaWriteEffect::kHalt)) {
    resolve();
    after = ch.regs;
    effect = after.write(rel, v);
  }
  if (general_) {  // the live run has the batch: the write is one more of its actions
    add_action({OracleAction::Kind::kWrite, t_ps, config_.engines->dma_base(d) + off, v, 0, {}});
    return;
  }
  if (effect == DmaWriteEffect::kStart && !batch_open_) {
    for (int dd = 0; dd < int(ch_.size()); ++dd)
      for (int cc = 0; cc < 2; ++cc) open_regs_[dd][cc] = ch_[dd][cc].regs;
    batch_open_ = collecting_ = true;
    next_event_ps_ = 0;
    general_ = false;
  }
  if (effect == DmaWriteEffect::kStart) ch.start_edge = t_ps / period_ + 1;
  if (effect == DmaWriteEffect::kReset && !batch_open_) after.drain_complete();  // nothing of it is on the bus
  const bool in_flight = batch_open_ && !collecting_;
  // A write to a channel whose part of the batch is over, that starts nothing, cannot change
  // the batch; any other write during it makes the batch general (run live on the clocked board).
  const bool harmless = ch.next >= ch.pending.size() && effect != DmaWriteEffect::kStart &&
                        effect != DmaWriteEffect::kReset;
  ch.regs = after;
  if (batch_open_) add_action({OracleAction::Kind::kWrite, t_ps, config_.engines->dma_base(d) + off, v, 0, {}});
  if (in_flight && !harmless) enter_general();
}

uint32_t FastBoard::read_engine(uint64_t addr) const {
  const int e = engine_of(*config_.engines, addr);
  const uint64_t rel = addr - (*config_.engines)[e].regs;
  uint32_t v = 0;
  read_lane_register(engines_[e][rel / engine_reg::kLaneStride], uint32_t(rel % engine_reg::kLaneStride), &v);
  return v;
}

uint32_t FastBoard::read32(uint64_t addr, uint64_t t_ps) {
  if (collecting_) resolve();
  advance(t_ps);
  const int d = config_.engines->dma_at(addr);
  if (d >= 0) {
    const uint32_t off = uint32_t(addr - config_.engines->dma_base(d));
    const int c = off >= R::kS2mmOffset ? 1 : 0;
    const uint32_t rel = off - (c ? R::kS2mmOffset : 0);
    if (off >= 2 * R::kS2mmOffset || !DmaChannelRegisters::is_register(rel)) address_error("read", addr);
    return general_ ? probe_register(addr, t_ps) : ch_[d][c].regs.read(rel);
  }
  const int e = engine_of(*config_.engines, addr);
  if (e < 0 || !is_lane_register(uint32_t((addr - (*config_.engines)[e].regs) % engine_reg::kLaneStride))) address_error("read", addr);
  if (!batch_in_flight()) return read_engine(addr);
  // The run starts from fresh engines: their counters count this batch only, and add to the
  // counts before it (read now: the probe may close the batch).
  const uint32_t off = uint32_t((addr - (*config_.engines)[e].regs) % engine_reg::kLaneStride);
  const uint32_t before = off >= engine_reg::kUnitsDone ? read_engine(addr) : 0;
  // The engines' counters move beat by beat: ask the clocked board.
  return probe_register(addr, t_ps) + before;
}

void FastBoard::cpu_read(uint64_t addr, void* dst, size_t n, uint64_t t_ps) {
  if (collecting_) resolve();
  advance(t_ps);
  if (general_) {  // the live run holds the DDR as the batch has it
    const std::vector<uint8_t> v = probe({OracleAction::Kind::kProbeMemory, t_ps, addr, 0, n, {}});
    std::memcpy(dst, v.data(), n);
    return;
  }
  // Bytes the batch writes are read as the clocked board has them at t: final once their
  // channel's transfer has completed, else from a run of the batch up to t.
  bool overlaps = false;
  if (batch_in_flight())
    for (const Undo& u : undo_) overlaps |= addr < u.addr + u.old.size() && u.addr < addr + n && !final_at(u, t_ps);
  if (!overlaps) {
    memory_.read(addr, dst, n);
    return;
  }
  const std::vector<uint8_t> v = probe({OracleAction::Kind::kProbeMemory, t_ps, addr, 0, n, {}});
  std::memcpy(dst, v.data(), n);
}

void FastBoard::cpu_write(uint64_t addr, const void* src, size_t n, uint64_t t_ps) {
  if (batch_open_) {
    const auto* p = static_cast<const uint8_t*>(src);
    add_action({OracleAction::Kind::kCpuStore, t_ps, addr, 0, n, std::vector<uint8_t>(p, p + n)});
    if (general_) return;  // the live run has it; the DDR here gets it when the batch closes
    // Keep what the store replaces: a run of the batch starts from the DDR as it was.
    undo_.push_back({addr, std::vector<uint8_t>(n), -1});
    memory_.read(addr, undo_.back().old.data(), n);
    memory_.write(addr, src, n);
    if (!collecting_) enter_general();
    return;
  }
  memory_.write(addr, src, n);
}

std::vector<FastBoard::Segment> FastBoard::chain(const DmaChannelRegisters& r) const {
  std::vector<Segment> segs;
  if (!r.has_sg()) {
    segs.push_back({r.addr(), r.length(), 0});
    return segs;
  }
  uint64_t d = r.next_desc();
  for (int k = 0; k < 65536; ++k) {
    // A descriptor outside the DDR: the clocked board's fetch fails (a decode error), and
    // only it says what follows.
    if (d > memory_.size() || memory_.size() - d < R::kDescBytes) return {};
    uint32_t w[16];
    memory_.read(d, w, sizeof w);
    segs.push_back({w[R::kDescBufferAddress / 4], w[R::kDescControl / 4] & R::kCtrlLengthMask, d});
    if (d == r.taildesc()) return segs;
    d = w[R::kDescNxtdesc / 4];
  }
  return {};  // no tail within reach: let the clocked board say what happens
}

const fast::DecodedRows* FastBoard::decoded(uint64_t addr, int rows, int n) {
  auto it = decoded_.find(addr);
  if (it != decoded_.end() && it->second.rows == rows && it->second.n == n) return it->second.rows_.get();
  const size_t stride = model::packed_row_bytes(n);
  const size_t bytes = size_t(rows) * stride;
  const uint8_t* p = memory_.span(addr, bytes);
  std::vector<uint8_t> copy;
  if (!p) {
    copy.resize(bytes);
    memory_.read(addr, copy.data(), bytes);
    p = copy.data();
  }
  auto dr = std::make_shared<fast::DecodedRows>();
  int bad = -1;
  if (!dr->decode(p, rows, n, &bad, options_.threads)) return nullptr;
  return install(addr, rows, n, std::move(dr));
}

// The decoded rows of the packed rows at addr, in place of any that were there.
const fast::DecodedRows* FastBoard::install(uint64_t addr, int rows, int n, std::shared_ptr<fast::DecodedRows> dr) {
  if (auto it = decoded_.find(addr); it != decoded_.end()) {
    stats_.decoded_bytes -= it->second.rows_->bytes();
    decoded_.erase(it);
  }
  stats_.decoded_bytes += dr->bytes();
  auto& slot = decoded_[addr];
  slot = Decoded{addr + uint64_t(rows) * model::packed_row_bytes(n), rows, n, std::move(dr)};
  return slot.rows_.get();
}

void FastBoard::adopt_weights(const std::vector<model::PackedRowsSpan>& spans, model::DerivedStore* derived,
                              const std::string& name) {
  size_t total = 0;
  for (const model::PackedRowsSpan& w : spans) total += fast::DecodedRows::bytes_for(w.rows, w.n);
  if (derived) {
    if (auto blob = derived->get(name); blob && blob->bytes == total) {
      size_t at = 0;
      for (const model::PackedRowsSpan& w : spans) {
        at += install(w.addr, w.rows, w.n,
                      std::make_shared<fast::DecodedRows>(fast::DecodedRows::view(w.rows, w.n, blob->data + at, blob->keep)))
                  ->bytes();
      }
      return;
    }
  }
  std::vector<model::ImagePart> parts;
  auto keep = std::make_shared<std::vector<std::shared_ptr<fast::DecodedRows>>>();
  for (const model::PackedRowsSpan& w : spans) {
    check_stop();
    const fast::DecodedRows* dr = decoded(w.addr, w.rows, w.n);
    if (!dr) return;  // rows that do not decode: the engine says so when it reads them
    parts.push_back({dr->data(), dr->bytes()});
    keep->push_back(decoded_.at(w.addr).rows_);
  }
  if (derived) derived->put(name, parts, keep);
}

// The engines' functional pass over the batch: each started MM2S stream goes to the engine
// the engine registry assigns its DMA (BoardConfig::engines), which appends the stream's shape to
// the key and computes the results (unless timing-only) into outputs_, at the partner S2MM's
// buffers. Returns false for anything the fast path does not model exactly (a malformed
// stream, a missing partner channel): the batch then runs on the clocked board.
bool FastBoard::compute(const std::vector<std::vector<Segment>>& segs,
                        const std::vector<std::pair<int, int>>& started, std::string& key) {
  outputs_.clear();
  auto index_of = [&](int d, int c) -> int {
    for (size_t i = 0; i < started.size(); ++i)
      if (started[i].first == d && started[i].second == c) return int(i);
    return -1;
  };
  FastEngineContext ctx{memory_, workers_, options_.timing_only,
                        [this](uint64_t addr, int rows, int n) { return decoded(addr, rows, n); }};
  for (size_t si = 0; si < started.size(); ++si) {
    const int d = started[si].first;
    if (started[si].second != 0) {
      if (index_of(d, 0) < 0) return false;  // an S2MM without its stream
      continue;
    }
    const int s2 = index_of(d, 1);
    if (s2 < 0) return false;
    std::vector<FastBuffer> in;
    for (const Segment& g : segs[si]) in.push_back(FastBuffer{g.addr, g.bytes});
    std::vector<uint8_t> results;
    if (!fast_engines_[size_t(EngineRegistry::engine_of_dma(d))]->compute(ctx, in, key, results)) return false;
    if (!place_results(segs[size_t(s2)], results)) return false;
  }
  return true;
}

// The results of one stream, where its S2MM puts them: its buffers, in order. False when
// they do not hold them all.
bool FastBoard::place_results(const std::vector<Segment>& out, const std::vector<uint8_t>& results) {
  size_t cap = 0;
  for (const auto& g : out) cap += g.bytes;
  if (cap < results.size()) return false;
  if (options_.timing_only) return true;
  size_t o = 0;
  for (const auto& g : out) {
    if (o >= results.size()) break;
    const size_t k = std::min<size_t>(g.bytes, results.size() - o);
    outputs_.emplace_back(g.addr, std::vector<uint8_t>(results.begin() + long(o), results.begin() + long(o + k)));
    o += k;
  }
  return true;
}

// The batch's cache key: every channel's register state when it opened, every write of
// the batch at its edge position, every chain's page offsets, lengths and descriptor control
// words (a descriptor is 64-byte aligned and never crosses 4 KB: its address does not matter
// to the timing), and how the started channels' descriptor registers relate to their chains.
std::string FastBoard::batch_key(const std::vector<std::pair<int, int>>& started) const {
  std::string key;
  for (const OracleAction& w : batch_actions_) {
    const uint64_t before = w.time_ps ? (w.time_ps - 1) / period_ : 0;  // last edge strictly before the write
    // A buffer address matters by its page offset; a descriptor address not at all (the
    // chain's shape below holds what matters); other values as they are.
    const uint32_t off = uint32_t(w.addr & 0xFF) % R::kS2mmOffset;
    const uint32_t value = off == R::kMm2sSa                                   ? uint32_t(axi_boundary_offset(w.value))
                           : off == R::kMm2sCurdesc || off == R::kMm2sTaildesc ? 0
                                                                               : w.value;
    key += fmt::format("w{:x},{},{},{:x};", w.addr & 0xFFFFF, int64_t(before) - int64_t(batch_first_),
                       int64_t(w.time_ps / period_ + 1) - int64_t(batch_first_), value);
  }
  for (int d = 0; d < int(ch_.size()); ++d)
    for (int c = 0; c < 2; ++c) {
      const DmaChannelRegisters& o = open_regs_[d][c];
      key += fmt::format("{:x},{:x},{},{};", o.dmacr(), o.dmasr(), o.ioc_count(), int(o.state()));
    }
  for (const auto& [d, c] : started) {
    const Channel& ch = ch_[d][c];
    key += fmt::format("|{}{}:", d, c);
    for (const int f : {0, 4}) {
      const Symbol s = symbol(ch, f, f == 0 ? ch.regs.curdesc() : ch.regs.next_desc());
      key += fmt::format("{}{},", int(s.kind), s.kind == Symbol::kLiteral ? 0 : s.value);
    }
    for (const auto& g : ch.chain) {
      key += fmt::format("{:x},{:x}", axi_boundary_offset(g.addr), g.bytes);
      memory_timing_->key_facts(g.addr, g.bytes, key);
      if (g.desc) {
        uint32_t w[16];
        memory_.read(g.desc, w, sizeof w);
        key += fmt::format(",{:x},{:x}", w[R::kDescControl / 4], w[R::kDescStatus / 4] & R::kStsCmplt);
      }
      key += ';';
    }
  }
  memory_timing_->key_state(opening_memory(), key);
  return key;
}

void FastBoard::account_dram(const DramActivity& batch, const std::vector<uint64_t>& tail) {
  if (!ledger_) return;
  const uint64_t opening = opening_edge();
  memory_timing_->advance_counted(memory_state_, opening - memory_state_edge_, memory_state_edge_, *ledger_);
  const uint64_t origin = memory_timing_->device_cycle(opening);
  dram_total_ += ledger_->close(origin);
  dram_total_ += batch;
  dram_total_.open_cycles += ledger_->continue_with(tail, origin);
}

DramActivity FastBoard::dram_activity(uint64_t t_ps) const {
  if (!ledger_) return {};
  DramLedger l = *ledger_;
  const uint64_t edge = std::max(t_ps / period_, memory_state_edge_);
  memory_timing_->advance_counted(memory_state_, edge - memory_state_edge_, memory_state_edge_, l);
  DramActivity a = dram_total_;
  a += l.close(memory_timing_->device_cycle(edge));
  return a;
}

uint64_t FastBoard::opening_edge() const {
  return std::max(batch_first_ > kOracleFirstEdge ? batch_first_ - kOracleFirstEdge : 0, memory_state_edge_);
}

MemoryState FastBoard::opening_memory() const {
  return memory_timing_->advance(memory_state_, opening_edge() - memory_state_edge_);
}

// How a register field's value relates to the batch (fields: 0 curdesc, 1 taildesc,
// 2 addr, 3 length, 4 next_desc).
FastBoard::Symbol FastBoard::symbol(const Channel& c, int field, uint32_t value) const {
  if (field == 0)
    for (size_t k = 0; k < c.chain.size(); ++k)
      if (c.chain[k].desc && uint32_t(c.chain[k].desc) == value) return {Symbol::kChainDesc, uint32_t(k)};
  if (field == 4)
    for (size_t k = 0; k < c.chain_next.size(); ++k)
      if (c.chain_next[k] == value) return {Symbol::kChainNext, uint32_t(k)};
  const auto a = c.at_resolve.addresses();
  const uint32_t resolved[5] = {a.curdesc, a.taildesc, a.addr, a.length, a.next_desc};
  if (resolved[field] == value) return {Symbol::kResolved, 0};
  return {Symbol::kLiteral, value};
}

FastBoard::RelativeRegs FastBoard::relative(const Channel& c, const DmaChannelRegisters& r) const {
  RelativeRegs out;
  out.regs = r;
  const auto a = r.addresses();
  const uint32_t v[5] = {a.curdesc, a.taildesc, a.addr, a.length, a.next_desc};
  for (int f = 0; f < 5; ++f) out.fields[f] = symbol(c, f, v[f]);
  return out;
}

DmaChannelRegisters FastBoard::absolute(const Channel& c, const RelativeRegs& r) const {
  const auto a = c.at_resolve.addresses();
  const uint32_t resolved[5] = {a.curdesc, a.taildesc, a.addr, a.length, a.next_desc};
  uint32_t v[5];
  for (int f = 0; f < 5; ++f) {
    const Symbol& s = r.fields[f];
    switch (s.kind) {
      case Symbol::kLiteral: v[f] = s.value; break;
      case Symbol::kResolved: v[f] = resolved[f]; break;
      case Symbol::kChainDesc: v[f] = uint32_t(c.chain.at(s.value).desc); break;
      case Symbol::kChainNext: v[f] = c.chain_next.at(s.value); break;
    }
  }
  DmaChannelRegisters out = r.regs;
  out.set_addresses({v[0], v[1], v[2], v[3], v[4]});
  return out;
}

// The batch for the clocked board: the registers when it opened, its actions shifted so that
// the first start's edge is kOracleFirstEdge, and the DDR it reads: this board's own DDR as
// the clocked board's backing (a reusable shape, run at once by run_timing_oracle while this
// DDR does not change), or a copy of all of the DDR as it was when the batch opened (a live
// run, which lasts while this DDR changes: its blocks that are not all zero, the clocked
// board's DDR starting as zeros).
OracleBatch FastBoard::oracle_batch(bool backed) const {
  OracleBatch batch;
  batch.initial = open_regs_;
  batch.memory_state = opening_memory();
  batch.memory_trace = memory_timing_->checks_reuse();
  const uint64_t shift = oracle_shift_ps();
  for (OracleAction a : batch_actions_) {
    a.time_ps -= shift;
    batch.actions.push_back(std::move(a));
  }
  auto add = [&](uint64_t addr, size_t n) {
    MemoryRegion r{addr, std::vector<uint8_t>(n)};
    memory_.read(addr, r.bytes.data(), n);
    batch.memory.push_back(std::move(r));
  };
  batch.arithmetic = !options_.timing_only;  // nobody reads a timing-only run's results
  if (backed) {
    batch.backing = &memory_;
    return batch;
  }
  memory_.for_each_nonzero_extent([&](uint64_t addr, size_t n) { add(addr, n); });
  return batch;
}

// What a run of the clocked board says about the batch, said relative to it.
FastBoard::Cached FastBoard::record(const OracleResult& res) const {
  Cached entry;
  entry.bytes_read = res.bytes_read;
  entry.end_edge = std::max(res.cycles, res.quiet_edge);
  entry.memory_after = res.memory_after;
  entry.memory_after_edge = res.memory_after_edge;
  entry.dram = res.dram;
  entry.dram_tail = res.dram_tail;
  entry.engines = res.engines;
  entry.channels.resize(ch_.size());
  for (int d = 0; d < int(ch_.size()); ++d)
    for (int c = 0; c < 2; ++c) {
      const Channel& ch = ch_[d][c];
      ChannelTimeline& t = entry.channels[d][c];
      // A reusable shape's writes are replayed by the fast board itself (they are all before
      // the batch resolves).
      for (const auto& change : res.channels[d][c].changes)
        if (!change.at_write) t.changes.push_back({change.time_ps, relative(ch, change.regs)});
      t.transfers = res.channels[d][c].transfers;
      for (const auto& g : ch.chain)
        if (g.desc) t.desc_status.push_back(rd32(memory_, g.desc + R::kDescStatus));
    }
  return entry;
}

FastBoard::Cached FastBoard::run_oracle(const std::vector<std::pair<int, int>>& started, bool check_outputs) {
  const auto t0 = std::chrono::steady_clock::now();
  OracleResult res = run_timing_oracle(config_, oracle_batch(true));
  stats_.oracle_wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.oracle_runs;
  stats_.oracle_cycles += res.cycles;
  // Check the fast kernels against the clocked engines on every batch the oracle runs.
  if (!options_.timing_only && check_outputs) {
    for (const auto& [addr, bytes] : outputs_) {
      std::vector<uint8_t> got(bytes.size());
      bool found = false;
      for (const auto& w : res.writes)
        if (addr >= w.addr && addr + bytes.size() <= w.addr + w.bytes.size()) {
          std::memcpy(got.data(), w.bytes.data() + (addr - w.addr), bytes.size());
          found = true;
        }
      if (!found || got != bytes)
        throw Error(fmt::format("fast fidelity: the fast kernels' results at {:#x} differ from the clocked "
                                "engines' (an internal error)", addr));
    }
  }
  for (const auto& w : res.writes) write_output(w.addr, w.bytes.data(), w.bytes.size(), owner_of(w.addr, w.bytes.size(), started));
  Cached entry = record(res);
  entry.trace = std::move(res.memory_trace);
  return entry;
}

// A write of the PL's results into DDR, undone if the batch has to run again.
void FastBoard::write_output(uint64_t addr, const void* src, size_t n, int owner) {
  undo_.push_back({addr, std::vector<uint8_t>(n), owner});
  memory_.read(addr, undo_.back().old.data(), n);
  memory_.write(addr, src, n);
}

// The started channel whose buffers or descriptors hold [addr, addr + n), or -1.
int FastBoard::owner_of(uint64_t addr, size_t n, const std::vector<std::pair<int, int>>& started) const {
  for (const auto& [d, c] : started)
    for (const auto& g : ch_[d][c].chain) {
      const bool in_buffer = addr >= g.addr && addr + n <= g.addr + g.bytes;
      const bool in_desc = g.desc && addr >= g.desc && addr + n <= g.desc + R::kDescBytes;
      if (in_buffer || in_desc) return d * 2 + c;
    }
  return -1;
}

// True if the bytes of `u` are final at t: their channel's transfer has completed by then.
bool FastBoard::final_at(const Undo& u, uint64_t t_ps) const {
  if (u.owner < 0 || general_) return false;
  const Channel& ch = ch_[u.owner / 2][u.owner % 2];
  return !ch.transfers.empty() && ch.transfers.back().second * period_ < t_ps;
}

void FastBoard::undo_outputs() {
  for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) memory_.write(it->addr, it->old.data(), it->old.size());
  undo_.clear();
}

// Puts a resolved batch in flight: its register changes, transfers and the engines'
// registers after it. A change before the latest access is the state now (a channel's
// writes in a reusable shape all come before its first change; a batch that runs again
// agrees with its earlier run up to then); transfers before it were reported already.
void FastBoard::apply(const Cached& entry, const MemoryReplay* replayed) {
  for (int d = 0; d < int(ch_.size()); ++d)
    for (int c = 0; c < 2; ++c) {
      Channel& ch = ch_[d][c];
      const ChannelTimeline& t = entry.channels[d][c];
      ch.pending.clear();
      ch.next = 0;
      // The clocked board's state at the latest access, then what is still to come.
      const uint64_t shift = oracle_shift_ps();
      for (const Change& change : t.changes) {
        if (change.time_ps + shift > advanced_ps_) ch.pending.emplace_back(change.time_ps + shift, absolute(ch, change.regs));
        else ch.regs = absolute(ch, change.regs);
      }
      ch.transfers.clear();
      ch.reported = 0;
      for (const auto& [s, e] : t.transfers)
        if ((batch_first_ + e) * period_ >= advanced_ps_) ch.transfers.emplace_back(batch_first_ + s, batch_first_ + e);
    }
  batch_end_edge_ = batch_first_ + entry.end_edge;
  account_dram(replayed ? replayed->dram : entry.dram, replayed ? replayed->dram_tail : entry.dram_tail);
  memory_state_ = replayed ? replayed->after : entry.memory_after;
  memory_state_edge_ = batch_first_ + entry.memory_after_edge;
  next_event_ps_ = 0;  // the next access looks at the new record
  for (int e = 0; e < int(engines_.size()); ++e)
    for (int lane = 0; lane < 2; ++lane) pending_engines_[e][lane] = after_batch(engines_[e][lane], entry.engines[e][lane]);
}

// The live run of the batch: the clocked board from the batch's opening (every channel's
// registers and the DDR as they were then: the batch's writes so far, results and CPU
// stores, are undone for the copy, and the stores go in again as actions at their times),
// with every action so far. Made at the first need and kept until the batch closes.
LiveOracle& FastBoard::live() {
  if (live_) return *live_;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::pair<uint64_t, std::vector<uint8_t>>> redo;
  for (const Undo& u : undo_) {
    redo.emplace_back(u.addr, std::vector<uint8_t>(u.old.size()));
    memory_.read(u.addr, redo.back().second.data(), u.old.size());
  }
  for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) memory_.write(it->addr, it->old.data(), it->old.size());
  OracleBatch batch = oracle_batch(false);
  for (const auto& [addr, bytes] : redo) memory_.write(addr, bytes.data(), bytes.size());
  live_ = std::make_unique<LiveOracle>(config_, std::move(batch));
  for (auto& dma : live_reported_)
    for (size_t& n : dma) n = 0;
  ++stats_.oracle_runs;
  stats_.oracle_wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return *live_;
}

// The batch is not a reusable shape (or a write or store came that can change it): from now
// on it runs live on the clocked board, which answers every read until it is quiet.
void FastBoard::enter_general() {
  general_ = true;
  general_from_ps_ = advanced_ps_;  // transfers completed before were reported already
  undo_outputs();                   // the DDR here as the batch opened; the live run has the rest
  memory_state_ = before_batch_.state;  // and the memory as it opened (not an applied record's end)
  memory_state_edge_ = before_batch_.edge;
  ledger_ = before_batch_.ledger;
  dram_total_ = before_batch_.dram_total;
  for (auto& dma : ch_)
    for (Channel& ch : dma) {
      ch.pending.clear();
      ch.next = 0;
      ch.transfers.clear();
      ch.reported = 0;
    }
  next_event_ps_ = 0;
  live();
}

// A register or DDR value at a time inside the batch, from the live run.
std::vector<uint8_t> FastBoard::probe(OracleAction a) {
  const uint64_t t_ps = a.time_ps;
  LiveOracle& l = live();
  a.time_ps -= oracle_shift_ps();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<uint8_t> v = l.probe(std::move(a));
  stats_.oracle_wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (general_) after_live_probe(t_ps);
  return v;
}

uint32_t FastBoard::probe_register(uint64_t addr, uint64_t t_ps) {
  const std::vector<uint8_t> v = probe({OracleAction::Kind::kProbeRegister, t_ps, addr, 0, 4, {}});
  uint32_t value;
  std::memcpy(&value, v.data(), 4);
  return value;
}

// After a probe of a general batch at t: the transfers the live run completed before t are
// reported, and a quiet board closes the batch. Not at an edge's time: the run has evaluated
// that edge already, and a read at that time must not see it, so the batch stays open to the
// next probe.
void FastBoard::after_live_probe(uint64_t t_ps) {
  LiveOracle& l = *live_;
  for (int d = 0; d < int(ch_.size()); ++d)
    for (int c = 0; c < 2; ++c) {
      const auto& transfers = l.channel(d, c).transfers;
      size_t& k = live_reported_[d][c];
      for (; k < transfers.size(); ++k) {
        const uint64_t start = batch_first_ + transfers[k].first, completion = batch_first_ + transfers[k].second;
        if (completion * period_ >= t_ps) break;
        if (completion * period_ >= general_from_ps_) completed_.push_back({d, c, start, completion});
      }
    }
  bytes_read_ = bytes_read_before_batch_ + l.bytes_read();
  if (t_ps % period_ != 0 && l.quiet()) close_general();
}

// A general batch is over: the fast board goes on from the live run's registers, engines
// and DDR.
void FastBoard::close_general() {
  LiveOracle& l = *live_;
  for (int d = 0; d < int(ch_.size()); ++d)
    for (int c = 0; c < 2; ++c) ch_[d][c].regs = l.registers(d, c);
  for (const MemoryRegion& w : l.writes()) memory_.write(w.addr, w.bytes.data(), w.bytes.size());
  for (int e = 0; e < int(engines_.size()); ++e)
    for (int lane = 0; lane < 2; ++lane) pending_engines_[e][lane] = after_batch(engines_[e][lane], l.lane(e, lane));
  stats_.oracle_cycles += l.cycles();
  std::vector<uint64_t> tail;
  const DramActivity dram = l.dram_activity(tail);
  account_dram(dram, tail);
  memory_state_ = l.memory_state();
  memory_state_edge_ = batch_first_ + l.cycles();
  close_batch();
}

// The channels whose start waits for its edge; the batch's first edge; every channel's
// registers as the batch resolves.
std::vector<std::pair<int, int>> FastBoard::started_channels() {
  std::vector<std::pair<int, int>> started;
  batch_first_ = UINT64_MAX;
  for (int d = 0; d < int(ch_.size()); ++d)
    for (int c = 0; c < 2; ++c) {
      Channel& ch = ch_[d][c];
      ch.at_resolve = ch.regs;
      ch.chain.clear();
      ch.chain_next.clear();
      if (ch.regs.state() != DmaState::kStarting) continue;
      started.emplace_back(d, c);
      batch_first_ = std::min(batch_first_, ch.start_edge);
    }
  for (int e = 0; e < int(engines_.size()); ++e)
    for (int lane = 0; lane < 2; ++lane)
      if (engines_[e][lane].error || engines_[e][lane].busy)  // a batch stays open while one is
        throw std::logic_error(fmt::format("fast fidelity: a batch opened while the {} lane {} is busy or holds an error",
                                           (*config_.engines)[e].name, lane));
  return started;
}

// True if the batch is a reusable shape: its chains end at their tails, and it writes only
// starts and buffer registers.
bool FastBoard::walk_chains(const std::vector<std::pair<int, int>>& started, std::vector<std::vector<Segment>>& segs) {
  bool ok = true;
  for (const auto& [d, c] : started) {
    Channel& ch = ch_[d][c];
    ch.chain = chain(ch.regs);
    for (const auto& g : ch.chain)
      if (g.desc) ch.chain_next.push_back(rd32(memory_, g.desc + R::kDescNxtdesc) & ~(R::kDescAlign - 1));
    segs.push_back(ch.chain);
    if (ch.chain.empty()) ok = false;
    // A buffer outside the DDR: the clocked board's transfer fails (a decode error); the fast
    // kernels neither read nor write outside it.
    for (const auto& g : ch.chain)
      if (g.addr > memory_.size() || g.bytes > memory_.size() - g.addr) ok = false;
    // A buffer the DMA refuses at its start (AxiDma: a length past dma.length_bits, a length or
    // address off a beat, an empty descriptor): the clocked DMA raises DMAIntErr and moves
    // nothing, so the fast kernels must not compute it; only the clocked board says what
    // follows (else the fast fidelity ends a program the cycle fidelity runs).
    const uint64_t max_length = (uint64_t(1) << config_.dma.length_bits) - 1;
    for (const auto& g : ch.chain)
      if (g.bytes == 0 || g.bytes > max_length || g.bytes % 8 != 0 || g.addr % 8 != 0) ok = false;
  }
  for (const OracleAction& a : batch_actions_) {
    const uint32_t off = uint32_t(a.addr & 0xFF) % R::kS2mmOffset;
    ok &= a.kind == OracleAction::Kind::kWrite && config_.engines->dma_at(a.addr) >= 0 &&
          (off == R::kMm2sSa || off == R::kMm2sLength || off == R::kMm2sTaildesc);
  }
  return ok;
}

// A reusable shape seen before: the fast kernels' results, the recorded descriptor status
// words and the recorded register changes.
void FastBoard::replay_cached(const Cached& entry, const std::vector<std::pair<int, int>>& started,
                              const MemoryReplay* replayed) {
  ++stats_.cache_hits;
  for (const auto& [addr, bytes] : outputs_) write_output(addr, bytes.data(), bytes.size(), owner_of(addr, bytes.size(), started));
  for (const auto& [d, c] : started) {
    const auto& status = entry.channels[d][c].desc_status;
    size_t k = 0;
    for (const auto& g : ch_[d][c].chain)
      if (g.desc && k < status.size()) write_output(g.desc + R::kDescStatus, &status[k++], 4, d * 2 + c);
  }
  bytes_read_ += entry.bytes_read;
  apply(entry, replayed);
}

size_t FastBoard::timing_entries() const {
  size_t n = 0;
  for (const auto& [key, records] : cache_) n += records.size();
  return n;
}

const FastBoard::Cached* FastBoard::reusable(const std::string& key, std::optional<MemoryReplay>& replayed) {
  replayed.reset();
  const auto it = cache_.find(key);
  if (it == cache_.end() || it->second.empty()) return nullptr;
  std::vector<Cached>& records = it->second;
  if (!memory_timing_->checks_reuse()) return &records.front();
  const MemoryState opening = opening_memory();
  for (size_t i = 0; i < records.size(); ++i) {
    // The replay's quiet edge counts from the oracle's edge 0, the record's from the first start.
    replayed = memory_timing_->replay(opening, records[i].trace, records[i].memory_after_edge + kOracleFirstEdge);
    if (!replayed) {
      ++stats_.replays_rejected;
      continue;
    }
    ++stats_.replays_accepted;
    ++records[i].uses;
    std::rotate(records.begin(), records.begin() + ptrdiff_t(i), records.begin() + ptrdiff_t(i) + 1);
    return &records.front();
  }
  return nullptr;
}

void FastBoard::resolve() {
  collecting_ = false;
  ++stats_.batches;
  const std::vector<std::pair<int, int>> started = started_channels();
  if (started.empty()) {  // the starts were stopped before they began
    batch_open_ = false;
    batch_actions_.clear();
    return;
  }
  std::vector<std::vector<Segment>> segs;
  bool ok = walk_chains(started, segs);
  std::string key = ok ? batch_key(started) : std::string();
  if (ok) ok = compute(segs, started, key);
  bytes_read_before_batch_ = bytes_read_;
  before_batch_ = {memory_state_, memory_state_edge_, ledger_, dram_total_};
  if (!ok) {
    enter_general();
  } else if (std::optional<MemoryReplay> replayed; const Cached* hit = reusable(key, replayed)) {
    replay_cached(*hit, started, replayed ? &*replayed : nullptr);
  } else {
    Cached entry = run_oracle(started, true);
    bytes_read_ += entry.bytes_read;
    apply(entry);
    // Under checked reuse, a run without a trace (the memory's model keeps none where a refresh
    // fell among its answers) can never be reused: it is not kept.
    if (!memory_timing_->checks_reuse() || !entry.trace.empty()) {
      std::vector<Cached>& records = cache_[key];
      // Full: the least used goes, the oldest of those (records in the order accepted, then added).
      if (records.size() >= kRecordsPerShape)
        records.erase(std::min_element(records.begin(), records.end(),
                                       [](const Cached& a, const Cached& b) { return a.uses < b.uses; }));
      records.push_back(std::move(entry));
    }
  }
}

// ---- The timing cache as bytes ------------------------------------------------------------
//
// Layout (native byte order and struct layout: the bytes are for this build only):
//   "BSTC", format (u32), records (u64), then per record (a shape with several records has
//   one entry each, under the same key): key length (u32) and key bytes;
//   per channel [DMA][2] (the registry's DMAs): changes (u64) and each (time_ps u64, RelativeRegs), transfers (u64)
//   and each (start u64, completion u64), status words (u64) and each u32; bytes_read (u64),
//   end_edge (u64), the engines' LaneRegisterView [engine][2]; the memory's carried state
//   after (count u64, words), its edge (u64), the DRAM command counts and open cycles (8 u64),
//   the ledger's tail (count u64, words), the memory trace (count u64, words).

namespace {
constexpr uint32_t kTimingMagic = 0x43545342;  // "BSTC"
// 2: each entry ends with the memory's carried state; 3: and its DRAM commands; 4: and its
// memory trace, a shape's records one entry each.
constexpr uint32_t kTimingFormat = 4;

struct ByteWriter {
  std::vector<uint8_t>& out;
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof v);
  }
};

struct ByteReader {
  const uint8_t* p;
  size_t left;
  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    if (left < sizeof(T)) throw Error("timing cache: the bytes end inside an entry");
    T v;
    std::memcpy(&v, p, sizeof v);
    p += sizeof v;
    left -= sizeof v;
    return v;
  }
  // A count of items of `item_bytes` each that the remaining bytes can hold.
  size_t count(size_t item_bytes) {
    const uint64_t n = get<uint64_t>();
    if (n > left / std::max<size_t>(item_bytes, 1)) throw Error("timing cache: a count larger than the bytes left");
    return size_t(n);
  }
};
}  // namespace

std::vector<uint8_t> FastBoard::export_timing() const {
  static_assert(std::is_trivially_copyable_v<RelativeRegs> && std::is_trivially_copyable_v<LaneRegisterView>);
  std::vector<uint8_t> out;
  ByteWriter w{out};
  w.put(kTimingMagic);
  w.put(kTimingFormat);
  w.put(uint64_t(timing_entries()));
  // In key order (a shape's records in their order), so that the same entries give the same bytes.
  std::vector<const std::pair<const std::string, std::vector<Cached>>*> shapes;
  for (const auto& e : cache_) shapes.push_back(&e);
  std::sort(shapes.begin(), shapes.end(), [](auto* a, auto* b) { return a->first < b->first; });
  for (const auto* shape : shapes)
  for (const Cached& c : shape->second) {
    w.put(uint32_t(shape->first.size()));
    out.insert(out.end(), shape->first.begin(), shape->first.end());
    for (const auto& dma : c.channels)
      for (const ChannelTimeline& t : dma) {
        w.put(uint64_t(t.changes.size()));
        for (const Change& ch : t.changes) {
          w.put(ch.time_ps);
          w.put(ch.regs);
        }
        w.put(uint64_t(t.transfers.size()));
        for (const auto& [a, b] : t.transfers) {
          w.put(a);
          w.put(b);
        }
        w.put(uint64_t(t.desc_status.size()));
        for (uint32_t v : t.desc_status) w.put(v);
      }
    w.put(c.bytes_read);
    w.put(c.end_edge);
    for (const auto& kind : c.engines)
      for (const LaneRegisterView& v : kind) w.put(v);
    w.put(uint64_t(c.memory_after.words.size()));
    for (const uint64_t v : c.memory_after.words) w.put(v);
    w.put(c.memory_after_edge);
    const Ddr3CommandCounts& k = c.dram.counts;
    for (const uint64_t v : {k.act, k.pre, k.prea, k.prea_banks, k.rd, k.wr, k.ref, c.dram.open_cycles}) w.put(v);
    w.put(uint64_t(c.dram_tail.size()));
    for (const uint64_t v : c.dram_tail) w.put(v);
    w.put(uint64_t(c.trace.words.size()));
    for (const uint64_t v : c.trace.words) w.put(v);
  }
  return out;
}

void FastBoard::import_timing(const uint8_t* data, size_t bytes) {
  ByteReader r{data, bytes};
  if (r.get<uint32_t>() != kTimingMagic) throw Error("timing cache: not a timing cache (magic)");
  if (const uint32_t f = r.get<uint32_t>(); f != kTimingFormat)
    throw Error(fmt::format("timing cache: format {} (this build reads {})", f, kTimingFormat));
  const size_t n = r.count(4);
  std::vector<std::pair<std::string, Cached>> read;
  read.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t klen = r.get<uint32_t>();
    if (klen > r.left) throw Error("timing cache: a key longer than the bytes left");
    std::string key(reinterpret_cast<const char*>(r.p), klen);
    r.p += klen;
    r.left -= klen;
    Cached c;
    c.channels.resize(ch_.size());
    c.engines.resize(engines_.size());
    for (auto& dma : c.channels)
      for (ChannelTimeline& t : dma) {
        t.changes.resize(r.count(sizeof(uint64_t) + sizeof(RelativeRegs)));
        for (Change& ch : t.changes) {
          ch.time_ps = r.get<uint64_t>();
          ch.regs = r.get<RelativeRegs>();
        }
        t.transfers.resize(r.count(16));
        for (auto& [a, b] : t.transfers) {
          a = r.get<uint64_t>();
          b = r.get<uint64_t>();
        }
        t.desc_status.resize(r.count(4));
        for (uint32_t& v : t.desc_status) v = r.get<uint32_t>();
      }
    c.bytes_read = r.get<uint64_t>();
    c.end_edge = r.get<uint64_t>();
    for (auto& kind : c.engines)
      for (LaneRegisterView& v : kind) v = r.get<LaneRegisterView>();
    c.memory_after.words.resize(r.count(8));
    for (uint64_t& v : c.memory_after.words) v = r.get<uint64_t>();
    c.memory_after_edge = r.get<uint64_t>();
    Ddr3CommandCounts& k = c.dram.counts;
    for (uint64_t* v : {&k.act, &k.pre, &k.prea, &k.prea_banks, &k.rd, &k.wr, &k.ref, &c.dram.open_cycles})
      *v = r.get<uint64_t>();
    c.dram_tail.resize(r.count(8));
    for (uint64_t& v : c.dram_tail) v = r.get<uint64_t>();
    c.trace.words.resize(r.count(8));
    for (uint64_t& v : c.trace.words) v = r.get<uint64_t>();
    read.emplace_back(std::move(key), std::move(c));
  }
  if (r.left != 0) throw Error(fmt::format("timing cache: {} bytes after the last entry", r.left));
  // A shape this board has records of keeps them (an imported record is added only to a shape
  // it has none of, up to kRecordsPerShape).
  std::unordered_map<std::string, bool> had;
  for (auto& [key, c] : read) {
    const auto it = had.try_emplace(key, cache_.count(key) > 0).first;
    std::vector<Cached>& records = cache_[key];
    if (it->second || records.size() >= kRecordsPerShape) continue;
    records.push_back(std::move(c));
    ++imported_;
  }
}

}  // namespace bitsim::hw
