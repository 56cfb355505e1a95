#pragma once
// FastBoard: the board in **fast** fidelity. The same boundaries as the clocked Board (four
// AXI DMAs with their register files, the engines' status registers, the DDR) but no
// SystemC and no clock: a batch of transfers moves whole buffers, the engines' results are
// computed with the fast kernels (or skipped in timing-only mode), and time advances by
// computed waits.
//
// The waits and register values are the clocked model's own: a batch's timing depends only
// on its shape (the register state of its channels, which writes come at which edges, on
// which page offsets and lengths, with which stream headers: docs/hw-timing.md, "idle
// board"), so the first batch of each shape runs once on the clocked Board (TimingOracle)
// and every later batch of that shape reuses its record: every change of every channel's
// register file (DmaChannelRegisters, the same class the clocked AxiDma uses) edge by
// edge, with addresses said relative to the batch, the descriptor status words and the
// DDR byte counts. The cycle counts are therefore the clocked model's, exactly; the equality test
// (tests/sim/fidelity_test.cpp) checks it on many shapes. A malformed stream is never
// cached: its batch runs on the clocked board, results and error registers included. A
// batch that is not a reusable shape (a malformed stream, a reset or stop while transfers
// run, an engine write, a CPU store, ...) runs live on the clocked board (LiveOracle): one
// run that pauses at each of the batch's reads and continues with the accesses since.
#include <cstdint>
#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hw/board.h"
#include "hw/fast/fast_engine.h"
#include "hw/memory/memory_model.h"
#include "hw/fast/fast_kernels.h"
#include "hw/memory/paged_memory.h"
#include "hw/fast/timing_oracle.h"
#include "model/derived_store.h"

namespace bitsim::hw {

// DDR contents in fast fidelity: the same store as the clocked DDR's (the decoded-weights
// cache is keyed by DDR address and listens for writes).
using FastMemory = PagedMemory;

struct FastBoardOptions {
  bool timing_only = false;  // skip the engines' arithmetic (results are not written)
  int threads = 2;           // host threads for the kernels
};

struct FastBoardStats {
  uint64_t batches = 0, cache_hits = 0, oracle_runs = 0, oracle_cycles = 0;
  // Under a memory whose reuse is checked (MemoryTiming::checks_reuse): records a replay
  // accepted (each also a cache hit) and records it rejected.
  uint64_t replays_accepted = 0, replays_rejected = 0;
  double oracle_wall_s = 0;
  uint64_t decoded_bytes = 0;  // memory held by the decoded-weights cache
};

class FastBoard {
 public:
  // Weight rows just written into DDR (rows x n at addr, CIRCUITS.md 2), decoded now into
  // the fast kernels' form, or mapped from `derived` under `name` where an earlier run kept
  // them (model/derived_store.h; null: decoded, not kept). The same rows as decoding them on
  // first use; a later write into them drops them as any decoded rows.
  void adopt_weights(const std::vector<model::PackedRowsSpan>& spans, model::DerivedStore* derived, const std::string& name);
  FastBoard(const BoardConfig& config, FastBoardOptions options = {});

  // A register access by the CPU at time t (ps). Reads see the state after every clock
  // edge strictly before t, as the clocked board's do.
  uint32_t read32(uint64_t addr, uint64_t t_ps);

  // Register reads at access times before this one see what a read sees now: the in-flight
  // batch is a settled record (a reusable shape, not a batch run live on the clocked board) and
  // none of its changes, transfer completions or its end falls before it. 0 when that is
  // not known. The host's poll loops use it to count the polls that would read the same
  // status without making them
  // (TokenLoop.PollsSkippedWhileTheFastBoardIsQuietAreCountedExactly).
  uint64_t quiet_until_ps() const {
    if (!batch_open_ || collecting_ || general_) return 0;
    return next_event_ps_;
  }
  void write32(uint64_t addr, uint32_t value, uint64_t t_ps);
  // The CPU's own loads and stores to DDR at time t. While a batch is in flight, a load of
  // bytes the batch writes sees them as the clocked board would at t, and a store becomes
  // part of the batch.
  void cpu_read(uint64_t addr, void* dst, size_t n, uint64_t t_ps);
  void cpu_write(uint64_t addr, const void* src, size_t n, uint64_t t_ps);

  // DDR contents without timing (loading images, tests).
  FastMemory& memory() { return memory_; }
  uint64_t bytes_read() const { return bytes_read_; }
  // The DRAM commands from edge 0 to time t (hw/memory/dram_ledger.h; ddr.model = ddr3, else
  // empty): every batch's as its clocked run gave them, and every idle gap's refreshes. The
  // same figure the clocked board's memory gives at t, for a t at which the board is quiet.
  DramActivity dram_activity(uint64_t t_ps) const;
  bool dma_has_sg(int id) const {
    return config_.engines->dma_sg(id, config_);
  }
  const FastBoardStats& stats() const { return stats_; }
  uint64_t period_ps() const { return period_; }
  // Transfers that completed (became visible) since the last call, in order.
  struct Completed {
    int dma, channel;
    uint64_t start, completion;
  };
  std::vector<Completed> take_completed() { return std::exchange(completed_, {}); }

  // The timing cache (every batch shape timed so far, with its register timeline) as bytes,
  // and back: a board that imports another's entries replays those shapes without running
  // the clocked board, with the same cycle counts. The bytes are for this build and this
  // BoardConfig only (sim/timing_cache.h keys them by both); import_timing throws
  // bitsim::Error on bytes that are not a whole export and then adds nothing.
  std::vector<uint8_t> export_timing() const;
  void import_timing(const uint8_t* data, size_t bytes);
  size_t timing_entries() const;
  size_t timing_entries_imported() const { return imported_; }

 private:
  // A register file value with its address fields said relative to the batch (so that a
  // cached batch replays on other buffers): each field is a literal, the value the channel
  // held when the batch was resolved, a descriptor of the chain, or that descriptor's
  // NXTDESC.
  struct Symbol {
    enum Kind : uint8_t { kLiteral, kResolved, kChainDesc, kChainNext } kind = kLiteral;
    uint32_t value = 0;  // literal value or chain index
  };
  struct RelativeRegs {
    DmaChannelRegisters regs;
    Symbol fields[5];  // curdesc, taildesc, addr, length, next_desc
  };
  struct Change {
    uint64_t time_ps;  // from when a read sees it, in the oracle's time (OracleRegisterChange)
    RelativeRegs regs;
  };
  struct ChannelTimeline {
    std::vector<Change> changes;
    std::vector<std::pair<uint64_t, uint64_t>> transfers;  // (start, completion), relative edges
    std::vector<uint32_t> desc_status;  // status words written back, in chain order
  };
  struct Cached {
    std::vector<std::array<ChannelTimeline, 2>> channels;  // by DMA
    uint64_t bytes_read = 0;
    uint64_t end_edge = 0;              // relative edge from which every channel is quiet
    std::vector<std::array<LaneRegisterView, 2>> engines;  // by engine, after the batch (counters: the batch's own)
    MemoryState memory_after;           // the memory's carried state after the batch,
    uint64_t memory_after_edge = 0;     // as of this relative edge
    DramActivity dram;                  // the DRAM commands up to then, and the ledger's tail
    std::vector<uint64_t> dram_tail;    // (OracleResult::dram, dram_tail)
    MemoryTrace trace;                  // the memory's requests and answers (checked reuse)
    uint64_t uses = 0;                  // times reused in this process (not exported)
  };
  // A batch shape's records: one, or under a memory whose reuse is checked, up to
  // kRecordsPerShape (each from another opening state), the last one accepted first; a new
  // record takes the place of the least used (the oldest of those).
  static constexpr size_t kRecordsPerShape = 8;
  // The record of `key` that holds from this batch's opening (checked by the memory's replay
  // where it checks reuse; `replayed` then holds the memory's side from this opening), or null.
  const Cached* reusable(const std::string& key, std::optional<MemoryReplay>& replayed);
  struct Segment {
    uint64_t addr;
    uint32_t bytes;
    uint64_t desc;  // descriptor address (SG) or 0
  };
  // Per channel: the resolved batch's register changes still to come (absolute edges).
  struct Channel {
    DmaChannelRegisters regs;
    uint64_t start_edge = 0;         // effective edge of a start not resolved yet
    DmaChannelRegisters at_resolve;  // the registers when the batch was resolved
    std::vector<Segment> chain;      // the chain of the resolved batch
    std::vector<uint32_t> chain_next;  // NXTDESC of each chain descriptor
    std::vector<std::pair<uint64_t, DmaChannelRegisters>> pending;  // (visible from, ps; registers)
    size_t next = 0;
    std::vector<std::pair<uint64_t, uint64_t>> transfers;  // absolute (start, completion) to report
    size_t reported = 0;
  };

  // DDR bytes the batch's writes replaced; `owner` (dma * 2 + channel, or -1 if not known):
  // the channel whose transfer's completion makes the new bytes final.
  struct Undo {
    uint64_t addr;
    std::vector<uint8_t> old;
    int owner = -1;
  };
  void write_dma(int d, uint32_t off, uint32_t v, uint64_t t_ps);
  uint32_t read_engine(uint64_t addr) const;
  bool batch_in_flight() const;
  void advance(uint64_t t_ps);
  void close_batch();
  uint64_t next_event() const;
  void add_action(OracleAction a);
  void resolve();
  std::vector<std::pair<int, int>> started_channels();
  bool walk_chains(const std::vector<std::pair<int, int>>& started, std::vector<std::vector<Segment>>& segs);
  void replay_cached(const Cached& entry, const std::vector<std::pair<int, int>>& started,
                     const MemoryReplay* replayed);
  LiveOracle& live();
  void enter_general();
  void after_live_probe(uint64_t t_ps);
  void close_general();
  std::vector<uint8_t> probe(OracleAction a);
  uint32_t probe_register(uint64_t addr, uint64_t t_ps);
  // Absolute time minus the oracle's time of the batch (its first start at kOracleFirstEdge).
  uint64_t oracle_shift_ps() const { return (batch_first_ - kOracleFirstEdge) * period_; }
  void undo_outputs();
  void write_output(uint64_t addr, const void* src, size_t n, int owner = -1);
  int owner_of(uint64_t addr, size_t n, const std::vector<std::pair<int, int>>& started) const;
  bool final_at(const Undo& u, uint64_t t_ps) const;
  std::string batch_key(const std::vector<std::pair<int, int>>& started) const;
  // The memory's carried state at the oracle's edge 0 of the batch (kOracleFirstEdge edges
  // before its first start): the state after the last batch, advanced over the idle gap.
  MemoryState opening_memory() const;
  // That edge 0 (absolute), never before the edge of the state the fast board carries.
  uint64_t opening_edge() const;
  Symbol symbol(const Channel& c, int field, uint32_t value) const;
  std::vector<Segment> chain(const DmaChannelRegisters& r) const;
  bool compute(const std::vector<std::vector<Segment>>& segs,
               const std::vector<std::pair<int, int>>& started, std::string& key);
  bool place_results(const std::vector<Segment>& out, const std::vector<uint8_t>& results);
  OracleBatch oracle_batch(bool backed) const;
  Cached run_oracle(const std::vector<std::pair<int, int>>& started, bool check_outputs);
  Cached record(const OracleResult& res) const;
  // `replayed`: the memory's side of the batch from this opening (checked reuse), in place of
  // the record's.
  void apply(const Cached& entry, const MemoryReplay* replayed = nullptr);
  RelativeRegs relative(const Channel& c, const DmaChannelRegisters& r) const;
  DmaChannelRegisters absolute(const Channel& c, const RelativeRegs& r) const;
  const fast::DecodedRows* decoded(uint64_t addr, int rows, int n);
  const fast::DecodedRows* install(uint64_t addr, int rows, int n, std::shared_ptr<fast::DecodedRows> dr);

  BoardConfig config_;
  FastBoardOptions options_;
  uint64_t period_;
  FastMemory memory_;
  std::vector<std::array<Channel, 2>> ch_;  // by DMA (the registry's)
  // The batch: the host's accesses from the first start on (absolute times) until every
  // channel is quiet again.
  std::vector<OracleAction> batch_actions_;
  bool collecting_ = false;   // starts written, not resolved yet
  bool batch_open_ = false;   // from the first start until the batch is over
  bool general_ = false;      // not a reusable shape: the batch runs live on the clocked board
  uint64_t batch_first_ = 0;  // the first start's effective edge
  uint64_t batch_end_edge_ = 0;             // absolute edge from which every channel is quiet
  uint64_t general_from_ps_ = 0;            // the latest access time when the batch became general
  uint64_t advanced_ps_ = 0;                // the latest access time
  uint64_t next_event_ps_ = 0;              // no change of the batch shows before this time
  uint64_t bytes_read_before_batch_ = 0;
  // The batch on the clocked board, run a step at a time (general batches, and reads inside
  // a batch that only the clocked board can answer); reset when the batch closes.
  std::unique_ptr<LiveOracle> live_;
  std::vector<std::array<size_t, 2>> live_reported_;  // transfers of the live run looked at so far
  std::vector<Undo> undo_;  // DDR bytes the batch's writes replaced
  std::vector<std::array<DmaChannelRegisters, 2>> open_regs_;  // every channel's registers when the batch opened
  std::vector<std::array<LaneRegisterView, 2>> engines_;          // the engines' registers on a quiet board
  std::vector<std::array<LaneRegisterView, 2>> pending_engines_;  // after the in-flight batch
  uint64_t bytes_read_ = 0;
  std::unordered_map<std::string, std::vector<Cached>> cache_;
  size_t imported_ = 0;  // entries import_timing added
  struct Decoded {
    uint64_t end;
    int rows, n;
    std::shared_ptr<fast::DecodedRows> rows_;  // shared with a layout being stored
  };
  std::map<uint64_t, Decoded> decoded_;  // by rows address
  fast::Workers workers_;
  std::vector<std::unique_ptr<FastEngine>> fast_engines_;  // by engine index (BoardConfig::engines)
  // The memory model's fast-side part, and the state it carries from batch to batch (as of
  // absolute edge memory_state_edge_).
  std::unique_ptr<MemoryTiming> memory_timing_;
  MemoryState memory_state_;
  uint64_t memory_state_edge_ = 0;
  // The DRAM commands (models that issue them): the total up to the ledger's start, and the
  // ledger from there (its start: the last batch's end, or an earlier batch's opening).
  std::optional<DramLedger> ledger_;
  DramActivity dram_total_;
  // The memory's carried state and DRAM commands as the batch resolved: a batch that turns
  // general after its record was applied runs live from them, not from its record's end.
  struct MemoryCarry {
    MemoryState state;
    uint64_t edge = 0;
    std::optional<DramLedger> ledger;
    DramActivity dram_total;
  };
  MemoryCarry before_batch_;
  // A batch's DRAM commands into the run's, before memory_state_ moves to its end: the gap
  // from the last state to the batch's opening, then the batch's, then its record's carry.
  void account_dram(const DramActivity& batch, const std::vector<uint64_t>& tail);
  FastBoardStats stats_;
  // Outputs the functional pass computed, written when the batch is accepted.
  std::vector<std::pair<uint64_t, std::vector<uint8_t>>> outputs_;
  std::vector<Completed> completed_;
};

}  // namespace bitsim::hw
