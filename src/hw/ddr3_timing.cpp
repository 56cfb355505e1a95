#include "hw/ddr3_timing.h"

#include <algorithm>
#include <cmath>

namespace bitsim::hw {

Ddr3Timing::Ddr3Timing(const Ddr3Config& c) : c_(c), q_(c.ports), banks_(c.banks), next_refresh_(c.trefi) {
  c_.validate("ddr3");
}

static uint32_t log2u(uint32_t v) {
  uint32_t n = 0;
  while ((1u << n) < v) ++n;
  return n;
}

Ddr3Address Ddr3Timing::map(uint64_t addr) const {
  const uint32_t bb = log2u(c_.bus_bytes), cb = log2u(c_.columns), kb = log2u(c_.banks), rb = log2u(c_.rows);
  const uint64_t w = addr >> bb;
  Ddr3Address a;
  a.column = uint32_t(w & (c_.columns - 1));
  if (c_.address_map == "row-bank-col") {
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
  if (p.act) {
    b.row = a.row;
    b.last_act = p.act_t;
    b.acted = true;
    b.act_ok = p.act_t + c_.trc;
    b.pre_ok = p.act_t + c_.tras;
    b.col_ok = p.act_t + c_.trcd;
    last_act_ = p.act_t;
    any_act_ = true;
    acts_.push_back(p.act_t);
    if (acts_.size() > 4) acts_.erase(acts_.begin());
  }
  b.pre_ok = std::max<uint64_t>(b.pre_ok, write ? p.col_t + c_.cwl + half + c_.twr : p.col_t + c_.trtp);
  any_col_ = true;
  last_col_ = p.col_t;
  last_write_ = write;
  (write ? last_wr_ : last_rd_) = p.col_t;
  if (c_.page_policy == "closed") {
    b.act_ok = std::max(b.act_ok, b.pre_ok + c_.trp);
    b.row = -1;
  }
}

void Ddr3Timing::refresh() {
  uint64_t ref = next_refresh_;
  for (auto& b : banks_)
    if (b.row >= 0) ref = std::max(ref, std::max(next_refresh_, b.pre_ok) + c_.trp);
  for (auto& b : banks_) {
    b.row = -1;
    b.act_ok = std::max(b.act_ok, ref + c_.trfc);
  }
  next_refresh_ += c_.trefi;
}

void Ddr3Timing::submit(const Ddr3Request& r, uint64_t id) {
  if (r.port >= c_.ports) throw Error("ddr3: request port out of range");
  const uint32_t bb = c_.bus_bytes * c_.burst_length;
  const uint64_t first = r.addr / bb * bb, stop = r.addr + std::max<uint32_t>(r.bytes, 1);
  for (uint64_t a = first; a < stop; a += bb) q_[r.port].push_back(Burst{id, r.arrival, a, r.write, a + bb >= stop});
}

bool Ddr3Timing::idle() const {
  for (const auto& pq : q_)
    if (!pq.empty()) return false;
  return true;
}

std::optional<Ddr3Served> Ddr3Timing::step() {
  int best = -1;
  Plan bp;
  bool best_hit = false;
  uint64_t decide = UINT64_MAX;
  for (auto& pq : q_)
    if (!pq.empty()) decide = std::min(decide, pq.front().arrival);
  if (decide == UINT64_MAX) return std::nullopt;
  if (any_col_) decide = std::max(decide, last_col_ + c_.tccd);
  for (uint32_t p = 0; p < c_.ports; ++p) {
    if (q_[p].empty() || q_[p].front().arrival > decide) continue;
    const Burst& bu = q_[p].front();
    const Ddr3Address a = map(bu.addr);
    const bool hit = c_.scheduler == "frfcfs-port" && banks_[a.bank].row == int64_t(a.row);
    Plan pl = plan(a, bu.write, bu.arrival);
    const bool better = best < 0 || (hit && !best_hit) ||
                        (hit == best_hit && bu.arrival < q_[best].front().arrival);
    if (better) best = p, bp = pl, best_hit = hit;
  }
  const Burst bu = q_[best].front();
  const Ddr3Address a = map(bu.addr);
  while ((bp.act ? bp.act_t : bp.col_t) >= next_refresh_ || (bp.pre && bp.pre_t >= next_refresh_)) {
    refresh();
    bp = plan(a, bu.write, bu.arrival);
  }
  commit(a, bu.write, bp);
  q_[best].pop_front();
  const uint64_t end = bp.col_t + (bu.write ? c_.cwl : c_.cl) + c_.burst_length / 2 + c_.cycles(c_.ctrl_latency_ns);
  return Ddr3Served{bu.id, end, bu.last};
}

std::vector<uint64_t> Ddr3Timing::run(const std::vector<Ddr3Request>& requests) {
  if (!idle()) throw Error("ddr3: run() while submitted requests are still queued");
  for (size_t i = 0; i < requests.size(); ++i) submit(requests[i], i);
  std::vector<uint64_t> done(requests.size(), 0);
  while (const auto s = step()) done[s->id] = std::max(done[s->id], s->end);
  return done;
}

Ddr3Snapshot Ddr3Timing::snapshot() const {
  Ddr3Snapshot s;
  for (const auto& b : banks_) s.open_row.push_back(b.row);
  s.next_refresh = next_refresh_;
  return s;
}

}  // namespace bitsim::hw
