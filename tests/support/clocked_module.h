#pragma once
// The base of the tests' own SystemC modules (stream sources and sinks, bus masters): one
// method process, tick(), at every rising edge of the PL clock from the first on.
// Test scaffolding only.
#include <systemc>

#include "hw/parts/clock.h"

namespace bitsim::test {

class ClockedModule : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(ClockedModule);
  ClockedModule(sc_core::sc_module_name n, hw::Clock& clock) : sc_module(n), clock_(clock) {
    SC_METHOD(tick);
    sensitive << clock.listen();
    dont_initialize();
  }

 protected:
  virtual void tick() = 0;
  hw::Clock& clock_;
};

}  // namespace bitsim::test
