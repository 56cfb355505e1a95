#include "hw/board.h"

#include <fmt/format.h>

#include "hw/parts/fingerprint.h"
#include "base/error.h"

namespace bitsim::hw {

static_assert(kLanes == 2, "two DMAs per engine: one per lane");

Board::Board(sc_core::sc_module_name name, const BoardConfig& config)
    : sc_core::sc_module(name), ps_bus("ps_bus"), config_(config) {
  config_.check_own(std::string(this->name()));
  const EngineRegistry& reg = engines();
  clock_ = std::make_unique<Clock>("clock", config_.clock);
  memory_ = make_memory("ddr", *clock_, config_.ddr);
  for (int i = 0; i < kLanes; ++i)  // lane i's DMAs on HP port i (HP0, HP2)
    hp_[i] = std::make_unique<HpPort>(i == 0 ? "hp0" : "hp2", *clock_, config_.hp, memory_->port(i));

  for (int e = 0; e < reg.count(); ++e) engines_.push_back(reg[e].clocked(reg[e].name.c_str(), *clock_, config_, reg[e].regs));
  for (int i = 0; i < reg.dma_count(); ++i) {
    AxiDmaConfig dc = config_.dma;
    dc.base_address = reg.dma_base(i);
    dc.has_sg = reg.dma_sg(i, config_);
    dma_.push_back(std::make_unique<AxiDma>(reg.dma_name(i).c_str(), *clock_, dc));
    AxiDma& d = *dma_.back();
    const int lane = EngineRegistry::lane_of_dma(i);  // mm0/at0 -> lane 0 on HP0; mm1/at1 -> lane 1 on HP2
    EngineLanes& engine = *engines_[size_t(EngineRegistry::engine_of_dma(i))];
    d.mm2s_out = &engine.in(lane);
    d.s2mm_in = &engine.out(lane);
    HpPort& port = *hp_[config_.hp_ports == 1 ? 0 : lane];  // board.hp_ports = 1: all on HP0
    port.attach(d.m_axi_mm2s);
    port.attach(d.m_axi_s2mm);
    port.attach(d.m_axi_sg);
  }

  ps_bus.register_b_transport(this, &Board::b_transport);
  for (size_t i = 0; i < dma_.size() + engines_.size(); ++i)
    targets_.push_back(std::make_unique<tlm_utils::simple_initiator_socket<Board>>(fmt::format("to_target{}", i).c_str()));
  for (size_t i = 0; i < dma_.size(); ++i) targets_[i]->bind(dma_[i]->ctrl);
  for (size_t e = 0; e < engines_.size(); ++e) targets_[dma_.size() + e]->bind(engines_[e]->ctrl);
}

void Board::b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  ++bus_accesses_;
  const uint64_t a = trans.get_address();
  if (const int d = engines().dma_at(a); d >= 0) {
    (*targets_[size_t(d)])->b_transport(trans, delay);
    return;
  }
  if (const int e = engines().engine_at(a); e >= 0) {
    (*targets_[dma_.size() + size_t(e)])->b_transport(trans, delay);
    return;
  }
  // Nothing decodes the address: the interconnect answers DECERR.
  trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
}

std::vector<std::pair<std::string, uint64_t>> Board::state_fingerprints(uint64_t cycle) const {
  std::vector<std::pair<std::string, uint64_t>> out;
  out.emplace_back("ddr", memory_->state_fingerprint(cycle));
  out.emplace_back("hp0", hp_[0]->state_fingerprint());
  out.emplace_back("hp2", hp_[1]->state_fingerprint());
  for (size_t i = 0; i < dma_.size(); ++i) out.emplace_back(engines().dma_name(int(i)), dma_[i]->state_fingerprint());
  for (size_t e = 0; e < engines_.size(); ++e) out.emplace_back(engines()[int(e)].name, engines_[e]->state_fingerprint());
  return out;
}

}  // namespace bitsim::hw
