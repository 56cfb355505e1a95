#pragma once
// DramTrace: every request the board's memory accepts, one line each, for another DRAM
// simulator to replay (`bitsim run --dram-trace FILE`, cycle fidelity; the format is in
// docs/ddr3.md, "A trace of the requests"). Written through a temporary file: close()
// puts it in place; a trace destroyed before close() (a stop, an error) is put in place
// with what was heard, ending in a line "# partial".
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "base/file_io.h"
#include "hw/memory/memory.h"

namespace bitsim::hw {

class DramTrace {
 public:
  // Opens the temporary file and listens to `memory` (whose clock runs at `clock_mhz`).
  DramTrace(const std::string& path, Memory& memory, double clock_mhz);
  ~DramTrace();
  DramTrace(const DramTrace&) = delete;
  DramTrace& operator=(const DramTrace&) = delete;
  void close();
  uint64_t requests() const { return requests_; }

 private:
  void finish(const char* last_line);
  Memory& memory_;
  std::unique_ptr<io::OutputFile> out_;
  std::FILE* file_ = nullptr;
  uint64_t requests_ = 0;
};

}  // namespace bitsim::hw
