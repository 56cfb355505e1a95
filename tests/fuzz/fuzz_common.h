#pragma once
// Shared by the libFuzzer targets (tests/fuzz/): bad input must end in bitsim::Error, the
// project's one exception for bad input; anything else (another exception, a crash, a hang,
// a sanitizer report) is a finding. Other exceptions escape the target, libFuzzer sees the
// std::terminate abort and saves the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "base/error.h"

namespace bitsim::fuzz {

template <class F>
void expect_only_bitsim_errors(F&& f) {
  try {
    f();
  } catch (const bitsim::Error&) {
    // the expected outcome for bad input
  }
}

// A property of valid input that does not hold: abort with the reason (libFuzzer saves the input).
[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "fuzz property violated: %s\n", what);
  std::abort();
}

// A per-process scratch file (in /dev/shm when present) holding the input, for the readers
// that take a path. Removed when the process exits normally.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& name) {
    const std::filesystem::path dir = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    path_ = dir / ("bitsim-fuzz-" + std::to_string(::getpid()) + "-" + name);
  }
  ~ScratchFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  const std::filesystem::path& write(const uint8_t* data, size_t size) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
    out.close();
    if (!out) fail("cannot write the scratch file");
    return path_;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace bitsim::fuzz
