#pragma once
// AxiDma: a Xilinx AXI DMA v7.1 (PG021) as configured on the board (CIRCUITS.md 1;
// docs/hw-timing.md "AXI DMA"): an MM2S channel (DDR -> AXI-Stream) and an S2MM channel
// (AXI-Stream -> DDR), each in simple (direct register) mode or, with the SG engine, in
// scatter-gather mode. Registers are reached over AXI-Lite as a TLM-2.0 target (`ctrl`);
// memory is reached through three AXI3 master links (MM2S data, S2MM data, SG) that the
// owner attaches to an HpPort; the streams are RegFifos bound by the owner. Timing follows
// the documented PG021 latencies; errors (length limit, misalignment, DECERR) set the
// DMASR bits and halt the channel as the IP does.
#include <cstdint>
#include <functional>
#include <tuple>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>

#include "hw/interconnect/axi_mm.h"
#include "hw/parts/clock.h"
#include "hw/parts/fixed_ring.h"
#include "hw/memory/memory.h"
#include "hw/interconnect/dma_registers.h"
#include "hw/parts/reg_fifo.h"

namespace bitsim::hw {


// The shipped default is the board's AXI DMA as bitsim runs it (the board sets base_address
// and has_sg per instance); visit() gives each field's key, range, unit, evidence label and
// meaning (base/config_field.h).
struct AxiDmaConfig {
  uint64_t base_address = 0x4040'0000;  // AXI-Lite address of register offset 0 (PYNQ-Z2 base design's
                                        // first DMA); ctrl decodes [base, base + 64 KB)
  int length_bits = 23;                 // width of LENGTH and of a descriptor's buffer length, bits
                                        // (BOARD.md: 23 -> at most 8,388,607 bytes)
  bool has_sg = true;                   // SG engine included: scatter-gather mode (TAILDESC starts);
                                        // false: simple mode (LENGTH starts), as C_INCLUDE_SG on the IP
  int sg_tail_to_fetch = 10;            // TAILDESC write -> descriptor read request, cycles (PG021)
  int desc_to_data = 28;                // descriptor arrived -> data request / stream accepted, cycles (PG021)
  int read_to_stream = 1;               // read data beat arrived -> it leaves on the stream, cycles (PG021)
  int s2mm_beat_to_write = 39;          // first S2MM stream beat arrived -> first write request, cycles (PG021)
  int datamover_cmd_to_read = 8;        // LENGTH write -> read request (MM2S) / stream accepted (S2MM),
                                        // cycles (PG022)
  int max_burst_beats = 16;             // DataMover burst size: longest data request, beats (PG021: 16)
  int mm2s_fifo_beats = 64;             // MM2S data FIFO, beats; a read request is issued only when the
                                        // FIFO has room for all its beats; at least max_burst_beats
  int s2mm_fifo_beats = 64;             // S2MM data FIFO, beats: stream beats wait here for their write
                                        // request, which takes a whole burst; at least max_burst_beats

  template <typename Self, typename Visitor>
  static void visit(Self& c, Visitor&& v) {
    const Evidence board = Evidence::kBoard;
    v(c.base_address, FieldInfo{"dma.base_address", 0, 4294967295.0, "bytes", board,
                                "AXI-Lite address of the register block, 64 KB aligned", 1, false});
    v(c.length_bits, FieldInfo{"dma.length_bits", 8, 26, "bits", board,
                               "AXI DMA length register width: transfers up to 2^bits - 1 bytes (BOARD.md: 23)"});
    v(c.has_sg, FieldInfo{"dma.has_sg", 0, 1, "", board, "scatter-gather engine included (C_INCLUDE_SG)", 1, false});
    v(c.sg_tail_to_fetch, FieldInfo{"dma.sg_tail_to_fetch", 0, 1000, "cycles", board,
                                    "SG: TAILDESC write -> descriptor read request (PG021)"});
    v(c.desc_to_data, FieldInfo{"dma.desc_to_data", 0, 1000, "cycles", board,
                                "SG: descriptor arrived -> data request (PG021)"});
    v(c.read_to_stream, FieldInfo{"dma.read_to_stream", 0, 1000, "cycles", board,
                                  "MM2S: first read data -> first stream beat (PG021)"});
    v(c.s2mm_beat_to_write, FieldInfo{"dma.s2mm_beat_to_write", 0, 1000, "cycles", board,
                                      "S2MM: first stream beat -> write request (PG021)"});
    v(c.datamover_cmd_to_read, FieldInfo{"dma.datamover_cmd_to_read", 0, 1000, "cycles", board,
                                         "DataMover command -> read request (PG021)"});
    v(c.max_burst_beats, FieldInfo{"dma.max_burst_beats", 1, 256, "beats", board, "DataMover burst size (PG021: 16)"});
    v(c.mm2s_fifo_beats, FieldInfo{"dma.mm2s_fifo_beats", 1, 4096, "beats", Evidence::kSimulated,
                                   "MM2S data FIFO: reads are requested only when their beats fit"});
    v(c.s2mm_fifo_beats, FieldInfo{"dma.s2mm_fifo_beats", 1, 4096, "beats", Evidence::kSimulated,
                                   "S2MM data FIFO: a write request waits for its whole burst here"});
  }
  // Throws bitsim::Error naming `who` and the key of the first field out of range.
  void validate(const std::string& who) const {
    check_fields(*this, who);
    // Both data FIFOs hold a whole burst: MM2S requests a read only when all its beats fit,
    // S2MM requests a write only when all its beats are in. A smaller FIFO never moves a
    // burst (the DataMover's store-and-forward FIFOs are at least one burst deep, PG022).
    for (const auto& [key, beats, why] :
         {std::tuple<const char*, int, const char*>{"dma.mm2s_fifo_beats", mm2s_fifo_beats,
                                                    "a read is requested only when its whole burst fits the FIFO"},
          std::tuple<const char*, int, const char*>{"dma.s2mm_fifo_beats", s2mm_fifo_beats,
                                                    "a write is requested only when its whole burst is in the FIFO"}})
      if (beats < max_burst_beats)
        throw Error(fmt::format("config key '{}' = {} is smaller than dma.max_burst_beats = {}: {}, so no transfer "
                                "would ever move; give {} >= {} or a smaller dma.max_burst_beats",
                                key, beats, max_burst_beats, why, key, max_burst_beats));
    if (base_address % dma_reg::kWindowBytes != 0)
      throw Error(fmt::format("{}: dma.base_address = {:#x} is not 64 KB aligned", who, base_address));
  }
};

enum class DmaChannel { kMm2s = 0, kS2mm = 1 };

struct AxiDmaChannelStats {
  uint64_t transfers = 0;     // completed simple transfers and SG chains (descriptor at TAILDESC done)
  uint64_t descriptors = 0;   // SG descriptors completed (status written back)
  uint64_t bytes = 0;         // data bytes moved (MM2S: streamed out; S2MM: received and written)
  uint64_t busy_cycles = 0;   // sum over transfers of (completion or error edge - start edge)
  uint64_t errors = 0;        // transfers ended by an error (DMASR error bit set)
  uint64_t last_start_cycle = 0;          // edge at which the last transfer started (the edge after the
                                          // LENGTH / TAILDESC write)
  uint64_t last_first_request_cycle = 0;  // edge of its first data request (MM2S read, S2MM write)
  uint64_t last_first_beat_cycle = 0;     // edge of its first stream beat (MM2S pushed, S2MM taken)
  uint64_t last_completion_cycle = 0;     // edge at which it completed (DMASR.Idle set)
};

struct AxiDmaStats {
  AxiDmaChannelStats mm2s;
  AxiDmaChannelStats s2mm;
};

class AxiDma : public sc_core::sc_module {
 public:
  // AXI-Lite register access: 4-byte reads and writes at base_address + offset.
  tlm_utils::simple_target_socket<AxiDma> ctrl;
  // AXI3 masters; the owner attaches each to an HpPort (HpPort::attach).
  AxiMmLink m_axi_mm2s;  // MM2S data reads
  AxiMmLink m_axi_s2mm;  // S2MM data writes
  AxiMmLink m_axi_sg;    // descriptor fetches and status write-backs of both channels
  // Streams, bound by the owner before the simulation starts: MM2S pushes into mm2s_out, S2MM
  // pops from s2mm_in. A transfer on an unbound channel throws bitsim::Error.
  AxiStream* mm2s_out = nullptr;
  AxiStream* s2mm_in = nullptr;
  // Interrupt lines: (IOC_Irq and IOC_IrqEn) or (Err_Irq and Err_IrqEn); updated at the
  // rising edge after the status or control change.
  sc_core::sc_signal<bool> mm2s_introut;
  sc_core::sc_signal<bool> s2mm_introut;

  SC_HAS_PROCESS(AxiDma);
  AxiDma(sc_core::sc_module_name name, Clock& clock, const AxiDmaConfig& config);

  const AxiDmaConfig& config() const { return config_; }
  uint32_t max_length() const { return max_length_; }  // 2^length_bits - 1 bytes
  const AxiDmaStats& stats() const { return stats_; }
  const AxiDmaChannelStats& stats(DmaChannel ch) const { return ch == DmaChannel::kMm2s ? stats_.mm2s : stats_.s2mm; }
  uint64_t last_completion_cycle(DmaChannel ch) const { return stats(ch).last_completion_cycle; }
  // True while the channel has work or traffic in flight (not halted or idle, a reset
  // draining, or an aborted transfer's beats still on the bus).
  bool active(DmaChannel ch) const;
  // Timing state (hw/parts/fingerprint.h): what each channel's datapath holds, its links'
  // FIFOs, the SG engine's queues and turns; not the register file (the fast board keys its
  // reuse on that) nor the statistics.
  uint64_t state_fingerprint() const;
  // The last edge at the end of which a channel of this DMA was still active (0 if never).
  uint64_t last_active_cycle() const { return last_active_cycle_; }
  // The channel's register file; restore_registers sets it on a quiescent channel (the
  // timing oracle starts a batch from the fast board's register state).
  const DmaChannelRegisters& registers(DmaChannel ch) const { return ch_[int(ch)].regs; }
  void restore_registers(DmaChannel ch, const DmaChannelRegisters& regs);
  // Called after every clock edge at which a channel's register file changed, and after a
  // register write that changed it (cycle UINT64_MAX); the timing oracle records the
  // changes for the fast fidelity. Costs nothing when unset.
  void set_register_observer(std::function<void(DmaChannel, uint64_t cycle)> observer);

  // One rising edge `now` of the clocked method, awake (hw/edge_loop.h drives the board with
  // it, without SystemC's scheduler), and the rest the method then takes: none, asleep until
  // a register write (kIdle), or asleep until a register write or a beat on s2mm_in
  // (kStreamWait).
  enum class Rest : uint8_t { kAwake, kIdle, kStreamWait };
  Rest edge(uint64_t now);

 private:
  // What the datapath is doing; kNone whenever the channel is halted, idle or starting
  // (the register file holds that state), and during the drain of an error.
  enum class Step : uint8_t {
    kNone,
    kFetchWait,  // SG: descriptor read request due from action_cycle on
    kFetching,   // SG: descriptor beats in flight
    kData,       // moving data; requests (MM2S) / stream beats (S2MM) from action_cycle on
    kWriteBack,  // SG: descriptor status write-back due or in flight
  };
  struct Mm2sBeat {
    uint64_t data = 0;
    uint64_t ready = 0;  // edge from which it may leave on the stream
  };
  struct Channel {
    bool s2mm = false;
    uint32_t reg_base = 0;  // 0x00 or 0x30
    DmaChannelRegisters regs;     // the register file (shared with the fast fidelity)
    Step step = Step::kNone;
    uint64_t start_cycle = 0;     // edge at which the pending start takes effect
    uint64_t action_cycle = 0;    // earliest edge of the phase's next action
    bool first_request_done = false, first_beat_done = false;  // of the transfer (for the stats)
    bool data_first_beat = false;  // S2MM: the data phase (transfer or descriptor) has taken a beat
    // SG state.
    uint64_t desc_addr = 0, desc_next = 0;
    uint64_t desc_words[8] = {};
    uint32_t desc_control = 0;
    int desc_beats = 0;
    bool desc_error = false;
    uint32_t wb_status = 0;
    bool wb_issued = false, wb_error = false;  // wb_error: the write-back reports an error, then halt
    bool packet_open = false;                  // S2MM SG: a packet continues into the next descriptor
    bool rx_sof = false;
    int sg_outstanding = 0;  // SG reads / writes of this channel in flight
    // Data transfer in progress.
    uint64_t xfer_addr = 0;   // next data request address
    uint32_t xfer_beats = 0;  // beats of the transfer (MM2S) / buffer capacity (S2MM)
    uint32_t req_beats = 0;   // beats requested so far
    uint32_t next_req = 0;    // beats of the next data request (0 when all are requested);
                              // kept by request_issued
    uint32_t done_beats = 0;  // MM2S: streamed; S2MM: received
    bool last_on_end = false; // MM2S: TLAST on the final beat
    bool aborted = false;     // a data error ended the transfer; in-flight traffic drains
    // MM2S data FIFO.
    detail::FixedRing<Mm2sBeat> mm2s_fifo;
    uint32_t reserved = 0;       // requested beats not yet arrived
    uint32_t discard_beats = 0;  // beats of aborted requests still to arrive
    // S2MM data FIFO and write bookkeeping.
    detail::FixedRing<uint64_t> s2mm_fifo;  // received beats; the oldest w_owed have write requests
    detail::FixedRing<uint32_t> write_reqs; // beats of issued write requests whose first W beat is pending
    uint32_t w_owed = 0, b_owed = 0, w_left_in_req = 0;
    bool ended = false, tlast = false;
    uint64_t first_beat_cycle = 0;
  };
  struct SgRead {
    uint8_t ch = 0;
    uint8_t beats = 0;
    bool discard = false;
  };
  struct SgWrite {
    uint8_t ch = 0;
    bool discard = false;
  };

  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  uint32_t read_register(uint32_t offset) const;
  void write_register(uint32_t offset, uint32_t value, uint64_t effective_cycle);
  void drop_transfer(Channel& c);
  void drain_data(Channel& c);

  void tick();
  void end_of_elaboration() override;
  void begin(Channel& c, uint64_t now);
  // Per-edge parts of tick(), inlined into it (defined in axi_dma.cpp only).
  inline void mm2s_data(Channel& c, uint64_t now);
  inline void s2mm_data(Channel& c, uint64_t now);
  inline void s2mm_take_beat(Channel& c, uint64_t now);
  inline void s2mm_write_request(Channel& c, uint64_t now);
  inline void s2mm_write_beat(Channel& c);
  inline void sg_returns(uint64_t now);
  inline void sg_issue(uint64_t now);
  void on_descriptor(Channel& c, uint64_t now);
  void on_writeback(Channel& c, bool error, uint64_t now);
  void data_done(Channel& c, uint64_t now);
  void data_error(Channel& c, uint64_t now);
  void raise_error(Channel& c, uint32_t dmasr_bit, uint64_t now);
  void finish_transfer(Channel& c, uint64_t now);
  void start_data(Channel& c, uint64_t addr, uint32_t bytes, bool last_on_end, uint64_t action);
  bool quiescent(const Channel& c) const;
  bool drained(const Channel& c) const;
  uint32_t request_beats(uint64_t addr, uint32_t left) const;
  void request_issued(Channel& c, uint32_t beats);
  AxiDmaChannelStats& stats_of(const Channel& c) { return c.s2mm ? stats_.s2mm : stats_.mm2s; }

  Clock& clock_;
  AxiDmaConfig config_;
  uint32_t max_length_ = 0;
  Channel ch_[2];
  detail::FixedRing<SgRead> sg_reads_;
  detail::FixedRing<SgWrite> sg_writes_;
  int sg_read_rr_ = 0, sg_write_rr_ = 0;
  sc_core::sc_event wake_event_;
  sc_core::sc_event_or_list idle_list_, s2mm_wait_list_;
  bool sleeping_ = false;
  AxiDmaStats stats_;
  void report_changes(uint64_t cycle);
  std::function<void(DmaChannel, uint64_t)> observer_;
  uint64_t last_active_cycle_ = 0;
  DmaChannelRegisters observed_[2];
};

}  // namespace bitsim::hw
