// The file rules (base/file_io.h): inputs must be regular files, outputs are checked before
// the work, written through a temporary file renamed into place, and write errors are errors.
#include "base/file_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
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
  EXPECT_EQ(read_file(file, "x", 4), "text");
  EXPECT_TRUE(has(error_of([&] { check_input_folder(file, "model"); }), "is not a folder"));
  EXPECT_TRUE(has(error_of([&] { check_input_folder(loop, "model"); }), "symlink loop"));
}

// A file longer than its format can hold is refused before it is read: a sparse gigabyte
// costs no memory.
TEST(FileIo, AReadIsBoundedByWhatTheFormatCanHold) {
  TempDir d;
  const fs::path file = d.path / "f", big = d.path / "big";
  std::ofstream(file) << "12345";
  EXPECT_EQ(read_file(file, "config file", 5), "12345");
  EXPECT_TRUE(has(error_of([&] { read_file(file, "config file", 4); }),
                  "config file " + file.string() + ": 5 bytes or more, over the 4 bytes a config file can hold"));
  { std::ofstream(big) << "x"; }
  fs::resize_file(big, uintmax_t(1) << 30);
  EXPECT_TRUE(has(error_of([&] { read_file(big, "suite file", kMaxSmallFileBytes); }), "1073741824 bytes or more"));
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

// A file written line by line as a run goes (io::LineFile: the DRAM and command traces):
// nothing reaches the target before close(), which adds the last line; destroyed open, the
// target is left as it was and no temporary file stays; a failed write is an error naming
// the output and its path.
TEST(FileIo, ALineFileAppearsWholeAtCloseAndNeverHalfWritten) {
  TempDir d;
  const fs::path p = d.path / "trace.txt";
  write_file(p, "old", "trace file");
  {
    LineFile f(p, "trace file");
    ASSERT_TRUE(f.is_open());
    std::fputs("line 1\n", f.file());
    std::fflush(f.file());
    EXPECT_EQ(slurp(p), "old");
    f.close("# last\n");
    EXPECT_FALSE(f.is_open());
    f.close();  // a second close does nothing
  }
  EXPECT_EQ(slurp(p), "line 1\n# last\n");
  {
    LineFile f(p, "trace file");
    std::fputs("abandoned\n", f.file());
  }
  EXPECT_EQ(slurp(p), "line 1\n# last\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(d.path), fs::directory_iterator()), 1);
  const std::string full = error_of([] {
    LineFile f("/dev/full", "dram trace file");
    std::fputs("x\n", f.file());
    f.close();
  });
  EXPECT_TRUE(has(full, "dram trace file /dev/full")) << full;
  EXPECT_TRUE(has(error_of([&] { LineFile f(d.path / "missing" / "t.txt", "dram commands file"); }),
                  "dram commands file"));
}

// One command's outputs: no two name one file (the same path spelled two ways, a symlink, a
// hard link), none replaces an input (the file itself, or a file inside an input folder), and
// an empty name is refused.
TEST(FileIo, OutputsNamingOneFileOrAnInputAreRefused) {
  TempDir d;
  const fs::path a = d.path / "a.json", model = d.path / "model", config = model / "config.json";
  fs::create_directories(model);
  std::ofstream(config) << "{}";
  std::ofstream(a) << "old";
  fs::create_symlink(a, d.path / "link.json");
  fs::create_hard_link(a, d.path / "hard.json");
  auto check = [&](std::vector<NamedPath> outs, std::vector<NamedPath> ins = {}) {
    return error_of([&] { check_outputs(outs, ins); });
  };
  EXPECT_EQ(check({{"trace file", d.path / "t.json"}, {"layers CSV file", d.path / "l.csv"}}), "");
  const std::string same = check({{"trace file", d.path / "x"}, {"layers CSV file", d.path / "." / "x"}});
  EXPECT_TRUE(has(same, "trace file") && has(same, "layers CSV file") && has(same, "name one file")) << same;
  EXPECT_TRUE(has(check({{"--csv", a}, {"--json", d.path / "link.json"}}), "name one file"));
  EXPECT_TRUE(has(check({{"--csv", a}, {"--json", d.path / "hard.json"}}), "name one file"));
  const std::string in_folder = check({{"mmio record file", config}}, {{"model folder", model}});
  EXPECT_TRUE(has(in_folder, "mmio record file " + config.string()) && has(in_folder, "model folder")) << in_folder;
  EXPECT_TRUE(has(check({{"--json", d.path / "link.json"}}, {{"--config", a}}), "the input --config"));
  EXPECT_EQ(check({{"--json", model / "new.json"}}, {{"model folder", model}}), "");  // a new file is no input
  EXPECT_TRUE(has(check({{"--csv", ""}}), "an empty file name"));
}

// A replaced file keeps its mode; a new one gets 0666 less the umask.
TEST(FileIo, AReplacedFileKeepsItsMode) {
  TempDir d;
  const fs::path p = d.path / "secret.json", q = d.path / "new.json";
  write_file(p, "first", "--json");
  ASSERT_EQ(::chmod(p.c_str(), 0600), 0);
  write_file(p, "second", "--json");
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  const mode_t mask = ::umask(0077);
  write_file(q, "new", "--json");
  ::umask(mask);
  ASSERT_EQ(::stat(q.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

}  // namespace
}  // namespace bitsim::io
