#pragma once
// Runs a SystemC simulation in chunks of 64 edges of `clock` until pred() holds; fails the
// test (and returns false) when it does not hold within max_cycles.
#include <gtest/gtest.h>

#include <cstdint>

#include <systemc>

#include "hw/parts/clock.h"

namespace bitsim::test {

template <typename Pred>
bool run_until(const hw::Clock& clock, Pred pred, uint64_t max_cycles) {
  for (uint64_t run = 0; !pred(); run += 64) {
    if (run >= max_cycles) {
      ADD_FAILURE() << "condition not reached within " << max_cycles << " cycles";
      return false;
    }
    sc_core::sc_start(clock.period() * 64.0);
  }
  return true;
}

}  // namespace bitsim::test
