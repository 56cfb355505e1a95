#pragma once
// SharedRows: the rows of the golden reference's matvecs, in chunks that the thread running
// the matvec, its own extra threads, and any thread that lends itself (help()) take in turn.
//
// Why: with the check on, the board's step and the golden reference's step run at the same
// time, one core each (sim/board_run.cpp). The board's step is the shorter of the two; its
// thread then calls help() and takes rows of the golden reference's remaining matvecs on
// its own core until the golden step is done, instead of waiting for it. Only a thread that
// has finished its own work helps, so no core is ever asked for more threads than it has
// (extra threads on a busy core make every matvec wait for a descheduled chunk).
//
// The arithmetic does not move: every row's sum is the same plain loop on whichever thread
// takes its chunk, and each row is written once (SharedRows.EveryRowOnceWithAHelper). The
// result never depends on who helped.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>

namespace bitsim::golden {

class SharedRows {
 public:
  using RowRange = std::function<void(int row_begin, int row_end)>;
  static constexpr int kChunkRows = 128;

  // Runs rows_fn over rows [0, rows) in chunks of kChunkRows, on this thread, on `threads`-1
  // threads of its own, and on any thread inside help() meanwhile; returns when every chunk
  // is done. One run() at a time (the golden reference's step is sequential). An exception
  // from rows_fn, on any of those threads, is rethrown here once they have all left the run.
  void run(int rows, int threads, const RowRange& rows_fn);

  // Takes chunks of the runs published meanwhile until close() is called; returns at once
  // if it was already called. For a thread whose own work is done. Returns the chunks it took.
  int help();
  // Before a golden step that helpers may join: help() waits for runs again.
  void open();
  // After that step (also when it throws): every help() returns.
  void close();

 private:
  int take_chunks(const RowRange& fn, int rows);

  std::mutex mutex_;
  std::condition_variable changed_;
  const RowRange* job_ = nullptr;  // the run in progress, while helpers may join it
  int rows_ = 0;
  uint64_t generation_ = 0;  // counts runs: a helper joins each run at most once
  int helpers_in_job_ = 0;
  bool closed_ = true;
  std::exception_ptr error_;  // the first exception of a run's rows_fn, on any thread
  std::atomic<int> next_{0};  // first row of the next chunk to take
};

}  // namespace bitsim::golden
