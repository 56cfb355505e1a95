// The sanitizer run-time options of the asan build (the "asan" preset, tools/sanitize):
// linked into every executable of a build whose CMAKE_CXX_FLAGS name -fsanitize=address, so
// that each test binary, the bitsim command the CLI tests start and any bitsim a user runs
// from build-asan/ get the same options. ASAN_OPTIONS, UBSAN_OPTIONS and LSAN_OPTIONS in the
// environment are read after these and add to or override them. docs/sanitizers.md says why
// each is chosen.
//
// BITSIM_LSAN_SUPPRESSIONS is the absolute path of tools/sanitizers/lsan.supp (set by CMake).

extern "C" {

// detect_stack_use_after_return=0: SystemC runs every SC_THREAD on its own QuickThreads
// stack. libsystemc announces the switches to ASan (__sanitizer_start_switch_fiber), but
// ASan's fake stack for use-after-return detection is per OS thread, not per coroutine: with
// it on, the first local access in a switched-to SC_THREAD faults (SEGV inside the thread's
// body). Off, the switches are handled and heap, global and in-frame stack checks all work.
// check_initialization_order / strict_init_order: a global whose constructor reads another
// translation unit's global before it is built is a report.
// strict_string_checks: str* functions must find the terminator inside the object.
// detect_leaks=1: LeakSanitizer at exit of every process (on by default on x86-64 Linux; said
// here so that no environment can turn it off silently).
const char* __asan_default_options() {
  return "detect_leaks=1:detect_stack_use_after_return=0:check_initialization_order=1:"
         "strict_init_order=1:strict_string_checks=1:detect_odr_violation=2:halt_on_error=1:"
         "print_summary=1";
}

// print_stacktrace: UBSan's reports say where, not only what. halt_on_error: the first report
// ends the process (the code is also built with -fno-sanitize-recover=undefined).
const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1:report_error_type=1"; }

// The leak suppressions file: third-party libraries' own allocations only, each entry with
// its reason.
const char* __lsan_default_options() { return "suppressions=" BITSIM_LSAN_SUPPRESSIONS ":print_suppressions=0"; }
}
