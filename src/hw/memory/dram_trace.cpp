#include "hw/memory/dram_trace.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::hw {

DramTrace::DramTrace(const std::string& path, Memory& memory, double clock_mhz) : memory_(memory) {
  out_ = std::make_unique<io::OutputFile>(path, "dram trace file");
  file_ = std::fopen(out_->temp_path().c_str(), "w");
  if (!file_)
    throw Error(fmt::format("dram trace file {}: cannot write ({})", path, std::strerror(errno)));
  const DdrConfig& c = memory.config();
  fmt::print(file_,
             "# bitsim.dram-trace/1: one line per burst the memory accepted from an HP port\n"
             "# cycle port op address bytes\n"
             "#   cycle: the PL edge it was accepted at ({} MHz, edge 0 at time 0); port: the memory port (0 = HP0, "
             "1 = HP2); op: R or W;\n"
             "#   address: the byte address, hex; bytes: beats x 8\n"
             "# ddr.model = {}, ddr.ports = {}\n",
             clock_mhz, c.model, c.ports);
  memory_.set_request_listener([this](uint64_t cycle, int port, bool write, uint64_t addr, uint32_t bytes) {
    fmt::print(file_, "{} {} {} 0x{:x} {}\n", cycle, port, write ? 'W' : 'R', addr, bytes);
    ++requests_;
  });
}

void DramTrace::finish(const char* last_line) {
  memory_.set_request_listener({});
  if (!file_) return;
  if (last_line) fmt::print(file_, "{}", last_line);
  const bool failed = std::ferror(file_) != 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (failed || !closed) throw Error(fmt::format("dram trace file {}: the write failed", out_->path().string()));
  out_->commit();
}

void DramTrace::close() { finish(nullptr); }

DramTrace::~DramTrace() {
  try {
    if (file_) finish("# partial: the run did not finish\n");
  } catch (...) {  // the temporary file is removed by OutputFile; nothing to throw from here
  }
}

}  // namespace bitsim::hw
