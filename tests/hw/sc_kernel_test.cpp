// start_simulation (hw/parts/sc_kernel.h): sc_start for simulations with an SC_THREAD. It runs the
// kernel as sc_start does, and in an AddressSanitizer build it leaves ASan knowing the
// caller's real stack after threads ran and returned: LeakSanitizer can then check the
// process (before, its scan of the ended thread's freed stack was a fatal error).
#include "hw/parts/sc_kernel.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "hw/parts/sim_context.h"

#if defined(__SANITIZE_ADDRESS__)
#define BITSIM_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BITSIM_TEST_ASAN 1
#endif
#endif
#if defined(BITSIM_TEST_ASAN)
#include <pthread.h>
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#endif

namespace bitsim::hw {
namespace {

// An SC_THREAD that waits `steps` times 1 ns, counting, then stops the kernel and returns
// (the way the PS and the timing oracle's host end).
class Stepper : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Stepper);
  Stepper(sc_core::sc_module_name n, int steps, bool stop) : sc_module(n), steps_(steps), stop_(stop) {
    SC_THREAD(run);
  }
  int done = 0;
  // Heap memory the thread allocates. A member, not a local: a thread still waiting when its
  // context goes away is never resumed, so its locals would never be destroyed (a leak).
  std::vector<std::string> scratch;

 private:
  void run() {
    for (int i = 0; i < steps_; ++i) {
      scratch.push_back(std::to_string(i));
      wait(1, sc_core::SC_NS);
      ++done;
    }
    if (stop_) sc_core::sc_stop();
  }
  int steps_;
  bool stop_;
};

void quiet_kernel() {
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
}

TEST(ScKernel, RunsTheThreadUntilItStopsTheKernel) {
  FreshSimContext context;
  quiet_kernel();
  Stepper s("s", 7, true);
  start_simulation();
  EXPECT_EQ(s.done, 7);
  EXPECT_EQ(sc_core::sc_time_stamp(), sc_core::sc_time(7, sc_core::SC_NS));
}

TEST(ScKernel, ADurationEndsTheRunAtThatTime) {
  FreshSimContext context;
  quiet_kernel();
  Stepper s("s", 100, false);
  // sc_start(10 ns) ends at 10 ns before the events of that instant: the wake-ups at 1..9 ns
  // ran, the one at 10 ns is the next run's first.
  start_simulation(sc_core::sc_time(10, sc_core::SC_NS));
  EXPECT_EQ(s.done, 9);
  EXPECT_EQ(sc_core::sc_time_stamp(), sc_core::sc_time(10, sc_core::SC_NS));
  start_simulation(sc_core::sc_time(5, sc_core::SC_NS));  // the same simulation goes on
  EXPECT_EQ(s.done, 14);
  EXPECT_EQ(sc_core::sc_time_stamp(), sc_core::sc_time(15, sc_core::SC_NS));
}

#if defined(BITSIM_TEST_ASAN)
// The stack ASan holds as this thread's current one, read by announcing the real one (a
// switch to the stack already in use, which changes nothing when ASan was right).
bool asan_knows_this_stack() {
  pthread_attr_t attr;
  EXPECT_EQ(pthread_getattr_np(pthread_self(), &attr), 0);
  void* bottom = nullptr;
  size_t size = 0;
  EXPECT_EQ(pthread_attr_getstack(&attr, &bottom, &size), 0);
  pthread_attr_destroy(&attr);
  void* fake_stack = nullptr;
  const void* held_bottom = nullptr;
  size_t held_size = 0;
  __sanitizer_start_switch_fiber(&fake_stack, bottom, size);
  __sanitizer_finish_switch_fiber(fake_stack, &held_bottom, &held_size);
  const char here = 0;
  const char* lo = static_cast<const char*>(held_bottom);
  return lo <= &here && &here < lo + held_size;
}

// Two simulations whose thread steps 5 times and returns, each in its own context;
// check(run) after each, while its context is open.
void two_returning_simulations(const std::function<void(int run)>& check) {
  for (int run = 0; run < 2; ++run) {
    FreshSimContext context;
    quiet_kernel();
    Stepper s("s", 5, true);
    start_simulation();
    ASSERT_EQ(s.done, 5);
    check(run);
  }
}
#endif

TEST(ScKernel, AfterThreadsRanAndReturnedAsanKnowsTheCallersStack) {
#if !defined(BITSIM_TEST_ASAN)
  GTEST_SKIP() << "an AddressSanitizer build checks this (tools/sanitize)";
#else
  // Two simulations whose thread returns, each in its own context. With sc_start alone, ASan
  // held an empty stack or the ended thread's freed one here.
  ASSERT_NO_FATAL_FAILURE(
      two_returning_simulations([](int run) { EXPECT_TRUE(asan_knows_this_stack()) << "after run " << run; }));
#endif
}

TEST(ScKernel, LeakSanitizerChecksTheProcessAfterThreadsRanAndReturned) {
#if !defined(BITSIM_TEST_ASAN)
  GTEST_SKIP() << "an AddressSanitizer build checks this (tools/sanitize)";
#else
  // The same two simulations, heap churn (the ended threads' stacks are freed and their
  // pages reused), an exception on this stack, then a leak check: it must run (a fatal
  // error at exit was the bug's symptom in the suite) and find nothing.
  ASSERT_NO_FATAL_FAILURE(two_returning_simulations([](int) {}));
  std::vector<std::unique_ptr<char[]>> churn;
  for (int i = 0; i < 256; ++i) churn.emplace_back(new char[1 << 16]);
  churn.clear();
  EXPECT_THROW(throw std::runtime_error("thrown on the caller's stack"), std::runtime_error);
  EXPECT_EQ(__lsan_do_recoverable_leak_check(), 0);
#endif
}

}  // namespace
}  // namespace bitsim::hw
