#pragma once
// DmaDriver: the host's DMA driver (CIRCUITS.md 5). It programs the four DMAs through
// their registers only (each access a TLM transaction with its CPU cost), builds SG chains
// in simulated DDR, polls for completion as a real driver does, and charges cache
// maintenance for every buffer the CPU wrote (clean) or will read (invalidate).
//
// Matmul DMAs (mm0, mm1) run in simple mode: per lane, S2MM_DA + S2MM_LENGTH, then
// MM2S_SA + MM2S_LENGTH; then poll S2MM_DMASR until Idle, read S2MM_LENGTH (bytes
// received) and MM2S_DMASR. Attention DMAs (at0, at1) run in SG mode: per lane, the chain
// (3 descriptors per head: header+q, K rows, V rows) is appended to a descriptor ring and
// started by TAILDESC; the S2MM side takes one descriptor for the lane's results.
// A DMA error, a short result, or an engine error is a bitsim::Error naming the DMA, the
// lane and (from the engine's status registers) the group or head and row.
#include <cstdint>
#include <string>
#include <vector>

#include "host/memory_map.h"
#include "host/platform.h"

namespace bitsim::host {

struct DriverConfig {
  std::string profile = "c";        // c | python
  double reg_access_ns = 200;       // CPU time of one AXI-Lite register access
  double call_overhead_ns = 1000;   // fixed CPU time per driver call (both lanes)
  double flush_fixed_ns = 500;      // cache clean of one buffer the CPU wrote: fixed part
  double flush_ns_per_byte = 0.05;  // ... and per byte
  double invalidate_fixed_ns = 500; // cache invalidate of one buffer the CPU will read: fixed
  double invalidate_ns_per_byte = 0.05;
  double poll_gap_ns = 0;           // CPU time between two status polls, besides the access
};

struct DriverStats {
  uint64_t matmul_calls = 0, attention_calls = 0;
  uint64_t transfers = 0;       // DMA channel starts (MM2S and S2MM)
  uint64_t descriptors = 0;     // SG descriptors written
  uint64_t polls = 0;           // status reads while waiting
  uint64_t flushed_bytes = 0, invalidated_bytes = 0;
};

// One head of an attention call, as its lane's chain carries it.
struct HeadWork {
  uint64_t header_q_addr = 0;   // 112 bytes: header + q (written by the CPU)
  uint64_t k_addr = 0, v_addr = 0;
  uint32_t kv_bytes = 0;        // T x 96
};

class DmaDriver {
 public:
  DmaDriver(Platform& platform, const MemoryMap& map, const DriverConfig& config);

  // Reset every DMA, point the SG channels at their rings, set run/stop.
  void init();
  // One matmul call on both lanes; the CPU has written each lane's header + x. Returns
  // when both lanes' results are in DDR and invalidated.
  void matmul(const MatmulCall& call, int n);
  // One attention call: `heads[lane]` in order. The CPU has written headers + q and the
  // new K/V rows (`cpu_written_bytes`, cleaned here).
  void attention(const std::vector<HeadWork> heads[kLanes], uint64_t cpu_written_bytes);

  const DriverStats& stats() const { return stats_; }
  const DriverConfig& config() const { return config_; }

 private:
  uint64_t ps_of(double ns) const;
  uint32_t rd(int dma, uint32_t off);
  void wr(int dma, uint32_t off, uint32_t v);
  void flush(uint64_t bytes);
  void invalidate(uint64_t bytes);
  void wait_idle(int dma, uint32_t sr_offset, const char* what);
  [[noreturn]] void engine_failure(bool matmul, int lane, const std::string& what);
  uint64_t write_descriptor(int lane, bool s2mm, uint64_t buffer, uint32_t bytes, bool sof, bool eof);

  Platform& ps_;
  const MemoryMap& map_;
  DriverConfig config_;
  uint64_t access_ps_ = 0;
  DriverStats stats_;
  // Descriptor rings: per lane, MM2S ring then S2MM ring inside the lane's descriptor area.
  int mm2s_ring_ = 0, s2mm_ring_ = 0;
  int mm2s_next_[kLanes] = {0, 0}, s2mm_next_[kLanes] = {0, 0};
};

}  // namespace bitsim::host
