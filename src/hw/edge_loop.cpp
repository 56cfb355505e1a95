#include "hw/edge_loop.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "base/stop_signal.h"

namespace bitsim::hw {

namespace {

// Every RegFifo under `object`, depth first.
void collect_fifos(sc_core::sc_object& object, std::vector<RegFifoBase*>& out) {
  for (sc_core::sc_object* child : object.get_child_objects()) {
    if (auto* f = dynamic_cast<RegFifoBase*>(child)) out.push_back(f);
    collect_fifos(*child, out);
  }
}

}  // namespace

void EdgeLoop::Wakes::add(uint64_t e) {
  if (e == first || e == second) return;
  if (e < first) {
    second = first;
    first = e;
  } else {
    second = std::min(second, e);
  }
}

EdgeLoop::EdgeLoop(Board& board) : board_(board), period_ps_(board.clock().period().value()) {
  if (!can_drive(board))
    throw std::logic_error(std::string(board.memory().name()) + ": this memory model cannot be driven by an edge loop");
  // Every module starts awake: one evaluation tells each whether it rests (an idle module's
  // edge changes nothing but the arbiters it resets, as its method did when it fell asleep).
  for (int i = 0; i < kLanes; ++i) hp_.emplace_back(&board.hp(i), false);
  for (int d = 0; d < board.dma_count(); ++d) dmas_.push_back({&board.dma(d), AxiDma::Rest::kAwake, {}});
  for (int e = 0; e < board.engine_count(); ++e) engines_.push_back({&board.engine(e), false, {}});
  collect_fifos(board, fifos_);
  for (RegFifoBase* f : fifos_) f->drive_updates(&pending_);
}

EdgeLoop::~EdgeLoop() {
  for (RegFifoBase* f : fifos_) f->drive_updates(nullptr);
}

void EdgeLoop::wrote(uint64_t addr, uint64_t t_ps) {
  const uint64_t e = t_ps / period_ps_ + 1;
  const EngineRegistry& reg = board_.engines();
  if (const int d = reg.dma_at(addr); d >= 0) {
    dmas_.at(size_t(d)).wakes.add(e);
  } else if (const int g = reg.engine_at(addr); g >= 0) {
    engines_.at(size_t(g)).wakes.add(e);
  }
}

bool EdgeLoop::edge(uint64_t c) {
  board_.clock().drive(c);
  bool acted = false;
  Memory& memory = board_.memory();
  if (!memory_resting_ || memory.request_waiting()) {
    memory_resting_ = memory.edge(c);
    acted = true;
  }
  for (auto& [port, resting] : hp_)
    if (!resting || port->request_waiting()) {
      resting = port->edge(c);
      acted = true;
    }
  for (DmaSlot& s : dmas_) {
    const bool written = s.wakes.take(c);
    if (s.rest == AxiDma::Rest::kAwake || written ||
        (s.rest == AxiDma::Rest::kStreamWait && s.dma->s2mm_in != nullptr && s.dma->s2mm_in->valid())) {
      s.rest = s.dma->edge(c);
      acted = true;
    }
  }
  for (EngineSlot& s : engines_) {
    const bool written = s.wakes.take(c);
    if (!s.resting || written || s.engine->input_waiting()) {
      s.resting = s.engine->edge(c);
      acted = true;
    }
  }
  // The update phase.
  for (RegFifoBase* f : pending_) f->commit();
  pending_.clear();
  return acted;
}

uint64_t EdgeLoop::first_wake() const {
  uint64_t w = kNone;
  for (const DmaSlot& s : dmas_) w = std::min(w, s.wakes.first);
  for (const EngineSlot& s : engines_) w = std::min(w, s.wakes.first);
  return w;
}

void EdgeLoop::run_before(uint64_t t_ps) {
  constexpr uint64_t kStopCheckEdges = uint64_t(1) << 14;
  const uint64_t end = (t_ps + period_ps_ - 1) / period_ps_;  // the first edge at or after t_ps
  while (next_ < end) {
    const bool acted = edge(next_++);
    // An edge at which nothing acted is followed by more of them until a register write wakes
    // a module: skip to its edge (or to the end), as SystemC's stopped clock does. Every
    // pending wake is at or after the next edge (a write wakes the edge after its time).
    if (!acted) next_ = std::max(next_, std::min(first_wake(), end));
    if (++evaluated_ % kStopCheckEdges == 0) check_stop();
  }
}

}  // namespace bitsim::hw
