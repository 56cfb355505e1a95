// Clock (docs/hw-timing.md "Clock and channels"): edges at multiples of the period from
// cycle 0 at time 0, and the gating while nobody listens: a module that sleeps and is woken
// acts at the first edge strictly after its wake, with the cycle number the running clock
// gives, whether or not another listener keeps the clock running meanwhile.
#include "hw/parts/clock.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "hw/parts/sim_context.h"
#include "hw/parts/sc_kernel.h"

namespace bitsim::hw {
namespace {

// Acts at `burst` edges, then sleeps on `kick` (as the DMAs and engines sleep on a register
// write or a stream beat); woken, it acts again from the next edge on.
class Sleeper : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Sleeper);
  Sleeper(sc_core::sc_module_name n, Clock& clock, int burst) : sc_module(n), clock_(clock), burst_(burst) {
    SC_METHOD(tick);
    sensitive << clock.listen();
    dont_initialize();
  }
  sc_core::sc_event kick;
  std::vector<uint64_t> acted, woke_at;

 private:
  void tick() {
    if (sleeping_) {
      sleeping_ = false;
      clock_.wake();
      woke_at.push_back(clock_.cycle());  // before the next edge: the last edge's number
      return;
    }
    acted.push_back(clock_.cycle());
    if (++done_ % burst_ == 0) {
      sleeping_ = true;
      clock_.sleep();
      next_trigger(kick);
    }
  }
  Clock& clock_;
  int burst_;
  int done_ = 0;
  bool sleeping_ = false;
};

// Listens at every edge and never sleeps (a VCD probe, a test's bus driver).
class Poller : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Poller);
  Poller(sc_core::sc_module_name n, Clock& clock) : sc_module(n), clock_(clock) {
    SC_METHOD(tick);
    sensitive << clock.listen();
    dont_initialize();
  }
  std::vector<uint64_t> seen;

 private:
  void tick() { seen.push_back(clock_.cycle()); }
  Clock& clock_;
};

// Wakes the sleeper at the given times (picoseconds) one delta cycle later, as a register
// write wakes a DMA, and records the clock's cycle() at each.
class Kicker : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Kicker);
  Kicker(sc_core::sc_module_name n, Clock& clock, Sleeper& s, std::vector<uint64_t> at_ps)
      : sc_module(n), clock_(clock), sleeper_(s), at_(std::move(at_ps)) {
    SC_THREAD(run);
  }
  std::vector<uint64_t> cycle_at_kick;

 private:
  void run() {
    for (uint64_t t : at_) {
      wait(sc_core::sc_time::from_value(t) - sc_core::sc_time_stamp());
      cycle_at_kick.push_back(clock_.cycle());
      sleeper_.kick.notify(sc_core::SC_ZERO_TIME);
    }
  }
  Clock& clock_;
  Sleeper& sleeper_;
  std::vector<uint64_t> at_;
};

struct Outcome {
  std::vector<uint64_t> acted, woke_at, cycle_at_kick, polled;
  uint64_t cycle_at_end = 0, skipped = 0;
};

// 100 MHz (10,000 ps): a wake in mid-period, one exactly at an edge's time, one late.
Outcome run(bool with_poller) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{100.0});
  Sleeper sleeper("sleeper", clock, 3);
  Kicker kicker("kicker", clock, sleeper, {1000 * 10'000 + 5'000, 5000 * 10'000, 5002 * 10'000 + 1});
  std::unique_ptr<Poller> poller;
  if (with_poller) poller = std::make_unique<Poller>("poller", clock);
  start_simulation(sc_core::sc_time::from_value(uint64_t(6000) * 10'000 + 3'000));
  Outcome o{sleeper.acted, sleeper.woke_at, kicker.cycle_at_kick, poller ? poller->seen : std::vector<uint64_t>{}, clock.cycle(),
            clock.edges_skipped()};
  return o;
}

TEST(Clock, ASleeperWokenActsAtTheFirstEdgeAfterItsWakeGatedOrNot) {
  const Outcome gated = run(false), running = run(true);
  // Edges 0..2 at the start; a wake at 1000.5 cycles: 1001..1003; one at exactly edge 5000
  // (which the running clock evaluates before the wake): 5001..5003. The third wake, at
  // edge 5002 + 1 ps, comes while the sleeper is still acting: its kick finds it awake.
  const std::vector<uint64_t> want{0, 1, 2, 1001, 1002, 1003, 5001, 5002, 5003};
  EXPECT_EQ(gated.acted, want);
  EXPECT_EQ(running.acted, want);
  EXPECT_EQ(gated.cycle_at_kick, (std::vector<uint64_t>{1000, 5000, 5002}));
  EXPECT_EQ(running.cycle_at_kick, gated.cycle_at_kick);
  // Woken, between the wake and the next edge, cycle() is the edge before the wake.
  EXPECT_EQ(gated.woke_at, (std::vector<uint64_t>{1000, 5000}));
  EXPECT_EQ(running.woke_at, gated.woke_at);
  EXPECT_EQ(gated.cycle_at_end, 6000u);
  EXPECT_EQ(running.cycle_at_end, 6000u);
}

TEST(Clock, StopsWhileNobodyListensAndNeverWithAListener) {
  const Outcome gated = run(false), running = run(true);
  // Gated: of the 6001 edges 0..6000 only the 9 acted on were evaluated (after each burst,
  // the clock runs once more to find nobody listening, and notifies no edge).
  EXPECT_EQ(gated.skipped, 6001u - 9u);
  EXPECT_EQ(running.skipped, 0u);
  ASSERT_EQ(running.polled.size(), 6001u);
  for (size_t i = 0; i < running.polled.size(); ++i) ASSERT_EQ(running.polled[i], i);
}

// A stopped clock's cycle() comes from its own context's time, also after the run when
// another simulation's context is current (the fast board reads the clocked board's cycle
// after its live run; sc_time_stamp() would read, or even create, the current context).
TEST(Clock, ACycleReadAfterTheRunIsOfItsOwnContext) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{100.0});
  Sleeper sleeper("sleeper", clock, 3);  // acts at edges 0..2, then the clock stops
  start_simulation(sc_core::sc_time::from_value(uint64_t(1000) * 10'000 + 5'000));
  EXPECT_EQ(clock.cycle(), 1000u);
  EXPECT_EQ(clock.edges_skipped(), 1001u - 3u);
  sc_core::sc_simcontext* own = sc_core::sc_curr_simcontext;
  {
    FreshSimContext other;
    EXPECT_EQ(clock.cycle(), 1000u);
  }
  sc_core::sc_curr_simcontext = own;  // current again while the modules above go
  sc_core::sc_default_global_context = own;
}

TEST(Clock, ASleepWithNoListenerAwakeIsALogicError) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{125.0});
  EXPECT_THROW(clock.sleep(), std::logic_error);
  clock.listen();
  clock.sleep();
  EXPECT_THROW(clock.sleep(), std::logic_error);  // one more than it listened
  clock.wake();
  EXPECT_NO_THROW(clock.sleep());
}

}  // namespace
}  // namespace bitsim::hw
