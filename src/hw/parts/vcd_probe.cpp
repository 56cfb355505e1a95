#include "hw/parts/vcd_probe.h"

#include <fmt/format.h>

#include "base/error.h"
#include "base/file_io.h"

namespace bitsim::hw {

VcdProbe::VcdProbe(sc_core::sc_module_name name, Board& board, const VcdConfig& config)
    : sc_core::sc_module(name), board_(board), config_(config) {
  if (config_.end <= config_.start) throw Error(fmt::format("vcd window {}:{}: the end must be after the start", config_.start, config_.end));
  // SystemC appends ".vcd" to the name it is given: the temporary file ends in it.
  out_ = std::make_unique<io::OutputFile>(config_.path, "vcd file", ".vcd");
  std::string base = out_->temp_path().string();
  base.resize(base.size() - 4);
  file_ = sc_core::sc_create_vcd_trace_file(base.c_str());
  if (!file_) throw Error(fmt::format("vcd file '{}': cannot create it", config_.path));
  file_->set_time_unit(1, sc_core::SC_PS);
  const EngineRegistry& engines = board.engines();
  for (int e = 0; e < board.engine_count(); ++e)
    for (int lane = 0; lane < kLanes; ++lane)
      for (int dir = 0; dir < 2; ++dir)
        streams_.push_back(Stream{dir ? &board.engine(e).out(lane) : &board.engine(e).in(lane)});
  // The shadows are sized once, before sc_trace takes their addresses.
  dma_active_.resize(size_t(board.dma_count()));
  engine_busy_.resize(size_t(board.engine_count()));
  size_t k = 0;
  for (int e = 0; e < board.engine_count(); ++e)
    for (int lane = 0; lane < kLanes; ++lane)
      for (int dir = 0; dir < 2; ++dir) {
        const std::string n = fmt::format("{}_lane{}_{}", engines[e].name, lane, dir ? "result" : "input");
        sc_core::sc_trace(file_, streams_[k].valid, n + "_tvalid");
        sc_core::sc_trace(file_, streams_[k].ready, n + "_tready");
        sc_core::sc_trace(file_, streams_[k].last, n + "_tlast");
        ++k;
      }
  for (int d = 0; d < board.dma_count(); ++d)
    for (int c = 0; c < 2; ++c)
      sc_core::sc_trace(file_, dma_active_[size_t(d)][size_t(c)],
                        fmt::format("dma_{}_{}_active", engines.dma_name(d), c ? "s2mm" : "mm2s"));
  for (int lane = 0; lane < kLanes; ++lane)
    for (int e = 0; e < board.engine_count(); ++e)
      sc_core::sc_trace(file_, engine_busy_[size_t(e)][size_t(lane)], fmt::format("{}_lane{}_busy", engines[e].name, lane));
  sc_core::sc_trace(file_, clk_, "clk_edge_parity");
  sc_core::sc_trace(file_, cycle_, "cycle");
  SC_METHOD(sample);
  sensitive << board.clock().listen();
  dont_initialize();
}

// Not closed by close() (an error or a signal ended the run): the trace file is closed and
// the temporary file removed; the target stays as it was.
VcdProbe::~VcdProbe() {
  if (file_) sc_core::sc_close_vcd_trace_file(file_);
  file_ = nullptr;
}

void VcdProbe::close() {
  if (!file_) return;
  sc_core::sc_close_vcd_trace_file(file_);
  file_ = nullptr;
  out_->commit();
}

void VcdProbe::sample() {
  const uint64_t c = board_.clock().cycle();
  if (c < config_.start || c >= config_.end) return;  // outside the window the shadows hold still
  cycle_ = c;
  clk_ = !clk_;
  for (auto& s : streams_) {
    s.valid = s.fifo->valid();
    s.ready = s.fifo->ready();
    s.last = s.valid && s.fifo->front().last;
  }
  for (int d = 0; d < board_.dma_count(); ++d)
    for (int ch = 0; ch < 2; ++ch) dma_active_[size_t(d)][size_t(ch)] = board_.dma(d).active(DmaChannel(ch));
  for (int e = 0; e < board_.engine_count(); ++e)
    for (int lane = 0; lane < kLanes; ++lane) engine_busy_[size_t(e)][size_t(lane)] = board_.engine(e).busy(lane);
}

}  // namespace bitsim::hw
