#pragma once
// TimingOracle: runs one batch of DMA transfers on the clocked Board (cycle fidelity) from
// an idle board, and reports what the fast fidelity needs to reproduce it exactly: each
// channel's completion cycle relative to the batch's first start, the final DMASR and
// S2MM_LENGTH values, the bytes the PL read from DDR, and every byte the PL wrote.
//
// A batch is what the host starts between two quiescent points: the register writes from
// the first start (LENGTH or TAILDESC) on, at known times, from a known register state of
// every channel. The oracle records every change of every channel's register file, edge
// by edge, so that the fast fidelity answers a register read at any time of the batch with
// the clocked board's value. Every call of the
// token loop starts on an idle board (the driver waits for all of its channels), and an
// idle board is always in the same state (empty FIFOs, a full DDR bucket, arbiters at slot
// 0: docs/hw-timing.md) apart from the state its memory model carries across an idle gap
// (hw/memory/memory_model.h; empty for wall and latency-bandwidth, the open rows and refresh phase for ddr3), which the batch opens with. So the
// batch's timing depends only on its configuration, the start offsets, the buffers' page
// offsets and lengths, the stream headers' shapes and the memory's carried state: what the
// fast fidelity's cache key holds, or, for the state of a memory that checks reuse (ddr3),
// what its replay of the record's memory trace checks (MemoryTiming::replay).
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "hw/board.h"
#include "hw/circuits/engine_regs.h"

namespace bitsim::hw {

// How the oracle drives its clocked board (docs/hw-timing.md, "Two ways to drive the
// board"): in the edge loop (hw/edge_loop.h: the same modules and their edge functions in a
// plain loop), or by SystemC's scheduler, the reference the loop is tested against.
enum class OracleDriver : uint8_t { kEdgeLoop, kSystemC };

// One access of the batch's host program, at its time relative to the batch's time origin
// (the first start's effective edge is edge kOracleFirstEdge of the oracle's run).
struct OracleAction {
  enum class Kind : uint8_t {
    kWrite,          // register write: addr, value
    kCpuStore,       // the CPU's store to DDR: addr, bytes
    kProbeRegister,  // a register read whose value the caller wants (OracleResult::probes)
    kProbeMemory,    // a DDR load whose bytes the caller wants: addr, size
  };
  Kind kind = Kind::kWrite;
  uint64_t time_ps = 0;
  uint64_t addr = 0;
  uint32_t value = 0;
  uint64_t size = 0;
  std::vector<uint8_t> bytes;
};
constexpr uint64_t kOracleFirstEdge = 64;

struct MemoryRegion {
  uint64_t addr = 0;
  std::vector<uint8_t> bytes;
};

// The register file of one channel after a clock edge or a register write of the batch.
struct OracleRegisterChange {
  uint64_t time_ps = 0;  // a read at this time (oracle time) or later sees it: edge c at c * period + 1
  bool at_write = false;  // made by a register write (else by a clock edge)
  DmaChannelRegisters regs;
};

struct OracleChannelResult {
  std::vector<OracleRegisterChange> changes;                // in edge order
  std::vector<std::pair<uint64_t, uint64_t>> transfers;     // (start, completion) edges, relative
};

struct OracleResult {
  std::vector<std::array<OracleChannelResult, 2>> channels;  // [dma][MM2S, S2MM], by the registry's DMAs
  uint64_t bytes_read = 0;      // DDR bytes read by the PL during the batch
  uint64_t cycles = 0;          // cycles simulated from the first start to the last register change
  std::vector<MemoryRegion> writes;  // every byte range the PL wrote, with its final contents
  std::vector<std::array<LaneRegisterView, 2>> engines;  // [engine][lane] after the batch
  uint64_t quiet_edge = 0;  // first edge (relative) from which every channel is quiet, when settled
  bool settled = true;      // every channel quiet at the end (false: a probe ended the run)
  std::vector<std::vector<uint8_t>> probes;  // the probes' values, in program order
  // The memory's carried state (hw/memory/memory_model.h) at the end of the run, as of edge
  // memory_after_edge (relative); empty for the shipped memory models.
  MemoryState memory_after;
  uint64_t memory_after_edge = 0;
  // The DRAM commands of the run up to memory_after_edge (hw/memory/dram_ledger.h; empty for
  // models without commands), and its ledger's record (DramLedger::record: its head and what
  // it carries past that edge, relative to the device cycle of the oracle's edge 0).
  DramActivity dram;
  std::vector<uint64_t> dram_tail;
  // The memory's requests and answers (OracleBatch::memory_trace; else empty).
  MemoryTrace memory_trace;
  OracleDriver driver = OracleDriver::kSystemC;  // the driver that ran the batch
};

struct OracleBatch {
  std::vector<std::array<DmaChannelRegisters, 2>> initial;  // every channel's register file when the batch opens (by DMA)
  std::vector<MemoryRegion> memory;   // every region the batch reads (streams, descriptors, buffers)
  // Or (run_timing_oracle) the DDR the batch reads, as it is for the whole run: the clocked
  // board's DDR reads it where it has not written (PagedMemory::set_backing), instead of a
  // copy of the regions; `memory` is written over it.
  const PagedMemory* backing = nullptr;
  // false: the engines skip their arithmetic (Board::skip_arithmetic): a timing-only run, whose
  // results are zeros; every edge is the same.
  bool arithmetic = true;
  std::vector<OracleAction> actions;  // in program order; the first is the first start
  MemoryState memory_state;           // the memory's carried state at the oracle's edge 0
  bool memory_trace = false;          // record the memory's trace (MemoryTiming::replay)
  // The edge loop, unless the board has a memory model it cannot drive (Memory::has_edge)
  // or an action at time 0: those run under SystemC. Both give the same result.
  OracleDriver driver = OracleDriver::kEdgeLoop;
  // A batch without probes runs until every channel is quiet; a batch with probes ends at its
  // last action.
};

// Runs the batch until every DMA channel is quiet again (or as OracleBatch says), with the
// batch's driver. Throws bitsim::Error if it does not settle within `max_cycles`.
OracleResult run_timing_oracle(const BoardConfig& config, const OracleBatch& batch,
                               uint64_t max_cycles = uint64_t(1) << 28);

// LiveOracle: the same clocked board and PS, run a step at a time, for a batch whose later
// accesses are not known yet (the fast board's batches that are not a reusable shape, and
// its reads inside a batch). The actions are those of run_timing_oracle, performed the same
// way; the run pauses (sc_pause) after each probe, so that the caller reads the value and
// the board, and continues from there with the next actions: a batch of N accesses costs one
// run of the board, not one per access.
//
// Exactness: a probe at time t sees what it would see in a whole run of the batch. The one
// case a pause could change is an action at the very time of the pause when that time is a
// clock edge (the modules evaluate that edge after the PS in the same delta cycle, so an
// action after the pause would meet the edge already evaluated, where a whole run performs
// it before): the run then starts again from the opening with every action so far
// (restarts()), which is a whole run.
class LiveOracle {
 public:
  // `opening`: every channel's registers and the DDR when the batch opened, and its actions
  // so far (oracle time, as in OracleBatch).
  LiveOracle(const BoardConfig& config, OracleBatch opening);
  ~LiveOracle();
  LiveOracle(const LiveOracle&) = delete;
  LiveOracle& operator=(const LiveOracle&) = delete;

  // A register write or a CPU store, at or after the time of every action before it. It is
  // performed when a later probe runs the board to it.
  void add(OracleAction a);
  // Runs the board to the probe (kProbeRegister or kProbeMemory), performs it and returns its
  // value. A register probe checks the progress watchdog (hw/parts/progress_watchdog.h) as a
  // status poll of the cycle fidelity does. Throws what the board throws.
  std::vector<uint8_t> probe(OracleAction a);

  // The board at the last probe.
  bool quiet() const;  // every DMA channel quiet, no engine lane busy or holding an error
  DmaChannelRegisters registers(int dma, int channel) const;
  LaneRegisterView lane(int engine, int lane) const;  // [matmul, attention][lane]
  // Every register change and transfer so far (edges relative to the first start).
  const OracleChannelResult& channel(int dma, int channel) const;
  uint64_t bytes_read() const;  // by the PL since the opening
  uint64_t cycles() const;      // simulated from the first start to the last probe
  // The memory's carried state now (as of edge cycles(), relative).
  MemoryState memory_state() const;
  // The DRAM commands since the opening, up to now, and the ledger's tail (as OracleResult's).
  DramActivity dram_activity(std::vector<uint64_t>& tail);
  // Every byte range written since the opening (by the PL or a CPU store), with its contents.
  std::vector<MemoryRegion> writes() const;
  uint64_t restarts() const { return restarts_; }

 private:
  struct Run;
  void start();
  BoardConfig config_;
  OracleBatch opening_;  // actions: every action so far, probes included
  std::unique_ptr<Run> run_;
  uint64_t restarts_ = 0;
};

}  // namespace bitsim::hw
