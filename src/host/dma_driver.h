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
#include "model/attention_stream.h"
#include "host/platform.h"
#include "base/config_field.h"
#include "base/error.h"

#include <fmt/format.h>

namespace bitsim::host {

// The shipped default is the C driver (the board's final state) with its calibrated costs;
// python() is PYNQ's driver. visit() gives each field's key (driver.<profile>.<field>),
// range, unit, evidence label and meaning (base/config_field.h).
struct DriverConfig {
  std::string profile = "c";           // c | python
  double reg_access_ns = 200;          // CPU time of one AXI-Lite register access
  double call_overhead_ns = 64443;     // fixed CPU time per driver call (both lanes) (calibrated)
  double flush_fixed_ns = 500;         // cache clean of one buffer the CPU wrote: fixed part
  double flush_ns_per_byte = 1.7447;   // ... and per byte (calibrated)
  double invalidate_fixed_ns = 500;    // cache invalidate of one buffer the CPU will read: fixed
  double invalidate_ns_per_byte = 1.7447;  // ... and per byte (calibrated, the flush value)
  double poll_gap_ns = 0;              // CPU time between two status polls, besides the access
  // PYNQ's driver makes more register accesses per transfer and its wait than this driver's
  // protocol does (running/idle checks before a start, DMACR reads, status re-reads): when not
  // 0, each call is charged up to this many accesses per transfer (DMA channel start), the
  // protocol's own accesses of the call counted in (docs/calibration.md, "python driver").
  double accesses_per_transfer = 0;
  double transfer_call_ns = 0;         // CPU time per transfer of the driver's own method calls

  // PYNQ's Python driver, composed from BOARD.md's per-access and per-transfer facts
  // (docs/calibration.md): 9 accesses of 10 us per transfer and wait, two Python method
  // calls of 21 us per transfer, one cache-maintenance ioctl of 25 us per buffer. Nothing is
  // fitted: the ~150 us per transfer BOARD.md reports is a validation row, not an input.
  static DriverConfig python() {
    DriverConfig d;
    d.profile = "python";
    d.reg_access_ns = 10000;          // BOARD.md: 6-14 us per register access from Python
    d.call_overhead_ns = 0;           // the per-transfer terms carry the Python calls
    d.flush_fixed_ns = 25000;         // one ioctl per buffer: a Python call (21 us) + the syscall
    d.flush_ns_per_byte = 0.05;
    d.invalidate_fixed_ns = 25000;
    d.invalidate_ns_per_byte = 0.05;
    d.poll_gap_ns = 0;
    d.accesses_per_transfer = 9;      // BOARD.md: PYNQ's 8-10 accesses per transfer and wait
    d.transfer_call_ns = 42000;       // transfer() and wait(): 2 x (27-36 us per mmio.write call - 6-14 us access)
    return d;
  }

  template <typename Self, typename Visitor>
  static void visit(Self& c, Visitor&& v) {
    using bitsim::Evidence;
    using bitsim::FieldInfo;
    v(c.profile, FieldInfo{"driver.profile", 0, 0, "", Evidence::kBoard,
                           "DMA driver: c (the board's final state) or python (PYNQ's driver)", 1, true, {"c", "python"}});
    const bool py = c.profile == "python";
    const std::string t = "driver." + std::string(py ? "python" : "c") + ".";
    // Of the C driver's figures, `bitsim calibrate` fits the cost per call and per byte of
    // cache maintenance (study/calibrate.h). In the python profile only the access's cost and count are BOARD.md's figures; the
    // other terms are composed from them or chosen (simulated), none is fitted.
    const Evidence fitted = py ? Evidence::kSimulated : Evidence::kCalibrated;
    const Evidence chosen = Evidence::kSimulated;
    v(c.reg_access_ns, FieldInfo{t + "reg_access_ns", 0, 1e6, "ns", py ? Evidence::kBoard : Evidence::kSimulated,
                                 "CPU time of one AXI-Lite register access (read or write); " +
                                     std::string(py ? "BOARD.md: 6-14 us per access from Python, 27-36 us public figure"
                                                    : "C over /dev/mem mmap")});
    v(c.call_overhead_ns, FieldInfo{t + "call_overhead_ns", 0, 1e7, "ns", fitted,
                                    "fixed CPU time per driver call (both lanes of one matmul or attention call)"});
    v(c.flush_fixed_ns, FieldInfo{t + "flush_fixed_ns", 0, 1e7, "ns", chosen,
                                  "cache clean of one CPU-written buffer before a DMA reads it: fixed part"});
    v(c.flush_ns_per_byte, FieldInfo{t + "flush_ns_per_byte", 0, 1e3, "ns/B", fitted, "cache clean: per byte"});
    v(c.invalidate_fixed_ns, FieldInfo{t + "invalidate_fixed_ns", 0, 1e7, "ns", chosen,
                                       "cache invalidate of one buffer the CPU will read after a DMA wrote it: fixed part"});
    v(c.invalidate_ns_per_byte, FieldInfo{t + "invalidate_ns_per_byte", 0, 1e3, "ns/B", fitted,
                                          "cache invalidate: per byte"});
    v(c.poll_gap_ns, FieldInfo{t + "poll_gap_ns", 0, 1e7, "ns", Evidence::kSimulated,
                               "CPU time between two DMASR polls besides the register access itself"});
    v(c.accesses_per_transfer, FieldInfo{t + "accesses_per_transfer", 0, 100, "", py ? Evidence::kBoard : Evidence::kSimulated,
                                         "register accesses the driver makes per transfer and its wait, the protocol's own "
                                         "counted in (0: the protocol's only)" +
                                             std::string(py ? "; BOARD.md: PYNQ's driver 8-10" : "")});
    v(c.transfer_call_ns, FieldInfo{t + "transfer_call_ns", 0, 1e7, "ns", Evidence::kSimulated,
                                    "CPU time per transfer of the driver's method calls besides their register accesses" +
                                        std::string(py ? " (transfer() and wait(): 2 x the public 27-36 us per mmio.write "
                                                         "call less BOARD.md's 6-14 us per access)"
                                                       : "")});
  }
  // Throws bitsim::Error naming `who` and the key of the first field out of range.
  void validate(const std::string& who) const {
    bitsim::check_fields(*this, who);  // both at 0 still poll: a poll takes at least kMinPollStepPs
  }
};

// The least simulated time one status poll takes when driver.<profile>.reg_access_ns and
// poll_gap_ns are both 0 (1 ns, well under the board's shortest register access): a poll
// loop always moves simulated time forward.
constexpr uint64_t kMinPollStepPs = 1000;

struct DriverStats {
  uint64_t matmul_calls = 0, attention_calls = 0;
  uint64_t transfers = 0;       // DMA channel starts (MM2S and S2MM)
  uint64_t descriptors = 0;     // SG descriptors written
  uint64_t polls = 0;           // status reads while waiting
  uint64_t flushed_bytes = 0, invalidated_bytes = 0;
  // Fixed cost of the calls (docs/variants-host.md): call overhead, register accesses outside
  // the polling loop plus one poll per wait, fixed part of each cache maintenance.
  uint64_t fixed_ps = 0;
};

// One head of an attention call, as its lane's chain carries it.
struct HeadWork {
  uint64_t header_q_addr = 0;   // header_bytes: header + q (written by the CPU)
  uint64_t k_addr = 0, v_addr = 0;
  uint32_t kv_bytes = 0;        // T x d (d = attention.head_dim)
  bool interleaved = false;     // online-softmax: one buffer of 2 x kv_bytes at k_addr (K_t V_t
                                // rows), 2 descriptors per head instead of 3
  uint32_t stream_bytes = 0;    // interleaved: when not 0, that buffer's bytes instead (INT4 KV:
                                // the bank and T rows of the INT4 format)
  // TIP (docs/tip.md "Stream"): when not empty, the head is header_bytes at header_q_addr
  // (header, q and the tag beats), then these buffers in order (the bank, then each region's
  // rows in its slot), one descriptor each; its result is result_bytes (with the masses).
  struct Segment {
    uint64_t addr = 0;
    uint32_t bytes = 0;
  };
  std::vector<Segment> segments;
  uint32_t header_bytes = 0;    // header + q (model::attention_header_q_bytes(G, d): 112 at d = 96,
                                // G = 1; TIP: and the tag beats)
  uint32_t result_bytes = 0;    // the head's (a pass's G heads') result (model::attention_result_bytes(d):
                                // 392 at d = 96; TIP: with the masses)
  int members = 1;              // a shared-stream pass (docs/variants-attention.md 9): its G query
                                // heads, whose results result_bytes holds in order
  uint32_t header_q_bytes() const { return header_bytes; }
  uint32_t head_result_bytes() const { return result_bytes; }
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
  // At a call's end: the accesses up to accesses_per_transfer the protocol did not make, and
  // the method calls' time, for the call's `transfers` channel starts.
  void charge_per_transfer(uint64_t transfers);
  void invalidate(uint64_t bytes);
  void wait_idle(int dma, uint32_t sr_offset, const char* what);
  [[noreturn]] void engine_failure(int engine, int lane, const std::string& what);
  // The opening of a call on the shipped engine of registry index `engine`: counted in
  // `calls`, the fixed CPU time spent; its engine index, its lanes' DMAs and the transfers
  // before it.
  struct Call {
    int engine;
    int dmas[kLanes];
    uint64_t transfers_before;
  };
  Call open_call(int engine, uint64_t& calls);
  int matmul_ = 0, attention_ = 0;  // the shipped engines' registry indices
  uint64_t write_descriptor(int lane, bool s2mm, uint64_t buffer, uint32_t bytes, bool sof, bool eof);

  Platform& ps_;
  const MemoryMap& map_;
  DriverConfig config_;
  uint64_t access_ps_ = 0;
  uint64_t call_accesses_ = 0;  // the protocol's fixed-cost register accesses in the current call
  DriverStats stats_;
  bool polling_ = false;  // inside wait_idle's loop (its reads are not fixed cost)
  // Descriptor rings: per lane, MM2S ring then S2MM ring inside the lane's descriptor area.
  int mm2s_ring_ = 0, s2mm_ring_ = 0;
  int mm2s_next_[kLanes] = {0, 0}, s2mm_next_[kLanes] = {0, 0};
};

}  // namespace bitsim::host
