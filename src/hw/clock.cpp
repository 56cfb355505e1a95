#include "hw/clock.h"

#include <stdexcept>
#include <string>

namespace bitsim::hw {

Clock::Clock(sc_core::sc_module_name name, const ClockConfig& config)
    : sc_core::sc_module(name), config_(config) {
  if (!(config_.mhz > 0.0 && config_.mhz <= 2000.0))
    throw std::invalid_argument(std::string(this->name()) + ": clock mhz must be in (0, 2000]");
  // Periods are kept in picoseconds; the SystemC time resolution is 1 ps by default.
  period_ = sc_core::sc_time::from_value(clock_period_ps(config_.mhz));
  SC_METHOD(tick);
}

void Clock::tick() {
  if (started_) ++cycle_;
  started_ = true;
  posedge_.notify(sc_core::SC_ZERO_TIME);
  next_trigger(period_);
}

}  // namespace bitsim::hw
