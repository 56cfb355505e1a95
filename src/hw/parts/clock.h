#pragma once
// Clock: the PL clock of the board. One rising edge per period, as an sc_event that every
// clocked module is sensitive to, and a cycle counter. It is cheaper than sc_clock (one
// process activation per cycle, no falling edge).
//
// Gated while nobody listens (docs/hw-timing.md, "Clock and channels"): a process that makes
// itself sensitive to the edge with `sensitive << clock.listen()` counts as a listener; a
// module that sleeps on another event says so with sleep() and, when that event wakes it,
// wake(). At an edge with no listener the clock stops; the first wake() schedules the next
// edge where the running clock would have had it (the first edge strictly after the wake).
// No edge that a listener would have seen is skipped, so no cycle count moves; an idle board
// (the CPU computing, a wait between two polls) costs no process activation per cycle.
#include <cstdint>

#include <string>

#include <systemc>

#include "base/config_field.h"

namespace bitsim::hw {

// The shipped default is the board's clock; visit() gives each field's key, range, unit,
// evidence label and meaning (base/config_field.h).
struct ClockConfig {
  double mhz = 125.0;  // PL clock (BOARD.md: 125 MHz; IO PLL 1000 MHz / 8)

  template <typename Self, typename Visitor>
  static void visit(Self& c, Visitor&& v) {
    v(c.mhz, FieldInfo{"clock.mhz", 1, 1000, "MHz", Evidence::kBoard,
                       "PL clock of the DMAs, HP ports and engines (BOARD.md: 125 MHz = IO PLL 1000/8)"});
  }
  // Throws bitsim::Error naming `who` and the key of the first field out of range.
  void validate(const std::string& who) const { check_fields(*this, who); }
};

// The clock period in picoseconds (SystemC's default resolution), rounded to the nearest
// picosecond: the one definition both fidelities use.
inline uint64_t clock_period_ps(double mhz) { return uint64_t(1e6 / mhz + 0.5); }

class Clock : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Clock);
  Clock(sc_core::sc_module_name name, const ClockConfig& config);

  // The rising edge, for a process's static sensitivity (`sensitive << clock.listen()`):
  // the process counts as a listener from now on, awake until it calls sleep().
  const sc_core::sc_event& listen() {
    ++listening_;
    return posedge_;
  }
  // A listener stops listening (it waits on another event, next_trigger) ...
  // std::logic_error when no listener is awake (a sleep() without its listen() or wake()).
  void sleep();
  // ... and listens again (its event woke it; it acts from the next rising edge on). A
  // stopped clock starts again: its next edge is the first one strictly after now.
  void wake();
  // Cycle number of the current (or most recent) rising edge; the first edge is cycle 0
  // at time 0. While the clock is stopped, the edge that the running clock would have had.
  // (The time of the clock's own simulation context: cycle() is also read after the run,
  // when another context, or none, is current.)
  uint64_t cycle() const { return stopped_ ? simcontext()->time_stamp().value() / period_ps_ : cycle_; }
  // Edges up to now at which nobody listened (the clock notified nothing): what the gating
  // saved (the Clock.* tests check it).
  uint64_t edges_skipped() const { return cycle() + 1 - edges_run_; }
  const sc_core::sc_time& period() const { return period_; }
  // True at an edge whose time step stopped the simulation (sc_stop by the PS before the
  // modules evaluated): the modules skip it, as if it had never come.
  bool stop_requested() const { return simcontext()->sim_status() != sc_core::SC_SIM_OK; }
  double mhz() const { return config_.mhz; }
  // A driver without SystemC's scheduler (hw/edge_loop.h) evaluates edge `cycle`: cycle()
  // says so from now on (the clock's own process no longer runs).
  void drive(uint64_t cycle) {
    cycle_ = cycle;
    stopped_ = false;
  }

 private:
  void tick();
  ClockConfig config_;
  sc_core::sc_time period_;
  sc_core::sc_event posedge_;
  sc_core::sc_event next_edge_;  // timed, one period ahead: cheaper than next_trigger(period)
  uint64_t period_ps_ = 0;
  uint64_t cycle_ = 0;
  bool started_ = false;
  uint64_t edges_run_ = 0;
  uint64_t listening_ = 0;  // listeners awake
  bool stopped_ = false;
};

}  // namespace bitsim::hw
