#pragma once
// RegFifo<T>: a clocked valid/ready channel, the one primitive every bitsim link is made of
// (AXI-Stream, and the AR/R/AW/W/B channels between a DMA and an HP port).
//
// Semantics, per clock edge (all modules evaluate at the rising edge):
//   - the producer sees ready() = "the FIFO had space at the end of the previous cycle" and
//     may push() one item per cycle when ready;
//   - the consumer sees valid() = "the FIFO held an item at the end of the previous cycle"
//     and may pop() one item per cycle when valid;
//   - pushes and pops take effect in the update phase, so an item pushed at edge c is
//     visible at edge c+1, and a slot freed at edge c is visible to the producer at c+1.
// This is a registered handshake: evaluation order between modules never matters, and a
// depth of 2 carries one item per clock at full throughput. Events let an idle module
// sleep until there is something to do.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <systemc>

namespace bitsim::hw {

template <typename T>
class RegFifo : public sc_core::sc_prim_channel {
 public:
  explicit RegFifo(const char* name, int depth = 2)
      : sc_core::sc_prim_channel(name), buf_(size_t(depth)), depth_(depth) {
    if (depth < 1) throw std::invalid_argument(std::string(name) + ": depth must be >= 1");
  }

  // Producer side.
  bool ready() const { return count_ < depth_; }
  void push(const T& item) {
    if (!ready() || pushed_) throw std::logic_error(std::string(name()) + ": push without ready");
    pending_ = item;
    pushed_ = true;
    request_update();
  }

  // Consumer side.
  bool valid() const { return count_ > 0; }
  const T& front() const {
    if (!valid()) throw std::logic_error(std::string(name()) + ": front without valid");
    return buf_[head_];
  }
  T pop() {
    if (!valid() || popped_) throw std::logic_error(std::string(name()) + ": pop without valid");
    popped_ = true;
    request_update();
    return buf_[head_];
  }

  int size() const { return count_; }
  int depth() const { return depth_; }
  uint64_t transfers() const { return transfers_; }
  void clear() {
    head_ = count_ = 0;
    pushed_ = popped_ = false;
  }

  // Notified in the update phase when an empty FIFO received an item / a full FIFO freed a
  // slot (the only states a module sleeps in).
  const sc_core::sc_event& written_event() const { return written_; }
  const sc_core::sc_event& read_event() const { return read_; }

 private:
  void update() override {
    // Events fire only on the transitions a sleeping module can be waiting for: empty ->
    // not empty (a consumer sleeps only on an empty FIFO) and full -> not full (a producer
    // sleeps only on a full one). Most beats fire none, which keeps the kernel cheap.
    const int before = count_;
    if (popped_) {
      head_ = (head_ + 1) % depth_;
      --count_;
      popped_ = false;
      if (before == depth_) read_.notify(sc_core::SC_ZERO_TIME);
    }
    if (pushed_) {
      buf_[(head_ + count_) % depth_] = pending_;
      ++count_;
      ++transfers_;
      pushed_ = false;
      if (before == 0) written_.notify(sc_core::SC_ZERO_TIME);
    }
  }

  std::vector<T> buf_;
  int depth_;
  int head_ = 0, count_ = 0;
  T pending_{};
  bool pushed_ = false, popped_ = false;
  uint64_t transfers_ = 0;
  sc_core::sc_event written_, read_;
};

// A 64-bit AXI-Stream beat (CIRCUITS.md: a beat is 8 bytes, little-endian).
struct StreamBeat {
  uint64_t data = 0;
  bool last = false;  // TLAST
};
using AxiStream = RegFifo<StreamBeat>;

}  // namespace bitsim::hw
