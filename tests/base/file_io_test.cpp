// The file rules (base/file_io.h): inputs must be regular files, outputs are checked before
// the work, written through a temporary file renamed into place, and write errors are errors.
#include "base/file_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "base/error.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

namespace bitsim::io {
namespace {

namespace fs = std::filesystem;

using TempDir = test::MadeTempDir;
using test::error_of;

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(FileIo, InputsMustBeRegularFilesNamedInTheError) {
  TempDir d;
  const fs::path fifo = d.path / "fifo", loop = d.path / "loop", missing = d.path / "missing", file = d.path / "f";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_symlink(loop, loop);
  std::ofstream(file) << "text";
  EXPECT_TRUE(has(error_of([&] { check_input_file(fifo, "config file"); }), "config file " + fifo.string() + ": is a FIFO"));
  EXPECT_TRUE(has(error_of([&] { check_input_file(d.path, "config file"); }), "is a folder"));
  EXPECT_TRUE(has(error_of([&] { check_input_file(loop, "model"); }), "symlink loop"));
  EXPECT_TRUE(has(error_of([&] { check_input_file(missing, "model"); }), "no such file"));
  EXPECT_TRUE(has(error_of([&] { check_input_file("/dev/null", "x"); }), "character device"));
  EXPECT_EQ(read_file(file, "x"), "text");
  EXPECT_TRUE(has(error_of([&] { check_input_folder(file, "model"); }), "is not a folder"));
  EXPECT_TRUE(has(error_of([&] { check_input_folder(loop, "model"); }), "symlink loop"));
}

TEST(FileIo, OutputsAreCheckedBeforeTheWork) {
  TempDir d;
  EXPECT_TRUE(has(error_of([&] { check_output_file(d.path / "no" / "x.csv", "--csv"); }),
                  "its folder " + (d.path / "no").string() + " does not exist"));
  EXPECT_TRUE(has(error_of([&] { check_output_file(d.path, "--csv"); }), "is a folder"));
  EXPECT_EQ(error_of([&] { check_output_file(d.path / "new.csv", "--csv"); }), "");
  EXPECT_FALSE(fs::exists(d.path / "new.csv"));  // checked, nothing left behind
  EXPECT_EQ(error_of([&] { check_output_file("/dev/null", "--csv"); }), "");
}

TEST(FileIo, WritesGoThroughATemporaryFileAndFailuresAreErrors) {
  TempDir d;
  const fs::path p = d.path / "out.json";
  write_file(p, "first", "--json");
  EXPECT_EQ(slurp(p), "first");
  {
    OutputFile out(p, "--json");
    std::ofstream(out.temp_path()) << "second";
    EXPECT_EQ(slurp(p), "first");  // the target changes only at commit
    EXPECT_EQ(out.temp_path().parent_path(), d.path);
    out.commit();
  }
  EXPECT_EQ(slurp(p), "second");
  {
    OutputFile abandoned(p, "--json");
    std::ofstream(abandoned.temp_path()) << "half";
  }  // not committed: the target stays, the temporary file is gone
  EXPECT_EQ(slurp(p), "second");
  EXPECT_EQ(std::distance(fs::directory_iterator(d.path), fs::directory_iterator()), 1);
  EXPECT_TRUE(has(error_of([&] { write_file("/dev/full", "data", "--csv"); }), "--csv /dev/full: write failed"));
}

}  // namespace
}  // namespace bitsim::io
