#pragma once
// FastBoard: the board in **fast** fidelity. The same boundaries as the clocked Board (four
// AXI DMAs with their register files, the engines' status registers, the DDR) but no
// SystemC and no clock: a batch of transfers moves whole buffers, the engines' results are
// computed with the fast kernels (or skipped in timing-only mode), and time advances by
// computed waits.
//
// The waits are the clocked model's own: a batch's timing depends only on its shape (which
// channels start, at which edge offsets, on which page offsets and lengths, with which
// stream headers: docs/hw-timing.md, "idle board"), so the first batch of each shape runs
// once on the clocked Board (TimingOracle) and every later batch of that shape reuses its
// completion cycles, DMASR values, S2MM lengths, descriptor status words and DDR byte
// counts. The cycle counts are therefore the clocked model's, exactly; the equality test
// (tests/sim/fidelity_test.cpp) checks it on many shapes. A malformed stream is never
// cached: its batch runs on the clocked board, results and error registers included.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hw/board.h"
#include "hw/fast_kernels.h"
#include "hw/timing_oracle.h"

namespace bitsim::hw {

// DDR contents in fast fidelity: 512 MiB allocated lazily in 1 MiB pages, with a write
// listener (the decoded-weights cache is keyed by DDR address and invalidated on writes).
class FastMemory {
 public:
  explicit FastMemory(uint64_t size_bytes);
  void read(uint64_t addr, void* dst, size_t n) const;
  void write(uint64_t addr, const void* src, size_t n);
  // A pointer to n contiguous bytes if they lie in one page, else nullptr.
  const uint8_t* span(uint64_t addr, size_t n) const;
  uint64_t size() const { return size_; }
  void set_write_listener(std::function<void(uint64_t, size_t)> f) { listener_ = std::move(f); }

 private:
  static constexpr uint64_t kPage = 1ull << 20;
  void check(uint64_t addr, size_t n, const char* what) const;
  uint64_t size_;
  mutable std::vector<std::unique_ptr<uint8_t[]>> pages_;
  std::function<void(uint64_t, size_t)> listener_;
};

struct FastBoardOptions {
  bool timing_only = false;  // skip the engines' arithmetic (results are not written)
  int threads = 2;           // host threads for the kernels
};

struct FastBoardStats {
  uint64_t batches = 0, cache_hits = 0, oracle_runs = 0, oracle_cycles = 0;
  double oracle_wall_s = 0;
  uint64_t decoded_bytes = 0;  // memory held by the decoded-weights cache
};

class FastBoard {
 public:
  FastBoard(const BoardConfig& config, FastBoardOptions options = {});

  // A register access by the CPU at time t (ps). Reads see the state after every clock
  // edge strictly before t, as the clocked board's do.
  uint32_t read32(uint64_t addr, uint64_t t_ps);
  void write32(uint64_t addr, uint32_t value, uint64_t t_ps);

  FastMemory& memory() { return memory_; }
  uint64_t bytes_read() const { return bytes_read_; }
  bool dma_has_sg(int id) const { return id >= 2 ? config_.attention_dma_sg : config_.matmul_dma_sg; }
  const FastBoardStats& stats() const { return stats_; }
  uint64_t period_ps() const { return period_; }
  // Transfers that completed (became visible) since the last call, in order.
  struct Completed {
    int dma, channel;
    uint64_t start, completion;
  };
  std::vector<Completed> take_completed() { return std::exchange(completed_, {}); }

 private:
  struct Channel {
    bool sg = false, s2mm = false;
    uint32_t dmacr = dma_reg::kCrResetValue, dmasr = 1, curdesc = 0, taildesc = 0, addr = 0, length = 0;
    uint64_t next_desc = 0;
    bool started = false;         // start written, batch not resolved yet
    uint64_t start_edge = 0;
    bool busy = false;            // resolved, completes at completion_edge
    bool completes = true;
    uint64_t completion_edge = 0;
    uint32_t final_dmasr = 0;
  };
  struct CachedChannel {
    bool completes = true;
    uint64_t completion = 0;
    uint32_t dmasr = 0, s2mm_length = 0;
    std::vector<uint32_t> desc_status;  // status words written back, in chain order
  };
  struct Cached {
    std::vector<CachedChannel> channels;  // in the batch's channel order
    uint64_t bytes_read = 0;
  };
  struct Segment {
    uint64_t addr;
    uint32_t bytes;
    uint64_t desc;  // descriptor address (SG) or 0
  };

  Channel& channel(int dma, int ch) { return ch_[dma][ch]; }
  void resolve();
  std::vector<Segment> chain(const Channel& c) const;
  bool compute(const std::vector<std::vector<Segment>>& segs,
               const std::vector<std::pair<int, int>>& started, std::string& key);
  void run_oracle(const std::vector<std::pair<int, int>>& started, const std::vector<std::vector<Segment>>& segs,
                  uint64_t first, bool cache, const std::string& key);
  const fast::DecodedRows* decoded(uint64_t addr, int rows, int n);

  BoardConfig config_;
  FastBoardOptions options_;
  uint64_t period_;
  FastMemory memory_;
  Channel ch_[4][2];
  uint32_t engine_regs_[2][2][9] = {};
  uint64_t bytes_read_ = 0;
  std::unordered_map<std::string, Cached> cache_;
  struct Decoded {
    uint64_t end;
    int rows, n;
    std::unique_ptr<fast::DecodedRows> rows_;
  };
  std::map<uint64_t, Decoded> decoded_;  // by rows address
  fast::Workers workers_;
  FastBoardStats stats_;
  // Outputs the functional pass computed, written when the batch is accepted.
  std::vector<std::pair<uint64_t, std::vector<uint8_t>>> outputs_;
  std::vector<Completed> completed_;
};

}  // namespace bitsim::hw
