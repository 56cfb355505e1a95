#include "hw/board.h"

#include <fmt/format.h>

#include "hw/fingerprint.h"
#include "base/error.h"

namespace bitsim::hw {

static_assert(2 * kLanes == 4, "four DMAs: mm0, mm1 for the matmul lanes, at0, at1 for the attention lanes");

Board::Board(sc_core::sc_module_name name, const BoardConfig& config)
    : sc_core::sc_module(name), ps_bus("ps_bus"), config_(config) {
  config_.check_own(std::string(this->name()));
  clock_ = std::make_unique<Clock>("clock", config_.clock);
  memory_ = make_memory("ddr", *clock_, config_.ddr);
  for (int i = 0; i < kLanes; ++i)  // lane i's DMAs on HP port i (HP0, HP2)
    hp_[i] = std::make_unique<HpPort>(i == 0 ? "hp0" : "hp2", *clock_, config_.hp, memory_->port(i));

  MatmulEngineConfig mc = config_.matmul;
  mc.reg_base = board_map::kMatmulRegs;
  matmul_ = std::make_unique<MatmulEngine>("matmul", *clock_, mc);
  AttentionUnitConfig ac = config_.attention;
  ac.reg_base = board_map::kAttentionRegs;
  attention_ = std::make_unique<AttentionUnit>("attention", *clock_, ac);

  EngineLanes* engines[board_map::kEngineCount] = {matmul_.get(), attention_.get()};
  for (int i = 0; i < 2 * kLanes; ++i) {
    AxiDmaConfig dc = config_.dma;
    dc.base_address = board_map::kDmaBase[i];
    const int e = board_map::engine_of_dma(i);
    dc.has_sg = e == 0 ? config_.matmul_dma_sg : config_.attention_dma_sg;
    dma_[i] = std::make_unique<AxiDma>(board_map::kDmaName[i], *clock_, dc);
    AxiDma& d = *dma_[i];
    const int lane = board_map::kEngines[e].dma[1] == i ? 1 : 0;  // mm0/at0 -> lane 0 on HP0; mm1/at1 -> lane 1 on HP2
    d.mm2s_out = &engines[e]->in(lane);
    d.s2mm_in = &engines[e]->out(lane);
    HpPort& port = *hp_[config_.hp_ports == 1 ? 0 : lane];  // board.hp_ports = 1: all on HP0
    port.attach(d.m_axi_mm2s);
    port.attach(d.m_axi_s2mm);
    port.attach(d.m_axi_sg);
  }

  ps_bus.register_b_transport(this, &Board::b_transport);
  for (int i = 0; i < 6; ++i) {
    auto s = std::make_unique<tlm_utils::simple_initiator_socket<Board>>(
        fmt::format("to_target{}", i).c_str());
    targets_.push_back(std::move(s));
  }
  for (int i = 0; i < 4; ++i) targets_[i]->bind(dma_[i]->ctrl);
  targets_[4]->bind(matmul_->ctrl);
  targets_[5]->bind(attention_->ctrl);
}

void Board::b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  ++bus_accesses_;
  const uint64_t a = trans.get_address();
  for (int i = 0; i < 4; ++i) {
    if (a >= board_map::kDmaBase[i] && a < board_map::kDmaBase[i] + board_map::kWindow) {
      (*targets_[i])->b_transport(trans, delay);
      return;
    }
  }
  if (a >= board_map::kMatmulRegs && a < board_map::kMatmulRegs + board_map::kWindow) {
    (*targets_[4])->b_transport(trans, delay);
    return;
  }
  if (a >= board_map::kAttentionRegs && a < board_map::kAttentionRegs + board_map::kWindow) {
    (*targets_[5])->b_transport(trans, delay);
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
  for (int i = 0; i < 4; ++i) out.emplace_back(board_map::kDmaName[i], dma_[size_t(i)]->state_fingerprint());
  out.emplace_back("matmul", matmul_->state_fingerprint());
  out.emplace_back("attention", attention_->state_fingerprint());
  return out;
}

// The fast face of each engine of board_map::kEngines.
std::unique_ptr<FastEngine> make_fast_engine(int engine, const BoardConfig& config) {
  switch (engine) {
    case 0: return std::make_unique<MatmulFastEngine>(config.matmul);
    case 1: return std::make_unique<AttentionFastEngine>(config.attention);
    default: throw Error(fmt::format("make_fast_engine: engine {} is not in the board's map", engine));
  }
}

}  // namespace bitsim::hw
