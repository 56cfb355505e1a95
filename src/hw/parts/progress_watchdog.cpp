#include "hw/parts/progress_watchdog.h"

#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::hw {

uint64_t ProgressWatchdog::progress() const {
  uint64_t p = 0;
  for (const auto& port : board_.memory().stats().ports) p += port.bytes_read + port.bytes_written;
  for (int d = 0; d < board_.dma_count(); ++d) p += board_.dma(d).stats().mm2s.bytes + board_.dma(d).stats().s2mm.bytes;
  return p;
}

void ProgressWatchdog::check(uint64_t cycle) {
  std::vector<std::string> busy;
  const EngineRegistry& engines = board_.engines();
  std::vector<bool> engine_busy(size_t(engines.count()), false);
  bool mm2s = false, s2mm = false;
  for (int d = 0; d < board_.dma_count(); ++d)
    for (int c = 0; c < 2; ++c)
      if (board_.dma(d).active(DmaChannel(c))) {
        busy.push_back(fmt::format("{} {}", engines.dma_name(d), c ? "S2MM" : "MM2S"));
        engine_busy[size_t(EngineRegistry::engine_of_dma(d))] = true;
        (c ? s2mm : mm2s) = true;
      }
  const uint64_t p = progress();
  if (busy.empty() || p != last_progress_) {
    last_progress_ = p;
    last_change_ = cycle;
    return;
  }
  if (cycle - last_change_ <= stall_) return;
  const BoardConfig& c = board_.config();
  std::vector<std::string> keys{fmt::format("dma.max_burst_beats = {}", c.dma.max_burst_beats),
                                fmt::format("hp.max_burst_beats = {}", c.hp.max_burst_beats)};
  if (mm2s) {
    keys.push_back(fmt::format("dma.mm2s_fifo_beats = {}", c.dma.mm2s_fifo_beats));
    keys.push_back(fmt::format("hp.max_outstanding_reads = {}", c.hp.max_outstanding_reads));
  }
  if (s2mm) {
    keys.push_back(fmt::format("dma.s2mm_fifo_beats = {}", c.dma.s2mm_fifo_beats));
    keys.push_back(fmt::format("hp.max_outstanding_writes = {}", c.hp.max_outstanding_writes));
  }
  for (const std::string& k : c.ddr.kind().watchdog_keys(c.ddr)) keys.push_back(k);
  for (int e = 0; e < engines.count(); ++e)
    if (engine_busy[size_t(e)] && engines[e].output_keys)
      for (const std::string& k : engines[e].output_keys(c)) keys.push_back(k);
  // A memory holding requests it never completes is named with them (ddr.model and its keys).
  std::string memory;
  const Memory::RequestCounts& q = board_.memory().requests();
  if (q.heard > q.completed)
    memory = fmt::format(" The memory (ddr.model = {}) holds {} request{} it has not completed ({}).", c.ddr.model,
                         q.heard - q.completed, q.heard - q.completed == 1 ? "" : "s",
                         q.completed == 0 ? std::string("none completed since reset")
                                          : fmt::format("the last completed at edge {}", q.last_completion));
  throw Error(fmt::format("watchdog: no data moved for {} PL cycles (edge {} to {}) while DMA {} {} busy: the "
                          "transfer cannot finish.{} The keys that shape {}: {}",
                          cycle - last_change_, last_change_, cycle, fmt::join(busy, ", "),
                          busy.size() == 1 ? "is" : "are", memory, busy.size() == 1 ? "it" : "them",
                          fmt::join(keys, ", ")));
}

}  // namespace bitsim::hw
