#pragma once
// Stopping on SIGINT / SIGTERM (docs/errors.md). The bitsim command installs the handlers;
// the handler only records which signal arrived, in the one piece of global mutable state
// bitsim has (a volatile std::sig_atomic_t in stop_signal.cpp: a signal handler can reach
// nothing else safely). Long loops call check_stop() at their natural steps (every DMA
// status poll, every layer loaded, every calibration token), which throws Stopped; the
// commands catch it where finished work can still be written (the trace of the tokens run,
// the sweep rows done), say so on stderr and exit 128 + the signal (130 / 143).
// Without install_stop_handlers() (the library in tests) check_stop() never throws.
#include <exception>
#include <string>

namespace bitsim {

class Stopped : public std::exception {
 public:
  Stopped(int signal, std::string what) : signal_(signal), what_(std::move(what)) {}
  int signal() const { return signal_; }
  int exit_code() const { return 128 + signal_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  int signal_;
  std::string what_;
};

// SIGINT and SIGTERM set the flag (no SA_RESTART: a blocking select() or read() returns
// EINTR, so a waiting loop sees the signal at once). SIGPIPE is caught and does nothing, so a
// closed pipe on standard output is a failed write, exit 2 (docs/errors.md), not death by
// SIGPIPE (141).
void install_stop_handlers();
// 0, or the signal that asked bitsim to stop.
int stop_signal();
// Throws Stopped if a signal arrived.
void check_stop();
// Forgets the signal that asked to stop: for a front end that goes on after a stopped call
// (the Python module, whose SIGINT stops one call, not the interpreter).
void clear_stop_signal();
// "SIGINT", "SIGTERM".
std::string signal_name(int signal);

}  // namespace bitsim
