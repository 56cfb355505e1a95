#include "hw/memory/dram_command_trace.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::hw {

std::string drampower_line(uint64_t cycle, Ddr3Command command, uint32_t bank) {
  return fmt::format("{},{},{}", cycle, ddr3_command_name(command), bank);
}

DramCommandTrace::DramCommandTrace(const std::string& path, Memory& memory) : memory_(memory) {
  try {
    memory_.set_command_listener([this](uint64_t c, Ddr3Command k, uint32_t b) { heard(c, k, b); });
  } catch (const Error& e) {
    throw Error(fmt::format("dram commands file {}: {}", path, e.what()));
  }
  horizon_ = Ddr3Timing(memory.config().ddr3).horizon();
  try {
    out_ = std::make_unique<io::LineFile>(path, "dram commands file");
  } catch (...) {
    memory_.set_command_listener({});
    throw;
  }
}

void DramCommandTrace::heard(uint64_t cycle, Ddr3Command command, uint32_t bank) {
  held_.emplace_back(cycle, commands_++, command, bank);
  latest_ = std::max(latest_, cycle);
  // A later decision's commands lie at or after that decision, which is no earlier than the
  // latest command less the horizon.
  if (held_.size() >= 4096 && latest_ > 2 * horizon_) flush(latest_ - 2 * horizon_);
}

void DramCommandTrace::flush(uint64_t before) {
  std::stable_sort(held_.begin(), held_.end());
  auto it = held_.begin();
  for (; it != held_.end() && std::get<0>(*it) < before; ++it)
    fmt::print(out_->file(), "{}\n", drampower_line(std::get<0>(*it), std::get<2>(*it), std::get<3>(*it)));
  held_.erase(held_.begin(), it);
}

void DramCommandTrace::finish(const char* last_line) {
  memory_.set_command_listener({});
  if (!out_->is_open()) return;
  flush(UINT64_MAX);
  out_->close(last_line);
}

void DramCommandTrace::close() { finish(nullptr); }

DramCommandTrace::~DramCommandTrace() {
  try {
    if (out_->is_open()) finish("# partial: the run did not finish\n");
  } catch (...) {  // the temporary file is removed by OutputFile; nothing to throw from here
  }
}

}  // namespace bitsim::hw
