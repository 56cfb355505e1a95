#include "hw/memory/dram_ledger.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::hw {

namespace {
void add_counts(Ddr3CommandCounts& a, const Ddr3CommandCounts& b, int sign) {
  auto f = [&](uint64_t& x, uint64_t y) { x = sign > 0 ? x + y : x - y; };
  f(a.act, b.act), f(a.pre, b.pre), f(a.prea, b.prea), f(a.prea_banks, b.prea_banks);
  f(a.rd, b.rd), f(a.wr, b.wr), f(a.ref, b.ref);
}
}  // namespace

DramActivity& DramActivity::operator+=(const DramActivity& o) {
  add_counts(counts, o.counts, 1);
  open_cycles += o.open_cycles;
  return *this;
}

DramActivity DramActivity::operator-(const DramActivity& o) const {
  DramActivity d = *this;
  add_counts(d.counts, o.counts, -1);
  d.open_cycles -= o.open_cycles;
  return d;
}

DramLedger::DramLedger(uint32_t banks, uint64_t trfc, uint64_t start)
    : trfc_(trfc), start_(start), open_since_(banks, -1) {}

void DramLedger::open_at_start(const std::vector<int64_t>& open_row) {
  for (size_t b = 0; b < open_since_.size() && b < open_row.size(); ++b)
    if (open_row[b] >= 0 && open_since_[b] < 0) open_since_[b] = int64_t(start_);
}

void DramLedger::close_bank(size_t bank, uint64_t cycle) {
  if (open_since_[bank] < 0) return;
  const uint64_t since = uint64_t(open_since_[bank]);
  spans_.emplace_back(since, std::max(cycle, since));
  open_since_[bank] = -1;
}

void DramLedger::command(uint64_t cycle, Ddr3Command command, uint32_t bank) {
  if (cycle < start_)
    throw Error(fmt::format("DRAM ledger: a {} at device cycle {}, before the interval's start {} (the engine was not "
                            "caught up when the interval before closed)",
                            ddr3_command_name(command), cycle, start_));
  const bool per_bank = command == Ddr3Command::kAct || command == Ddr3Command::kPre || command == Ddr3Command::kRd ||
                        command == Ddr3Command::kWr;
  if (per_bank && bank >= open_since_.size())
    throw Error(fmt::format("DRAM ledger: a {} to bank {} of {}", ddr3_command_name(command), bank, open_since_.size()));
  switch (command) {
    case Ddr3Command::kAct:
      ++counted_.act;
      if (open_since_[bank] < 0) open_since_[bank] = int64_t(cycle);
      break;
    case Ddr3Command::kRd: ++counted_.rd; break;
    case Ddr3Command::kWr: ++counted_.wr; break;
    case Ddr3Command::kPre:
      close_bank(bank, cycle);
      pending_.push_back({cycle, command, 1});
      return;
    case Ddr3Command::kPrea: {
      uint32_t n = 0;
      for (size_t b = 0; b < open_since_.size(); ++b)
        if (open_since_[b] >= 0) close_bank(b, cycle), ++n;
      pending_.push_back({cycle, command, n});
      return;
    }
    case Ddr3Command::kRef:
      spans_.emplace_back(cycle, cycle + trfc_);
      pending_.push_back({cycle, command, 0});
      return;
  }
  latest_counted_ = std::max(latest_counted_, cycle + 1);
}

DramActivity DramLedger::close(uint64_t end) {
  if (end < start_ || latest_counted_ > end)
    throw Error(fmt::format("DRAM ledger: an interval closed at device cycle {}, before its start {} or a command at {}",
                            end, start_, latest_counted_ - 1));
  std::vector<std::pair<uint64_t, uint64_t>> segs, carried;
  for (const auto& [from, to] : spans_) {
    if (from < end) segs.emplace_back(from, std::min(to, end));
    if (to > end) carried.emplace_back(std::max(from, end), to);
  }
  spans_.swap(carried);
  for (auto& since : open_since_)
    if (since >= 0 && uint64_t(since) < end) {
      segs.emplace_back(uint64_t(since), end);
      since = int64_t(end);
    }
  std::sort(segs.begin(), segs.end());
  DramActivity a;
  uint64_t covered = start_;
  const bool head = !closed_once_ && head_window_ > 0;
  for (auto [from, to] : segs) {
    from = std::max(from, covered);
    if (to <= from) continue;
    a.open_cycles += to - from, covered = to;
    if (head && from < start_ + head_window_) head_.emplace_back(from, std::min(to, start_ + head_window_));
  }
  closed_once_ = true;
  a.counts = counted_;
  std::vector<Pending> later;
  for (const Pending& p : pending_) {
    if (p.cycle >= end) {
      later.push_back(p);
      continue;
    }
    if (p.command == Ddr3Command::kPre) ++a.counts.pre;
    if (p.command == Ddr3Command::kPrea) ++a.counts.prea, a.counts.prea_banks += p.banks;
    if (p.command == Ddr3Command::kRef) ++a.counts.ref;
  }
  pending_.swap(later);
  counted_ = {};
  latest_counted_ = 0;
  start_ = end;
  return a;
}

// Words: the start; per bank its open-since + 1 (0: precharged); the spans' count and
// [from, to) each; the pending commands' count and (cycle, command, banks) each. Every cycle
// relative to `origin`.
std::vector<uint64_t> DramLedger::save(uint64_t origin) const {
  if (counted_ != Ddr3CommandCounts{} || start_ < origin)
    throw Error("DRAM ledger: saved with commands not yet counted, or past its origin");
  std::vector<uint64_t> w{start_ - origin};
  for (const int64_t s : open_since_) w.push_back(s < 0 ? 0 : uint64_t(s) - origin + 1);
  w.push_back(spans_.size());
  for (const auto& [from, to] : spans_) w.push_back(from - origin), w.push_back(to - origin);
  w.push_back(pending_.size());
  for (const Pending& p : pending_) w.push_back(p.cycle - origin), w.push_back(uint64_t(p.command)), w.push_back(p.banks);
  return w;
}

std::vector<uint64_t> DramLedger::record(uint64_t origin) const {
  std::vector<uint64_t> w{head_window_, head_.size()};
  for (const auto& [from, to] : head_) w.push_back(from - origin), w.push_back(to - origin);
  const std::vector<uint64_t> saved = save(origin);
  w.insert(w.end(), saved.begin(), saved.end());
  return w;
}

uint64_t DramLedger::continue_with(const std::vector<uint64_t>& record, uint64_t origin) {
  if (record.size() < 2 || (record.size() - 2) / 2 < record[1])
    throw Error(fmt::format("DRAM ledger: {} words are not an oracle's record", record.size()));
  const uint64_t window = record[0];
  const size_t n = size_t(record[1]);
  std::vector<std::pair<uint64_t, uint64_t>> head;
  for (size_t i = 0; i < n; ++i) head.emplace_back(origin + record[2 + 2 * i], origin + record[3 + 2 * i]);
  const std::vector<std::pair<uint64_t, uint64_t>> carried = spans_;
  const std::vector<Pending> pending = pending_;
  load(std::vector<uint64_t>(record.begin() + 2 + 2 * long(n), record.end()), origin);
  // The carried spans inside the oracle's part [origin, start_) add what its head lacks; the
  // rest of them is this ledger's again.
  std::vector<std::pair<uint64_t, uint64_t>> inside;
  for (const auto& [from, to] : carried) {
    if (to > origin + window)
      throw Error(fmt::format("DRAM ledger: a span carried to device cycle {} reaches past the oracle's head window "
                              "({} cycles from {})",
                              to, window, origin));
    if (from < start_) inside.emplace_back(from, std::min(to, start_));
    if (to > start_) spans_.emplace_back(std::max(from, start_), to);
  }
  pending_.insert(pending_.end(), pending.begin(), pending.end());
  auto measure = [](std::vector<std::pair<uint64_t, uint64_t>> v) {
    std::sort(v.begin(), v.end());
    uint64_t n = 0, covered = 0;
    for (auto [from, to] : v) {
      from = std::max(from, covered);
      if (to > from) n += to - from, covered = to;
    }
    return n;
  };
  std::vector<std::pair<uint64_t, uint64_t>> both = head;
  both.insert(both.end(), inside.begin(), inside.end());
  return measure(both) - measure(head);
}

void DramLedger::load(const std::vector<uint64_t>& w, uint64_t origin) {
  const size_t banks = open_since_.size();
  auto bad = [&] { return Error(fmt::format("DRAM ledger: {} words are not a saved ledger of {} banks", w.size(), banks)); };
  size_t i = 0;
  auto next = [&] {
    if (i >= w.size()) throw bad();
    return w[i++];
  };
  start_ = origin + next();
  for (auto& s : open_since_) {
    const uint64_t v = next();
    s = v == 0 ? -1 : int64_t(origin + v - 1);
  }
  spans_.assign(size_t(std::min<uint64_t>(next(), w.size())), {});
  for (auto& [from, to] : spans_) from = origin + next(), to = origin + next();
  pending_.assign(size_t(std::min<uint64_t>(next(), w.size())), {});
  for (Pending& p : pending_) {
    p.cycle = origin + next();
    const uint64_t c = next();
    if (c > uint64_t(Ddr3Command::kRef)) throw bad();
    p.command = Ddr3Command(c);
    p.banks = uint32_t(next());
  }
  if (i != w.size()) throw bad();
  counted_ = {};
  latest_counted_ = 0;
}

}  // namespace bitsim::hw
