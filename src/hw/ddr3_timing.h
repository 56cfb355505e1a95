#pragma once
// The DDR3 device and the Zynq DDR controller as a SystemC-free timing engine
// (docs/ddr3.md is its contract). All times are device cycles (525 MHz by default).
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "hw/ddr3_config.h"

namespace bitsim::hw {

struct Ddr3Request {
  uint64_t arrival = 0;  // device cycle the request reaches the controller
  uint32_t port = 0;
  bool write = false;
  uint64_t addr = 0;
  uint32_t bytes = 16;
};

// One burst step() served: the id given to submit(), the completion of this burst (device
// cycles, controller latency included) and whether it was the request's last burst.
struct Ddr3Served {
  uint64_t id = 0;
  uint64_t end = 0;
  bool last = false;
};

struct Ddr3Address {
  uint32_t bank = 0, row = 0, column = 0;
};

// The state that survives between calls (and could become MemoryState): open rows and the
// refresh phase, plus the earliest times of the next commands.
struct Ddr3Snapshot {
  std::vector<int64_t> open_row;  // -1: precharged
  uint64_t next_refresh = 0;      // device cycle the next refresh is due
};

class Ddr3Timing {
 public:
  explicit Ddr3Timing(const Ddr3Config& c);
  Ddr3Address map(uint64_t addr) const;
  // Serves the requests (each port's in arrival order) and returns each one's completion
  // time in device cycles, in the order given. State carries over to the next call.
  // Refused while requests submitted one by one are still queued.
  std::vector<uint64_t> run(const std::vector<Ddr3Request>& requests);
  // Incremental use (closed-loop masters, study/membench.h): submit() queues a request's
  // bursts behind its port's earlier ones under the caller's id; step() serves the one burst
  // run() would serve next among those queued, or nothing when idle. run() is submit() of
  // every request, then step() until idle: one scheduler, one timing model.
  void submit(const Ddr3Request& r, uint64_t id);
  std::optional<Ddr3Served> step();
  bool idle() const;
  Ddr3Snapshot snapshot() const;
  const Ddr3Config& config() const { return c_; }

 private:
  struct Bank {
    int64_t row = -1;
    uint64_t act_ok = 0, pre_ok = 0, col_ok = 0, last_act = 0;
    bool acted = false;
  };
  struct Burst {
    uint64_t id, arrival, addr;
    bool write, last;
  };
  struct Plan {
    bool pre = false, act = false;
    uint64_t pre_t = 0, act_t = 0, col_t = 0;
  };
  Plan plan(const Ddr3Address& a, bool write, uint64_t t0) const;
  void commit(const Ddr3Address& a, bool write, const Plan& p);
  void refresh();

  Ddr3Config c_;
  std::vector<std::deque<Burst>> q_;  // per port, in order
  std::vector<Bank> banks_;
  std::vector<uint64_t> acts_;  // last four ACT times (tFAW)
  uint64_t last_act_ = 0;
  bool any_act_ = false;
  uint64_t last_col_ = 0, last_rd_ = 0, last_wr_ = 0;
  bool any_col_ = false, last_write_ = false;
  uint64_t next_refresh_;
};

}  // namespace bitsim::hw
