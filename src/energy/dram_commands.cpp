#include "energy/dram_commands.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::energy {

BankStateTracker::BankStateTracker(uint32_t banks, uint64_t trfc, uint64_t start)
    : trfc_(trfc), start_(start), last_command_(start), open_since_(banks, -1) {}

void BankStateTracker::command(uint64_t cycle, hw::Ddr3Command command, uint32_t bank) {
  using hw::Ddr3Command;
  const uint64_t t = std::max(cycle, start_);
  last_command_ = std::max(last_command_, t);
  auto close_bank = [&](size_t b) {
    if (open_since_[b] < 0) return;
    spans_.emplace_back(uint64_t(open_since_[b]), std::max(t, uint64_t(open_since_[b])));
    open_since_[b] = -1;
  };
  switch (command) {
    case Ddr3Command::kAct:
      if (bank >= open_since_.size()) throw Error(fmt::format("energy: an ACT to bank {} of {}", bank, open_since_.size()));
      if (open_since_[bank] < 0) open_since_[bank] = int64_t(t);
      break;
    case Ddr3Command::kPre:
      if (bank >= open_since_.size()) throw Error(fmt::format("energy: a PRE to bank {} of {}", bank, open_since_.size()));
      close_bank(bank);
      break;
    case Ddr3Command::kPrea:
      for (size_t b = 0; b < open_since_.size(); ++b) close_bank(b);
      break;
    case Ddr3Command::kRef:
      spans_.emplace_back(t, t + trfc_);
      break;
    case Ddr3Command::kRd:
    case Ddr3Command::kWr:
      break;
  }
}

BankStateTracker::Split BankStateTracker::close(uint64_t end) {
  if (end < start_ || end < last_command_)
    throw Error(fmt::format("energy: a bank-state interval closed at device cycle {}, before its start {} or its last "
                            "command {}",
                            end, start_, last_command_));
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  spans.swap(spans_);
  for (auto& since : open_since_)
    if (since >= 0) {
      spans.emplace_back(uint64_t(since), end);
      since = int64_t(end);
    }
  // A refresh running past `end` carries its remainder into the next interval.
  for (const auto& [from, to] : spans)
    if (to > end) spans_.emplace_back(std::max(from, end), to);
  std::sort(spans.begin(), spans.end());
  Split s;
  uint64_t covered_to = start_;
  for (auto [from, to] : spans) {
    from = std::max(from, covered_to);
    to = std::min(to, end);
    if (to > from) s.open += to - from, covered_to = to;
  }
  s.precharged = end - start_ - s.open;
  start_ = end;
  return s;
}

std::string drampower_line(uint64_t cycle, hw::Ddr3Command command, uint32_t bank) {
  return fmt::format("{},{},{}", cycle, hw::ddr3_command_name(command), bank);
}

}  // namespace bitsim::energy
