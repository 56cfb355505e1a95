#pragma once
// The bitsim command as users run it: the real binary (BITSIM_BINARY) in a child process,
// its exit code, stdout and stderr. Used by the CLI tests of every module, and run_command
// for the tools/ scripts.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace bitsim::testing {

struct CommandResult {
  int code = -1;
  std::string out, err;
};

// A shell command in a child process: its exit code, stdout and stderr (the command must not
// redirect its own stderr).
inline CommandResult run_command(const std::string& command) {
  static int counter = 0;
  const std::filesystem::path err_file =
      std::filesystem::temp_directory_path() /
      ("bitsim_cli_err_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  const std::string cmd = command + " 2>" + err_file.string();
  CommandResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream f(err_file);
  r.err.assign(std::istreambuf_iterator<char>(f), {});
  std::filesystem::remove(err_file);
  return r;
}

// The child uses the build tree's start-up cache (BITSIM_TEST_CACHE_DIR), never the user's;
// `env` (e.g. "HOME=/x") is put before the command.
inline CommandResult run_bitsim(const std::string& args, const std::string& env = "") {
  return run_command(std::string("BITSIM_CACHE_DIR=") + BITSIM_TEST_CACHE_DIR + " " + env + " " +
                     std::string(BITSIM_BINARY) + " " + args);
}

}  // namespace bitsim::testing
