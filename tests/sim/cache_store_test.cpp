// The start-up cache's store (sim/cache_store.h): entries round-trip; a corrupt or truncated
// entry is warned about once, deleted and a miss; a file the cache cannot prove it wrote
// (its name and magic), or one that is not a regular file, is left alone and a folder that
// holds one of another name is refused; several stores (as several
// processes would) fill one folder at once; least recently used entries are evicted to the
// bound; an unusable folder is one warning and no store. Every test has its own folder.
#include "sim/cache_store.h"

#include <gtest/gtest.h>

#include "support/edit_byte.h"
#include "support/temp_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "base/error.h"

using namespace bitsim::sim;
namespace fs = std::filesystem;

namespace {

using bitsim::test::flip_byte;
using bitsim::test::TempDir;

CacheSettings settings(const fs::path& dir, double max_gb = 1.0) {
  CacheSettings s;
  s.enabled = true;
  s.dir = dir;
  s.max_gb = max_gb;
  return s;
}

std::vector<uint8_t> payload(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(g());
  return v;
}

std::vector<uint8_t> bytes_of(const CacheStore::Payload& p) { return {p.data, p.data + p.bytes}; }

struct Warnings {
  std::vector<std::string> list;
  CacheWarn fn() {
    return [this](const std::string& m) { list.push_back(m); };
  }
  // Exactly one warning (a fatal failure otherwise), and it names `what`.
  void expect_one(const std::string& what) const {
    ASSERT_EQ(list.size(), 1u);
    EXPECT_NE(list[0].find(what), std::string::npos) << list[0];
  }
};

}  // namespace

TEST(CacheStore, AnEntryRoundTripsAlignedAndCountsItsHits) {
  TempDir d;
  Warnings w;
  auto store = CacheStore::open(settings(d.path), w.fn());
  ASSERT_TRUE(store);
  EXPECT_FALSE(store->get("model", "k1"));
  const auto data = payload(5000, 1);
  ASSERT_TRUE(store->put("model", "k1", data));
  for (int i = 0; i < 3; ++i) {
    const auto p = store->get("model", "k1");
    ASSERT_TRUE(p);
    EXPECT_EQ(bytes_of(*p), data);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p->data) % 64, 0u);
  }
  const auto info = store->info();
  ASSERT_EQ(info.entries.size(), 1u);
  EXPECT_EQ(info.entries[0].kind, "model");
  EXPECT_EQ(info.entries[0].key, "k1");
  EXPECT_EQ(info.entries[0].hits, 3u);
  EXPECT_EQ(info.entries[0].bytes, 128u + 5000u);
  EXPECT_EQ(info.total_bytes, 128u + 5000u);
  const std::string text = format_cache_info(info);
  EXPECT_NE(text.find("model"), std::string::npos);
  EXPECT_NE(text.find(" 3 "), std::string::npos) << text;
  EXPECT_TRUE(w.list.empty());
  // A payload written through the private mapping does not reach the file.
  {
    auto p = store->get("model", "k1");
    p->data[0] ^= 0xFF;
  }
  EXPECT_EQ(bytes_of(*store->get("model", "k1")), data);
  EXPECT_EQ(store->clear(), 1u);
  EXPECT_FALSE(store->get("model", "k1"));
  EXPECT_TRUE(store->info().entries.empty());
}

TEST(CacheStore, ACorruptPayloadIsWarnedOnceDeletedAndAMiss) {
  TempDir d;
  Warnings w;
  auto store = CacheStore::open(settings(d.path), w.fn());
  ASSERT_TRUE(store->put("kvscales", "abc", payload(3000, 2)));
  const fs::path file = store->entry_path("kvscales", "abc");
  flip_byte(file, 128 + 1234, 0x10);
  EXPECT_FALSE(store->get("kvscales", "abc"));
  ASSERT_NO_FATAL_FAILURE(w.expect_one("corrupt payload"));
  EXPECT_NE(w.list[0].find(file.string()), std::string::npos) << w.list[0];
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(store->get("kvscales", "abc"));  // now a plain miss, no second warning
  EXPECT_EQ(w.list.size(), 1u);
  // Rebuilt, it is trusted again.
  ASSERT_TRUE(store->put("kvscales", "abc", payload(3000, 2)));
  EXPECT_EQ(bytes_of(*store->get("kvscales", "abc")), payload(3000, 2));
}

// A hit records the file's stamp (device, inode, size, a modification time no write can
// give it) beside its hit count; the next read hashes the payload only if the stamp changed.
// So a payload written in place after a hit is still found, at once, by its new mtime.
TEST(CacheStore, AnEntryWrittenInPlaceAfterAHitIsHashedAgain) {
  TempDir d;
  Warnings w;
  auto store = CacheStore::open(settings(d.path), w.fn());
  ASSERT_TRUE(store->put("model", "s", payload(4000, 5)));
  const fs::path file = store->entry_path("model", "s");
  ASSERT_TRUE(store->get("model", "s"));
  fs::path hits = file;
  hits.replace_extension(".hits");
  std::ifstream in(hits);
  std::string count, stamp;
  std::getline(in, count);
  std::getline(in, stamp);
  EXPECT_EQ(count, "1");
  EXPECT_EQ(stamp.rfind("verified ", 0), 0u) << stamp;
  ASSERT_TRUE(store->get("model", "s"));  // verified by its stamp, served
  flip_byte(file, 128 + 77, 0x01);        // at once: within the clock tick of the last hit
  EXPECT_FALSE(store->get("model", "s"));
  ASSERT_NO_FATAL_FAILURE(w.expect_one("corrupt payload"));
  EXPECT_FALSE(fs::exists(file));
}

// What the stamp trusts: a payload changed in place whose file gets back its exact stamp
// (the mtime to the nanosecond) is served unhashed; docs/cache.md says so.
TEST(CacheStore, AnUnchangedStampSkipsThePayloadsHash) {
  TempDir d;
  Warnings w;
  auto store = CacheStore::open(settings(d.path), w.fn());
  const auto data = payload(4000, 6);
  ASSERT_TRUE(store->put("model", "t", data));
  const fs::path file = store->entry_path("model", "t");
  ASSERT_TRUE(store->get("model", "t"));
  struct stat before {};
  ASSERT_EQ(::stat(file.c_str(), &before), 0);
  flip_byte(file, 128 + 10, 0x01);
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, file.c_str(), times, 0), 0);
  const auto p = store->get("model", "t");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->data[10], uint8_t(data[10] ^ 0x01));
  EXPECT_TRUE(w.list.empty());
  // Without the stamp (the .hits file gone) the same file is hashed and refused.
  fs::path hits = file;
  hits.replace_extension(".hits");
  fs::remove(hits);
  EXPECT_FALSE(store->get("model", "t"));
  ASSERT_NO_FATAL_FAILURE(w.expect_one("corrupt payload"));
}

TEST(CacheStore, ACorruptHeaderIsWarnedDeletedAndAMiss) {
  TempDir d;
  Warnings w;
  auto store = CacheStore::open(settings(d.path), w.fn());
  ASSERT_TRUE(store->put("model", "h", payload(100, 3)));
  flip_byte(store->entry_path("model", "h"), 20, 0x10);  // inside payload_bytes / the hash
  EXPECT_FALSE(store->get("model", "h"));
  ASSERT_NO_FATAL_FAILURE(w.expect_one("corrupt header"));
  EXPECT_FALSE(fs::exists(store->entry_path("model", "h")));
}

TEST(CacheStore, ATruncatedEntryIsWarnedDeletedAndAMiss) {
  TempDir d;
  Warnings w;
  auto store = CacheStore::open(settings(d.path), w.fn());
  for (size_t cut : {size_t(60), size_t(128 + 999)}) {
    w.list.clear();
    ASSERT_TRUE(store->put("model", "t", payload(2000, 4)));
    fs::resize_file(store->entry_path("model", "t"), cut);
    EXPECT_FALSE(store->get("model", "t")) << cut;
    ASSERT_EQ(w.list.size(), 1u) << cut;
    EXPECT_NE(w.list[0].find("truncated"), std::string::npos) << w.list[0];
    EXPECT_FALSE(fs::exists(store->entry_path("model", "t")));
  }
}

TEST(CacheStore, AnEntryUnderAnotherNameIsNotTrusted) {
  TempDir d;
  Warnings w;
  auto store = CacheStore::open(settings(d.path), w.fn());
  ASSERT_TRUE(store->put("model", "one", payload(100, 5)));
  fs::copy_file(store->entry_path("model", "one"), store->entry_path("model", "two"));
  EXPECT_FALSE(store->get("model", "two"));
  ASSERT_NO_FATAL_FAILURE(w.expect_one("another entry"));
  EXPECT_TRUE(store->get("model", "one"));
}

TEST(CacheStore, SeveralStoresFillOneFolderAtOnce) {
  TempDir d;
  constexpr int kStores = 4, kRounds = 6;
  std::vector<std::thread> threads;
  std::vector<std::vector<std::string>> warnings(kStores);
  std::vector<int> bad(kStores, 0);
  for (int t = 0; t < kStores; ++t) {
    threads.emplace_back([&, t] {
      // Each thread has its own store (its own lock file descriptor), as a process would.
      auto store = CacheStore::open(settings(d.path), [&, t](const std::string& m) { warnings[size_t(t)].push_back(m); });
      for (int r = 0; r < kRounds; ++r) {
        // Every thread writes and reads the same shared entries, plus one of its own.
        for (int k = 0; k < 3; ++k) {
          const std::string key = "shared" + std::to_string(k);
          const auto want = payload(200000 + size_t(k), uint32_t(k));
          if (auto p = store->get("model", key)) bad[size_t(t)] += bytes_of(*p) != want;
          else if (!store->put("model", key, want)) ++bad[size_t(t)];
        }
        store->put("own", std::to_string(t), payload(1000, uint32_t(100 + t)));
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kStores; ++t) {
    EXPECT_EQ(bad[size_t(t)], 0) << "store " << t;
    EXPECT_TRUE(warnings[size_t(t)].empty()) << warnings[size_t(t)].front();
  }
  Warnings w;
  auto store = CacheStore::open(settings(d.path), w.fn());
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(bytes_of(*store->get("model", "shared" + std::to_string(k))), payload(200000 + size_t(k), uint32_t(k)));
  EXPECT_EQ(store->info().entries.size(), size_t(3 + kStores));
  for (const auto& e : fs::directory_iterator(d.path))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();  // no temp file left
  EXPECT_TRUE(w.list.empty());
}

TEST(CacheStore, OneStoreServesSeveralThreadsAtOnce) {
  // One store shared by threads of one process (start-up writes the model entry on a
  // helper thread): its flock does not exclude them, its mutex must.
  TempDir d;
  Warnings w;
  auto store = CacheStore::open(settings(d.path), w.fn());
  ASSERT_TRUE(store);
  constexpr int kThreads = 4, kRounds = 8;
  std::vector<int> bad(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r)
        for (int k = 0; k < 3; ++k) {
          const std::string key = "shared" + std::to_string(k);
          const auto want = payload(150000 + size_t(k), uint32_t(k));
          if (auto p = store->get("model", key)) bad[size_t(t)] += bytes_of(*p) != want;
          else if (!store->put("model", key, want)) ++bad[size_t(t)];
          if (!store->put("own", std::to_string(t) + "x" + std::to_string(r), payload(500, uint32_t(t * 100 + r))))
            ++bad[size_t(t)];
        }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(bad[size_t(t)], 0) << "thread " << t;
  for (int t = 0; t < kThreads; ++t)
    for (int r = 0; r < kRounds; ++r)
      EXPECT_EQ(bytes_of(*store->get("own", std::to_string(t) + "x" + std::to_string(r))),
                payload(500, uint32_t(t * 100 + r)));
  EXPECT_EQ(store->info().entries.size(), size_t(3 + kThreads * kRounds));
  for (const auto& e : fs::directory_iterator(d.path))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  EXPECT_TRUE(w.list.empty());
}

TEST(CacheStore, LeastRecentlyUsedEntriesAreEvictedToTheBound) {
  TempDir d;
  Warnings w;
  // Room for two entries of 1000 payload bytes (1128 bytes each), not three.
  auto store = CacheStore::open(settings(d.path, 3000e-9), w.fn());
  ASSERT_EQ(store->max_bytes(), 3000u);
  ASSERT_TRUE(store->put("x", "a", payload(1000, 1)));
  ASSERT_TRUE(store->put("x", "b", payload(1000, 2)));
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(store->entry_path("x", "a"), now - std::chrono::hours(2));
  fs::last_write_time(store->entry_path("x", "b"), now - std::chrono::hours(1));
  ASSERT_TRUE(store->get("x", "a"));  // a is now the most recently used
  ASSERT_TRUE(store->put("x", "c", payload(1000, 3)));
  EXPECT_TRUE(fs::exists(store->entry_path("x", "a")));
  EXPECT_FALSE(fs::exists(store->entry_path("x", "b")));  // the least recently used
  EXPECT_TRUE(fs::exists(store->entry_path("x", "c")));
  EXPECT_LE(store->info().total_bytes, 3000u);
  EXPECT_TRUE(w.list.empty());
  // An entry larger than the whole bound is not kept, with a warning.
  ASSERT_TRUE(store->put("x", "big", payload(5000, 4)));
  EXPECT_FALSE(fs::exists(store->entry_path("x", "big")));
  ASSERT_NO_FATAL_FAILURE(w.expect_one("larger than cache.max_gb"));
  EXPECT_TRUE(fs::exists(store->entry_path("x", "a")));
}

TEST(CacheStore, AnUnusableFolderIsOneWarningAndNoStore) {
  TempDir d;
  fs::create_directories(d.path);
  const fs::path file = d.path / "a-file";
  std::ofstream(file) << "x";
  Warnings w;
  EXPECT_FALSE(CacheStore::open(settings(file / "cache"), w.fn()));  // under a regular file
  ASSERT_NO_FATAL_FAILURE(w.expect_one("running without the cache"));
  EXPECT_NE(w.list[0].find((file / "cache").string()), std::string::npos) << w.list[0];
  w.list.clear();
  EXPECT_FALSE(CacheStore::open(settings(file), w.fn()));  // a file, not a folder
  EXPECT_EQ(w.list.size(), 1u);
  w.list.clear();
  CacheSettings none;
  none.enabled = true;
  none.why_no_dir = "no HOME";
  EXPECT_FALSE(CacheStore::open(none, w.fn()));
  ASSERT_NO_FATAL_FAILURE(w.expect_one("no HOME"));
  w.list.clear();
  CacheSettings off = settings(d.path / "never");
  off.enabled = false;
  EXPECT_FALSE(CacheStore::open(off, w.fn()));  // --no-cache: silent, nothing created
  EXPECT_TRUE(w.list.empty());
  EXPECT_FALSE(fs::exists(d.path / "never"));
}

TEST(CacheSettings, FlagThenVariablesThenHomeDecideTheFolderAndTheBound) {
  std::map<std::string, std::string> env;
  auto lookup = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  CacheSettings s = resolve_cache_settings("", false, std::nullopt, lookup);
  EXPECT_TRUE(s.enabled);
  EXPECT_TRUE(s.dir.empty());
  EXPECT_FALSE(s.why_no_dir.empty());
  env["HOME"] = "/home/u";
  EXPECT_EQ(resolve_cache_settings("", false, std::nullopt, lookup).dir, fs::path("/home/u/.cache/bitsim"));
  env["XDG_CACHE_HOME"] = "/xdg";
  EXPECT_EQ(resolve_cache_settings("", false, std::nullopt, lookup).dir, fs::path("/xdg/bitsim"));
  env["BITSIM_CACHE_DIR"] = "/b";
  EXPECT_EQ(resolve_cache_settings("", false, std::nullopt, lookup).dir, fs::path("/b"));
  EXPECT_EQ(resolve_cache_settings("/flag", false, std::nullopt, lookup).dir, fs::path("/flag"));
  EXPECT_FALSE(resolve_cache_settings("/flag", true, std::nullopt, lookup).enabled);
  EXPECT_EQ(resolve_cache_settings("", false, std::nullopt, lookup).max_gb, kDefaultCacheMaxGb);
  env["BITSIM_CACHE_MAX_GB"] = "0.5";
  EXPECT_EQ(resolve_cache_settings("", false, std::nullopt, lookup).max_gb, 0.5);
  EXPECT_EQ(resolve_cache_settings("", false, 2.0, lookup).max_gb, 2.0);
  env["BITSIM_CACHE_MAX_GB"] = "lots";
  try {
    resolve_cache_settings("", false, std::nullopt, lookup);
    FAIL() << "a bad BITSIM_CACHE_MAX_GB was accepted";
  } catch (const bitsim::Error& e) {
    EXPECT_NE(std::string(e.what()).find("BITSIM_CACHE_MAX_GB"), std::string::npos) << e.what();
  }
  EXPECT_THROW(resolve_cache_settings("", false, -1.0, lookup), bitsim::Error);
}

TEST(CacheStore, TempFilesLeftByADeadWriterAreDeletedAfterADay) {
  TempDir d;
  auto store = CacheStore::open(settings(d.path), {});
  const fs::path old_tmp = d.path / "model-x.bin.tmp.99999.0.1", new_tmp = d.path / "model-y.bin.tmp.99999.0.2";
  std::ofstream(old_tmp) << "partial";
  std::ofstream(new_tmp) << "partial";
  fs::last_write_time(old_tmp, fs::file_time_type::clock::now() - std::chrono::hours(25));
  ASSERT_TRUE(store->put("x", "a", payload(10, 1)));
  EXPECT_FALSE(fs::exists(old_tmp));
  EXPECT_TRUE(fs::exists(new_tmp));  // may still be written by a live process
  EXPECT_EQ(store->info().entries.size(), 1u);  // temp files are not entries
  EXPECT_EQ(store->clear(), 1u);
  EXPECT_FALSE(fs::exists(new_tmp));  // clear deletes them all
}

namespace {

std::string open_error(const CacheSettings& s) {
  try {
    CacheStore::open(s, {});
  } catch (const bitsim::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// Not a regular file in an entry's place (a FIFO would hang a reader), or no magic: a warned
// miss, and neither get, put, evict, info nor clear touches it.
TEST(CacheStore, WhatItCannotProveItsOwnIsLeftAlone) {
  TempDir d;
  Warnings w;
  auto store = CacheStore::open(settings(d.path, 1e-6), w.fn());  // a 1,000-byte bound: every put evicts
  const fs::path fifo = store->entry_path("model", "f"), plain = store->entry_path("model", "p");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(plain) << "the user's own notes";
  const fs::path fifo_hits = d.path / "model-h.hits";
  ASSERT_TRUE(store->put("model", "h", payload(10, 1)));
  ASSERT_EQ(::mkfifo(fifo_hits.c_str(), 0600), 0);
  EXPECT_TRUE(store->get("model", "h"));  // its .hits is a FIFO: not read, not replaced
  EXPECT_FALSE(store->get("model", "f"));
  EXPECT_FALSE(store->get("model", "p"));
  ASSERT_EQ(w.list.size(), 2u);
  EXPECT_NE(w.list[0].find(fifo.string() + " is not a regular file; left alone"), std::string::npos) << w.list[0];
  EXPECT_NE(w.list[1].find(plain.string() + " is not a bitsim cache entry (no magic); left alone"), std::string::npos)
      << w.list[1];
  EXPECT_FALSE(store->put("model", "f", payload(10, 2)));
  EXPECT_FALSE(store->put("model", "p", payload(10, 3)));
  ASSERT_TRUE(store->put("model", "big", payload(5000, 4)));  // over the bound: evicts what it may
  const CacheStore::Info info = store->info();
  for (const auto& e : info.entries) EXPECT_TRUE(e.key != "f" && e.key != "p") << e.key;
  store->clear();
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(fs::is_fifo(fifo_hits));
  EXPECT_TRUE(fs::is_regular_file(plain));
  EXPECT_FALSE(fs::exists(store->entry_path("model", "h")));
}

// A folder with a file of another name, or a folder in it, is not a cache: refused, untouched.
TEST(CacheStore, AFolderThatIsNotACacheIsRefused) {
  for (const std::string foreign : {"thesis.bin", "notes.txt", "model.bin", "model-x.bin.tmp.notanumber", "sub"}) {
    TempDir d;
    fs::create_directories(d.path);
    if (foreign == "sub") fs::create_directories(d.path / foreign);
    else std::ofstream(d.path / foreign) << "mine";
    const std::string e = open_error(settings(d.path, 1e-9));
    EXPECT_NE(e.find("start-up cache folder " + d.path.string() + ": not a bitsim cache: it holds '" + foreign + "'"),
              std::string::npos)
        << e;
    EXPECT_TRUE(fs::exists(d.path / foreign));
    EXPECT_FALSE(fs::exists(d.path / "lock"));
    EXPECT_THROW(CacheStore::open_existing(settings(d.path)), bitsim::Error);
  }
  // What a cache holds is a cache.
  TempDir d;
  auto store = CacheStore::open(settings(d.path), {});
  ASSERT_TRUE(store->put("kvscales", "k1", payload(10, 1)));
  ASSERT_TRUE(store->get("kvscales", "k1"));
  std::ofstream(d.path / "model-y.bin.tmp.99999.0.2") << "partial";
  EXPECT_EQ(open_error(settings(d.path)), "");
}

// info and clear on a folder that does not exist create nothing.
TEST(CacheStore, OpeningAnExistingStoreCreatesNothing) {
  TempDir d;
  EXPECT_FALSE(CacheStore::open_existing(settings(d.path / "none")));
  EXPECT_FALSE(fs::exists(d.path / "none"));
  fs::create_directories(d.path / "empty");
  auto store = CacheStore::open_existing(settings(d.path / "empty"));
  ASSERT_TRUE(store);
  EXPECT_TRUE(store->info().entries.empty());
  EXPECT_EQ(store->clear(), 0u);
  EXPECT_TRUE(fs::is_empty(d.path / "empty"));
}
