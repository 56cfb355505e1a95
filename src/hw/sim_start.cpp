#include "hw/sim_start.h"

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
// Announces this thread's own stack to ASan as the current one (a switch to it that has
// already happened), then unpoisons the stack below this frame, where an exception thrown
// while ASan had the wrong stack may have left the poison of frames it unwound.
class AsanStackRestore {
 public:
  AsanStackRestore() = default;
  AsanStackRestore(const AsanStackRestore&) = delete;
  AsanStackRestore& operator=(const AsanStackRestore&) = delete;
  ~AsanStackRestore() {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
    void* bottom = nullptr;
    size_t size = 0;
    const bool ok = pthread_attr_getstack(&attr, &bottom, &size) == 0;
    pthread_attr_destroy(&attr);
    if (!ok) return;
    void* fake_stack = nullptr;
    __sanitizer_start_switch_fiber(&fake_stack, bottom, size);
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
