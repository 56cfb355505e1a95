#pragma once
// The ddr3.* keys: the DDR3 device and the Zynq DDR controller as ddr.model = ddr3 times them
// (docs/ddr3.md is the contract; each field's key, range, unit, evidence and meaning is in
// visit(), base/config_field.h). Device timings are in device cycles (nCK) of ddr3.clock_mhz.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "base/config_field.h"

namespace bitsim::hw {

struct Ddr3Config {
  uint32_t banks = 8, rows = 32768, columns = 1024, bus_bytes = 2, burst_length = 8;
  uint32_t cl = 7, cwl = 6, trcd = 7, trp = 7, tras = 19, trc = 26, tfaw = 21, trrd = 6;
  uint32_t tccd = 4, twr = 8, twtr = 4, trtp = 4, trfc = 158, trefi = 4064;
  std::string address_map = "row-bank-col";
  uint32_t ports = 4, queue_depth = 8, cam_entries = 0;
  std::string scheduler = "frfcfs-port";
  std::string page_policy = "open";
  // Read/write switching (docs/ddr3.md "Read/write switching"): UG585's transaction stores
  // (reads in the low-priority read store, writes in the write store) and the DDRC's
  // LPR_reg / WR_reg fields with the PS7 configuration's ps7_init values; `fifo` mixes both
  // directions in one queue per port, in arrival order.
  std::string rw_policy = "ug585";
  uint32_t timer_ncks = 64;  // device cycles per pulse of the DDRC's 32-cycle timer (docs/ddr3.md)
  uint32_t lpr_max_starve_x32 = 2, lpr_xact_run_length = 8, lpr_min_non_critical_x32 = 1;
  uint32_t w_max_starve_x32 = 2, w_xact_run_length = 8, w_min_non_critical_x32 = 1;
  double ctrl_latency_ns = 51.27;  // fitted by bitsim calibrate under ddr.model = ddr3 (docs/ddr3.md)
  double clock_mhz = 525;
  // How the fast fidelity reuses a batch's record (docs/ddr3.md, "Approximate reuse"): only
  // in the memory state it was made in (exact), or at the same addresses in any state
  // (approximate). The clocked board has no records: the cycle fidelity is always exact.
  std::string fast_reuse = "exact";
  bool approximate_reuse() const { return fast_reuse == "approximate"; }

  // A time in ns as whole device cycles, rounded up (docs/ddr3.md, "Clocks and units").
  uint64_t cycles(double ns) const { return uint64_t(std::ceil(ns * clock_mhz / 1000.0 - 1e-9)); }
  // Bytes the data bus moves per device cycle at its peak (two transfers per cycle).
  uint32_t peak_bytes_per_cycle() const { return 2 * bus_bytes; }

  // The device's bytes: banks x rows x columns x bus width.
  uint64_t device_bytes() const { return uint64_t(banks) * rows * columns * bus_bytes; }

  // The longest time one burst's row holds the device between two refreshes, in nCK: from its
  // ACT until the bank may precharge (tRAS, or the column command at tRCD and its recovery: a
  // read's tRTP, a write's CWL + BL/2 + tWR), then tRP until every bank is precharged and a
  // refresh may start (docs/ddr3.md, "Relations between the keys").
  uint64_t row_cycle() const {
    const uint64_t recovery = std::max<uint64_t>(trtp, uint64_t(cwl) + burst_length / 2 + twr);
    return std::max<uint64_t>(tras, trcd + recovery) + trp;
  }

  // check_fields, the sizes the address map splits into bits powers of two, and the JEDEC
  // relations among the timings (docs/ddr3.md, "Relations between the keys").
  void validate(const std::string& who) const {
    check_fields(*this, who);
    const std::pair<const char*, uint32_t> pow2[] = {
        {"ddr3.banks", banks}, {"ddr3.rows", rows}, {"ddr3.columns", columns}, {"ddr3.bus_bytes", bus_bytes}};
    for (const auto& [key, v] : pow2)
      if ((v & (v - 1)) != 0)
        throw Error(fmt::format("{}: {} = {} is not a power of two (the address map splits it into bits)", who, key, v));
    check_relations(who);
  }

  // Each rule names every key it relates, with its value.
  void check_relations(const std::string& who) const {
    auto rule = [&](bool holds, const std::string& what, const char* why) {
      if (!holds) throw Error(fmt::format("{}: {}: {}", who, what, why));
    };
    rule(trc >= uint64_t(tras) + trp,
         fmt::format("ddr3.trc = {} is below ddr3.tras + ddr3.trp = {} + {} = {}", trc, tras, trp, tras + trp),
         "a bank's ACT-to-ACT cycle holds the row open and precharges it (JEDEC: tRC = tRAS + tRP)");
    rule(trfc < trefi, fmt::format("ddr3.trfc = {} is not below ddr3.trefi = {}", trfc, trefi),
         "a refresh must end before the next one is due, else the device refreshes for ever and never serves a "
         "request");
    rule(trfc + row_cycle() <= uint64_t(trefi),
         fmt::format("ddr3.trfc = {} plus the row cycle {} (max(ddr3.tras = {}, ddr3.trcd = {} + max(ddr3.trtp = {}, "
                     "ddr3.cwl = {} + 4 + ddr3.twr = {})) + ddr3.trp = {}) = {} exceeds ddr3.trefi = {}",
                     trfc, row_cycle(), tras, trcd, trtp, cwl, twr, trp, trfc + row_cycle(), trefi),
         "after each refresh the interval must leave room for one row cycle (ACT, a read or write, PRE) before the "
         "next refresh is due; else the refreshes fall ever further behind (JEDEC allows 8 owed), run into each "
         "other, and the device spends its time refreshing rather than serving (docs/ddr3.md, \"Relations between the "
         "keys\")");
    // JEDEC's tRAS max = 9 x tREFI follows: tREFI >= tRFC + the row cycle > tRAS.
  }

  template <typename C, typename V>
  static void visit(C& c, V&& v) {
    visit_device(c, v);
    visit_controller(c, v);
    v(c.fast_reuse, FieldInfo{"ddr3.fast_reuse", 0, 0, "", Evidence::kSimulated,
                              "fast fidelity: reuse a batch's timing only in the memory state it was timed in "
                              "(exact: every cycle the clocked board's) or in any state at the same addresses "
                              "(approximate: much faster, its error measured by bitsim bench; docs/ddr3.md)",
                              1, true, {"exact", "approximate"}});
  }
  // The device's geometry and timings.
  template <typename C, typename V>
  static void visit_device(C& c, V&& v) {
    const auto B = Evidence::kBoard;
    v(c.clock_mhz, FieldInfo{"ddr3.clock_mhz", 100, 1200, "MHz", B,
                             "device clock (base design FREQ_MHZ 525: 1,050 MT/s); the nCK timings count its cycles"});
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
    v(c.trfc, FieldInfo{"ddr3.trfc", 1, 4096, "nCK", B,
                        "refresh cycle as the controller is programmed (ps7_init t_rfc_min: 158, about 300 ns; "
                        "the 4 Gb device's minimum is 260 ns)"});
    v(c.trefi, FieldInfo{"ddr3.trefi", 1, 1 << 20, "nCK", B,
                         "refresh interval as the controller is programmed (ps7_init t_rfc_nom_x32 127: "
                         "4,064, 7.74 us)"});
  }
  // The controller: address map, ports, queues, scheduling and its latency.
  template <typename C, typename V>
  static void visit_controller(C& c, V&& v) {
    const auto B = Evidence::kBoard, S = Evidence::kSimulated;
    v(c.address_map, FieldInfo{"ddr3.address_map", 0, 0, "", B,
                               "address to row/bank/column (ps7_init addrmap registers, x16: row-bank-col; "
                               "docs/ddr3.md)",
                               1, true,
                               {"row-bank-col", "bank-row-col"}});
    v(c.ports, FieldInfo{"ddr3.ports", 1, 8, "ports", B, "controller AXI ports (UG585: 4)"});
    v(c.queue_depth, FieldInfo{"ddr3.queue_depth", 1, 256, "requests", S, "requests a port may hold"});
    v(c.cam_entries, FieldInfo{"ddr3.cam_entries", 0, 1024, "bursts", S,
                               "DRAM bursts the scheduler may choose among per direction, all ports together (UG585 "
                               "10.1: two 32-entry CAMs); 0: no limit beyond the ports' queues, as calibrated "
                               "(docs/ddr3.md, \"The CAM\")"});
    v(c.scheduler, FieldInfo{"ddr3.scheduler", 0, 0, "", S, "in order per port, first-ready first-come across ports",
                             1, true, {"frfcfs-port", "in-order"}});
    v(c.page_policy, FieldInfo{"ddr3.page_policy", 0, 0, "", B,
                               "rows left open or closed after each burst (ps7_init ctrl_reg1 pageclose 0: open)", 1,
                               true,
                               {"open", "closed"}});
    v(c.rw_policy, FieldInfo{"ddr3.rw_policy", 0, 0, "", S,
                             "read/write switching: UG585's read and write transaction stores (ug585) or one queue "
                             "per port in arrival order (fifo)",
                             1, true, {"ug585", "fifo"}});
    v(c.timer_ncks, FieldInfo{"ddr3.timer_ncks", 1, 1024, "nCK", S,
                              "device cycles per pulse of the DDRC's starvation timer (32 cycles of a controller "
                              "clock taken at half the device clock; UG585 does not name the clock)"});
    // The two transaction stores' fields, one shape (LPR_reg and WR_reg).
    auto store = [&](auto& starve, auto& run, auto& non_critical, const std::string& prefix, const std::string& dir,
                     const std::string& reg) {
      v(starve, FieldInfo{"ddr3." + prefix + "_max_starve_x32", 0, 2047, "pulses", B,
                          "timer pulses a pending " + dir + " waits unserved before the " + dir +
                              " store goes critical (" + reg + "; ps7_init: 2)"});
      v(run, FieldInfo{"ddr3." + prefix + "_xact_run_length", 0, 15, "bursts", B,
                       "bursts a critical " + dir + " store serves before it is hard non-critical (" + reg +
                           "; ps7_init: 8)"});
      v(non_critical, FieldInfo{"ddr3." + prefix + "_min_non_critical_x32", 0, 2047, "pulses", B,
                                "timer pulses the " + dir + " store stays hard non-critical (" + reg + "; ps7_init: 1)"});
    };
    store(c.lpr_max_starve_x32, c.lpr_xact_run_length, c.lpr_min_non_critical_x32, "lpr", "read", "LPR_reg");
    store(c.w_max_starve_x32, c.w_xact_run_length, c.w_min_non_critical_x32, "w", "write", "WR_reg");
    v(c.ctrl_latency_ns, FieldInfo{"ddr3.ctrl_latency_ns", 0, 10000, "ns", Evidence::kCalibrated,
                                   "controller and interconnect latency added to each completion (fitted by bitsim "
                                   "calibrate with ddr.model = ddr3 to the attention unit alone at T=512)"});
  }
};

}  // namespace bitsim::hw
