#include "golden/shared_rows.h"

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

namespace bitsim::golden {

int SharedRows::take_chunks(const RowRange& fn, int rows) {
  int taken = 0;
  try {
    for (int b = next_.fetch_add(kChunkRows); b < rows; b = next_.fetch_add(kChunkRows), ++taken)
      fn(b, std::min(rows, b + kChunkRows));
  } catch (...) {
    // The run rethrows the first error once every thread has left it; the others stop.
    next_.store(rows);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
  return taken;
}

void SharedRows::run(int rows, int threads, const RowRange& rows_fn) {
  if (rows <= 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    next_.store(0);
    rows_ = rows;
    job_ = &rows_fn;
    error_ = nullptr;
    ++generation_;
  }
  changed_.notify_all();
  std::vector<std::thread> own;
  for (int i = 1; i < threads && (i + 1) * kChunkRows <= rows; ++i)
    own.emplace_back([&] { take_chunks(rows_fn, rows); });
  take_chunks(rows_fn, rows);
  for (auto& t : own) t.join();
  // Every chunk is taken; wait for the helpers still inside one, and let no other join.
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = nullptr;
  changed_.wait(lock, [&] { return helpers_in_job_ == 0; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

int SharedRows::help() {
  int taken = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  uint64_t seen = generation_;
  if (job_ != nullptr) seen = generation_ - 1;  // a run in progress: join it
  for (;;) {
    changed_.wait(lock, [&] { return closed_ || (job_ != nullptr && generation_ != seen); });
    if (closed_) return taken;
    seen = generation_;
    const RowRange* job = job_;
    const int rows = rows_;
    ++helpers_in_job_;
    lock.unlock();
    taken += take_chunks(*job, rows);
    lock.lock();
    if (--helpers_in_job_ == 0) changed_.notify_all();
  }
}

void SharedRows::open() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = false;
}

void SharedRows::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
  }
  changed_.notify_all();
}

}  // namespace bitsim::golden
