#pragma once
// DramLedger: the DRAM commands a memory model issues, accounted by device cycle
// (docs/energy.md, "DRAM under ddr.model = ddr3: from the commands"). It follows the
// commands hw::Ddr3Timing's listener gives and answers, for an interval of device cycles, how
// many of each kind fell in it and how many of its cycles had a bank open or a refresh
// running (DRAMPower's active time; the rest is precharged standby).
//
// An interval closes at a device cycle `end` (close()). Everything at or after `end` is
// carried into the next interval: a bank still open counts from `end` on, a span closed by a
// PRE, PREA or REF already decided for a later cycle counts its part past `end` there, and
// such commands count there. So the activity of a run is a function of its command schedule
// alone, whatever points it is closed at: the two fidelities close at different points (the
// fast board at each batch it replays, the clocked board at each token) and give the same
// activity at every token (EnergyAccount.BothFidelitiesGiveTheSameDramActivityTokenByToken).
//
// The one condition: every command at a cycle before `end` has been given when the interval
// closes (catch the engine up to `end` first: hw::Ddr3Timing::catch_up). ACT, RD and WR are
// counted as they come (they always lie before the memory's next quiet point); a ledger
// closed before one of them throws rather than miscount.
#include <cstdint>
#include <utility>
#include <vector>

#include "hw/memory/ddr3_timing.h"

namespace bitsim::hw {

// An interval's commands and active time.
struct DramActivity {
  Ddr3CommandCounts counts;   // commands at device cycles in the interval (prea_banks: banks the PREAs closed)
  uint64_t open_cycles = 0;   // device cycles with a bank open or a refresh running (its tRFC)
  DramActivity& operator+=(const DramActivity& o);
  DramActivity operator-(const DramActivity& o) const;  // o must be a part of this (a cumulative figure earlier)
  bool operator==(const DramActivity&) const = default;
};

class DramLedger {
 public:
  // `banks` banks, all precharged at device cycle `start`; `trfc`: a refresh's cycles.
  DramLedger(uint32_t banks, uint64_t trfc, uint64_t start);
  // Every bank whose entry of `open_row` is a row (>= 0) counts as open from the start (a
  // restored carried state's open rows).
  void open_at_start(const std::vector<int64_t>& open_row);
  void command(uint64_t cycle, Ddr3Command command, uint32_t bank);
  // The activity of [start, end); a new interval starts at `end`. Throws bitsim::Error when
  // `end` is before the start or an ACT, RD or WR counted lies at or after it.
  DramActivity close(uint64_t end);
  uint64_t start() const { return start_; }

  // What the ledger carries past its start (the open banks, the spans and the commands not
  // yet counted), as words relative to device cycle `origin` (at or before the start); load()
  // sets a ledger to them at another origin. The fast board carries the timing oracle's
  // ledger into its own so.
  std::vector<uint64_t> save(uint64_t origin) const;
  void load(const std::vector<uint64_t>& words, uint64_t origin);

  // A ledger that opens mid-run (the timing oracle's) cannot see the spans an earlier part of
  // the run carries into it (a refresh still running, a PRE decided past its start). It keeps
  // the cycles it counted open within `window` of its start (head()), so that the run's
  // ledger adds only the carried cycles not among them (continue_with).
  void keep_head(uint64_t window) { head_window_ = window; }
  // The oracle's record: its window, its head (the counted spans within the window after its
  // first close's start) and save(origin), one word list.
  std::vector<uint64_t> record(uint64_t origin) const;
  // This ledger, closed at `origin`, continues with an oracle's record made relative to its
  // own origin (here: `origin`): its carried commands stay to be counted, and the cycles its
  // carried spans add to the record's head are returned (the open cycles the oracle could
  // not see). Throws bitsim::Error when a carried span reaches past the record's window (the
  // oracle's head would not cover it).
  uint64_t continue_with(const std::vector<uint64_t>& record, uint64_t origin);

 private:
  struct Pending {
    uint64_t cycle = 0;
    Ddr3Command command = Ddr3Command::kPre;
    uint32_t banks = 0;  // PREA: the banks it closed
  };
  void close_bank(size_t bank, uint64_t cycle);
  uint64_t trfc_, start_;
  std::vector<int64_t> open_since_;                   // per bank, -1: precharged
  std::vector<std::pair<uint64_t, uint64_t>> spans_;  // [from, to) of a bank open or a refresh, not yet counted
  std::vector<Pending> pending_;                      // PRE, PREA, REF not yet counted
  Ddr3CommandCounts counted_;                         // ACT, RD, WR since the start
  uint64_t latest_counted_ = 0;                       // the latest cycle among them (+1; 0: none)
  uint64_t head_window_ = 0;                          // keep_head
  std::vector<std::pair<uint64_t, uint64_t>> head_;   // the first close's counted spans within the window
  bool closed_once_ = false;
};

}  // namespace bitsim::hw
