#include "base/file_io.h"

#include <algorithm>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::io {

namespace fs = std::filesystem;

namespace {

std::string reason(int err) {
  if (err == ELOOP) return "a symlink loop (too many levels of symbolic links)";
  if (err == ENOENT) return "no such file or folder";
  return std::strerror(err);
}

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a folder";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

fs::path folder_of(const fs::path& p) {
  const fs::path parent = p.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

}  // namespace

void check_input_file(const fs::path& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error(fmt::format("{} {}: {}", what, path.string(), reason(errno)));
  if (!S_ISREG(st.st_mode))
    throw Error(fmt::format("{} {}: is {}, a regular file is expected", what, path.string(), kind_of(st.st_mode)));
  if (::access(path.c_str(), R_OK) != 0)
    throw Error(fmt::format("{} {}: cannot be read: {}", what, path.string(), std::strerror(errno)));
}

void check_input_folder(const fs::path& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error(fmt::format("{} {}: {}", what, path.string(), reason(errno)));
  if (!S_ISDIR(st.st_mode)) throw Error(fmt::format("{} {}: is not a folder", what, path.string()));
}

void read_blocks(const fs::path& path, const std::string& what, const std::function<void(uint64_t)>& size,
                 const std::function<void(const char*, size_t)>& block) {
  check_input_file(path, what);
  // Opened without blocking and checked again on the descriptor: a file swapped for a FIFO
  // after the check cannot hang the open.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(fmt::format("{} {}: cannot open: {}", what, path.string(), std::strerror(errno)));
  const std::unique_ptr<const int, void (*)(const int*)> closer(&fd, [](const int* f) { ::close(*f); });
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw Error(fmt::format("{} {}: is {}, a regular file is expected", what, path.string(), kind_of(st.st_mode)));
  if (size) size(uint64_t(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t k = ::read(fd, buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) throw Error(fmt::format("{} {}: read failed: {}", what, path.string(), std::strerror(errno)));
    if (k == 0) break;
    block(buf, size_t(k));
  }
}

std::string read_file(const fs::path& path, const std::string& what, uint64_t max_bytes) {
  auto too_long = [&](uint64_t bytes) {
    return Error(fmt::format("{} {}: {} bytes or more, over the {} bytes a {} can hold", what, path.string(), bytes,
                             max_bytes, what));
  };
  std::string out;
  read_blocks(
      path, what,
      [&](uint64_t size) {
        if (size > max_bytes) throw too_long(size);
        out.reserve(size_t(size));
      },
      [&](const char* p, size_t k) {
        if (out.size() + k > max_bytes) throw too_long(out.size() + k);
        out.append(p, k);
      });
  return out;
}

void check_output_file(const fs::path& path, const std::string& what) {
  if (path.empty()) throw Error(fmt::format("{}: an empty file name", what));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw Error(fmt::format("{} {}: is a folder, a file name is expected", what, path.string()));
    if (::access(path.c_str(), W_OK) != 0)
      throw Error(fmt::format("{} {}: cannot be written: {}", what, path.string(), std::strerror(errno)));
    if (!S_ISREG(st.st_mode)) return;  // a device or a pipe: written in place at commit
  } else if (errno != ENOENT) {
    throw Error(fmt::format("{} {}: {}", what, path.string(), reason(errno)));
  }
  const fs::path folder = folder_of(path);
  struct stat ds {};
  if (::stat(folder.c_str(), &ds) != 0)
    throw Error(fmt::format("{} {}: its folder {} does not exist ({})", what, path.string(), folder.string(),
                            reason(errno)));
  if (!S_ISDIR(ds.st_mode))
    throw Error(fmt::format("{} {}: {} is not a folder", what, path.string(), folder.string()));
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    throw Error(fmt::format("{} {}: cannot create files in {}: {}", what, path.string(), folder.string(),
                            std::strerror(errno)));
}

namespace {
// The file a path names, if it exists: (device, inode).
std::optional<std::pair<dev_t, ino_t>> identity(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return std::nullopt;
  return std::make_pair(st.st_dev, st.st_ino);
}

// The path as it will be written: absolute, symlinks of its existing part resolved.
fs::path resolved(const fs::path& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return ec ? p : r;
}
}  // namespace

void check_outputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  for (const NamedPath& o : outputs) check_output_file(o.path, o.what);
  for (size_t i = 0; i < outputs.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      const auto a = identity(outputs[i].path), b = identity(outputs[j].path);
      if (resolved(outputs[i].path) == resolved(outputs[j].path) || (a && b && *a == *b))
        throw Error(fmt::format("{} {} and {} {} name one file: each output needs its own", outputs[j].what,
                                outputs[j].path.string(), outputs[i].what, outputs[i].path.string()));
    }
  for (const NamedPath& o : outputs) {
    const auto out = identity(o.path);
    if (!out) continue;  // a new file is no input
    const auto folder = identity(folder_of(resolved(o.path)));
    for (const NamedPath& in : inputs) {
      if (in.path.empty()) continue;
      const auto id = identity(in.path);
      if (id && (*id == *out || (folder && *id == *folder)))
        throw Error(fmt::format("{} {}: is {} {} of this command, which an output must not replace", o.what,
                                o.path.string(), *id == *out ? "the input" : "a file inside the input", in.what +
                                " " + in.path.string()));
    }
  }
}

OutputFile::OutputFile(const fs::path& path, const std::string& what, const std::string& suffix)
    : path_(path), what_(what) {
  check_output_file(path, what);
  // A symlink is followed: the file it names is replaced, the link stays.
  std::error_code ec;
  fs::path target = path;
  if (fs::is_symlink(path, ec) && fs::exists(path, ec)) target = fs::canonical(path, ec);
  if (ec) target = path;
  struct stat st {};
  const bool special = ::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
  // Beside the target (same file system: the rename is atomic), or in the temporary folder
  // when the target is a device or a pipe (copied into it at commit).
  const fs::path dir = special ? fs::temp_directory_path() : folder_of(target);
  std::string templ = (dir / fmt::format(".{}.tmp.XXXXXX{}", target.filename().string(), suffix)).string();
  const int fd = ::mkstemps(templ.data(), int(suffix.size()));
  if (fd < 0)
    throw Error(fmt::format("{} {}: cannot create a temporary file in {}: {}", what, path.string(), dir.string(),
                            std::strerror(errno)));
  // The replaced file's mode, or a new file's: 0666 less the umask (read back at once).
  mode_t mode = 0;
  if (!special && ::stat(target.c_str(), &st) == 0) {
    mode = st.st_mode & 07777;
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  ::fchmod(fd, mode);
  ::close(fd);
  temp_ = templ;
  if (!special) path_ = target;
}

OutputFile::~OutputFile() {
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void OutputFile::commit() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    // A device or a pipe: copy the finished file into it in blocks, every write checked.
    const int in = ::open(temp_.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) throw Error(fmt::format("{} {}: cannot open: {}", what_, temp_.string(), std::strerror(errno)));
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      ::close(in);
      throw Error(fmt::format("{} {}: cannot open: {}", what_, path_.string(), std::strerror(err)));
    }
    bool ok = true;
    int err = 0;
    char buf[1 << 16];
    for (;;) {
      const ssize_t k = ::read(in, buf, sizeof buf);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) {
        if (k < 0) ok = false, err = errno;
        break;
      }
      if (!write_all(fd, buf, size_t(k))) {
        ok = false, err = errno;
        break;
      }
    }
    ::close(in);
    if (::close(fd) != 0 && ok) ok = false, err = errno;
    if (!ok) throw Error(fmt::format("{} {}: write failed: {}", what_, path_.string(), std::strerror(err)));
    ::unlink(temp_.c_str());
    committed_ = true;
    return;
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    throw Error(fmt::format("{} {}: cannot move the written file into place: {}", what_, path_.string(),
                            std::strerror(errno)));
  committed_ = true;
}

LineFile::LineFile(const fs::path& path, const std::string& what) : out_(path, what), what_(what) {
  file_ = std::fopen(out_.temp_path().c_str(), "w");
  if (!file_) throw Error(fmt::format("{} {}: cannot write ({})", what_, path.string(), std::strerror(errno)));
}

LineFile::~LineFile() {
  if (file_) std::fclose(file_);  // out_ then removes the temporary file
}

void LineFile::close(const char* last_line) {
  if (!file_) return;
  if (last_line) std::fputs(last_line, file_);
  const bool failed = std::ferror(file_) != 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (failed || !closed) throw Error(fmt::format("{} {}: the write failed", what_, out_.path().string()));
  out_.commit();
}

void write_file(const fs::path& path, const std::string& content, const std::string& what) {
  OutputFile out(path, what);
  const int fd = ::open(out.temp_path().c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("{} {}: cannot open: {}", what, path.string(), std::strerror(errno)));
  const bool ok = write_all(fd, content.data(), content.size());
  const int err = errno;
  if (::close(fd) != 0 || !ok)
    throw Error(fmt::format("{} {}: write failed: {}", what, path.string(), std::strerror(ok ? errno : err)));
  out.commit();
}

bool write_all(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t k = ::write(fd, p, std::min<size_t>(size, size_t(1) << 30));  // a piece the kernel takes whole
    if (k < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += k;
    size -= size_t(k);
  }
  return true;
}

}  // namespace bitsim::io
