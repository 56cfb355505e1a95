#pragma once
// DramCommandTrace: every DRAM command the ddr3 engine issues, one line each, in DRAMPower's
// command-trace form "<cycle>,<command>,<bank>" (`bitsim run --dram-commands FILE`, cycle
// fidelity, ddr.model = ddr3; docs/energy.md, "DRAM commands and DRAMPower's trace"), so that
// DRAMPower or another tool prices the same commands. Cycles are device cycles of the run.
// The engine decides commands out of cycle order by at most its horizon: lines are held
// back until no later decision can come before them, then written in cycle order (stable).
// Written through a temporary file: close() puts it in place; a trace destroyed before
// close() (a stop, an error) is put in place with what was heard, ending in "# partial".
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "base/file_io.h"
#include "hw/memory/memory.h"

namespace bitsim::hw {

// One line of DRAMPower's command trace: "<cycle>,<command>,<bank>" (for example "500,ACT,2"),
// the cycle in device clocks, the bank 0 for PREA and REF.
std::string drampower_line(uint64_t cycle, Ddr3Command command, uint32_t bank);

class DramCommandTrace {
 public:
  // Opens the temporary file and listens to `memory`; bitsim::Error when the memory model
  // issues no commands (ddr.model other than ddr3), naming the file and ddr.model.
  DramCommandTrace(const std::string& path, Memory& memory);
  ~DramCommandTrace();
  DramCommandTrace(const DramCommandTrace&) = delete;
  DramCommandTrace& operator=(const DramCommandTrace&) = delete;
  void close();
  uint64_t commands() const { return commands_; }

 private:
  void heard(uint64_t cycle, Ddr3Command command, uint32_t bank);
  void flush(uint64_t before);  // writes the held lines of cycles before `before`, in order
  void finish(const char* last_line);
  Memory& memory_;
  std::unique_ptr<io::LineFile> out_;
  uint64_t horizon_ = 0, latest_ = 0, commands_ = 0;
  std::vector<std::tuple<uint64_t, uint64_t, Ddr3Command, uint32_t>> held_;  // cycle, order heard, command, bank
};

}  // namespace bitsim::hw
