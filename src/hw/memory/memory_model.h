#pragma once
// The memory model's SystemC-free part: its config (the ddr.* keys, ddr.model among them),
// the state it carries across an idle gap, and what the fast fidelity asks of it
// (MemoryTiming). The clocked part is hw::Memory (hw/memory/memory.h).
//
// The fast fidelity reuses a batch's timing whenever the batch's shape is the same
// (docs/architecture.md, "A transfer through both fidelities"). A memory model takes part in
// that in three ways, each here:
//   - the address facts of a transfer its timing depends on enter the batch key (key_facts;
//     none for wall and latency-bandwidth, whose timing does not depend on where a buffer
//     lies beyond the HP port's 4 KB rule, which enters the key through
//     hw::axi_boundary_offset; ddr3 keys on every buffer's address);
//   - the state that survives an idle gap (open rows, a refresh counter: MemoryState) is
//     carried by the fast board from one batch to the next, advanced over the gap (advance),
//     and opens the timing oracle's clocked board (Memory::restore_state); it enters the key
//     (key_state), or, for a model that checks reuse (ddr3), a record is reused from another
//     state only where the model's replay of the record's trace gives the same answers
//     (checks_reuse, replay);
//   - everything else of the memory's timing state is back at its reset value whenever the
//     board is quiet (the idle-board check, Board::state_fingerprints, covers that part).
// wall and latency-bandwidth carry nothing: their MemoryState is empty, and their keys are
// those of a board without a memory model. ddr3 carries its open rows, refresh phase and
// clock-crossing phase, and its timing depends on where each buffer lies (docs/ddr3.md).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/config_field.h"
#include "hw/memory/ddr3_config.h"
#include "hw/memory/dram_ledger.h"
#include "hw/memory/memory_registry.h"

namespace bitsim::hw {

// The most DDR a Zynq-7000 addresses: its DDR controller's 1 GiB (UG585, the system address map).
inline constexpr uint64_t kMaxDdrBytes = 1ull << 30;

// The shipped default is the board's DDR as bitsim runs it; visit() gives each field's key,
// range, unit, evidence label and meaning (base/config_field.h).
struct DdrConfig {
  // Which model times the DDR (docs/hw-timing.md, "DDR"): "wall" (the board's measured
  // bandwidth wall, one token bucket shared by the ports and both directions),
  // "latency-bandwidth" (a fixed latency and a bandwidth per port, no shared wall) or "ddr3"
  // (banks, rows, refresh and the controller: docs/ddr3.md, the ddr3.* keys).
  std::string model = "wall";
  uint64_t size_bytes = 512ull << 20;  // DDR size in bytes, a multiple of 1 MiB (key ddr.size_mib;
                                       // BOARD.md: 512 MB)
  double wall_bytes_per_s = 2.009e9;   // bandwidth wall shared by all ports and both directions,
                                       // bytes per second (key ddr.wall_gb_s, in GB/s)
  double port_bytes_per_s = 1.0045e9;  // latency-bandwidth: each port's own bandwidth, both
                                       // directions, bytes per second (key ddr.port_gb_s)
  double read_latency_ns = 367.86;     // read burst accepted -> its first beat may leave, ns;
                                       // rounded up to whole PL cycles (calibrated)
  double write_latency_ns = 50.0;      // write burst's last beat taken -> its response leaves, ns;
                                       // rounded up to whole PL cycles
  int ports = 2;                       // HP ports wired to the DDR (BOARD.md: HP0 and HP2)
  int max_pending_bursts = 16;         // bursts the DDR holds per port and direction (accepted, not
                                       // finished); a full queue stops taking AR / AW
  Ddr3Config ddr3;                     // ddr.model = ddr3: the device and the controller (ddr3.* keys)
  // The memory models ddr.model chooses from (not a key: the shipped ones unless a caller
  // registers another).
  std::shared_ptr<const MemoryRegistry> models = MemoryRegistry::board_handle();

  // The registration of the model ddr.model names; throws bitsim::Error naming ddr.model and
  // the choices when the registry has none of that name.
  const MemoryKind& kind(const std::string& who = "memory model") const { return models->at(model, who); }

  bool per_port_bandwidth() const { return model == "latency-bandwidth"; }

  template <typename Self, typename Visitor>
  static void visit(Self& c, Visitor&& v) {
    v(c.model, FieldInfo{"ddr.model", 0, 0, "", Evidence::kSimulated,
                         "memory model: wall (one bandwidth wall shared by the ports, fitted to the board), "
                         "latency-bandwidth (a fixed latency and a bandwidth per port, no shared wall) or ddr3 (the "
                         "DDR3 device's banks, rows and refresh behind the Zynq controller: the ddr3.* keys)",
                         1, true, MemoryRegistry::board().names()});
    v(c.size_bytes, FieldInfo{"ddr.size_mib", 1, double(kMaxDdrBytes >> 20), "MiB", Evidence::kBoard,
                              "DDR the PS and the PL share (BOARD.md: 512 MB on the PYNQ-Z2); at most the 1 GiB the "
                              "Zynq-7000's DDR controller addresses (UG585 address map: 0x0000_0000..0x3FFF_FFFF)",
                              double(1ull << 20)});
    v(c.wall_bytes_per_s, FieldInfo{"ddr.wall_gb_s", 0.01, 100, "GB/s", Evidence::kBoard,
                                    "DDR read wall seen from the PL, shared by both HP ports (BOARD.md: 2.009 GB/s "
                                    "measured)", 1e9});
    v(c.port_bytes_per_s, FieldInfo{"ddr.port_gb_s", 0.01, 100, "GB/s", Evidence::kSimulated,
                                    "ddr.model = latency-bandwidth: each port's own bandwidth, reads and writes "
                                    "together (default: half the wall)", 1e9});
    v(c.read_latency_ns, FieldInfo{"ddr.read_latency_ns", 0, 10000, "ns", Evidence::kCalibrated,
                                   "read burst accepted -> first data beat (no board figure; fitted, CIRCUITS.md 6)"});
    v(c.write_latency_ns, FieldInfo{"ddr.write_latency_ns", 0, 10000, "ns", Evidence::kSimulated,
                                    "write burst's last beat -> write response"});
    v(c.ports, FieldInfo{"ddr.ports", 1, 16, "ports", Evidence::kBoard,
                         "HP ports wired to the DDR (BOARD.md: HP0 and HP2)", 1, false});
    v(c.max_pending_bursts, FieldInfo{"ddr.max_pending_bursts", 1, 256, "bursts", Evidence::kSimulated,
                                      "bursts the DDR controller queues per port and direction"});
    Ddr3Config::visit(c.ddr3, v);
  }
  // Throws bitsim::Error naming `who` and the key of the first field out of range.
  void validate(const std::string& who) const {
    // ddr.model against the config's own registry (a registered model beyond the shipped
    // choices is valid here); every other field against its declared range.
    visit(*this, [&](const auto& field, const FieldInfo& f) {
      if (f.key != "ddr.model") check_field(field, f, who);
    });
    kind(who);
    ddr3.validate(who);
    if (size_bytes % (1ull << 20) != 0)
      throw Error(fmt::format("{}: ddr.size_mib = {} bytes is not a whole number of MiB", who, size_bytes));
    // A device smaller than the memory map would alias the addresses past its end onto its
    // own rows: the DRAM model would time a memory the board cannot hold.
    if (const uint64_t device = ddr3.device_bytes(); device < size_bytes)
      throw Error(fmt::format("{}: ddr3.banks x ddr3.rows x ddr3.columns x ddr3.bus_bytes = {} x {} x {} x {} = {} "
                              "bytes ({} MiB) is smaller than ddr.size_mib = {}: the "
                              "device must hold every address the board reaches",
                              who, ddr3.banks, ddr3.rows, ddr3.columns, ddr3.bus_bytes, device, device >> 20,
                              size_bytes >> 20));
  }
};

// The part of a memory's timing state that survives an idle gap, as the model's own words
// (opaque to the board). Empty for wall and latency-bandwidth; ddr3's words are in
// hw/memory/ddr3_timing.h (ddr3_carry).
struct MemoryState {
  std::vector<uint64_t> words;
  bool empty() const { return words.empty(); }
  bool operator==(const MemoryState&) const = default;
};

// A memory's requests and answers over one run of the clocked board (the timing oracle's
// batch), as the model's own words (opaque to the board): what MemoryTiming::replay needs to
// check that a record of the batch holds from another opening state. Empty for models
// that do not replay (wall, latency-bandwidth); ddr3's words are in hw/memory/ddr3_memory.cpp.
struct MemoryTrace {
  std::vector<uint64_t> words;
  bool empty() const { return words.empty(); }
};

// What a replay of a batch's trace gives in place of its record's: the carried state as of
// the record's quiet edge, and the DRAM commands up to then with the ledger's tail
// (OracleResult::memory_after, dram, dram_tail).
struct MemoryReplay {
  MemoryState after;
  DramActivity dram;
  std::vector<uint64_t> dram_tail;
};

// What the fast fidelity asks of the memory model, without SystemC.
class MemoryTiming {
 public:
  virtual ~MemoryTiming() = default;
  // Appends to `key` the facts of a transfer of `bytes` bytes at `addr` that the memory's
  // timing depends on beyond the HP port's 4 KB rule. Default: none (wall, latency-bandwidth).
  virtual void key_facts(uint64_t addr, uint64_t bytes, std::string& key) const {
    (void)addr, (void)bytes, (void)key;
  }
  // The carried state of a memory at reset (edge 0 of a board that opens nothing).
  virtual MemoryState initial_state() const { return {}; }
  // The carried state `idle_cycles` PL cycles later, with no request in between.
  virtual MemoryState advance(const MemoryState& state, uint64_t idle_cycles) const {
    (void)idle_cycles;
    return state;
  }
  // Appends the carried state to a batch key (nothing for an empty state). A model whose
  // records are checked by replay() appends a mark instead: the state is then not keyed
  // but checked on every reuse.
  virtual void key_state(const MemoryState& state, std::string& key) const;

  // Checked reuse (ddr.model = ddr3, exact): a record of a batch, timed on the clocked board
  // from one opening state, is reused from another when the memory, opened in the new state
  // and given the same requests at the same edges (the record's trace), answers every one of
  // them at the same edge. The board's side of the batch is then the same edge by edge (it
  // sees the memory only through those answers, and it makes its requests from what it saw
  // before), and so is every register change, transfer and cycle count; the replay gives the
  // memory's own end state and DRAM commands from the new opening. Any answer at another
  // edge rejects the record (std::nullopt), and the batch runs on the clocked board.
  // docs/hw-timing.md, "Checked reuse under a memory with state".
  virtual bool checks_reuse() const { return false; }
  virtual std::optional<MemoryReplay> replay(const MemoryState& opening, const MemoryTrace& trace,
                                             uint64_t after_edge) const {
    (void)opening, (void)trace, (void)after_edge;
    return std::nullopt;
  }

  // The DRAM commands (hw/memory/dram_ledger.h; the energy model's ddr3 pricing): a model
  // that issues them gives a ledger of the run from edge 0, in the device cycles of the
  // clocked board's run (device_cycle), and advance_counted() over a gap that opens at the run's
  // edge `from` tells the ledger every command the gap performs (its refreshes). Models
  // without commands (wall, latency-bandwidth) give none.
  virtual std::optional<DramLedger> ledger() const { return std::nullopt; }
  virtual uint64_t device_cycle(uint64_t edge) const { return edge; }
  virtual MemoryState advance_counted(const MemoryState& state, uint64_t idle_cycles, uint64_t from,
                                      DramLedger& ledger) const {
    (void)from, (void)ledger;
    return advance(state, idle_cycles);
  }
};

// The fast-side part of the model `config.model` names, for a PL clock of `pl_period_ps`.
std::unique_ptr<MemoryTiming> make_memory_timing(const DdrConfig& config, uint64_t pl_period_ps);

}  // namespace bitsim::hw
