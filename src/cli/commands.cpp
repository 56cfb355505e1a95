// The bitsim command: every subcommand registered the one way (cli/command.h), the one that
// was parsed run. Bad arguments and bad input exit with code 2 and a message that names the
// thing at fault.
#include "cli/commands.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "base/error.h"
#include "base/stop_signal.h"
#include "bitsim/version.h"
#include "cli/bench_command.h"
#include "cli/cache_command.h"
#include "cli/calibrate_command.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/config_command.h"
#include "cli/eval_command.h"
#include "cli/inspect_command.h"
#include "cli/make_model_command.h"
#include "cli/membench_command.h"
#include "cli/regress_command.h"
#include "cli/replay_command.h"
#include "cli/run_command.h"
#include "cli/sweep_command.h"
#include "cli/validate_command.h"

namespace bitsim::cli {

namespace {

// Every subcommand, in the order of `bitsim --help`.
std::vector<std::unique_ptr<Command>> add_commands(CLI::App& app) {
  std::vector<std::unique_ptr<Command>> c;
  for (auto add : {add_make_model_command, add_inspect_command, add_run_command, add_replay_command,
                   add_config_command, add_sweep_command, add_validate_command, add_calibrate_command, add_membench_command,
                   add_bench_command, add_eval_command, add_regress_command, add_cache_command})
    c.push_back(add(app));
  return c;
}

// Standard output is an output like any other: a failed write (a full disk, /dev/full, a
// closed pipe) is an error, not a silent exit 0.
bool stdout_failed() { return std::fflush(stdout) != 0 || std::ferror(stdout); }
int stdout_error() {
  fmt::print(stderr, "bitsim: error: standard output: write failed: {}\n", std::strerror(errno ? errno : EIO));
  return 2;
}

// The parsed subcommand's exit code; bitsim::Error is bad input (2), a stop 128 + the signal.
int run_parsed(const std::vector<std::unique_ptr<Command>>& commands) {
  try {
    int code = 2;
    for (const auto& c : commands)
      if (c->parsed()) {
        code = c->run();
        break;
      }
    // SIGINT / SIGTERM after the command's last check (its outputs were being written): the
    // work is whole, and still the run was interrupted, so it ends as a stop does (128 + the
    // signal). Only standard output, written through stdio, can have lost bytes to the signal.
    if (const int sig = stop_signal(); sig != 0 && code == 0) {
      const bool cut = stdout_failed();
      fmt::print(stderr, "\nbitsim: stopped by {} {}\n", signal_name(sig),
                 cut ? "while writing standard output, which may be cut short"
                     : "after the work had finished: every output is complete");
      return Stopped(sig, "").exit_code();
    }
    if (stdout_failed()) return stdout_error();
    return code;
  } catch (const bitsim::FieldError& e) {
    fmt::print(stderr, "bitsim: error: {}\n", option_message(e));
    return 2;
  } catch (const bitsim::Error& e) {
    fmt::print(stderr, "bitsim: error: {}\n", e.what());
    return 2;
  } catch (const Stopped& s) {
    // SIGINT / SIGTERM: the command wrote what had finished; 128 + the signal (130 / 143).
    fmt::print(stderr, "\nbitsim: {}\n", s.what());
    return s.exit_code();
  } catch (const std::exception& e) {
    if (std::ferror(stdout)) return stdout_error();
    fmt::print(stderr, "bitsim: internal error: {}\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bitsim: a cycle-accurate simulator of a ternary/INT8 FPGA LLM accelerator "
               "(PYNQ-Z2) running bitnet_b1_58-large"};
  app.set_version_flag("--version", std::string("bitsim ") + kVersion);
  app.require_subcommand(1);
  const auto commands = add_commands(app);

  install_stop_handlers();  // SIGINT / SIGTERM stop the command cleanly (base/stop_signal.h)
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  return run_parsed(commands);
}

}  // namespace bitsim::cli
