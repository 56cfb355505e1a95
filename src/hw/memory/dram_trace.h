#pragma once
// DramTrace: every request the board's memory accepts, one line each with the cycle it
// completed at, for another DRAM simulator to replay and for its latencies to be read
// (`bitsim run --dram-trace FILE`, cycle fidelity; the format is in docs/ddr3.md, "A trace
// of the requests"). A line is written once its request has completed (each port completes
// its reads, and its writes, in order), in the order the requests were accepted. Written
// through a temporary file: close() puts it in place; a trace destroyed before close() (a
// stop, an error) is put in place with what was heard, ending in a line "# partial".
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <vector>

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
  struct Request {
    uint64_t cycle = 0, addr = 0, done = 0;
    int port = 0;
    uint32_t bytes = 0;
    bool write = false, completed = false;
  };
  void finish(const char* last_line);
  void complete(uint64_t cycle, int port, bool write);
  // Writes the requests at the front that have completed (all of them with `all`; "-" for
  // a request not completed).
  void write_front(bool all);
  Memory& memory_;
  std::deque<Request> pending_;          // accepted, not yet written, in acceptance order
  uint64_t first_seq_ = 0;               // the sequence number of pending_.front()
  std::vector<std::deque<uint64_t>> waiting_;  // per (port, direction): accepted, not completed
  std::unique_ptr<io::LineFile> out_;
  uint64_t requests_ = 0;
};

}  // namespace bitsim::hw
