#include "sim/cache_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "base/content_hash.h"
#include "base/stop_signal.h"
#include "base/error.h"
#include "base/file_io.h"
#include "base/parse_number.h"

namespace bitsim::sim {

namespace fs = std::filesystem;

namespace {
constexpr char kMagic[8] = {'B', 'S', 'C', 'A', 'C', 'H', 'E', '1'};
constexpr size_t kHeaderBytes = 128;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t payload_bytes;
  uint64_t payload_hash[2];
  char kind[32];
  char key[48];
  uint64_t header_checksum;  // checksum64 of the bytes before it
};
static_assert(sizeof(Header) == kHeaderBytes);

std::string errno_text() { return std::strerror(errno); }

// The store's mutex (the threads of this process: an flock is held per open file, so it
// does not exclude them), then an flock on the folder's lock file (other processes), for
// the scope.
class Locked {
 public:
  Locked(std::mutex& m, int fd) : lock_(m), fd_(fd) {
    while (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~Locked() {
    if (fd_ >= 0) ::flock(fd_, LOCK_UN);
  }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;

 private:
  std::lock_guard<std::mutex> lock_;
  int fd_;
};

constexpr size_t kWritePiece = size_t(64) << 20;

// A regular file opened for reading without blocking (a FIFO or a device is refused before
// anything waits on it); -1 if it is not one.
int open_regular(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

uint64_t read_hits(const fs::path& file) {
  const int fd = open_regular(file);
  if (fd < 0) return 0;
  char buf[32] = {};
  const ssize_t k = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  uint64_t n = 0;
  for (ssize_t i = 0; i < k && buf[i] >= '0' && buf[i] <= '9' && n < UINT64_MAX / 10; ++i) n = n * 10 + uint64_t(buf[i] - '0');
  return n;
}

// Whether `file` is a regular file that begins with the entry magic: a file the cache can
// prove it wrote (with its name, see classify), and so may delete or replace.
bool has_entry_magic(const fs::path& file) {
  const int fd = open_regular(file);
  if (fd < 0) return false;
  char magic[8] = {};
  const bool ok = ::read(fd, magic, 8) == 8 && std::memcmp(magic, kMagic, 8) == 0;
  ::close(fd);
  return ok;
}

// Whether the name can be replaced by a rename: nothing there, or a regular file.
bool replaceable(const fs::path& file) {
  struct stat st {};
  return ::lstat(file.c_str(), &st) != 0 || S_ISREG(st.st_mode);
}

// Writes `text` to `file` via a temp file + rename (false on failure, nothing left behind).
bool replace_file(const fs::path& file, const std::string& text) {
  if (!replaceable(file)) return false;
  const fs::path tmp = file.string() + fmt::format(".tmp.{}", ::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!(f << text) || !f.flush()) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return false;
    }
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

// A new entry's header, before its payload is known.
Header entry_header(const std::string& kind, const std::string& key) {
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kCacheVersion;
  h.header_bytes = kHeaderBytes;
  std::memcpy(h.kind, kind.data(), kind.size());
  std::memcpy(h.key, key.data(), key.size());
  return h;
}

// The header's payload size and hash, then its own checksum.
void seal(Header& h, const model::ContentHash& hash) {
  h.payload_bytes = hash.total_bytes();
  const auto d = hash.digest();
  h.payload_hash[0] = d[0];
  h.payload_hash[1] = d[1];
  h.header_checksum = model::checksum64(&h, offsetof(Header, header_checksum));
}

// Writes the parts (a part without data as zeros) and hashes them; false on a write error.
// `stopped` when SIGINT / SIGTERM came: the rest is not written.
bool write_payload(int fd, const std::vector<model::ImagePart>& parts, model::ContentHash& hash, bool& stopped) {
  bool ok = true;
  std::vector<uint8_t> zeros;
  for (const model::ImagePart& p : parts) {
    if (!ok || stopped) break;
    if (p.data) {
      // 64 MB at a time, so that SIGINT / SIGTERM abandons a large entry promptly.
      const auto* d = static_cast<const uint8_t*>(p.data);
      for (size_t at = 0; ok && at < p.bytes; at += kWritePiece) {
        if ((stopped = stop_signal() != 0)) break;
        const size_t n = std::min(kWritePiece, p.bytes - at);
        hash.update(d + at, n);
        ok = io::write_all(fd, d + at, n);
      }
    } else {
      zeros.assign(p.bytes, 0);
      hash.update(zeros.data(), zeros.size());
      ok = io::write_all(fd, zeros.data(), zeros.size());
    }
  }
  return ok;
}

// What a file of the folder is by its name: KIND-KEY.bin an entry, KIND-KEY.hits its hit
// count, either name + ".tmp." + digits and dots a temp file, `lock` the lock; anything else
// is not the cache's (KIND and KEY: letters, digits and '_').
enum class FileClass { kEntry, kHits, kTemp, kLock, kForeign };

FileClass classify(const std::string& name) {
  if (name == "lock") return FileClass::kLock;
  auto word = [](std::string_view w) {
    return !w.empty() && std::all_of(w.begin(), w.end(), [](char c) { return std::isalnum(uint8_t(c)) || c == '_'; });
  };
  auto stem_ok = [&](std::string_view stem) {
    const size_t dash = stem.find('-');
    return dash != std::string_view::npos && word(stem.substr(0, dash)) && word(stem.substr(dash + 1));
  };
  std::string_view n = name;
  bool temp = false;
  if (const size_t t = n.find(".tmp."); t != std::string_view::npos) {
    const std::string_view tail = n.substr(t + 5);
    if (tail.empty() || !std::all_of(tail.begin(), tail.end(), [](char c) { return std::isxdigit(uint8_t(c)) || c == '.'; }))
      return FileClass::kForeign;
    n = n.substr(0, t);
    temp = true;
  }
  for (const auto& [ext, cls] : {std::pair{std::string_view(".bin"), FileClass::kEntry}, {".hits", FileClass::kHits}})
    if (n.size() > ext.size() && n.ends_with(ext) && stem_ok(n.substr(0, n.size() - ext.size())))
      return temp ? FileClass::kTemp : cls;
  return FileClass::kForeign;
}

bool is_entry_name(const std::string& name) { return classify(name) == FileClass::kEntry; }

// An entry of the listing: its name is an entry's and it carries the magic.
bool is_own_entry(const fs::directory_entry& e) {
  return is_entry_name(e.path().filename().string()) && has_entry_magic(e.path());
}

// The folder holds only what the cache writes (by name): else it is not a cache, and the
// store refuses it rather than evict, count or clear someone else's files.
void check_cache_folder(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    std::error_code e1;
    if (classify(name) == FileClass::kForeign || e.is_directory(e1))
      throw Error(fmt::format("start-up cache folder {}: not a bitsim cache: it holds '{}' (a cache folder holds "
                              "only KIND-KEY.bin entries, their .hits files, temp files and `lock`); choose another "
                              "cache folder (or set BITSIM_CACHE_DIR)",
                              dir.string(), name));
  }
  if (ec) throw Error(fmt::format("start-up cache folder {}: cannot be listed: {}", dir.string(), ec.message()));
}

// A number of GB (base/parse_number.h: decimal notation, the whole text), positive.
double parse_positive(const std::string& text, const std::string& what) {
  const double v = parse_real(text, what, 0, kCacheMaxGbLimit);
  if (!(v > 0)) throw Error(fmt::format("{}: '{}' is not a positive number of GB", what, text));
  return v;
}
}  // namespace

CacheSettings resolve_cache_settings(const std::string& dir_flag, bool no_cache, std::optional<double> max_gb_flag,
                                     const EnvLookup& env) {
  CacheSettings s;
  s.enabled = !no_cache;
  auto var = [&](const char* name) -> std::string {
    const char* v = env ? env(name) : nullptr;
    return v ? std::string(v) : std::string();
  };
  if (max_gb_flag) {
    if (!(std::isfinite(*max_gb_flag) && *max_gb_flag > 0 && *max_gb_flag <= kCacheMaxGbLimit))
      throw FieldError("cache.max_gb", fmt::format("{} is not a positive number of GB (at most {})", *max_gb_flag,
                                                   kCacheMaxGbLimit));
    s.max_gb = *max_gb_flag;
  } else if (const std::string v = var("BITSIM_CACHE_MAX_GB"); !v.empty()) {
    s.max_gb = parse_positive(v, "BITSIM_CACHE_MAX_GB");
  }
  if (!dir_flag.empty()) {
    s.dir = dir_flag;
  } else if (const std::string v = var("BITSIM_CACHE_DIR"); !v.empty()) {
    s.dir = v;
  } else if (const std::string v = var("XDG_CACHE_HOME"); !v.empty() && fs::path(v).is_absolute()) {
    s.dir = fs::path(v) / "bitsim";
  } else if (const std::string v = var("HOME"); !v.empty()) {
    s.dir = fs::path(v) / ".cache" / "bitsim";
  } else {
    s.why_no_dir = "neither BITSIM_CACHE_DIR, XDG_CACHE_HOME nor HOME is set";
  }
  return s;
}

std::unique_ptr<CacheStore> CacheStore::open(const CacheSettings& s, const CacheWarn& warn) {
  if (!s.enabled) return nullptr;
  auto say = [&](const std::string& m) {
    if (warn) warn(m);
  };
  if (s.dir.empty()) {
    say(fmt::format("start-up cache: no folder ({}); running without the cache", s.why_no_dir));
    return nullptr;
  }
  std::error_code ec;
  if (fs::is_directory(s.dir, ec)) check_cache_folder(s.dir);
  fs::create_directories(s.dir, ec);
  if (ec || !fs::is_directory(s.dir)) {
    say(fmt::format("start-up cache: cannot create the folder {} ({}); running without the cache", s.dir.string(),
                    ec ? ec.message() : "not a folder"));
    return nullptr;
  }
  const fs::path lock = s.dir / "lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || ::access(s.dir.c_str(), W_OK) != 0) {
    say(fmt::format("start-up cache: the folder {} is not writable ({}); running without the cache", s.dir.string(),
                    errno_text()));
    if (fd >= 0) ::close(fd);
    return nullptr;
  }
  const uint64_t max_bytes = uint64_t(std::llround(s.max_gb * 1e9));
  return std::unique_ptr<CacheStore>(new CacheStore(s.dir, max_bytes, fd, warn));
}

std::unique_ptr<CacheStore> CacheStore::open_existing(const CacheSettings& s) {
  if (!s.enabled) return nullptr;
  if (s.dir.empty()) throw Error(fmt::format("start-up cache: no folder ({})", s.why_no_dir));
  std::error_code ec;
  if (!fs::exists(s.dir, ec)) return nullptr;
  if (!fs::is_directory(s.dir, ec)) throw Error(fmt::format("start-up cache folder {}: is not a folder", s.dir.string()));
  check_cache_folder(s.dir);
  // The lock file if a store made one; none: no store has written here.
  const int fd = ::open((s.dir / "lock").c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK);
  const uint64_t max_bytes = uint64_t(std::llround(s.max_gb * 1e9));
  return std::unique_ptr<CacheStore>(new CacheStore(s.dir, max_bytes, fd, {}));
}

CacheStore::CacheStore(fs::path dir, uint64_t max_bytes, int lock_fd, CacheWarn warn)
    : dir_(std::move(dir)), max_bytes_(max_bytes), lock_fd_(lock_fd), warn_(std::move(warn)) {}

CacheStore::~CacheStore() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void CacheStore::warn_once(const std::string& m) {
  std::lock_guard<std::mutex> lock(warn_mutex_);
  if (std::find(warned_.begin(), warned_.end(), m) != warned_.end()) return;
  warned_.push_back(m);
  if (warn_) warn_(m);
}

fs::path CacheStore::entry_path(const std::string& kind, const std::string& key) const {
  return dir_ / (kind + "-" + key + ".bin");
}

void CacheStore::remove_entry_locked(const fs::path& path) {
  std::error_code ec;
  fs::remove(path, ec);
  fs::path hits = path;
  hits.replace_extension(".hits");
  fs::remove(hits, ec);
}

namespace {

// What is wrong with the mapped entry of `size` bytes at base, "" if nothing: its header (magic,
// checksum, version, kind and key) and its payload's length and content hash. h gets the header.
std::string entry_fault(const void* base, size_t size, const std::string& kind, const std::string& key, Header& h) {
  std::memcpy(&h, base, sizeof h);
  const bool key_ok = std::string(h.kind, strnlen(h.kind, sizeof h.kind)) == kind &&
                      std::string(h.key, strnlen(h.key, sizeof h.key)) == key;
  if (std::memcmp(h.magic, kMagic, 8) != 0) return "not a bitsim cache entry (bad magic)";
  if (h.header_checksum != model::checksum64(&h, offsetof(Header, header_checksum))) return "corrupt header";
  if (h.version != kCacheVersion || h.header_bytes != kHeaderBytes || !key_ok) return "header of another entry or version";
  if (size != kHeaderBytes + h.payload_bytes)
    return fmt::format("truncated ({} bytes, the header says {})", size, kHeaderBytes + h.payload_bytes);
  return {};
}

// The payload's hash against the header's: empty if they agree.
std::string payload_fault(const void* base, const Header& h) {
  // 64 MB at a time, so that SIGINT / SIGTERM stops the check of a large entry promptly.
  model::ContentHash hash;
  const auto* payload = static_cast<const uint8_t*>(base) + kHeaderBytes;
  for (size_t at = 0; at < h.payload_bytes; at += kWritePiece) {
    check_stop();
    hash.update(payload + at, std::min<size_t>(kWritePiece, h.payload_bytes - at));
  }
  const auto d = hash.digest();
  if (d[0] != h.payload_hash[0] || d[1] != h.payload_hash[1]) return "corrupt payload (checksum mismatch)";
  return {};
}

// The stamp of an entry file whose payload was verified: the file (device, inode), its size,
// its modification time to the nanosecond, and the payload hash its header holds. The second
// line of the entry's .hits file ("verified DEV INO SIZE SEC NSEC HASH0 HASH1").
std::string verified_stamp(const struct stat& st, const Header& h) {
  return fmt::format("verified {} {} {} {} {} {:016x} {:016x}", uint64_t(st.st_dev), uint64_t(st.st_ino),
                     uint64_t(st.st_size), int64_t(st.st_mtim.tv_sec), int64_t(st.st_mtim.tv_nsec), h.payload_hash[0],
                     h.payload_hash[1]);
}

// The stamp recorded in a .hits file (its second line), empty if none.
std::string read_stamp(const fs::path& hits) {
  const int fd = open_regular(hits);
  if (fd < 0) return {};
  char buf[256] = {};
  const ssize_t k = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (k <= 0) return {};
  const std::string text(buf, size_t(k));
  const size_t nl = text.find('\n');
  if (nl == std::string::npos) return {};
  const size_t end = text.find('\n', nl + 1);
  return text.substr(nl + 1, end == std::string::npos ? std::string::npos : end - nl - 1);
}

// A modification time that no write can give the file: this second, and a nanosecond count
// drawn at random (the kernel stamps a write with its coarse clock, whose nanoseconds are
// multiples of its tick). After it, an unchanged stamp means nothing wrote the file.
struct timespec marked_now() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  struct timespec t {};
  ::clock_gettime(CLOCK_REALTIME, &t);
  t.tv_nsec = long(1 + rng() % 999'999'998);
  return t;
}

}  // namespace

std::optional<CacheStore::Payload> CacheStore::get(const std::string& kind, const std::string& key) {
  const fs::path path = entry_path(kind, key);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;  // a miss
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    warn_once(fmt::format("start-up cache: {} is not a regular file; left alone, running without that entry",
                          path.string()));
    return std::nullopt;
  }
  const size_t size = size_t(st.st_size);
  std::string fault;
  void* base = MAP_FAILED;
  Header h{};
  if (size < kHeaderBytes) {
    fault = fmt::format("truncated ({} bytes, shorter than the header)", size);
  } else {
    base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) fault = fmt::format("cannot be mapped ({})", errno_text());
  }
  char magic[sizeof kMagic] = {};
  const bool own = ::pread(fd, magic, sizeof magic, 0) == ssize_t(sizeof magic) && std::memcmp(magic, kMagic, sizeof magic) == 0;
  ::close(fd);
  std::shared_ptr<void> keep;
  if (base != MAP_FAILED) keep = std::shared_ptr<void>(base, [size](void* p) { ::munmap(p, size); });
  fs::path hits = path;
  hits.replace_extension(".hits");
  if (fault.empty()) fault = entry_fault(base, size, kind, key, h);
  // The payload is hashed unless this very file was verified before and not written since
  // (its stamp, read_stamp); docs/cache.md "Safety".
  if (fault.empty() && read_stamp(hits) != verified_stamp(st, h)) fault = payload_fault(base, h);
  Locked lock(mutex_, lock_fd_);
  if (!fault.empty() && !own) {
    // Without the magic the file is not provably the cache's: it is left as it is.
    warn_once(fmt::format("start-up cache: {} is not a bitsim cache entry (no magic); left alone, running without "
                          "that entry",
                          path.string()));
    return std::nullopt;
  }
  if (!fault.empty()) {
    warn_once(fmt::format("start-up cache: entry {} is {}; deleted, rebuilding it", path.string(), fault));
    // Delete it only if it is still the file we read (another process may have replaced it).
    struct stat now {};
    if (::stat(path.c_str(), &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev) remove_entry_locked(path);
    return std::nullopt;
  }
  // A hit: count it, make the entry the most recently used (its mtime, marked_now), and
  // record the verified stamp if the file system keeps the mark (else every read hashes).
  const struct timespec times[2] = {{0, UTIME_OMIT}, marked_now()};
  std::string text = std::to_string(read_hits(hits) + 1) + "\n";
  struct stat after {};
  if (::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0 && ::stat(path.c_str(), &after) == 0 &&
      after.st_ino == st.st_ino && after.st_dev == st.st_dev && after.st_size == st.st_size &&
      after.st_mtim.tv_sec == times[1].tv_sec && after.st_mtim.tv_nsec == times[1].tv_nsec)
    text += verified_stamp(after, h) + "\n";
  replace_file(hits, text);
  return Payload{std::move(keep), static_cast<uint8_t*>(base) + kHeaderBytes, size_t(h.payload_bytes)};
}

bool CacheStore::put(const std::string& kind, const std::string& key, const std::vector<model::ImagePart>& parts) {
  const fs::path path = entry_path(kind, key);
  if (kind.size() >= sizeof(Header::kind) || key.size() >= sizeof(Header::key))
    throw Error(fmt::format("start-up cache: kind '{}' or key '{}' too long", kind, key));
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const fs::path tmp = path.string() + fmt::format(".tmp.{}.{}.{:x}", ::getpid(), temp_counter_.fetch_add(1), rng());
  auto fail = [&](const std::string& why) {
    std::error_code ec;
    fs::remove(tmp, ec);
    warn_once(fmt::format("start-up cache: cannot write {} ({}); going on without storing it", path.string(), why));
    return false;
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fail(errno_text());
  Header h = entry_header(kind, key);
  model::ContentHash hash;
  bool stopped = false;
  // The header is a placeholder until the payload is written and hashed.
  bool ok = io::write_all(fd, &h, sizeof h) && write_payload(fd, parts, hash, stopped);
  if (ok) {
    seal(h, hash);
    ok = ::pwrite(fd, &h, sizeof h, 0) == ssize_t(sizeof h);
  }
  const std::string why = ok ? std::string() : errno_text();
  if (stopped) {
    ::close(fd);
    std::error_code ec;
    fs::remove(tmp, ec);  // the entry is abandoned, not broken: no warning
    return false;
  }
  if (::close(fd) != 0 && ok) return fail(errno_text());
  if (!ok) return fail(why);
  {
    Locked lock(mutex_, lock_fd_);
    std::error_code ec;
    if (fs::exists(fs::symlink_status(path, ec)) && !has_entry_magic(path)) {
      fs::remove(tmp, ec);
      warn_once(fmt::format("start-up cache: {} is there and is not a bitsim cache entry; left alone, not storing it",
                            path.string()));
      return false;
    }
    fs::rename(tmp, path, ec);
    if (ec) {
      fs::remove(tmp, ec);
      warn_once(fmt::format("start-up cache: cannot write {} ({}); going on without storing it", path.string(),
                            ec.message()));
      return false;
    }
    evict(path.filename().string());
  }
  return true;
}

void CacheStore::evict(const std::string& just_written) {
  struct Item {
    fs::path path;
    uint64_t bytes;
    fs::file_time_type used;
  };
  std::vector<Item> items;
  uint64_t total = 0;
  std::error_code ec;
  const auto stale = fs::file_time_type::clock::now() - std::chrono::hours(24);
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    std::error_code e0;
    if (classify(name) == FileClass::kTemp && e.is_regular_file(e0)) {
      // A temp file a day old was left by a process that died while writing it.
      std::error_code e1;
      if (e.last_write_time(e1) < stale && !e1) fs::remove(e.path(), e1);
      continue;
    }
    if (!is_own_entry(e)) continue;
    std::error_code e1, e2;
    const uint64_t bytes = e.file_size(e1);
    const auto used = e.last_write_time(e2);
    if (e1 || e2) continue;  // deleted meanwhile
    items.push_back({e.path(), bytes, used});
    total += bytes;
  }
  if (total <= max_bytes_) return;
  for (const Item& it : items) {
    if (it.path.filename() == just_written && it.bytes > max_bytes_) {
      // The new entry alone is over the bound: it goes, the others stay.
      warn_once(fmt::format("start-up cache: entry {} ({:.3f} GB) is larger than cache.max_gb ({:.3f} GB); not kept",
                            it.path.string(), it.bytes / 1e9, max_bytes_ / 1e9));
      remove_entry_locked(it.path);
      return;
    }
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.used < b.used; });
  for (const Item& it : items) {
    if (total <= max_bytes_) break;
    if (it.path.filename() == just_written) continue;
    remove_entry_locked(it.path);
    total -= it.bytes;
  }
}

CacheStore::Info CacheStore::info() const {
  Info info;
  info.dir = dir_;
  info.max_bytes = max_bytes_;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (!is_own_entry(e)) continue;
    std::error_code e1, e2;
    EntryInfo x;
    x.bytes = e.file_size(e1);
    x.last_used = e.last_write_time(e2);
    if (e1 || e2) continue;
    const std::string stem = e.path().stem().string();
    const size_t dash = stem.rfind('-');
    x.kind = dash == std::string::npos ? stem : stem.substr(0, dash);
    x.key = dash == std::string::npos ? std::string() : stem.substr(dash + 1);
    fs::path hits = e.path();
    hits.replace_extension(".hits");
    x.hits = read_hits(hits);
    info.total_bytes += x.bytes;
    info.entries.push_back(std::move(x));
  }
  std::sort(info.entries.begin(), info.entries.end(),
            [](const EntryInfo& a, const EntryInfo& b) { return a.last_used > b.last_used; });
  return info;
}

size_t CacheStore::clear() {
  Locked lock(mutex_, lock_fd_);
  size_t n = 0;
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const FileClass c = classify(e.path().filename().string());
    std::error_code e1;
    if (!e.is_regular_file(e1)) continue;
    if (c == FileClass::kEntry && has_entry_magic(e.path())) {
      ++n;
      doomed.push_back(e.path());
    } else if (c == FileClass::kHits || c == FileClass::kTemp) {
      doomed.push_back(e.path());
    }
  }
  for (const fs::path& p : doomed) fs::remove(p, ec);
  return n;
}

std::string format_cache_info(const CacheStore::Info& info) {
  std::string s = fmt::format("start-up cache  {}\n", info.dir.string());
  s += fmt::format("entries         {}, {:.3f} GB of at most {:.3f} GB (cache.max_gb)\n", info.entries.size(),
                   info.total_bytes / 1e9, info.max_bytes / 1e9);
  if (info.entries.empty()) return s;
  s += fmt::format("  {:<10} {:>12} {:>6}  {:<19}  {}\n", "kind", "MB", "hits", "last used (UTC)", "key");
  for (const auto& e : info.entries) {
    const auto sys = std::chrono::file_clock::to_sys(e.last_used);
    const std::time_t t = std::chrono::system_clock::to_time_t(sys);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    s += fmt::format("  {:<10} {:>12.3f} {:>6}  {:<19}  {}\n", e.kind, e.bytes / 1e6, e.hits, when, e.key);
  }
  return s;
}

}  // namespace bitsim::sim
