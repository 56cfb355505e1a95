// Linked into the fuzzers that link libsystemc: it requires an sc_main symbol (never
// called: the simulations build their modules in a fresh simulation context), and the
// copyright banner and deprecation reports are silenced once before fuzzing starts.
#include <cstdlib>

#include <systemc>

int sc_main(int, char**) { return 0; }

// A target's one-time set-up (fuzz_campaign.h's campaign directory), run here rather than
// inside the first input: libFuzzer's per-input -timeout does not count it.
extern "C" __attribute__((weak)) void bitsim_fuzz_prepare();

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  sc_core::sc_report_handler::set_actions("/IEEE_Std_1666/deprecated", sc_core::SC_DO_NOTHING);
  if (bitsim_fuzz_prepare) bitsim_fuzz_prepare();
  return 0;
}

// LeakSanitizer at process exit: libsystemc keeps its timed-event pool
// (sc_event_timed::allocate) on a free list it never returns, and once SystemC's coroutine
// stacks have run LSan also loses sight of libFuzzer's own driver state. Neither is project
// code; per-input leaks in project code are still reported.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libsystemc\nleak:sc_core::\nleak:fuzzer::FuzzerDriver\nleak:fuzzer::ReadCorpora\n";
}
