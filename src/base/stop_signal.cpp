#include "base/stop_signal.h"

#include <csignal>

#include <fmt/format.h>

namespace bitsim {

namespace {

// The signal that asked bitsim to stop (0: none). Written only by the handler; the one
// global mutable state of bitsim, as a handler can safely touch nothing else.
volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int signal) { g_stop_signal = signal; }

// SIGPIPE does nothing: a write to a closed pipe fails with EPIPE and is an output error
// (exit 2) like any other. A handler, not SIG_IGN, so that a program bitsim starts gets the
// default back (exec resets caught signals, not ignored ones).
extern "C" void on_broken_pipe(int) {}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  struct sigaction pipe {};
  pipe.sa_handler = on_broken_pipe;
  sigemptyset(&pipe.sa_mask);
  pipe.sa_flags = SA_RESTART;
  ::sigaction(SIGPIPE, &pipe, nullptr);
}

int stop_signal() { return g_stop_signal; }

void clear_stop_signal() { g_stop_signal = 0; }

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return fmt::format("signal {}", signal);
}

void check_stop() {
  if (const int s = g_stop_signal) throw Stopped(s, fmt::format("stopped by {}", signal_name(s)));
}

}  // namespace bitsim
