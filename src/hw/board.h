#pragma once
// Board: the top level of the simulated PL (CIRCUITS.md 1): the PL clock, the DDR and its
// bandwidth wall, HP0 and HP2, four AXI DMAs (mm0, mm1 feed the matmul engine's lanes;
// at0, at1 the attention unit's; mm0 and at0 on HP0, mm1 and at1 on HP2), the two
// engines, the interrupt lines, and the address map of the PS's AXI-Lite bus (GP0).
// The engines, their DMAs and their register windows come from the engine registry the
// config holds (hw/circuits/engine_registry.h: BoardConfig::engines); the memory model from
// the memory registry (hw/memory/memory_registry.h: DdrConfig::models).
//
// The PS side: `ps_bus` is a TLM-2.0 target the PS's initiator socket binds to; it routes
// each register access by address to a DMA or an engine. `memory()` is the backdoor for the
// CPU's own loads and stores to DDR (the CPU's traffic is not timed against the wall).
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include "hw/circuits/attention_unit.h"
#include "hw/circuits/engine_registry.h"
#include "hw/interconnect/axi_dma.h"
#include "hw/parts/clock.h"
#include "hw/memory/memory.h"
#include "hw/interconnect/hp_port.h"
#include "hw/circuits/matmul_engine.h"
#include "hw/circuits/prefill_config.h"

namespace bitsim::hw {

// The shipped board's DMAs by name (EngineRegistry::board(): DMA d feeds lane d % 2 of engine d / 2).
enum class DmaId { Mm0 = 0, Mm1 = 1, At0 = 2, At1 = 3 };

// The board as `bitsim run` simulates it: BoardConfig{} is the shipped board (the key table,
// configs/pynq-z2.toml and `bitsim config --dump` take their defaults from these structs).
struct BoardConfig {
  ClockConfig clock;                 // PL clock
  DdrConfig ddr;                     // memory, wall, latencies
  HpPortConfig hp;                   // both HP ports
  AxiDmaConfig dma;                  // all four DMAs (base address and SG set per instance)
  bool matmul_dma_sg = false;        // mm0/mm1 built without the SG engine (simple mode) (model)
  bool attention_dma_sg = true;      // at0/at1 built with it (CIRCUITS.md 5: SG chains)
  int hp_ports = 2;                  // HP ports used: 2 (the board: lane 0 on HP0, lane 1 on HP2)
                                     // or 1 (all four DMAs on HP0; docs/variants-host.md)
  MatmulEngineConfig matmul;
  PrefillConfig prefill;  // prefill.* (the matmul engine is built for prefill.tokens_per_pass vectors)
  AttentionUnitConfig attention;
  // The circuits the board is built from (not a key: the shipped board's unless a caller
  // registers another engine).
  std::shared_ptr<const EngineRegistry> engines = EngineRegistry::board_handle();

  // Every field of every module, in key order (base/config_field.h).
  template <typename Self, typename Visitor>
  static void visit(Self& c, Visitor&& v) {
    ClockConfig::visit(c.clock, v);
    DdrConfig::visit(c.ddr, v);
    HpPortConfig::visit(c.hp, v);
    AxiDmaConfig::visit(c.dma, v);
    v(c.matmul_dma_sg, FieldInfo{"board.matmul_dma_sg", 0, 1, "", Evidence::kSimulated,
                                 "mm0/mm1 built with the SG engine", 1, false});
    v(c.attention_dma_sg, FieldInfo{"board.attention_dma_sg", 0, 1, "", Evidence::kBoard,
                                    "at0/at1 built with the SG engine (CIRCUITS.md 5: SG chains)", 1, false});
    v(c.hp_ports, FieldInfo{"board.hp_ports", 1, 2, "ports", Evidence::kBoard,
                            "HP ports the DMAs use: 2 (the board: mm0/at0 on HP0, mm1/at1 on HP2) or 1 (all four "
                            "DMAs share HP0: half the port bandwidth; docs/variants-host.md)"});
    MatmulEngineConfig::visit(c.matmul, v);
    PrefillConfig::visit(c.prefill, v);
    AttentionUnitConfig::visit(c.attention, v);
  }
  // Throws bitsim::Error naming `who` and the key of the first field out of range.
  void validate(const std::string& who) const {
    clock.validate(who);
    ddr.validate(who);
    hp.validate(who);
    dma.validate(who);
    check_own(who);  // prefill before the engine that takes its P: the user's key is named
    matmul_config().validate(who);
    attention.validate(who);
  }
  // The matmul engine's config as the board builds it: the keys' values, and the activation
  // vectors its groups may carry from prefill.tokens_per_pass.
  MatmulEngineConfig matmul_config() const {
    MatmulEngineConfig m = matmul;
    m.max_vectors = prefill.tokens_per_pass;
    return m;
  }
  // The board's own fields (board.hp_ports, with the range its visit() declares; prefill.*,
  // which the board hands to the matmul engine as its vectors per group).
  void check_own(const std::string& who) const {
    prefill.validate(who);
    visit(*this, [&](const auto& field, const FieldInfo& f) {
      if (f.key == "board.hp_ports") check_field(field, f, who);
    });
  }
};

class Board : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Board);
  Board(sc_core::sc_module_name name, const BoardConfig& config);

  tlm_utils::simple_target_socket<Board> ps_bus;  // AXI-Lite (GP0) from the PS

  Clock& clock() { return *clock_; }
  Memory& memory() { return *memory_; }  // the DDR, as ddr.model times it
  const Memory& memory() const { return *memory_; }
  AxiDma& dma(DmaId id) { return *dma_[size_t(id)]; }
  const AxiDma& dma(DmaId id) const { return *dma_[size_t(id)]; }
  AxiDma& dma(int d) { return *dma_.at(size_t(d)); }
  const AxiDma& dma(int d) const { return *dma_.at(size_t(d)); }
  int dma_count() const { return int(dma_.size()); }
  HpPort& hp(int i) { return *hp_[size_t(i)]; }
  // Engine e of the registry (the clocked face), and the shipped two by name.
  EngineLanes& engine(int e) { return *engines_.at(size_t(e)); }
  const EngineLanes& engine(int e) const { return *engines_.at(size_t(e)); }
  int engine_count() const { return int(engines_.size()); }
  const EngineRegistry& engines() const { return *config_.engines; }
  MatmulEngine& matmul() { return dynamic_cast<MatmulEngine&>(engine(engines().find("matmul"))); }
  AttentionUnit& attention() { return dynamic_cast<AttentionUnit&>(engine(engines().find("attention"))); }
  const BoardConfig& config() const { return config_; }
  uint64_t dma_base(DmaId id) const { return engines().dma_base(int(id)); }

  // Timing state of each clocked module at edge `cycle` (hw/parts/fingerprint.h), by module name:
  // the DDR, the HP ports, the DMAs and the engines' lanes.
  std::vector<std::pair<std::string, uint64_t>> state_fingerprints(uint64_t cycle) const;

  // Every engine skips its arithmetic from now on (LaneDatapath::skip_arithmetic: the same
  // edges, results zero): the timing oracle of a timing-only run.
  void skip_arithmetic() {
    for (auto& e : engines_) e->skip_arithmetic();
  }

  // Register accesses seen on the bus (reads + writes), for the driver's statistics.
  uint64_t bus_accesses() const { return bus_accesses_; }

 private:
  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);

  BoardConfig config_;
  std::unique_ptr<Clock> clock_;
  std::unique_ptr<Memory> memory_;
  std::array<std::unique_ptr<HpPort>, kLanes> hp_;  // one per lane
  std::vector<std::unique_ptr<AxiDma>> dma_;          // by registry DMA index
  std::vector<std::unique_ptr<EngineLanes>> engines_;  // by registry engine index
  // One initiator per AXI-Lite target: the DMAs, then the engines' registers.
  std::vector<std::unique_ptr<tlm_utils::simple_initiator_socket<Board>>> targets_;
  uint64_t bus_accesses_ = 0;
};

}  // namespace bitsim::hw
