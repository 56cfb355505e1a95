#pragma once
// The one home of bitsim's file rules (docs/errors.md):
//   inputs  - every file bitsim reads is checked to be a regular file (a symlink to one is
//             fine) before it is opened: a missing path, a symlink loop, a folder, a FIFO, a
//             device or a socket is a bitsim::Error naming the path, never a hang or a crash;
//   outputs - checked before the work starts (the folder exists and takes new files, the
//             path is not a folder), written to a temporary file beside the target and
//             renamed into place when complete, so a reader (or a second writer) never sees
//             half a file; every write error (a full disk, /dev/full) is a bitsim::Error.
//             A target that exists and is not a regular file (/dev/stdout, /dev/null, a
//             pipe) cannot be renamed onto: the finished temporary file is copied into it,
//             every write checked. A replaced file keeps its mode; a new one gets 0666
//             less the umask. One command's outputs are checked together (check_outputs):
//             no two name one file, and none names one of its inputs.
// `what` names the thing in messages (the caller's name for it: "trace file", "model folder",
// the option that gave the path).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace bitsim::io {

void check_input_file(const std::filesystem::path& path, const std::string& what);
void check_input_folder(const std::filesystem::path& path, const std::string& what);
// check_input_file, then the file's bytes in order, in blocks of up to 64 KiB, to `block`;
// `size` (if given) first gets the file's size. Opened without blocking and checked to be a
// regular file on the descriptor too.
void read_blocks(const std::filesystem::path& path, const std::string& what, const std::function<void(uint64_t)>& size,
                 const std::function<void(const char*, size_t)>& block);
// read_blocks into one string, which may hold at most `max_bytes` (the most its
// format can legally hold): a longer file is a bitsim::Error naming it and the bound,
// checked before anything is read and again while reading (a file that grows).
std::string read_file(const std::filesystem::path& path, const std::string& what, uint64_t max_bytes);
// The bounds callers give read_file.
inline constexpr uint64_t kMaxSmallFileBytes = uint64_t(1) << 20;  // a config, a suite, a model's config.json
inline constexpr uint64_t kMaxRecordFileBytes = uint64_t(64) << 20;  // a baseline, a process's captured output

void check_output_file(const std::filesystem::path& path, const std::string& what);

// A path with what it is to the command ("trace file", "model folder").
struct NamedPath {
  std::string what;
  std::filesystem::path path;
};
// The outputs of one command, checked together before the work: each as check_output_file
// (so an empty name is refused), no two naming one file (the same path, or two names of one
// existing file), and none naming one of the command's inputs: an input file itself, or an
// existing file inside an input folder (a model folder's config.json). Throws bitsim::Error
// naming both paths.
void check_outputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);
// check_output_file, then `content` through an OutputFile.
void write_file(const std::filesystem::path& path, const std::string& content, const std::string& what);

// Writes all `size` bytes of `data` to `fd`, again after EINTR; false on any other error
// (errno set).
bool write_all(int fd, const void* data, size_t size);

// An output written by another writer (a stream, SystemC's VCD writer): it writes to
// temp_path(), then commit() puts the finished file in place. Destroyed uncommitted (an
// error, a signal), it removes the temporary file and leaves the target as it was.
class OutputFile {
 public:
  // `suffix` ends the temporary file's name (a writer that appends an extension itself).
  OutputFile(const std::filesystem::path& path, const std::string& what, const std::string& suffix = "");
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& temp_path() const { return temp_; }
  void commit();

 private:
  std::filesystem::path path_, temp_;
  std::string what_;
  bool committed_ = false;
};

// A text output written line by line as a run goes (a DRAM trace, a command trace): an
// OutputFile with its stdio stream. close() writes `last_line` (if any), closes the stream
// and puts the file in place, or throws bitsim::Error naming `what` and the path when any
// write failed. Destroyed open, it removes the temporary file. A writer that must keep what a
// stopped run heard closes it itself, with a last line that says so.
class LineFile {
 public:
  // Throws bitsim::Error naming `what` and the path when the temporary file cannot be opened.
  LineFile(const std::filesystem::path& path, const std::string& what);
  ~LineFile();
  LineFile(const LineFile&) = delete;
  LineFile& operator=(const LineFile&) = delete;

  bool is_open() const { return file_ != nullptr; }
  std::FILE* file() const { return file_; }  // null once closed
  void close(const char* last_line = nullptr);

 private:
  OutputFile out_;
  std::string what_;
  std::FILE* file_ = nullptr;
};

}  // namespace bitsim::io
