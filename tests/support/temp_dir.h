#pragma once
// A fresh folder for one test: under the system's temp folder, named after the running
// test and the process (so that parallel ctest processes never share one), not created
// (the code under test creates it when it needs it), removed with its contents when the
// TempDir goes out of scope. MadeTempDir creates it at once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace bitsim::test {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string name = info ? std::string(info->test_suite_name()) + "_" + info->name() : "bitsim";
    static int n = 0;  // several folders in one test
    path = std::filesystem::temp_directory_path() /
           ("bitsim_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    std::filesystem::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;  // never throws from a destructor (a test may leave a folder unreadable)
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// The same folder, created at once: for tests that write their inputs into it.
struct MadeTempDir : TempDir {
  MadeTempDir() { std::filesystem::create_directories(path); }
};

}  // namespace bitsim::test
