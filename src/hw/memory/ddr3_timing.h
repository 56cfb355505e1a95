#pragma once
// The DDR3 device and the Zynq DDR controller as a SystemC-free timing engine
// (docs/ddr3.md is its contract). All times are device cycles (525 MHz by default).
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hw/memory/ddr3_config.h"

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

// The DRAM commands the engine issues, by DRAMPower's names (docs/energy.md, "DRAM
// commands"): ACT and PRE of one bank, PREA (the precharge of every open bank before a
// refresh), RD and WR (one BL8 burst each), REF. Counting them changes no timing.
enum class Ddr3Command { kAct, kPre, kPrea, kRd, kWr, kRef };
const char* ddr3_command_name(Ddr3Command c);  // "ACT", "PRE", "PREA", "RD", "WR", "REF"

// The commands issued since the engine was built (load() keeps the count: a carried state has none).
// prea_banks: the open banks the PREAs closed (each costs one bank's precharge energy).
struct Ddr3CommandCounts {
  uint64_t act = 0, pre = 0, prea = 0, prea_banks = 0, rd = 0, wr = 0, ref = 0;
  bool operator==(const Ddr3CommandCounts&) const = default;
};

// Sees every command as the engine commits it: its device cycle, the command and its bank
// (0 for PREA and REF). Commands come in the order the engine decides them, which is not
// always cycle order (a burst's ACT may be placed before an earlier decision's column
// command; docs/energy.md says how a trace writer orders them).
using Ddr3CommandListener = std::function<void(uint64_t cycle, Ddr3Command command, uint32_t bank)>;

// The state that survives between calls (and could become MemoryState): open rows and the
// refresh phase, plus the earliest times of the next commands.
struct Ddr3Snapshot {
  std::vector<int64_t> open_row;  // -1: precharged
  uint64_t next_refresh = 0;      // device cycle the next refresh is due
};

// The clock crossing between the PL (edges) and the device (cycles): f_device / f_PL =
// num / den in lowest terms (525 / 125 MHz: 21 / 5). `phase` is the PL edge's position in
// the crossing's period of den edges at edge 0 of the board that uses it: a board that
// opens mid-run (the timing oracle) carries it in. A request issued at PL edge e arrives at
// device cycle device(e); a completion at device cycle t is seen at PL edge edge(t)
// (docs/ddr3.md, "Clock crossing").
struct Ddr3Crossing {
  uint64_t num = 21, den = 5, phase = 0;
  uint64_t origin = 0;  // the engine's device cycle at the PL's edge 0 (when phase is 0)
  // From the device clock and the PL clock's period in ps; throws naming ddr3.clock_mhz when
  // the ratio has no small exact form (kHz resolution).
  static Ddr3Crossing of(double device_mhz, uint64_t pl_period_ps, uint64_t origin = 0);
  uint64_t device(uint64_t edge) const { return origin + ceil_ratio(edge + phase, num, den); }
  uint64_t edge(uint64_t t) const {
    t = t > origin ? t - origin : 0;
    const uint64_t e = ceil_ratio(t, den, num);
    return e > phase ? e - phase : 0;
  }
  // ceil(v * a / b), in 64 bits when v * a + b cannot overflow them (every run's times), else
  // in 128 (the same value): the PL's per-edge conversions stay off the 128-bit division.
  static uint64_t ceil_ratio(uint64_t v, uint64_t a, uint64_t b) {
    if (v < (uint64_t(1) << 40) && a < (uint64_t(1) << 22) && b < (uint64_t(1) << 22)) return (v * a + b - 1) / b;
    return uint64_t(((unsigned __int128)v * a + b - 1) / b);
  }
};

class Ddr3Timing {
 public:
  // A device at reset at device cycle `origin` (its first refresh due tREFI later).
  explicit Ddr3Timing(const Ddr3Config& c, uint64_t origin = 0);
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
  // step(limit) serves nothing, and returns nothing, when the next decision time is later
  // than `limit` (a clocked caller's device cycle now).
  std::optional<Ddr3Served> step(uint64_t limit = UINT64_MAX);
  bool idle() const;
  Ddr3Snapshot snapshot() const;
  const Ddr3Config& config() const { return c_; }
  // The device cycle at which step() would choose the next burst (its decision time: the
  // earliest head arrival, not before the data bus can take another column command), or
  // nothing when idle. A caller that advances in time steps while this is <= its now: every
  // request that could compete for the choice has then arrived.
  std::optional<uint64_t> next_decision() const;
  // Performs every refresh due at or before device cycle `now` (step() does so at each
  // decision time before choosing; catch_up() is the same for an idle gap).
  void catch_up(uint64_t now);

  // The state that survives an idle gap, as plain words relative to device cycle `now`
  // (refreshes due by then performed; a time more than horizon() before `now` binds nothing
  // and is written as now - horizon(), so equal futures give equal words). Refused while
  // requests are queued. load() is its inverse at another `now`, which must be at least
  // horizon() (an engine that loads states runs with an origin of horizon(): see
  // Ddr3Crossing::origin).
  std::vector<uint64_t> save(uint64_t now) const;
  void load(const uint64_t* words, size_t n, uint64_t now);
  static size_t saved_words(const Ddr3Config& c) { return 18 + 4 * size_t(c.banks); }
  // Device cycles within which a past command can still constrain a later one.
  uint64_t horizon() const;

  // The commands issued so far (docs/energy.md), and an optional listener of each (an empty
  // function removes it). Neither changes any timing; save() performs its refreshes on a
  // copy that neither counts nor calls the listener.
  const Ddr3CommandCounts& command_counts() const { return counts_; }
  void set_command_listener(Ddr3CommandListener listener) { listener_ = std::move(listener); }

 private:
  struct Bank {
    int64_t row = -1;
    uint64_t act_ok = 0, pre_ok = 0, col_ok = 0;
  };
  // A request in its port's queue; its head burst is the one at `addr` (the request's
  // bursts are served in address order, so a request's entry advances rather than holding
  // one entry per burst).
  struct Burst {
    uint64_t id, arrival, addr, stop, seq;  // seq: submission order (one queue per port under fifo)
    Ddr3Address at;                         // map(addr)
    bool write;
    bool last(uint64_t burst_bytes) const { return addr + burst_bytes >= stop; }
  };
  // A transaction store of UG585's read/write switching (docs/ddr3.md): critical after
  // max_starve timer pulses unserved, hard non-critical until hnc_end after run_length
  // bursts served while critical.
  struct Store {
    bool critical = false;
    uint32_t served = 0;
    uint64_t hnc_end = 0, last_served = 0;
  };
  struct Plan {
    bool pre = false, act = false;
    uint64_t pre_t = 0, act_t = 0, col_t = 0;
  };
  Plan plan(const Ddr3Address& a, bool write, uint64_t t0) const;
  void commit(const Ddr3Address& a, bool write, const Plan& p);
  void refresh();
  // UG585's stores and mode at decision time `t` (rw_policy = ug585).
  void switch_mode(uint64_t t);
  uint64_t pulse(uint64_t t) const { return (t + timer_off_) / c_.timer_ncks; }
  // The queue port p offers at decision time t, or -1.
  int offer(uint32_t p, uint64_t t) const;
  // rw_policy = fifo: the queue holding port p's oldest submission, whichever direction and
  // whenever it arrives (a port serves its submissions in order), or -1 when both are empty.
  int fifo_head(uint32_t p) const;

  Ddr3Config c_;
  // The config's choices and bit widths, decided once (map, step and commit run per burst).
  uint32_t bus_bits_ = 0, col_bits_ = 0, bank_bits_ = 0, row_bits_ = 0, burst_bytes_ = 0;
  uint64_t ctrl_cycles_ = 0;  // c_.cycles(ctrl_latency_ns)
  bool row_bank_col_ = true, closed_page_ = false, frfcfs_ = true, fifo_ = false;
  // Whether the head of queue k is among the CAM's entries at decision time t (docs/ddr3.md).
  bool in_cam(size_t k, uint64_t t) const;
  std::vector<std::deque<Burst>> q_;  // per port and direction (2 p + write), in order
  std::vector<uint64_t> head_;         // per queue: its head's arrival, UINT64_MAX when empty
  // The earliest arrival of a head that can be offered (UINT64_MAX: idle); under fifo only
  // each port's fifo_head() can be.
  uint64_t earliest() const;
  void pop(size_t k);
  uint64_t seq_ = 0;
  bool write_mode_ = false;
  Store st_[2];           // reads, writes
  uint64_t timer_off_ = 0;  // the timer pulses where (t + timer_off_) % timer_ncks == 0
  std::vector<Bank> banks_;
  std::vector<uint64_t> acts_;  // last four ACT times (tFAW)
  uint64_t last_act_ = 0;
  bool any_act_ = false;
  uint64_t last_col_ = 0, last_rd_ = 0, last_wr_ = 0;
  bool any_col_ = false, last_write_ = false;
  uint64_t next_refresh_;
  Ddr3CommandCounts counts_;
  Ddr3CommandListener listener_;
  void issued(uint64_t cycle, Ddr3Command command, uint32_t bank) {
    if (listener_) listener_(cycle, command, bank);
  }
};

// The state ddr.model = ddr3 carries across an idle gap (hw::MemoryState's words), one
// layout for both fidelities: a tag, the clock crossing's phase at PL edge `edge`, then
// t.save(x.device(edge)). ddr3_restore is its inverse on an idle engine at edge 0 of a board:
// it loads the engine and returns the crossing with the carried phase; a state of another
// shape is refused naming `who`. ddr3_board_clock gives a board's crossing (origin horizon())
// and ddr3_board_engine its engine at reset.
std::vector<uint64_t> ddr3_carry(const Ddr3Timing& t, const Ddr3Crossing& x, uint64_t edge);
Ddr3Crossing ddr3_board_clock(const Ddr3Config& c, uint64_t pl_period_ps);
inline Ddr3Timing ddr3_board_engine(const Ddr3Config& c, const Ddr3Crossing& x) { return Ddr3Timing(c, x.device(0)); }
Ddr3Crossing ddr3_restore(Ddr3Timing& t, Ddr3Crossing x, const std::vector<uint64_t>& words, const std::string& who);

}  // namespace bitsim::hw
