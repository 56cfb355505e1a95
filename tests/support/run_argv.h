#pragma once
// A program run from its argv, without a shell (so that a hostile or spaced word reaches it
// as it is), in a working folder, with variables added to (or, with an empty value after
// "-", removed from) its environment; its exit code, stdout and stderr (through files in
// `scratch`), and its peak memory. A child of bitsim uses the build tree's start-up cache unless `env` says
// otherwise.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace bitsim::testing {

struct Outcome {
  int code = -1;
  std::string out, err;
  long peak_kb = 0;  // the program's peak resident memory (getrusage's ru_maxrss), KiB
};

inline Outcome run_argv(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                        const std::filesystem::path& scratch, const std::vector<std::string>& env = {}) {
  const std::filesystem::path out = scratch / "run.out", err = scratch / "run.err";
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::setenv("BITSIM_CACHE_DIR", BITSIM_TEST_CACHE_DIR, 1);
    for (const auto& kv : env) {
      if (kv.rfind("-", 0) == 0) {
        ::unsetenv(kv.substr(1).c_str());
        continue;
      }
      const auto eq = kv.find('=');
      ::setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  ::wait4(pid, &status, 0, &usage);
  Outcome r;
  r.peak_kb = usage.ru_maxrss;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto read = [](const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  r.out = read(out);
  r.err = read(err);
  return r;
}

}  // namespace bitsim::testing
