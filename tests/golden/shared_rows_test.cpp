// SharedRows (golden/shared_rows.h): every row of a run is done exactly once, whichever
// threads take its chunks; a helper takes chunks only between open() and close(); an
// exception in a chunk reaches the run.
#include "golden/shared_rows.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace bitsim::golden {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<int> run_counting(SharedRows& s, int rows, int threads) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(rows));
  s.run(rows, threads, [&](int b, int e) {
    for (int r = b; r < e; ++r) hits[size_t(r)].fetch_add(1);
  });
  std::vector<int> out;
  for (auto& h : hits) out.push_back(h.load());
  return out;
}

TEST(SharedRows, EveryRowOnceOnItsOwnThreads) {
  SharedRows s;
  for (int threads : {1, 2, 3})
    for (int rows : {1, 127, 128, 129, 1000, 4097}) {
      const std::vector<int> hits = run_counting(s, rows, threads);
      for (int r = 0; r < rows; ++r) ASSERT_EQ(hits[size_t(r)], 1) << "row " << r << " of " << rows << ", " << threads << " thread(s)";
    }
}

TEST(SharedRows, EveryRowOnceWithAHelper) {
  // The run's first chunk waits until the helper has done a chunk of its own, so the helper
  // certainly takes part; every row is still done once, over several runs in a row.
  SharedRows s;
  s.open();
  std::atomic<int> helper_chunks{0};
  std::thread::id helper_id;
  std::atomic<bool> helper_started{false};
  int returned = -1;
  std::thread helper([&] {
    helper_id = std::this_thread::get_id();
    helper_started = true;
    returned = s.help();
  });
  while (!helper_started) std::this_thread::yield();
  constexpr int kRows = 40 * SharedRows::kChunkRows + 5;
  for (int run = 0; run < 5; ++run) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(kRows));
    const int helped_before = helper_chunks.load();
    s.run(kRows, 1, [&](int b, int e) {
      if (std::this_thread::get_id() == helper_id) {
        helper_chunks.fetch_add(1);
      } else if (b == 0) {
        const auto until = Clock::now() + std::chrono::seconds(20);
        while (helper_chunks.load() == helped_before && Clock::now() < until) std::this_thread::yield();
      }
      for (int r = b; r < e; ++r) hits[size_t(r)].fetch_add(1);
    });
    EXPECT_GT(helper_chunks.load(), helped_before) << "run " << run << ": the helper took no chunk";
    for (int r = 0; r < kRows; ++r) ASSERT_EQ(hits[size_t(r)].load(), 1) << "run " << run << ", row " << r;
  }
  s.close();
  helper.join();
  EXPECT_EQ(returned, helper_chunks.load());
}

TEST(SharedRows, HelpReturnsWhenClosed) {
  SharedRows s;
  EXPECT_EQ(s.help(), 0);  // never opened: returns at once
  s.open();
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s.close();
  });
  EXPECT_EQ(s.help(), 0);  // no run meanwhile
  closer.join();
  // After close() a run is done by its own threads alone.
  const std::vector<int> hits = run_counting(s, 300, 1);
  for (int h : hits) EXPECT_EQ(h, 1);
}

TEST(SharedRows, AnExceptionInAChunkReachesTheRun) {
  SharedRows s;
  for (int threads : {1, 3}) {
    EXPECT_THROW(s.run(2000, threads,
                       [](int b, int) {
                         if (b == 5 * SharedRows::kChunkRows) throw std::runtime_error("chunk 5");
                       }),
                 std::runtime_error);
    const std::vector<int> hits = run_counting(s, 2000, threads);  // the next run is whole
    for (int h : hits) ASSERT_EQ(h, 1);
  }
}

}  // namespace
}  // namespace bitsim::golden
