#pragma once
// DmaChannelRegisters: the register file of one AXI DMA channel (PG021; CIRCUITS.md 1):
// DMACR, DMASR, CURDESC, TAILDESC, SA/DA and LENGTH, with the channel's architectural
// state (halted, idle, a start waiting for its edge, busy), run/stop, reset, the error
// bits, IOC and its threshold counter. It is a plain value: the clocked AxiDma keeps one
// per channel and drives it from its datapath; the fast board keeps the same objects
// between batches and takes their values during a batch from the clocked board's run (the
// timing oracle). Both fidelities therefore answer every register access with the same
// code, and cannot drift apart.
//
// What a register access does (PG021, as the IP behaves):
// - DMACR.Reset: every register to its reset value, the channel halted; the owner drops its
//   transfer (traffic already on the bus drains; Reset reads 1 until it has).
// - DMACR.RS = 1: a halted channel without errors becomes idle (Halted -> Idle); after an
//   error only a reset restarts it (RS stays 0). An IRQThreshold of 0 is ignored.
// - DMACR.RS = 0: an idle channel (or one whose start has not reached its edge) halts at
//   once; a busy one halts when its transfer (simple) or descriptor (SG) ends.
// - DMASR: bits 12..14 are write-1-to-clear; everything else reads only.
// - CURDESC: written only while halted (SG). TAILDESC (SG) or a non-zero LENGTH (simple) on
//   an idle channel starts it; a TAILDESC write while busy moves the tail of the running
//   chain. SA/DA and LENGTH do not exist in SG mode, CURDESC and TAILDESC not in simple mode
//   (they read 0, writes are ignored).
#include <cstdint>

namespace bitsim::hw {

// Register map and bit fields (CIRCUITS.md 1, PG021), for the host driver and the tests.
namespace dma_reg {
constexpr uint32_t kMm2sDmacr = 0x00, kMm2sDmasr = 0x04, kMm2sCurdesc = 0x08, kMm2sTaildesc = 0x10,
                   kMm2sSa = 0x18, kMm2sLength = 0x28;
constexpr uint32_t kS2mmDmacr = 0x30, kS2mmDmasr = 0x34, kS2mmCurdesc = 0x38, kS2mmTaildesc = 0x40,
                   kS2mmDa = 0x48, kS2mmLength = 0x58;
constexpr uint32_t kS2mmOffset = 0x30;      // S2MM register = MM2S register + 0x30
constexpr uint32_t kWindowBytes = 0x10000;  // AXI-Lite address window of one DMA (64 KB)
// DMACR
constexpr uint32_t kCrRunStop = 1u << 0, kCrReset = 1u << 2, kCrKeyhole = 1u << 3, kCrCyclic = 1u << 4,
                   kCrIocIrqEn = 1u << 12, kCrDlyIrqEn = 1u << 13, kCrErrIrqEn = 1u << 14;
constexpr uint32_t kCrIrqThresholdShift = 16;  // bits 23:16
constexpr uint32_t kCrResetValue = 0x0001'0000;
// DMASR
constexpr uint32_t kSrHalted = 1u << 0, kSrIdle = 1u << 1, kSrSgIncld = 1u << 3, kSrDmaIntErr = 1u << 4,
                   kSrDmaSlvErr = 1u << 5, kSrDmaDecErr = 1u << 6, kSrSgIntErr = 1u << 8, kSrSgSlvErr = 1u << 9,
                   kSrSgDecErr = 1u << 10, kSrIocIrq = 1u << 12, kSrDlyIrq = 1u << 13, kSrErrIrq = 1u << 14;
constexpr uint32_t kSrErrors = kSrDmaIntErr | kSrDmaSlvErr | kSrDmaDecErr | kSrSgIntErr | kSrSgSlvErr | kSrSgDecErr;
// SG descriptor (0x40-aligned)
constexpr uint32_t kDescNxtdesc = 0x00, kDescBufferAddress = 0x08, kDescControl = 0x18, kDescStatus = 0x1C;
constexpr uint32_t kDescAlign = 0x40, kDescBytes = 0x40;
constexpr uint32_t kCtrlLengthMask = 0x03FF'FFFF, kCtrlSof = 1u << 27, kCtrlEof = 1u << 26;
constexpr uint32_t kStsCmplt = 1u << 31, kStsDecErr = 1u << 30, kStsSlvErr = 1u << 29, kStsIntErr = 1u << 28,
                   kStsRxSof = 1u << 27, kStsRxEof = 1u << 26, kStsLengthMask = 0x03FF'FFFF;
}  // namespace dma_reg


enum class DmaState : uint8_t {
  kHalted,    // RS = 0, after reset or an error
  kIdle,      // running, no work
  kStarting,  // a start (LENGTH / TAILDESC write) waits for its edge
  kBusy,      // a transfer or chain is in progress (the owner's datapath has it)
};

// What a register write asks of the owner's datapath.
enum class DmaWriteEffect : uint8_t {
  kNone,
  kStart,  // the channel was idle and is now kStarting: begin at the effective edge
  kReset,  // the channel was reset: drop the transfer, drain the bus traffic
  kHalt,   // RS cleared on an idle or starting channel: it halted at once
};

class DmaChannelRegisters {
 public:
  DmaChannelRegisters() = default;
  DmaChannelRegisters(bool s2mm, bool has_sg);

  // Register offsets are relative to the channel (0x00 DMACR .. 0x28 LENGTH).
  uint32_t read(uint32_t rel) const;
  // Offsets outside the channel's map are the caller's to reject. After kReset the owner
  // drops its transfer and calls drain_complete() once no traffic of the channel is left
  // on the bus (at once if there is none).
  DmaWriteEffect write(uint32_t rel, uint32_t value);
  static bool is_register(uint32_t rel);

  // Datapath events.
  void begin();                           // the start reached its edge: busy
  void descriptor_fetched(uint32_t addr);  // SG: CURDESC follows the chain
  void descriptor_done(bool end_of_packet, uint32_t next_desc);  // SG write-back done; IOC counting
  // The transfer or chain ended without error. Simple mode: IOC set, and S2MM_LENGTH holds
  // the bytes received. Returns true if the channel halted (a stop was requested).
  bool finish(uint32_t s2mm_bytes);
  void halt();
  // A descriptor ended and a stop was requested: halt now (SG). Returns true if it halted.
  bool halt_if_stop_requested();
  void error(uint32_t dmasr_bit);         // error bit, Err_Irq, halted, RS cleared
  void drain_complete() { reset_pending_ = false; dmacr_ &= ~dma_reg::kCrReset; }

  DmaState state() const { return state_; }
  bool reset_pending() const { return reset_pending_; }
  bool has_sg() const { return has_sg_; }
  bool s2mm() const { return s2mm_; }
  uint32_t dmacr() const { return dmacr_; }
  uint32_t dmasr() const { return dmasr_; }
  uint32_t curdesc() const { return curdesc_; }
  uint32_t taildesc() const { return taildesc_; }
  uint32_t addr() const { return addr_; }
  uint32_t length() const { return length_; }
  uint32_t next_desc() const { return next_desc_; }  // the descriptor the next start fetches
  bool irq() const { return (dmasr_ & dmacr_ & (dma_reg::kSrIocIrq | dma_reg::kSrErrIrq)) != 0; }
  uint32_t ioc_count() const { return ioc_count_; }
  // The fields that hold addresses or lengths, as a group: the fast board replays a
  // recorded register file on other buffers by setting them.
  struct Addresses {
    uint32_t curdesc = 0, taildesc = 0, addr = 0, length = 0, next_desc = 0;
  };
  Addresses addresses() const { return {curdesc_, taildesc_, addr_, length_, next_desc_}; }
  void set_addresses(const Addresses& a) {
    curdesc_ = a.curdesc;
    taildesc_ = a.taildesc;
    addr_ = a.addr;
    length_ = a.length;
    next_desc_ = a.next_desc;
  }

  bool operator==(const DmaChannelRegisters&) const = default;

 private:
  DmaWriteEffect write_dmacr(uint32_t value);
  void reset();
  void start();

  bool s2mm_ = false, has_sg_ = false;
  DmaState state_ = DmaState::kHalted;
  uint32_t dmacr_ = dma_reg::kCrResetValue, dmasr_ = dma_reg::kSrHalted;
  uint32_t curdesc_ = 0, taildesc_ = 0, addr_ = 0, length_ = 0;
  uint32_t next_desc_ = 0;
  uint32_t ioc_count_ = 0;        // SG completions toward IRQThreshold
  bool stop_requested_ = false;   // RS cleared while busy
  bool reset_pending_ = false;    // Reset reads 1 until in-flight traffic has drained
};

}  // namespace bitsim::hw
