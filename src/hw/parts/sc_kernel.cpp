#include "hw/parts/sc_kernel.h"

#if defined(__SANITIZE_ADDRESS__)
#define BITSIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BITSIM_ASAN 1
#endif
#endif

#if defined(BITSIM_ASAN)
#include <pthread.h>
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace bitsim::hw {
namespace {

#if defined(BITSIM_ASAN)
// This thread's stack, asked once per thread: for the main thread, glibc's
// pthread_getattr_np reads /proc/self/maps, which for an ASan process is long (about 4% of
// fuzz_mmio_replay's time went there, at two simulation starts per input). The bounds of a
// thread's stack never change while it lives, so nothing of one simulation carries to the next.
struct ThreadStack {
  void* bottom = nullptr;
  size_t size = 0;
  bool ok = false;
};

const ThreadStack& this_thread_stack() {
  thread_local const ThreadStack stack = [] {
    ThreadStack s;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return s;
    s.ok = pthread_attr_getstack(&attr, &s.bottom, &s.size) == 0;
    pthread_attr_destroy(&attr);
    return s;
  }();
  return stack;
}

// Announces this thread's own stack to ASan as the current one (a switch to it that has
// already happened), then unpoisons the stack below this frame, where an exception thrown
// while ASan had the wrong stack may have left the poison of frames it unwound.
class AsanStackRestore {
 public:
  AsanStackRestore() = default;
  AsanStackRestore(const AsanStackRestore&) = delete;
  AsanStackRestore& operator=(const AsanStackRestore&) = delete;
  ~AsanStackRestore() {
    const ThreadStack& stack = this_thread_stack();
    if (!stack.ok) return;
    void* fake_stack = nullptr;
    __sanitizer_start_switch_fiber(&fake_stack, stack.bottom, stack.size);
    __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
    __asan_handle_no_return();
  }
};
#else
struct AsanStackRestore {};
#endif

}  // namespace

void start_simulation() {
  [[maybe_unused]] AsanStackRestore restore;
  sc_core::sc_start();
}

void start_simulation(const sc_core::sc_time& duration) {
  [[maybe_unused]] AsanStackRestore restore;
  sc_core::sc_start(duration);
}

}  // namespace bitsim::hw
