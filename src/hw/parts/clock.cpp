#include "hw/parts/clock.h"

#include <stdexcept>
#include <string>

namespace bitsim::hw {

Clock::Clock(sc_core::sc_module_name name, const ClockConfig& config)
    : sc_core::sc_module(name), config_(config) {
  config_.validate(this->name());
  // Periods are kept in picoseconds; the SystemC time resolution is 1 ps by default.
  period_ps_ = clock_period_ps(config_.mhz);
  period_ = sc_core::sc_time::from_value(period_ps_);
  SC_METHOD(tick);
  sensitive << next_edge_;
}

void Clock::tick() {
  // Edges come at multiples of the period from time 0 (cycle 0), gated or not: every tick
  // is the edge after the last one counted (a restart sets cycle_ to the edge before it).
  if (started_) ++cycle_;
  started_ = true;
  if (listening_ == 0) {
    // Nobody listens: this edge changes nothing, and neither would the next ones until a
    // wake(). Stop; wake() starts the clock again at the edge after it.
    stopped_ = true;
    return;
  }
  ++edges_run_;
  // Immediate: the modules evaluate in this delta cycle. SystemC runs the methods made
  // runnable by the time step (this one) first, then the threads (the PS), then the methods
  // they made runnable (the modules), so a PS access at an edge's time still sees the state
  // before the edge, exactly as if the edge came one delta cycle later; and an edge at which
  // the PS stopped the simulation is not evaluated (stop_requested).
  posedge_.notify();
  next_edge_.notify(period_);
}

void Clock::sleep() {
  if (listening_ == 0) throw std::logic_error(std::string(name()) + ": sleep() with no listener awake");
  --listening_;
}

void Clock::wake() {
  ++listening_;
  if (!stopped_) return;
  stopped_ = false;
  const uint64_t now = simcontext()->time_stamp().value();
  cycle_ = now / period_ps_;  // until the next edge, the one the running clock had last
  next_edge_.notify(sc_core::sc_time::from_value((now / period_ps_ + 1) * period_ps_ - now));
}

}  // namespace bitsim::hw
