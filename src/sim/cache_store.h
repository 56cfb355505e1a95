#pragma once
// The start-up cache: a persistent, content-addressed store of what start-up computes from
// the model and the config alone (the ternary model image, the K/V scales; sim/startup.h
// says what is keyed by what). docs/cache.md describes it for users.
//
// Where: CacheSettings (resolved by the CLI from --cache-dir, BITSIM_CACHE_DIR,
// $XDG_CACHE_HOME/bitsim, ~/.cache/bitsim; --no-cache turns it off).
// An entry is one file KIND-KEY.bin: a 128-byte header (magic, kCacheVersion, payload
// length, the payload's 128-bit ContentHash, kind, key, the header's own checksum) and
// the payload from byte 128. Entries are
//   - written atomically: a temp file in the same folder, renamed into place;
//   - verified on every read: a short or corrupt entry is reported once as a warning,
//     deleted and treated as a miss (the caller rebuilds it), never trusted;
//   - only its own: the cache touches (reads, counts, evicts, clears, replaces) only files it
//     can prove it wrote, by their name and, for an entry, the magic at its start; a file
//     without it, or one that is not a regular file, is warned about and left alone; a
//     folder that holds files of other names is refused;
//   - safe with several bitsim processes at once: readers need no lock (a rename replaces
//     a whole file; a mapped file stays valid after it is replaced or deleted); renames,
//     deletions, hit counts and eviction take an flock on the folder's `lock` file;
//   - bounded: after each store the least recently used entries (file mtime, touched on
//     every hit) are deleted until the total is within max_gb, and temp files a day old
//     (left by a process that died while writing) are deleted;
//   - counted: KIND-KEY.hits beside the entry holds its hit count (`bitsim cache info`).
// A folder that cannot be created or written makes open() return null after one warning:
// the run goes on without the cache. One store may be used by several threads at once
// (start-up writes the model entry on a helper thread while it calibrates).
#include <atomic>
#include <cstdint>
#include <mutex>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/model_file.h"

namespace bitsim::sim {

// The one version of everything the cache holds: bump it when the ternary quantization,
// the model image layout, the calibration pass, or any payload's format changes. It is part
// of every entry's key and header, so entries of another version are never read (they
// age out by LRU).
constexpr uint32_t kCacheVersion = 1;
constexpr double kDefaultCacheMaxGb = 4.0;
// The largest cache.max_gb taken (a million GB): its bytes must fit the 64-bit sizes.
constexpr double kCacheMaxGbLimit = 1e6;

struct CacheSettings {
  bool enabled = false;             // library default: off (the bitsim command turns it on)
  std::filesystem::path dir;        // empty with enabled: no usable location (warned at open)
  double max_gb = kDefaultCacheMaxGb;  // cache.max_gb: the LRU bound on the entries' total size
  std::string why_no_dir;           // when dir is empty: why
};

// The settings of the bitsim command: the cache is on unless no_cache; its folder is
// dir_flag, else $BITSIM_CACHE_DIR, else $XDG_CACHE_HOME/bitsim, else $HOME/.cache/bitsim;
// max_gb is max_gb_flag, else $BITSIM_CACHE_MAX_GB, else kDefaultCacheMaxGb. `env` looks a
// variable up (std::getenv in the command). A max_gb that is not a positive number (in
// decimal notation, base/parse_number.h) up to kCacheMaxGbLimit is an Error naming the
// option or variable.
using EnvLookup = std::function<const char*(const char*)>;
CacheSettings resolve_cache_settings(const std::string& dir_flag, bool no_cache, std::optional<double> max_gb_flag,
                                     const EnvLookup& env);

using CacheWarn = std::function<void(const std::string&)>;

class CacheStore {
 public:
  // Null if the settings turn the cache off, or (after one warning) if the folder cannot
  // be created or written.
  // A folder that holds anything the cache does not write (by name: KIND-KEY.bin, .hits,
  // temp files, lock) is not a cache: an Error naming it and that file.
  static std::unique_ptr<CacheStore> open(const CacheSettings& settings, const CacheWarn& warn);
  // The store of an existing folder, for `cache info` and `cache clear`, which create
  // nothing: null if the folder does not exist (or the settings turn the cache off).
  static std::unique_ptr<CacheStore> open_existing(const CacheSettings& settings);
  ~CacheStore();
  CacheStore(const CacheStore&) = delete;
  CacheStore& operator=(const CacheStore&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  uint64_t max_bytes() const { return max_bytes_; }

  // A verified entry's payload, mapped MAP_PRIVATE (writable, copy on write); `keep` keeps
  // the mapping alive.
  struct Payload {
    std::shared_ptr<void> keep;
    uint8_t* data = nullptr;  // 64-byte aligned
    size_t bytes = 0;
  };
  // nullopt on a miss; a corrupt or truncated entry is warned about, deleted and a miss.
  // A hit counts and makes the entry the most recently used.
  std::optional<Payload> get(const std::string& kind, const std::string& key);

  // Stores the concatenated parts (a part with data null is zeros) as entry (kind, key),
  // then evicts. False (after one warning) if it could not be written; the run goes on.
  bool put(const std::string& kind, const std::string& key, const std::vector<model::ImagePart>& parts);
  bool put(const std::string& kind, const std::string& key, const std::vector<uint8_t>& bytes) {
    return put(kind, key, {model::ImagePart{bytes.data(), bytes.size()}});
  }

  struct EntryInfo {
    std::string kind, key;
    uint64_t bytes = 0, hits = 0;
    std::filesystem::file_time_type last_used;
  };
  struct Info {
    std::filesystem::path dir;
    uint64_t total_bytes = 0, max_bytes = 0;
    std::vector<EntryInfo> entries;  // most recently used first
  };
  Info info() const;
  // Deletes every entry, hit count and left-over temp file; returns the entries deleted.
  size_t clear();

  // The file of entry (kind, key) (for tests that damage one).
  std::filesystem::path entry_path(const std::string& kind, const std::string& key) const;

 private:
  CacheStore(std::filesystem::path dir, uint64_t max_bytes, int lock_fd, CacheWarn warn);
  void warn_once(const std::string& message);
  void evict(const std::string& just_written);
  void remove_entry_locked(const std::filesystem::path& path);

  std::filesystem::path dir_;
  uint64_t max_bytes_;
  int lock_fd_;
  CacheWarn warn_;
  std::mutex warn_mutex_;  // warned_
  std::vector<std::string> warned_;
  std::atomic<uint64_t> temp_counter_{0};
  std::mutex mutex_;  // the flock sections, between this process's threads
};

// The folder listing of `bitsim cache info` as text lines (entries, sizes, hit counts).
std::string format_cache_info(const CacheStore::Info& info);

}  // namespace bitsim::sim
