#pragma once
// EdgeLoop: drives an elaborated Board edge by edge in a plain loop, without SystemC's
// scheduler: the same modules, their same edge functions, the same FIFOs (docs/hw-timing.md,
// "Two ways to drive the board"). The timing oracle runs its batches so; the clocked fidelity
// stays SystemC's, and is the reference every run of this loop is tested against.
//
// SystemC's order is kept exactly, in three rules:
// - An edge evaluates every module that is awake (Memory::edge, HpPort::edge, AxiDma::edge,
//   EngineLanes::edge, in any order: every link is a registered RegFifo), then commits the
//   FIFOs pushed or popped in it (RegFifoBase::commit), which is SystemC's update phase.
// - A module that rests after an edge (its method would sleep) is not evaluated again until
//   what would wake it comes: an item in an empty FIFO it sleeps on (seen at the next edge,
//   where the woken method would act first), or a register write addressed to it while it
//   rests (it acts from the first edge strictly after the write's time). A write to a module
//   that is awake at that time is lost, as SystemC's event is.
// - A PS access at time t sees the board after every edge whose time is before t
//   (run_before): at an edge's time the PS comes before the modules, as under SystemC.
#include <cstdint>
#include <vector>

#include "hw/board.h"

namespace bitsim::hw {

class EdgeLoop {
 public:
  // `board` must be elaborated (sc_start(SC_ZERO_TIME) has run), and is driven from edge 1
  // on; until the loop is destroyed its FIFOs are committed by the loop, not by SystemC.
  // Throws std::logic_error for a board whose memory model has no edge (can_drive).
  explicit EdgeLoop(Board& board);
  ~EdgeLoop();
  EdgeLoop(const EdgeLoop&) = delete;
  EdgeLoop& operator=(const EdgeLoop&) = delete;

  // Every module of the board has an edge function (the memory model: Memory::has_edge).
  static bool can_drive(const Board& board) { return board.memory().has_edge(); }

  // The PS wrote a register at `addr` at time `t_ps` (not before the last run_before's time):
  // the module it addresses wakes at the first edge strictly after t_ps, if it rests then.
  void wrote(uint64_t addr, uint64_t t_ps);
  // Evaluates every edge whose time is before `t_ps`. Checks the stop signal (SIGINT,
  // SIGTERM) every 16,384 edges evaluated.
  void run_before(uint64_t t_ps);

 private:
  static constexpr uint64_t kNone = UINT64_MAX;
  // The register writes a resting module may wake at: pending wake edges, the earliest
  // first (at most two are ever pending: the next edge and the one after).
  struct Wakes {
    uint64_t first = kNone, second = kNone;
    void add(uint64_t e);
    // True when a wake falls at edge `c` (and drops it): the module wakes if it rests.
    bool take(uint64_t c) {
      if (first != c) return false;
      first = second;
      second = kNone;
      return true;
    }
  };
  struct DmaSlot {
    AxiDma* dma = nullptr;
    AxiDma::Rest rest = AxiDma::Rest::kAwake;
    Wakes wakes;
  };
  struct EngineSlot {
    EngineLanes* engine = nullptr;
    bool resting = false;
    Wakes wakes;
  };
  // Edge `c`; false when no module was evaluated in it (all rest, and nothing can wake one
  // but a register write: no FIFO moved, so no item can come).
  bool edge(uint64_t c);
  uint64_t first_wake() const;

  Board& board_;
  uint64_t period_ps_;
  uint64_t next_ = 1;
  uint64_t evaluated_ = 0;  // edges evaluated (the stop signal's check)
  bool memory_resting_ = false;
  std::vector<std::pair<HpPort*, bool>> hp_;  // (port, resting)
  std::vector<DmaSlot> dmas_;
  std::vector<EngineSlot> engines_;
  std::vector<RegFifoBase*> fifos_;    // every FIFO of the board
  std::vector<RegFifoBase*> pending_;  // pushed or popped in this edge
};

}  // namespace bitsim::hw
