#include "hw/interconnect/dma_registers.h"

#include <algorithm>

namespace bitsim::hw {

using namespace dma_reg;

DmaChannelRegisters::DmaChannelRegisters(bool s2mm, bool has_sg) : s2mm_(s2mm), has_sg_(has_sg) {
  dmasr_ = kSrHalted | (has_sg ? kSrSgIncld : 0);
}

bool DmaChannelRegisters::is_register(uint32_t rel) {
  return rel == kMm2sDmacr || rel == kMm2sDmasr || rel == kMm2sCurdesc || rel == kMm2sTaildesc || rel == kMm2sSa ||
         rel == kMm2sLength;
}

uint32_t DmaChannelRegisters::read(uint32_t rel) const {
  switch (rel) {
    case kMm2sDmacr: return dmacr_;
    case kMm2sDmasr: return dmasr_;
    case kMm2sCurdesc: return has_sg_ ? curdesc_ : 0;
    case kMm2sTaildesc: return has_sg_ ? taildesc_ : 0;
    case kMm2sSa: return has_sg_ ? 0 : addr_;
    case kMm2sLength: return has_sg_ ? 0 : length_;
    default: return 0;
  }
}

DmaWriteEffect DmaChannelRegisters::write(uint32_t rel, uint32_t value) {
  switch (rel) {
    case kMm2sDmacr:
      return write_dmacr(value);
    case kMm2sDmasr:  // IOC_Irq, Dly_Irq, Err_Irq: write 1 to clear
      dmasr_ &= ~(value & (kSrIocIrq | kSrDlyIrq | kSrErrIrq));
      return DmaWriteEffect::kNone;
    case kMm2sCurdesc:  // only while halted, as on the IP
      if (has_sg_ && (dmasr_ & kSrHalted)) next_desc_ = curdesc_ = value & ~(kDescAlign - 1);
      return DmaWriteEffect::kNone;
    case kMm2sTaildesc:
      if (!has_sg_) return DmaWriteEffect::kNone;
      taildesc_ = value & ~(kDescAlign - 1);
      if (state_ != DmaState::kIdle) return DmaWriteEffect::kNone;  // a busy chain runs on to the new tail
      start();
      return DmaWriteEffect::kStart;
    case kMm2sSa:
      if (!has_sg_) addr_ = value;
      return DmaWriteEffect::kNone;
    case kMm2sLength:
      if (has_sg_) return DmaWriteEffect::kNone;
      length_ = value;
      if (state_ != DmaState::kIdle || value == 0) return DmaWriteEffect::kNone;
      start();
      return DmaWriteEffect::kStart;
    default:
      return DmaWriteEffect::kNone;
  }
}

void DmaChannelRegisters::start() {
  state_ = DmaState::kStarting;
  dmasr_ &= ~kSrIdle;
}

DmaWriteEffect DmaChannelRegisters::write_dmacr(uint32_t value) {
  if (value & kCrReset) {
    reset();
    return DmaWriteEffect::kReset;
  }
  constexpr uint32_t kWritable =
      kCrRunStop | kCrKeyhole | kCrCyclic | kCrIocIrqEn | kCrDlyIrqEn | kCrErrIrqEn | 0xFFFF'0000u;
  uint32_t v = (dmacr_ & ~kWritable) | (value & kWritable);
  if (((value >> kCrIrqThresholdShift) & 0xFF) == 0)  // a threshold of 0 is ignored (PG021)
    v = (v & ~0x00FF'0000u) | (dmacr_ & 0x00FF'0000u);
  DmaWriteEffect effect = DmaWriteEffect::kNone;
  if (v & kCrRunStop) {
    if (reset_pending_ || (dmasr_ & kSrErrors)) {
      v &= ~kCrRunStop;  // after an error only a reset restarts the channel
    } else if (state_ == DmaState::kHalted) {
      state_ = DmaState::kIdle;
      dmasr_ = (dmasr_ & ~kSrHalted) | kSrIdle;
    }
    stop_requested_ = false;
  } else if (state_ == DmaState::kIdle || state_ == DmaState::kStarting) {
    halt();
    effect = DmaWriteEffect::kHalt;
  } else if (state_ == DmaState::kBusy) {
    stop_requested_ = true;  // halts when the transfer (simple) or descriptor (SG) ends
  }
  dmacr_ = v;
  return effect;
}

void DmaChannelRegisters::reset() {
  *this = DmaChannelRegisters(s2mm_, has_sg_);
  dmacr_ = kCrResetValue | kCrReset;
  reset_pending_ = true;
}

void DmaChannelRegisters::halt() {
  state_ = DmaState::kHalted;
  stop_requested_ = false;
  dmasr_ = (dmasr_ | kSrHalted) & ~kSrIdle;
}

void DmaChannelRegisters::begin() { state_ = DmaState::kBusy; }

void DmaChannelRegisters::descriptor_fetched(uint32_t addr) { curdesc_ = addr; }

void DmaChannelRegisters::descriptor_done(bool end_of_packet, uint32_t next_desc) {
  if (end_of_packet) {
    const uint32_t threshold = std::max(1u, (dmacr_ >> kCrIrqThresholdShift) & 0xFF);
    if (++ioc_count_ >= threshold) {
      ioc_count_ = 0;
      dmasr_ |= kSrIocIrq;
    }
  }
  next_desc_ = next_desc;
}

bool DmaChannelRegisters::finish(uint32_t s2mm_bytes) {
  if (!has_sg_) {
    if (s2mm_) length_ = s2mm_bytes;  // S2MM_LENGTH reads the bytes received
    dmasr_ |= kSrIocIrq;
  }
  if (stop_requested_) {
    halt();
    return true;
  }
  state_ = DmaState::kIdle;
  dmasr_ |= kSrIdle;
  return false;
}

bool DmaChannelRegisters::halt_if_stop_requested() {
  if (!stop_requested_) return false;
  halt();
  return true;
}

void DmaChannelRegisters::error(uint32_t dmasr_bit) {
  dmasr_ = (dmasr_ | dmasr_bit | kSrErrIrq | kSrHalted) & ~kSrIdle;
  dmacr_ &= ~kCrRunStop;
  state_ = DmaState::kHalted;
  stop_requested_ = false;
}

}  // namespace bitsim::hw
