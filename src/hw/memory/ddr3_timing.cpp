#include "hw/memory/ddr3_timing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::hw {

Ddr3Crossing Ddr3Crossing::of(double device_mhz, uint64_t pl_period_ps, uint64_t origin) {
  // f_dev / f_pl = device_khz * period_ps / 1e9, both integers when the clocks are whole kHz.
  const double khz = device_mhz * 1000.0;
  if (std::fabs(khz - std::round(khz)) > 1e-6 || pl_period_ps == 0)
    throw Error(fmt::format("ddr3.clock_mhz = {} is not a whole number of kHz: the clock crossing needs an exact ratio",
                            device_mhz));
  uint64_t num = uint64_t(std::llround(khz)) * pl_period_ps, den = 1'000'000'000ull;
  const uint64_t g = std::gcd(num, den);
  Ddr3Crossing x;
  x.origin = origin;
  x.num = num / g;
  x.den = den / g;
  return x;
}

static uint32_t log2u(uint32_t v) {
  uint32_t n = 0;
  while ((1u << n) < v) ++n;
  return n;
}

Ddr3Timing::Ddr3Timing(const Ddr3Config& c, uint64_t origin)
    : c_(c), q_(2 * size_t(c.ports)), head_(2 * size_t(c.ports), UINT64_MAX), banks_(c.banks),
      next_refresh_(origin + c.trefi) {
  c_.validate("ddr3");
  bus_bits_ = log2u(c_.bus_bytes);
  col_bits_ = log2u(c_.columns);
  bank_bits_ = log2u(c_.banks);
  row_bits_ = log2u(c_.rows);
  burst_bytes_ = c_.bus_bytes * c_.burst_length;
  ctrl_cycles_ = c_.cycles(c_.ctrl_latency_ns);
  row_bank_col_ = c_.address_map == "row-bank-col";
  closed_page_ = c_.page_policy == "closed";
  frfcfs_ = c_.scheduler == "frfcfs-port";
  fifo_ = c_.rw_policy == "fifo";
  timer_off_ = (c_.timer_ncks - origin % c_.timer_ncks) % c_.timer_ncks;  // a pulse at the origin
  for (Store& s : st_) s.hnc_end = s.last_served = origin;
  for (Bank& b : banks_) b.act_ok = b.pre_ok = b.col_ok = origin;
  last_act_ = last_col_ = last_rd_ = last_wr_ = origin;
}


Ddr3Address Ddr3Timing::map(uint64_t addr) const {
  const uint32_t cb = col_bits_, kb = bank_bits_, rb = row_bits_;
  const uint64_t w = addr >> bus_bits_;
  Ddr3Address a;
  a.column = uint32_t(w & (c_.columns - 1));
  if (row_bank_col_) {
    a.bank = uint32_t((w >> cb) & (c_.banks - 1));
    a.row = uint32_t((w >> (cb + kb)) & (c_.rows - 1));
  } else {
    a.row = uint32_t((w >> cb) & (c_.rows - 1));
    a.bank = uint32_t((w >> (cb + rb)) & (c_.banks - 1));
  }
  return a;
}

Ddr3Timing::Plan Ddr3Timing::plan(const Ddr3Address& a, bool write, uint64_t t0) const {
  const Bank& b = banks_[a.bank];
  Plan p;
  uint64_t col_min = t0;
  if (b.row != int64_t(a.row)) {
    uint64_t act = std::max(t0, b.act_ok);
    if (b.row >= 0) {
      p.pre = true;
      p.pre_t = std::max(t0, b.pre_ok);
      act = std::max(act, p.pre_t + c_.trp);
    }
    if (any_act_) act = std::max(act, last_act_ + c_.trrd);
    if (acts_.size() == 4) act = std::max(act, acts_.front() + c_.tfaw);
    p.act = true;
    p.act_t = act;
    col_min = act + c_.trcd;
  } else {
    col_min = std::max(col_min, b.col_ok);
  }
  if (any_col_) {
    col_min = std::max(col_min, last_col_ + c_.tccd);
    if (write && !last_write_) col_min = std::max<uint64_t>(col_min, last_rd_ + c_.cl + c_.tccd + 2 - c_.cwl);
    if (!write && last_write_)
      col_min = std::max<uint64_t>(col_min, last_wr_ + c_.cwl + c_.burst_length / 2 + c_.twtr);
  }
  p.col_t = col_min;
  return p;
}

void Ddr3Timing::commit(const Ddr3Address& a, bool write, const Plan& p) {
  Bank& b = banks_[a.bank];
  const uint32_t half = c_.burst_length / 2;
  if (p.pre) ++counts_.pre, issued(p.pre_t, Ddr3Command::kPre, a.bank);
  if (p.act) {
    ++counts_.act, issued(p.act_t, Ddr3Command::kAct, a.bank);
    b.row = a.row;
    b.act_ok = p.act_t + c_.trc;
    b.pre_ok = p.act_t + c_.tras;
    b.col_ok = p.act_t + c_.trcd;
    last_act_ = p.act_t;
    any_act_ = true;
    acts_.push_back(p.act_t);
    if (acts_.size() > 4) acts_.erase(acts_.begin());
  }
  b.pre_ok = std::max<uint64_t>(b.pre_ok, write ? p.col_t + c_.cwl + half + c_.twr : p.col_t + c_.trtp);
  ++(write ? counts_.wr : counts_.rd), issued(p.col_t, write ? Ddr3Command::kWr : Ddr3Command::kRd, a.bank);
  any_col_ = true;
  last_col_ = p.col_t;
  last_write_ = write;
  (write ? last_wr_ : last_rd_) = p.col_t;
  if (closed_page_) {
    ++counts_.pre, issued(b.pre_ok, Ddr3Command::kPre, a.bank);  // at the earliest time the bank allows
    b.act_ok = std::max(b.act_ok, b.pre_ok + c_.trp);
    b.row = -1;
  }
}

void Ddr3Timing::refresh() {
  uint64_t ref = next_refresh_;
  uint32_t open = 0;
  for (auto& b : banks_)
    if (b.row >= 0) ref = std::max(ref, std::max(next_refresh_, b.pre_ok) + c_.trp), ++open;
  // Open banks: one PREA when the last of them may close, tRP before the REF.
  if (open > 0) ++counts_.prea, counts_.prea_banks += open, issued(ref - c_.trp, Ddr3Command::kPrea, 0);
  ++counts_.ref, issued(ref, Ddr3Command::kRef, 0);
  for (auto& b : banks_) {
    b.row = -1;
    b.act_ok = std::max(b.act_ok, ref + c_.trfc);
  }
  next_refresh_ += c_.trefi;
}

void Ddr3Timing::submit(const Ddr3Request& r, uint64_t id) {
  if (r.port >= c_.ports) throw Error("ddr3: request port out of range");
  const uint64_t first = r.addr / burst_bytes_ * burst_bytes_, stop = r.addr + std::max<uint32_t>(r.bytes, 1);
  const size_t k = 2 * size_t(r.port) + r.write;
  q_[k].push_back(Burst{id, r.arrival, first, stop, seq_++, map(first), r.write});
  head_[k] = q_[k].front().arrival;
}

// The head request's next burst, or the next request.
void Ddr3Timing::pop(size_t k) {
  Burst& b = q_[k].front();
  if (!b.last(burst_bytes_)) {
    b.addr += burst_bytes_;
    b.at = map(b.addr);
    return;
  }
  q_[k].pop_front();
  head_[k] = q_[k].empty() ? UINT64_MAX : q_[k].front().arrival;
}

uint64_t Ddr3Timing::earliest() const {
  uint64_t e = UINT64_MAX;
  if (fifo_) {
    // A port's later submission that arrives first still waits for its older one: deciding
    // at its arrival would find nothing to offer.
    for (uint32_t p = 0; p < c_.ports; ++p)
      if (const int k = fifo_head(p); k >= 0) e = std::min(e, head_[size_t(k)]);
    return e;
  }
  for (const uint64_t h : head_) e = std::min(e, h);
  return e;
}

int Ddr3Timing::fifo_head(uint32_t p) const {
  const auto& r = q_[2 * p];
  const auto& w = q_[2 * p + 1];
  if (!r.empty() && (w.empty() || r.front().seq < w.front().seq)) return int(2 * p);
  return w.empty() ? -1 : int(2 * p + 1);
}

bool Ddr3Timing::idle() const { return earliest() == UINT64_MAX; }

int Ddr3Timing::offer(uint32_t p, uint64_t t) const {
  // fifo: the port's oldest submission, whichever its direction; ug585: the mode's queue.
  const int k = fifo_ ? fifo_head(p) : int(2 * p + (write_mode_ ? 1 : 0));
  return k >= 0 && head_[size_t(k)] <= t ? k : -1;  // an empty queue's head is UINT64_MAX
}

void Ddr3Timing::switch_mode(uint64_t t) {
  bool pending[2] = {false, false};
  uint64_t oldest[2] = {UINT64_MAX, UINT64_MAX};
  for (size_t k = 0; k < head_.size(); ++k)
    if (head_[k] <= t) {
      pending[k & 1] = true;
      oldest[k & 1] = std::min(oldest[k & 1], head_[k]);
    }
  const uint32_t starve[2] = {c_.lpr_max_starve_x32, c_.w_max_starve_x32};
  for (int d = 0; d < 2; ++d) {
    Store& s = st_[d];
    // A store whose oldest pending burst came after its last service was empty in between:
    // nothing starved, so it is not critical (docs/ddr3.md).
    if (!pending[d] || oldest[d] > s.last_served) s.critical = false, s.served = 0;
    if (!pending[d] || s.critical || t < s.hnc_end) continue;
    const uint64_t since = std::max({s.last_served, oldest[d], s.hnc_end});
    if (pulse(t) - pulse(since) >= starve[d]) s.critical = true, s.served = 0;
  }
  if (write_mode_ ? pending[0] && (st_[0].critical || !pending[1]) : pending[1] && (st_[1].critical || !pending[0]))
    write_mode_ = !write_mode_;
}

// The CAM of a direction holds its first cam_entries pending bursts in the order they reached
// the controller (arrival, then submission); the rest wait in their ports' queues. A port's
// head is the oldest of its port, so the bursts ahead of it are other ports' arrived bursts.
// The oldest arrived head has none ahead of it: some head is always in the CAM.
bool Ddr3Timing::in_cam(size_t k, uint64_t t) const {
  if (c_.cam_entries == 0) return true;  // no CAM limit
  const Burst& h = q_[k].front();
  uint64_t ahead = 0;
  for (size_t j = k & 1; j < q_.size(); j += 2) {
    if (j == k) continue;
    for (const Burst& b : q_[j]) {
      if (b.arrival > t || b.arrival > h.arrival || (b.arrival == h.arrival && b.seq > h.seq)) break;
      ahead += (b.stop - b.addr + burst_bytes_ - 1) / burst_bytes_;
      if (ahead >= c_.cam_entries) return false;
    }
  }
  return true;
}

std::optional<Ddr3Served> Ddr3Timing::step(uint64_t limit) {
  int best = -1;
  bool best_hit = false;
  const std::optional<uint64_t> next = next_decision();
  if (!next || *next > limit) return std::nullopt;
  const uint64_t decide = *next;
  catch_up(decide);  // a refresh due by the decision goes first (docs/ddr3.md, "Refresh")
  if (!fifo_) switch_mode(decide);
  for (uint32_t p = 0; p < c_.ports; ++p) {
    const int k = offer(p, decide);
    if (k < 0 || !in_cam(size_t(k), decide)) continue;
    const Burst& bu = q_[size_t(k)].front();
    const bool hit = frfcfs_ && banks_[bu.at.bank].row == int64_t(bu.at.row);
    const bool better = best < 0 || (hit && !best_hit) || (hit == best_hit && bu.arrival < head_[size_t(best)]);
    if (better) best = k, best_hit = hit;
  }
  // The decision time is an offered head's arrival (earliest(), and switch_mode() turns to a
  // direction with one pending), so some port offers a burst.
  if (best < 0) throw std::logic_error(fmt::format("ddr3: no port offers a burst at decision time {}", decide));
  const Burst bu = q_[size_t(best)].front();
  const Ddr3Address a = bu.at;
  Plan bp = plan(a, bu.write, bu.arrival);
  // A burst that would cross a refresh waits for it. The loop ends because the config
  // refuses ddr3.trfc + the row cycle > ddr3.trefi (Ddr3Config::check_relations, checked by
  // the constructor): after a refresh every bank is closed, its ACT waits tRFC, and each
  // further refresh moves the next due time tREFI > tRFC on while the other bounds (tRRD,
  // tFAW, the arrival, all within the horizon) stay put. The backstop: a burst that has waited
  // more refreshes than those bounds allow ends the run naming the keys, never a hang.
  const uint64_t max_waits = 2 + horizon() / (c_.trefi - std::min<uint64_t>(c_.trfc, c_.trefi - 1));
  for (uint64_t waits = 0;
       (bp.act ? bp.act_t : bp.col_t) >= next_refresh_ || (bp.pre && bp.pre_t >= next_refresh_); ++waits) {
    if (waits >= max_waits)
      throw Error(fmt::format("ddr3: a {} burst at bank {} row {} (arrived at device cycle {}) waited {} refreshes "
                              "without a command fitting between two: the memory cannot serve it (ddr3.trefi = {}, "
                              "ddr3.trfc = {}, ddr3.trrd = {}, ddr3.tfaw = {})",
                              bu.write ? "write" : "read", a.bank, a.row, bu.arrival, waits, c_.trefi, c_.trfc,
                              c_.trrd, c_.tfaw));
    refresh();
    bp = plan(a, bu.write, bu.arrival);
  }
  commit(a, bu.write, bp);
  pop(size_t(best));
  if (!fifo_) {
    Store& s = st_[bu.write];
    s.last_served = decide;
    const uint32_t run = bu.write ? c_.w_xact_run_length : c_.lpr_xact_run_length;
    if (s.critical && ++s.served >= run) {
      s.critical = false, s.served = 0;
      s.hnc_end = decide + uint64_t(bu.write ? c_.w_min_non_critical_x32 : c_.lpr_min_non_critical_x32) * c_.timer_ncks;
    }
  }
  const uint64_t end = bp.col_t + (bu.write ? c_.cwl : c_.cl) + c_.burst_length / 2 + ctrl_cycles_;
  return Ddr3Served{bu.id, end, bu.last(burst_bytes_)};
}

std::vector<uint64_t> Ddr3Timing::run(const std::vector<Ddr3Request>& requests) {
  if (!idle()) throw Error("ddr3: run() while submitted requests are still queued");
  for (size_t i = 0; i < requests.size(); ++i) submit(requests[i], i);
  std::vector<uint64_t> done(requests.size(), 0);
  while (const auto s = step()) done[s->id] = std::max(done[s->id], s->end);
  return done;
}

std::optional<uint64_t> Ddr3Timing::next_decision() const {
  uint64_t decide = earliest();
  if (decide == UINT64_MAX) return std::nullopt;
  if (any_col_) decide = std::max(decide, last_col_ + c_.tccd);
  return decide;
}

void Ddr3Timing::catch_up(uint64_t now) {
  if (next_refresh_ > now) return;
  refresh();
  // Every later refresh of the gap finds all banks precharged: only the last one's tRFC can
  // still bind, so the ones between are skipped in one step (the same act_ok as one by one).
  if (next_refresh_ <= now) {
    // The skipped refreshes still happen, each on time with every bank precharged.
    const uint64_t skipped = (now - next_refresh_) / c_.trefi;
    counts_.ref += skipped;
    if (listener_)
      for (uint64_t k = 0; k < skipped; ++k) issued(next_refresh_ + k * c_.trefi, Ddr3Command::kRef, 0);
    next_refresh_ += skipped * c_.trefi;
    refresh();
  }
}

uint64_t Ddr3Timing::horizon() const {
  // The longest command-to-command distance of the rules in plan(), commit() and refresh(),
  // with room to spare.
  return uint64_t(c_.trc) + c_.tras + c_.trp + c_.trcd + c_.trfc + c_.tfaw + c_.trrd + c_.tccd + c_.cl + c_.cwl +
         c_.burst_length + c_.twr + c_.twtr + c_.trtp + 16 +
         uint64_t(std::max(c_.lpr_min_non_critical_x32, c_.w_min_non_critical_x32)) * c_.timer_ncks;
}

// Words: 0 next refresh, 1 flags (any ACT, any column command, last column a write, write
// mode, read store critical, write store critical), 2 last ACT, 3 last column, 4 last read,
// 5 last write, 6 ACTs in the tFAW list, then per bank: row + 1 (0: none), act_ok, pre_ok,
// col_ok; then the four tFAW times; then per store (reads, writes): bursts served while
// critical, hnc_end, last_served; then the timer's phase. Times relative to now - horizon().
std::vector<uint64_t> Ddr3Timing::save(uint64_t now) const {
  if (!idle()) throw Error("ddr3: the state was asked for while requests are queued");
  Ddr3Timing t = *this;
  t.listener_ = nullptr;  // the copy's refreshes are performed again by this engine
  t.catch_up(now);
  // v - (now - horizon()), or 0 for a time that can bind nothing after `now`.
  const uint64_t h = horizon();
  auto rel = [&](uint64_t v) { return v + h > now ? v + h - now : 0; };
  std::vector<uint64_t> w;
  w.reserve(saved_words(c_));
  w.push_back(rel(t.next_refresh_));
  w.push_back(uint64_t(t.any_act_) | uint64_t(t.any_col_) << 1 | uint64_t(t.last_write_) << 2 |
              uint64_t(t.write_mode_) << 3 | uint64_t(t.st_[0].critical) << 4 | uint64_t(t.st_[1].critical) << 5);
  for (const uint64_t v : {t.last_act_, t.last_col_, t.last_rd_, t.last_wr_}) w.push_back(rel(v));
  w.push_back(t.acts_.size());
  for (const Bank& b : t.banks_) {
    w.push_back(uint64_t(b.row + 1));
    w.push_back(rel(b.act_ok));
    w.push_back(rel(b.pre_ok));
    w.push_back(rel(b.col_ok));
  }
  for (size_t i = 0; i < 4; ++i) w.push_back(i < t.acts_.size() ? rel(t.acts_[i]) : 0);
  for (const Store& s : t.st_) {
    w.push_back(s.served);
    w.push_back(rel(s.hnc_end));
    w.push_back(rel(s.last_served));
  }
  const uint64_t n = c_.timer_ncks;  // (now - h) mod n without wrapping below zero
  w.push_back((t.timer_off_ + now % n + n - h % n) % n);
  w.resize(saved_words(c_), 0);
  return w;
}

void Ddr3Timing::load(const uint64_t* w, size_t n, uint64_t now) {
  if (!idle()) throw Error("ddr3: a state was loaded while requests are queued");
  if (n != saved_words(c_))
    throw Error(fmt::format("ddr3: a carried state of {} words does not fit {} banks ({} words)", n, c_.banks,
                            saved_words(c_)));
  const uint64_t h = horizon();
  if (now < h) throw Error(fmt::format("ddr3: a state loaded at device cycle {}, before the horizon {}", now, h));
  const uint64_t base = now - h;
  size_t i = 0;
  next_refresh_ = base + w[i++];
  const uint64_t flags = w[i++];
  any_act_ = flags & 1, any_col_ = flags & 2, last_write_ = flags & 4, write_mode_ = flags & 8;
  st_[0].critical = flags & 16, st_[1].critical = flags & 32;
  for (uint64_t* v : {&last_act_, &last_col_, &last_rd_, &last_wr_}) *v = base + w[i++];
  const size_t acts = size_t(std::min<uint64_t>(w[i++], 4));
  for (Bank& b : banks_) {
    if (w[i] > c_.rows) throw Error(fmt::format("ddr3: a carried state names row {} of {}", w[i] - 1, c_.rows));
    b.row = int64_t(w[i++]) - 1;
    b.act_ok = base + w[i++];
    b.pre_ok = base + w[i++];
    b.col_ok = base + w[i++];
  }
  acts_.clear();
  for (size_t k = 0; k < acts; ++k) acts_.push_back(base + w[i + k]);
  i += 4;
  for (Store& s : st_) {
    s.served = uint32_t(w[i++]);
    s.hnc_end = base + w[i++];
    s.last_served = base + w[i++];
  }
  if (w[i] >= c_.timer_ncks) throw Error(fmt::format("ddr3: a carried timer phase {} of {} cycles", w[i], c_.timer_ncks));
  timer_off_ = (w[i] + c_.timer_ncks - base % c_.timer_ncks) % c_.timer_ncks;
}

Ddr3Snapshot Ddr3Timing::snapshot() const {
  Ddr3Snapshot s;
  for (const auto& b : banks_) s.open_row.push_back(b.row);
  s.next_refresh = next_refresh_;
  return s;
}

const char* ddr3_command_name(Ddr3Command c) {
  switch (c) {
    case Ddr3Command::kAct: return "ACT";
    case Ddr3Command::kPre: return "PRE";
    case Ddr3Command::kPrea: return "PREA";
    case Ddr3Command::kRd: return "RD";
    case Ddr3Command::kWr: return "WR";
    case Ddr3Command::kRef: return "REF";
  }
  return "?";
}

namespace {
constexpr uint64_t kCarryTag = 0xDD3;
}

Ddr3Crossing ddr3_board_clock(const Ddr3Config& c, uint64_t pl_period_ps) {
  return Ddr3Crossing::of(c.clock_mhz, pl_period_ps, Ddr3Timing(c).horizon());
}

std::vector<uint64_t> ddr3_carry(const Ddr3Timing& t, const Ddr3Crossing& x, uint64_t edge) {
  std::vector<uint64_t> words{kCarryTag, (edge + x.phase) % x.den};
  const std::vector<uint64_t> w = t.save(x.device(edge));
  words.insert(words.end(), w.begin(), w.end());
  return words;
}

Ddr3Crossing ddr3_restore(Ddr3Timing& t, Ddr3Crossing x, const std::vector<uint64_t>& words, const std::string& who) {
  const size_t n = Ddr3Timing::saved_words(t.config());
  if (words.size() != n + 2 || words[0] != kCarryTag || words[1] >= x.den)
    throw Error(fmt::format("{}: a carried state of {} words is not ddr.model = ddr3's ({} words)", who, words.size(),
                            n + 2));
  x.phase = words[1];
  t.load(words.data() + 2, n, x.device(0));
  return x;
}

}  // namespace bitsim::hw
