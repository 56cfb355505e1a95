#include "hw/clock.h"

#include <string>

namespace bitsim::hw {

Clock::Clock(sc_core::sc_module_name name, const ClockConfig& config)
    : sc_core::sc_module(name), config_(config) {
  config_.validate(this->name());
  // Periods are kept in picoseconds; the SystemC time resolution is 1 ps by default.
  period_ = sc_core::sc_time::from_value(clock_period_ps(config_.mhz));
  SC_METHOD(tick);
  sensitive << next_edge_;
}

void Clock::tick() {
  if (started_) ++cycle_;
  started_ = true;
  // Immediate: the modules evaluate in this delta cycle. SystemC runs the methods made
  // runnable by the time step (this one) first, then the threads (the PS), then the methods
  // they made runnable (the modules), so a PS access at an edge's time still sees the state
  // before the edge, exactly as if the edge came one delta cycle later; and an edge at which
  // the PS stopped the simulation is not evaluated (stop_requested).
  posedge_.notify();
  next_edge_.notify(period_);
}

}  // namespace bitsim::hw
