#pragma once
// The DDR3 device and the Zynq DDR controller as a SystemC-free timing engine
// (docs/ddr3.md is its contract). All times are device cycles (525 MHz by default).
#include <cstdint>
#include <string>
#include <vector>

#include "hw/config_field.h"

namespace bitsim::hw {

struct Ddr3Config {
  uint32_t banks = 8, rows = 32768, columns = 1024, bus_bytes = 2, burst_length = 8;
  uint32_t cl = 7, cwl = 6, trcd = 7, trp = 7, tras = 19, trc = 26, tfaw = 21, trrd = 6;
  uint32_t tccd = 4, twr = 8, twtr = 4, trtp = 4, trfc = 137, trefi = 4095;
  std::string address_map = "row-bank-col";
  uint32_t ports = 4, queue_depth = 8;
  std::string scheduler = "frfcfs-port";
  std::string page_policy = "open";
  double ctrl_latency_ns = 0;

  template <typename C, typename V>
  static void visit(C& c, V&& v) {
    const auto B = Evidence::kBoard, S = Evidence::kSimulated;
    v(c.banks, FieldInfo{"ddr3.banks", 1, 64, "banks", B, "banks of the device (4 Gb x16: 8)"});
    v(c.rows, FieldInfo{"ddr3.rows", 1, 1 << 20, "rows", B, "rows per bank (32,768)"});
    v(c.columns, FieldInfo{"ddr3.columns", 8, 1 << 16, "columns", B, "columns per row (1,024: a 2 KiB page)"});
    v(c.bus_bytes, FieldInfo{"ddr3.bus_bytes", 1, 16, "bytes", B, "data bus width (x16: 2)"});
    v(c.burst_length, FieldInfo{"ddr3.burst_length", 8, 8, "beats", B, "burst length (BL8)"});
    v(c.cl, FieldInfo{"ddr3.cl", 1, 64, "nCK", B, "CAS latency (base design: 7)"});
    v(c.cwl, FieldInfo{"ddr3.cwl", 1, 64, "nCK", B, "CAS write latency (base design: 6)"});
    v(c.trcd, FieldInfo{"ddr3.trcd", 1, 64, "nCK", B, "ACT to RD/WR (PS7 preset: 7)"});
    v(c.trp, FieldInfo{"ddr3.trp", 1, 64, "nCK", B, "PRE to ACT (PS7 preset: 7)"});
    v(c.tras, FieldInfo{"ddr3.tras", 1, 256, "nCK", B, "ACT to PRE (PS7 preset 35 ns: 19 at 525 MHz)"});
    v(c.trc, FieldInfo{"ddr3.trc", 1, 256, "nCK", B, "ACT to ACT same bank (PS7 preset 48.75 ns: 26)"});
    v(c.tfaw, FieldInfo{"ddr3.tfaw", 1, 256, "nCK", B, "four-activate window (PS7 preset 40 ns: 21)"});
    v(c.trrd, FieldInfo{"ddr3.trrd", 1, 64, "nCK", B, "ACT to ACT other bank (x16 at 1066: 6)"});
    v(c.tccd, FieldInfo{"ddr3.tccd", 4, 64, "nCK", B, "column to column (JEDEC: 4)"});
    v(c.twr, FieldInfo{"ddr3.twr", 1, 64, "nCK", B, "write recovery (JEDEC 15 ns: 8)"});
    v(c.twtr, FieldInfo{"ddr3.twtr", 1, 64, "nCK", B, "write to read (JEDEC 7.5 ns: 4)"});
    v(c.trtp, FieldInfo{"ddr3.trtp", 1, 64, "nCK", B, "read to precharge (JEDEC 7.5 ns: 4)"});
    v(c.trfc, FieldInfo{"ddr3.trfc", 1, 4096, "nCK", B, "refresh cycle (4 Gb 260 ns: 137)"});
    v(c.trefi, FieldInfo{"ddr3.trefi", 1, 1 << 20, "nCK", B, "refresh interval (7.8 us: 4,095)"});
    v(c.address_map, FieldInfo{"ddr3.address_map", 0, 0, "", S, "address to row/bank/column (docs/ddr3.md)", 1, true,
                               {"row-bank-col", "bank-row-col"}});
    v(c.ports, FieldInfo{"ddr3.ports", 1, 8, "ports", B, "controller AXI ports (UG585: 4)"});
    v(c.queue_depth, FieldInfo{"ddr3.queue_depth", 1, 256, "requests", S, "requests a port may hold"});
    v(c.scheduler, FieldInfo{"ddr3.scheduler", 0, 0, "", S, "in order per port, first-ready first-come across ports",
                             1, true, {"frfcfs-port", "in-order"}});
    v(c.page_policy, FieldInfo{"ddr3.page_policy", 0, 0, "", S, "rows left open or closed after each burst", 1, true,
                               {"open", "closed"}});
    v(c.ctrl_latency_ns, FieldInfo{"ddr3.ctrl_latency_ns", 0, 10000, "ns", Evidence::kCalibrated,
                                   "controller and interconnect latency added to each completion"});
  }
};

struct Ddr3Request {
  uint64_t arrival = 0;  // device cycle the request reaches the controller
  uint32_t port = 0;
  bool write = false;
  uint64_t addr = 0;
  uint32_t bytes = 16;
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
  std::vector<uint64_t> run(const std::vector<Ddr3Request>& requests);
  Ddr3Snapshot snapshot() const;
  const Ddr3Config& config() const { return c_; }

 private:
  struct Bank {
    int64_t row = -1;
    uint64_t act_ok = 0, pre_ok = 0, col_ok = 0, last_act = 0;
    bool acted = false;
  };
  struct Plan {
    bool pre = false, act = false;
    uint64_t pre_t = 0, act_t = 0, col_t = 0;
  };
  Plan plan(const Ddr3Address& a, bool write, uint64_t t0) const;
  void commit(const Ddr3Address& a, bool write, const Plan& p);
  void refresh();

  Ddr3Config c_;
  std::vector<Bank> banks_;
  std::vector<uint64_t> acts_;  // last four ACT times (tFAW)
  uint64_t last_act_ = 0;
  bool any_act_ = false;
  uint64_t last_col_ = 0, last_rd_ = 0, last_wr_ = 0;
  bool any_col_ = false, last_write_ = false;
  uint64_t next_refresh_;
};

}  // namespace bitsim::hw
