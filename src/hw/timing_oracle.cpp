#include "hw/timing_oracle.h"

#include <algorithm>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <tlm_utils/simple_initiator_socket.h>

#include "hw/engine_regs.h"
#include "hw/sim_context.h"
#include "model/error.h"

namespace bitsim::hw {

namespace {

namespace R = dma_reg;
constexpr uint64_t kFirstEdge = 64;  // the batch's first start edge in the oracle's run

// The oracle's PS: writes the registers at the requested edges, then waits for the batch.
class OraclePs : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(OraclePs);
  OraclePs(sc_core::sc_module_name name, Board& board, const std::vector<OracleStart>& starts, uint64_t max_cycles,
           OracleResult& result)
      : sc_core::sc_module(name), bus("bus"), board_(board), starts_(starts), max_cycles_(max_cycles), result_(result) {
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
  uint64_t reg(const OracleStart& s, uint32_t off) const {
    return board_map::kDmaBase[s.dma] + (s.channel ? R::kS2mmOffset : 0) + off;
  }

  void run() {
    try {
      const uint64_t period = board_.clock().period().value();
      // Bring every channel of the batch to running, pointing at its first descriptor.
      for (const auto& s : starts_) {
        access(true, reg(s, R::kMm2sDmacr), R::kCrReset);
        if (board_.dma(DmaId(s.dma)).config().has_sg) access(true, reg(s, R::kMm2sCurdesc), s.curdesc);
        access(true, reg(s, R::kMm2sDmacr), R::kCrRunStop);
      }
      std::vector<size_t> order(starts_.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return starts_[a].offset < starts_[b].offset; });
      for (const auto& p : board_.ddr().stats().ports) bytes_read_at_start_ += p.bytes_read;
      // A register write at time t takes effect at edge t / period + 1.
      for (size_t i : order) {
        const OracleStart& s = starts_[i];
        const uint64_t t = (kFirstEdge + s.offset - 1) * period;
        const uint64_t now = sc_core::sc_time_stamp().value();
        if (t > now) wait(sc_core::sc_time::from_value(t - now));
        if (board_.dma(DmaId(s.dma)).config().has_sg) {
          access(true, reg(s, R::kMm2sTaildesc), s.taildesc);
        } else {
          access(true, reg(s, s.channel ? R::kS2mmDa - R::kS2mmOffset : R::kMm2sSa), s.addr);
          access(true, reg(s, R::kMm2sLength), s.length);
        }
      }
      // Wait until every channel of the batch is quiet and the DDR has settled.
      const uint64_t limit = kFirstEdge + max_cycles_;
      for (;;) {
        wait(sc_core::sc_time::from_value(64 * period));
        bool busy = false;
        for (const auto& s : starts_) busy |= board_.dma(DmaId(s.dma)).active(DmaChannel(s.channel));
        if (!busy) break;
        if (board_.clock().cycle() > limit)
          throw Error(fmt::format("timing oracle: the batch did not settle within {} cycles", max_cycles_));
      }
      wait(sc_core::sc_time::from_value(64 * period));
      result_.channels.resize(starts_.size());
      uint64_t last = kFirstEdge;
      for (size_t i = 0; i < starts_.size(); ++i) {
        const OracleStart& s = starts_[i];
        const AxiDma& d = board_.dma(DmaId(s.dma));
        OracleChannelResult& r = result_.channels[i];
        r.dmasr = access(false, reg(s, R::kMm2sDmasr), 0);
        r.completed = (r.dmasr & R::kSrIdle) && !(r.dmasr & R::kSrErrors);
        const uint64_t c = d.last_completion_cycle(DmaChannel(s.channel));
        r.completion = c >= kFirstEdge ? c - kFirstEdge : 0;
        last = std::max(last, c);
        if (s.channel == 1 && !d.config().has_sg) r.s2mm_length = access(false, reg(s, R::kMm2sLength), 0);
      }
      result_.cycles = last - kFirstEdge;
      uint64_t bytes = 0;
      for (const auto& p : board_.ddr().stats().ports) bytes += p.bytes_read;
      result_.bytes_read = bytes - bytes_read_at_start_;
      for (int e = 0; e < 2; ++e)
        for (int lane = 0; lane < 2; ++lane)
          for (int k = 0; k < 9; ++k)
            result_.engine_regs[e][lane][k] =
                access(false, (e ? board_map::kAttentionRegs : board_map::kMatmulRegs) + lane * engine_reg::kLaneStride + 4 * k, 0);
    } catch (...) {
      failure = std::current_exception();
    }
    sc_core::sc_stop();
  }

  Board& board_;
  const std::vector<OracleStart>& starts_;
  uint64_t max_cycles_;
  OracleResult& result_;
  uint64_t bytes_read_at_start_ = 0;
};

}  // namespace

OracleResult run_timing_oracle(const BoardConfig& config, const std::vector<MemoryRegion>& memory,
                               const std::vector<OracleStart>& starts, uint64_t max_cycles) {
  OracleResult result;
  FreshSimContext context;
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  Board board("board", config);
  for (const auto& r : memory) board.ddr().write(r.addr, r.bytes.data(), r.bytes.size());
  // Record every range the PL writes (results, descriptor status words).
  std::map<uint64_t, uint64_t> written;  // begin -> end
  board.ddr().set_write_listener([&](uint64_t a, size_t n) {
    auto& end = written[a];
    end = std::max<uint64_t>(end, a + n);
  });
  OraclePs ps("oracle_ps", board, starts, max_cycles, result);
  ps.bus.bind(board.ps_bus);
  sc_core::sc_start();
  if (ps.failure) std::rethrow_exception(ps.failure);
  // Merge the written ranges and read back their final contents.
  uint64_t cur_b = 0, cur_e = 0;
  auto flush = [&] {
    if (cur_e > cur_b) {
      MemoryRegion r;
      r.addr = cur_b;
      r.bytes.resize(cur_e - cur_b);
      board.ddr().read(cur_b, r.bytes.data(), r.bytes.size());
      result.writes.push_back(std::move(r));
    }
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
  return result;
}

}  // namespace bitsim::hw
