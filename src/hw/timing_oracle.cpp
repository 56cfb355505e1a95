#include "hw/timing_oracle.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <tlm_utils/simple_initiator_socket.h>

#include "hw/engine_regs.h"
#include "hw/sim_context.h"
#include "hw/progress_watchdog.h"
#include "hw/sim_start.h"
#include "model/error.h"

namespace bitsim::hw {

namespace {

namespace R = dma_reg;

// The oracle's PS: writes the registers at their times, then waits until the board is quiet.
class OraclePs : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(OraclePs);
  OraclePs(sc_core::sc_module_name name, Board& board, const OracleBatch& batch, uint64_t max_cycles,
           OracleResult& result)
      : sc_core::sc_module(name), bus("bus"), board_(board), batch_(batch), max_cycles_(max_cycles), result_(result) {
    SC_THREAD(run);
  }
  tlm_utils::simple_initiator_socket<OraclePs> bus;
  std::exception_ptr failure;

 private:
  uint32_t access(bool write, uint64_t addr, uint32_t v) {
    tlm::tlm_generic_payload t;
    t.set_command(write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND);
    t.set_address(addr);
    t.set_data_ptr(reinterpret_cast<unsigned char*>(&v));
    t.set_data_length(4);
    t.set_streaming_width(4);
    t.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    sc_core::sc_time d = sc_core::SC_ZERO_TIME;
    bus->b_transport(t, d);
    if (t.is_response_error()) throw Error(fmt::format("timing oracle: access to 0x{:08x} failed", addr));
    return v;
  }

  // Every DMA channel quiet and no engine lane busy or holding an error (a lane still holding
  // input, results or an error carries the batch into the next one: the fast board then
  // keeps the batch open until it is quiet).
  bool quiet() {
    for (int d = 0; d < 4; ++d)
      for (int c = 0; c < 2; ++c)
        if (board_.dma(DmaId(d)).active(DmaChannel(c))) return false;
    for (uint64_t base : {board_map::kMatmulRegs, board_map::kAttentionRegs})
      for (int lane = 0; lane < 2; ++lane)
        if (access(false, base + uint64_t(lane) * engine_reg::kLaneStride + engine_reg::kStatus, 0) &
            (engine_reg::kStatusBusy | engine_reg::kStatusError))
          return false;
    return true;
  }

  // Performs one action; true for a probe.
  bool perform(const OracleAction& a) {
    switch (a.kind) {
      case OracleAction::Kind::kWrite:
        access(true, a.addr, a.value);
        return false;
      case OracleAction::Kind::kCpuStore:
        board_.ddr().write(a.addr, a.bytes.data(), a.bytes.size());
        return false;
      case OracleAction::Kind::kProbeRegister: {
        const uint32_t v = access(false, a.addr, 0);
        result_.probes.emplace_back(reinterpret_cast<const uint8_t*>(&v), reinterpret_cast<const uint8_t*>(&v) + 4);
        return true;
      }
      case OracleAction::Kind::kProbeMemory:
        result_.probes.emplace_back(a.size);
        board_.ddr().read(a.addr, result_.probes.back().data(), a.size);
        return true;
    }
    return false;
  }

  // Waits until every channel is quiet and the DDR has settled (true), or the horizon (false).
  bool settle(uint64_t period) {
    const uint64_t limit = kOracleFirstEdge + (batch_.horizon_edges ? batch_.horizon_edges : max_cycles_);
    ProgressWatchdog watchdog(board_);  // a batch that can never settle is an error naming its channels
    do {
      wait(sc_core::sc_time::from_value(64 * period));
      watchdog.check(board_.clock().cycle());
      if (board_.clock().cycle() > limit) {
        if (batch_.horizon_edges) return false;
        throw Error(fmt::format("timing oracle: the batch did not settle within {} cycles", max_cycles_));
      }
    } while (!quiet());
    wait(sc_core::sc_time::from_value(64 * period));
    return true;
  }

  void run() {
    try {
      const uint64_t period = board_.clock().period().value();
      for (const auto& p : board_.ddr().stats().ports) bytes_read_at_start_ += p.bytes_read;
      bool probes = false;
      for (const OracleAction& a : batch_.actions) {
        const uint64_t now = sc_core::sc_time_stamp().value();
        if (a.time_ps > now) wait(sc_core::sc_time::from_value(a.time_ps - now));
        probes |= perform(a);
      }
      result_.settled = !probes && settle(period);
      uint64_t last_active = 0;
      for (int d = 0; d < 4; ++d) last_active = std::max(last_active, board_.dma(DmaId(d)).last_active_cycle());
      result_.quiet_edge = last_active + 1 > kOracleFirstEdge ? last_active + 1 - kOracleFirstEdge : 0;
      result_.end_edge = board_.clock().cycle() - kOracleFirstEdge;
      uint64_t bytes = 0;
      for (const auto& p : board_.ddr().stats().ports) bytes += p.bytes_read;
      result_.bytes_read = bytes - bytes_read_at_start_;
      for (int lane = 0; lane < 2; ++lane) {
        result_.engines[0][lane] = board_.matmul().registers(lane);
        result_.engines[1][lane] = board_.attention().registers(lane);
      }
    } catch (...) {
      failure = std::current_exception();
    }
    sc_core::sc_stop();
  }

  Board& board_;
  const OracleBatch& batch_;
  uint64_t max_cycles_;
  OracleResult& result_;
  uint64_t bytes_read_at_start_ = 0;
};

// Records every register change of every channel, and every transfer that completes. A
// change in a clock edge is seen by reads after the edge; a change by a register write at
// once (AxiDma reports those with cycle UINT64_MAX).
void observe_registers(Board& board, OracleResult& result) {
  const uint64_t period = board.clock().period().value();
  for (int d = 0; d < 4; ++d) {
    AxiDma& dma = board.dma(DmaId(d));
    dma.set_register_observer(
        [&dma, &result, d, period, seen = std::array<uint64_t, 2>{}](DmaChannel ch, uint64_t cycle) mutable {
          const int c = int(ch);
          OracleChannelResult& r = result.channels[d][c];
          const uint64_t t = cycle == UINT64_MAX ? sc_core::sc_time_stamp().value() : cycle * period + 1;
          r.changes.push_back({t, cycle == UINT64_MAX, dma.registers(ch)});
          if (cycle != UINT64_MAX) result.cycles = std::max(result.cycles, cycle - kOracleFirstEdge);
          const AxiDmaChannelStats& st = dma.stats(ch);
          if (st.transfers > seen[size_t(c)]) {
            seen[size_t(c)] = st.transfers;
            r.transfers.emplace_back(st.last_start_cycle - kOracleFirstEdge, st.last_completion_cycle - kOracleFirstEdge);
          }
        });
  }
}

// Merges the ranges the PL wrote and reads back their final contents.
std::vector<MemoryRegion> written_regions(Board& board, const std::map<uint64_t, uint64_t>& written) {
  std::vector<MemoryRegion> out;
  uint64_t cur_b = 0, cur_e = 0;
  auto flush = [&] {
    if (cur_e <= cur_b) return;
    MemoryRegion r;
    r.addr = cur_b;
    r.bytes.resize(cur_e - cur_b);
    board.ddr().read(cur_b, r.bytes.data(), r.bytes.size());
    out.push_back(std::move(r));
  };
  for (const auto& [b, e] : written) {
    if (b <= cur_e && cur_e > cur_b) {
      cur_e = std::max(cur_e, e);
    } else {
      flush();
      cur_b = b;
      cur_e = e;
    }
  }
  flush();
  return out;
}

}  // namespace

OracleResult run_timing_oracle(const BoardConfig& config, const OracleBatch& batch, uint64_t max_cycles) {
  OracleResult result;
  FreshSimContext context;
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  Board board("board", config);
  for (const auto& r : batch.memory) board.ddr().write(r.addr, r.bytes.data(), r.bytes.size());
  for (int d = 0; d < 4; ++d)
    for (int c = 0; c < 2; ++c) board.dma(DmaId(d)).restore_registers(DmaChannel(c), batch.initial[d][c]);
  observe_registers(board, result);
  std::map<uint64_t, uint64_t> written;  // begin -> end of every range the PL writes
  board.ddr().set_write_listener([&](uint64_t a, size_t n) {
    auto& end = written[a];
    end = std::max<uint64_t>(end, a + n);
  });
  OraclePs ps("oracle_ps", board, batch, max_cycles, result);
  ps.bus.bind(board.ps_bus);
  start_simulation();
  if (ps.failure) std::rethrow_exception(ps.failure);
  result.writes = written_regions(board, written);
  return result;
}

}  // namespace bitsim::hw
