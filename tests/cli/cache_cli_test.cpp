// The start-up cache through the bitsim command (docs/cache.md): --cache-dir, --no-cache,
// `bitsim cache info|clear`, an unusable folder (one warning, the run goes on), a damaged
// entry (one warning, rebuilt), and two bitsim processes filling one folder at once. Every
// test uses its own temporary cache folder.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_bitsim.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using bitsim::testing::run_bitsim;

namespace {

// A folder for the test, created at once (tests/support/temp_dir.h names and removes it).
struct TempDir : ::bitsim::test::TempDir {
  TempDir() { std::filesystem::create_directories(path); }
};

const std::string kRun = "run --model synthetic:tiny --prompt \"Cached start\" --tokens 3 ";

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }
size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}
std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  return {std::istreambuf_iterator<char>(f), {}};
}
// The generated text of a run's stdout (between the markers).
std::string generated(const std::string& out) {
  const size_t a = out.find("--- generated text ---"), b = out.find("--- end of text ---");
  return a == std::string::npos || b == std::string::npos ? std::string() : out.substr(a, b - a);
}

}  // namespace

TEST(CacheCli, ASecondRunStartsFromTheCacheAndInfoAndClearSeeIt) {
  TempDir d;
  const std::string dir = (d.path / "c").string();
  const auto first = run_bitsim(kRun + "--cache-dir " + dir);
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_FALSE(contains(first.out, "(start-up cache)"));
  const auto second = run_bitsim(kRun + "--cache-dir " + dir);
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_TRUE(contains(second.out, "load ")) << second.out;
  EXPECT_EQ(count(second.out, "(start-up cache)"), 2u) << second.out;  // the model and the K/V scales
  EXPECT_TRUE(contains(second.out, "3 of 3 tokens bit-identical") || contains(second.out, "bit-identical")) << second.out;
  EXPECT_EQ(generated(second.out), generated(first.out));
  EXPECT_FALSE(contains(second.err, "warning"));
  // Every batch shape's timing from the first run: nothing on the clocked board.
  EXPECT_TRUE(contains(first.out, "(0 shapes from the start-up cache)")) << first.out;
  EXPECT_FALSE(contains(second.out, "(0 shapes from the start-up cache)")) << second.out;
  EXPECT_TRUE(contains(second.out, ", 0 run once on the clocked board")) << second.out;

  const auto info = run_bitsim("cache info --json --cache-dir " + dir);
  ASSERT_EQ(info.code, 0) << info.err;
  const auto j = nlohmann::json::parse(info.out);
  EXPECT_EQ(j["schema"], "bitsim.cache/1");
  // The model, the K/V scales, the batch timings, the executable's content hash and the three
  // layouts derived from the model (golden codes, packed image, decoded rows).
  ASSERT_EQ(j["entries"].size(), 7u);
  int layouts = 0;
  for (const auto& e : j["entries"]) {
    EXPECT_TRUE(e["kind"] == "model" || e["kind"] == "kvscales" || e["kind"] == "timing" || e["kind"] == "filehash" ||
                e["kind"] == "layout")
        << e.dump();
    layouts += e["kind"] == "layout";
    EXPECT_EQ(e["hits"], 1) << e.dump();
    EXPECT_GT(e["bytes"].get<uint64_t>(), e["kind"] == "filehash" ? 32u : 128u);
  }
  const auto text = run_bitsim("cache info --cache-dir " + dir);
  EXPECT_EQ(layouts, 3);
  EXPECT_TRUE(contains(text.out, "entries         7")) << text.out;
  const auto clear = run_bitsim("cache clear --cache-dir " + dir);
  ASSERT_EQ(clear.code, 0) << clear.err;
  EXPECT_TRUE(contains(clear.out, "deleted 7 entries")) << clear.out;
  EXPECT_EQ(nlohmann::json::parse(run_bitsim("cache info --json --cache-dir " + dir).out)["entries"].size(), 0u);
}

TEST(CacheCli, TheVariableMovesTheCacheAndNoCacheBypassesIt) {
  TempDir d;
  const fs::path via_env = d.path / "env";
  const auto r = run_bitsim(kRun, "BITSIM_CACHE_DIR=" + via_env.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(via_env / "lock"));
  const fs::path never = d.path / "never";
  const auto n = run_bitsim(kRun + "--no-cache --cache-dir " + never.string());
  ASSERT_EQ(n.code, 0) << n.err;
  EXPECT_FALSE(fs::exists(never));
  EXPECT_FALSE(contains(n.out, "(start-up cache)"));
  EXPECT_FALSE(contains(n.err, "warning"));
  // --no-cache also ignores a filled cache.
  const auto m = run_bitsim(kRun + "--no-cache", "BITSIM_CACHE_DIR=" + via_env.string());
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_FALSE(contains(m.out, "(start-up cache)"));
}

TEST(CacheCli, AnUnwritableHomeIsOneWarningAndTheRunGoesOn) {
  TempDir d;
  const fs::path file = d.path / "home-is-a-file";
  std::ofstream(file) << "x";
  // As in a CI job whose HOME cannot hold ~/.cache: no variable, HOME unusable.
  const auto r = run_bitsim(kRun, "BITSIM_CACHE_DIR= XDG_CACHE_HOME= HOME=" + file.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count(r.err, "warning"), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "running without the cache")) << r.err;
  EXPECT_TRUE(contains(r.out, "bit-identical")) << r.out;
  const auto bad = run_bitsim(kRun + "--cache-max-gb 0");
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(contains(bad.err, "--cache-max-gb")) << bad.err;
}

TEST(CacheCli, ADamagedEntryIsOneWarningAndRebuilt) {
  TempDir d;
  const fs::path dir = d.path / "c";
  ASSERT_EQ(run_bitsim(kRun + "--cache-dir " + dir.string()).code, 0);
  fs::path entry;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("kvscales-", 0) == 0 && e.path().extension() == ".bin") entry = e.path();
  ASSERT_FALSE(entry.empty());
  fs::resize_file(entry, fs::file_size(entry) - 1);
  const auto r = run_bitsim(kRun + "--cache-dir " + dir.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count(r.err, "warning"), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "truncated")) << r.err;
  EXPECT_EQ(count(r.out, "(start-up cache)"), 1u) << r.out;  // the model only; the scales were recomputed
  EXPECT_TRUE(contains(r.out, "bit-identical")) << r.out;
  const auto again = run_bitsim(kRun + "--cache-dir " + dir.string());
  EXPECT_EQ(count(again.out, "(start-up cache)"), 2u) << again.out;
  EXPECT_FALSE(contains(again.err, "warning")) << again.err;
}

TEST(CacheCli, TwoProcessesFillOneCacheAtOnce) {
  TempDir d;
  const fs::path dir = d.path / "c";
  const std::string one = std::string(BITSIM_BINARY) + " " + kRun + "--cache-dir " + dir.string();
  const fs::path o1 = d.path / "o1", o2 = d.path / "o2", e1 = d.path / "e1", e2 = d.path / "e2";
  const std::string cmd = "(" + one + " >" + o1.string() + " 2>" + e1.string() + "; echo $? >" + o1.string() +
                          ".rc) & (" + one + " >" + o2.string() + " 2>" + e2.string() + "; echo $? >" +
                          o2.string() + ".rc) & wait";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(read_file(o1.string() + ".rc"), "0\n") << read_file(e1);
  EXPECT_EQ(read_file(o2.string() + ".rc"), "0\n") << read_file(e2);
  EXPECT_FALSE(contains(read_file(e1), "warning")) << read_file(e1);
  EXPECT_FALSE(contains(read_file(e2), "warning")) << read_file(e2);
  EXPECT_EQ(generated(read_file(o1)), generated(read_file(o2)));
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_FALSE(contains(e.path().filename().string(), ".tmp.")) << e.path();
  const auto third = run_bitsim(kRun + "--cache-dir " + dir.string());
  ASSERT_EQ(third.code, 0) << third.err;
  EXPECT_EQ(count(third.out, "(start-up cache)"), 2u) << third.out;
  EXPECT_FALSE(contains(third.err, "warning")) << third.err;
  EXPECT_EQ(generated(third.out), generated(read_file(o1)));
}

TEST(CacheCli, EvalUsesTheCacheWithTheSameScores) {
  TempDir d;
  const fs::path dir = d.path / "c", text = d.path / "text.txt";
  std::ofstream(text) << "In the beginning the cache was empty, and the start-up computed everything again. "
                         "Then the second run found the model and its scales where the first had left them.";
  const std::string eval = "eval --model synthetic:tiny --text " + text.string() + " --cache-dir " + dir.string() +
                           " --window 64 --json --quiet";
  const auto first = run_bitsim(eval);
  ASSERT_EQ(first.code, 0) << first.err;
  const auto second = run_bitsim(eval);
  ASSERT_EQ(second.code, 0) << second.err;
  const auto a = nlohmann::json::parse(first.out), b = nlohmann::json::parse(second.out);
  EXPECT_EQ(a["rows"], b["rows"]);
  const auto info = nlohmann::json::parse(run_bitsim("cache info --json --cache-dir " + dir.string()).out);
  ASSERT_EQ(info["entries"].size(), 2u) << info.dump();
  for (const auto& e : info["entries"]) EXPECT_EQ(e["hits"], 1) << e.dump();
}

// The cases through the command: a FIFO in an entry's place does not hang a run or
// `cache info`; a folder with a user's file is refused and the file kept; info and clear of a
// folder that does not exist create nothing.
TEST(CacheCli, OnlyItsOwnFilesAreTouchedAndInfoAndClearCreateNothing) {
  TempDir d;
  const fs::path dir = d.path / "c";
  ASSERT_EQ(run_bitsim(kRun + "--cache-dir " + dir.string()).code, 0);
  fs::path entry;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("model-", 0) == 0) entry = e.path();
  ASSERT_FALSE(entry.empty());
  fs::remove(entry);
  ASSERT_EQ(::mkfifo(entry.c_str(), 0600), 0);
  const auto r = run_bitsim(kRun + "--cache-dir " + dir.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "is not a regular file; left alone")) << r.err;
  EXPECT_TRUE(contains(r.out, "bit-identical")) << r.out;
  const auto info = run_bitsim("cache info --cache-dir " + dir.string());
  EXPECT_EQ(info.code, 0) << info.err;
  EXPECT_TRUE(fs::is_fifo(entry));

  const fs::path c2 = d.path / "c2";
  fs::create_directories(c2);
  std::ofstream(c2 / "thesis.bin") << "four years";
  const auto evict = run_bitsim(kRun + "--cache-dir " + c2.string() + " --cache-max-gb 0.000002");
  EXPECT_EQ(evict.code, 2) << evict.err;
  EXPECT_TRUE(contains(evict.err, "not a bitsim cache: it holds 'thesis.bin'")) << evict.err;
  EXPECT_EQ(read_file(c2 / "thesis.bin"), "four years");
  for (const std::string sub : {"info", "clear"}) {
    EXPECT_EQ(run_bitsim("cache " + sub + " --cache-dir " + c2.string()).code, 2) << sub;
    EXPECT_EQ(read_file(c2 / "thesis.bin"), "four years");
    const fs::path none = d.path / ("none-" + sub);
    const auto n = run_bitsim("cache " + sub + " --cache-dir " + none.string());
    EXPECT_EQ(n.code, 0) << n.err;
    EXPECT_FALSE(fs::exists(none)) << sub << " created " << none;
  }
}
