#include "hw/memory/dram_trace.h"

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::hw {

DramTrace::DramTrace(const std::string& path, Memory& memory, double clock_mhz) : memory_(memory) {
  out_ = std::make_unique<io::LineFile>(path, "dram trace file");
  const DdrConfig& c = memory.config();
  fmt::print(out_->file(),
             "# bitsim.dram-trace/2: one line per burst the memory accepted from an HP port\n"
             "# cycle port op address bytes done\n"
             "#   cycle: the PL edge it was accepted at ({} MHz, edge 0 at time 0); port: the memory port (0 = HP0, "
             "1 = HP2); op: R or W;\n"
             "#   address: the byte address, hex; bytes: beats x 8;\n"
             "#   done: the PL edge it completed at (a read's last beat, a write's response left the memory; - : not "
             "completed); latency = done - cycle\n"
             "# ddr.model = {}, ddr.ports = {}\n",
             clock_mhz, c.model, c.ports);
  waiting_.resize(2 * size_t(c.ports));
  memory_.set_request_listener([this](uint64_t cycle, int port, bool write, uint64_t addr, uint32_t bytes) {
    waiting_[2 * size_t(port) + (write ? 1 : 0)].push_back(first_seq_ + pending_.size());
    pending_.push_back(Request{cycle, addr, 0, port, bytes, write, false});
    ++requests_;
  });
  memory_.set_completion_listener([this](uint64_t cycle, int port, bool write) { complete(cycle, port, write); });
}

void DramTrace::complete(uint64_t cycle, int port, bool write) {
  std::deque<uint64_t>& w = waiting_[2 * size_t(port) + (write ? 1 : 0)];
  if (w.empty()) return;  // accepted before the trace listened
  Request& r = pending_[size_t(w.front() - first_seq_)];
  w.pop_front();
  r.done = cycle;
  r.completed = true;
  write_front(false);
}

void DramTrace::write_front(bool all) {
  while (!pending_.empty() && (all || pending_.front().completed)) {
    const Request& r = pending_.front();
    const std::string done = r.completed ? std::to_string(r.done) : "-";
    fmt::print(out_->file(), "{} {} {} 0x{:x} {} {}\n", r.cycle, r.port, r.write ? 'W' : 'R', r.addr, r.bytes, done);
    pending_.pop_front();
    ++first_seq_;
  }
}

void DramTrace::finish(const char* last_line) {
  memory_.set_request_listener({});
  memory_.set_completion_listener({});
  if (!out_->is_open()) return;
  write_front(true);
  out_->close(last_line);
}

void DramTrace::close() { finish(nullptr); }

DramTrace::~DramTrace() {
  try {
    if (out_->is_open()) finish("# partial: the run did not finish\n");
  } catch (...) {  // the temporary file is removed by OutputFile; nothing to throw from here
  }
}

}  // namespace bitsim::hw
