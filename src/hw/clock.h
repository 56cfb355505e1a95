#pragma once
// Clock: the PL clock of the board. One rising edge per period, as an sc_event that every
// clocked module is sensitive to, and a cycle counter. It is cheaper than sc_clock (one
// process activation per cycle, no falling edge).
#include <cstdint>

#include <string>

#include <systemc>

#include "hw/config_field.h"

namespace bitsim::hw {

// The shipped default is the board's clock; visit() gives each field's key, range, unit,
// evidence label and meaning (hw/config_field.h).
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

  const sc_core::sc_event& posedge() const { return posedge_; }
  // Cycle number of the current (or most recent) rising edge; the first edge is cycle 0
  // at time 0.
  uint64_t cycle() const { return cycle_; }
  const sc_core::sc_time& period() const { return period_; }
  // True at an edge whose time step stopped the simulation (sc_stop by the PS before the
  // modules evaluated): the modules skip it, as if it had never come.
  bool stop_requested() const { return simcontext()->sim_status() != sc_core::SC_SIM_OK; }
  double mhz() const { return config_.mhz; }

 private:
  void tick();
  ClockConfig config_;
  sc_core::sc_time period_;
  sc_core::sc_event posedge_;
  sc_core::sc_event next_edge_;  // timed, one period ahead: cheaper than next_trigger(period)
  uint64_t cycle_ = 0;
  bool started_ = false;
};

}  // namespace bitsim::hw
