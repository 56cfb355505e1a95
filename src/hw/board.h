#pragma once
// Board: the top level of the simulated PL (CIRCUITS.md 1): the PL clock, the DDR and its
// bandwidth wall, HP0 and HP2, four AXI DMAs (mm0, mm1 feed the matmul engine's lanes;
// at0, at1 the attention unit's; mm0 and at0 on HP0, mm1 and at1 on HP2), the two
// engines, the interrupt lines, and the address map of the PS's AXI-Lite bus (GP0).
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

#include "hw/attention_unit.h"
#include "hw/axi_dma.h"
#include "hw/clock.h"
#include "hw/memory.h"
#include "hw/hp_port.h"
#include "hw/matmul_engine.h"

namespace bitsim::hw {

// AXI-Lite address map (model: the PYNQ base design's defaults for AXI DMA and custom IP).
namespace board_map {
constexpr uint64_t kDmaBase[4] = {0x4040'0000, 0x4041'0000, 0x4042'0000, 0x4043'0000};
constexpr const char* kDmaName[4] = {"mm0", "mm1", "at0", "at1"};
constexpr uint64_t kMatmulRegs = 0x43C0'0000;
constexpr uint64_t kAttentionRegs = 0x43C1'0000;
constexpr uint64_t kWindow = 0x1'0000;  // 64 KB per peripheral

// The board's engines (its circuits), by engine index: the register window and the DMAs that
// feed lane 0 and lane 1. Board wires the clocked engines and FastBoard its fast engines
// (make_fast_engine) from this table; a new circuit is one more row.
struct EngineSlot {
  const char* name;
  uint64_t regs;  // register window (two lanes of engine_reg::kLaneStride)
  int dma[2];     // the DMA of lane 0 and of lane 1 (MM2S feeds the engine, S2MM takes its results)
};
constexpr int kEngineCount = 2;
constexpr EngineSlot kEngines[kEngineCount] = {{"matmul", kMatmulRegs, {0, 1}}, {"attention", kAttentionRegs, {2, 3}}};
// The engine DMA d feeds, or -1.
constexpr int engine_of_dma(int d) {
  for (int e = 0; e < kEngineCount; ++e)
    if (kEngines[e].dma[0] == d || kEngines[e].dma[1] == d) return e;
  return -1;
}
}  // namespace board_map

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
  AttentionUnitConfig attention;

  // Every field of every module, in key order (hw/config_field.h).
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
    AttentionUnitConfig::visit(c.attention, v);
  }
  // Throws bitsim::Error naming `who` and the key of the first field out of range.
  void validate(const std::string& who) const {
    clock.validate(who);
    ddr.validate(who);
    hp.validate(who);
    dma.validate(who);
    matmul.validate(who);
    attention.validate(who);
    check_own(who);
  }
  // The board's own field (board.hp_ports), with the range its visit() declares.
  void check_own(const std::string& who) const {
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
  HpPort& hp(int i) { return *hp_[size_t(i)]; }
  MatmulEngine& matmul() { return *matmul_; }
  AttentionUnit& attention() { return *attention_; }
  const BoardConfig& config() const { return config_; }
  uint64_t dma_base(DmaId id) const { return board_map::kDmaBase[size_t(id)]; }

  // Timing state of each clocked module at edge `cycle` (hw/fingerprint.h), by module name:
  // the DDR, the HP ports, the DMAs and the engines' lanes.
  std::vector<std::pair<std::string, uint64_t>> state_fingerprints(uint64_t cycle) const;

  // Register accesses seen on the bus (reads + writes), for the driver's statistics.
  uint64_t bus_accesses() const { return bus_accesses_; }

 private:
  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);

  BoardConfig config_;
  std::unique_ptr<Clock> clock_;
  std::unique_ptr<Memory> memory_;
  std::array<std::unique_ptr<HpPort>, kLanes> hp_;  // one per lane
  std::array<std::unique_ptr<AxiDma>, 4> dma_;
  std::unique_ptr<MatmulEngine> matmul_;
  std::unique_ptr<AttentionUnit> attention_;
  // One initiator per AXI-Lite target: 4 DMAs, then the matmul and attention registers.
  std::vector<std::unique_ptr<tlm_utils::simple_initiator_socket<Board>>> targets_;
  uint64_t bus_accesses_ = 0;
};

}  // namespace bitsim::hw
