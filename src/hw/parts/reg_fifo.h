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

// The handshake state of a RegFifo, independent of the item type: one update() for every
// FIFO, so that the kernel's update phase calls the same function for all of them (a
// well-predicted call; the items never move in the update phase).
class RegFifoBase : public sc_core::sc_prim_channel {
 public:
  bool ready() const { return count_ < depth_; }
  bool valid() const { return count_ > 0; }
  int size() const { return count_; }
  int depth() const { return depth_; }
  uint64_t transfers() const { return transfers_; }
  void clear() {
    head_ = count_ = 0;
    pushed_ = popped_ = false;
    publish_valid();
  }

  // For a consumer of many FIFOs (HpPort): keep bit `bit` of `*word` equal to valid(), so
  // that the consumer finds the non-empty FIFOs in one word instead of polling each. One
  // watcher per FIFO, set before the simulation starts.
  void watch_valid(uint64_t* word, uint64_t bit) {
    if (watch_ != nullptr && watch_ != word)
      throw std::logic_error(std::string(name()) + ": already watched by another consumer");
    watch_ = word;
    watch_bit_ = bit;
    publish_valid();
  }

  // Notified in the update phase when an empty FIFO received an item (the state a consumer
  // sleeps in). No module sleeps on a full FIFO, so a FIFO has no event for a freed slot:
  // one SystemC event fewer per FIFO to build and name with every board.
  const sc_core::sc_event& written_event() const { return written_; }

  // Driven without SystemC's scheduler (hw/edge_loop.h): from now on a push or a pop lists
  // the FIFO in `*pending` (once per edge) instead of asking the kernel for an update, and
  // the driver calls commit() for each listed FIFO at the end of the edge. No event is
  // notified then (the driver knows which consumer an item wakes).
  void drive_updates(std::vector<RegFifoBase*>* pending) { pending_ = pending; }
  // The update phase of one edge: the pushes and pops of the edge become visible.
  void commit() {
    listed_ = false;
    apply();
  }

 protected:
  RegFifoBase(const char* name, int depth) : sc_core::sc_prim_channel(name), depth_(depth) {
    if (depth < 1) throw std::invalid_argument(std::string(name) + ": depth must be >= 1");
  }
  // Slot of a push in this cycle: after the visible items, free whatever the consumer does.
  int push_slot() {
    if (!ready() || pushed_) misuse("push without ready");
    pushed_ = true;
    mark();
    const int tail = head_ + count_;
    return tail >= depth_ ? tail - depth_ : tail;
  }
  int pop_slot() {
    if (!valid() || popped_) misuse("pop without valid");
    popped_ = true;
    mark();
    return head_;
  }
  int front_slot() const {
    if (!valid()) misuse("front without valid");
    return head_;
  }
  [[noreturn, gnu::cold, gnu::noinline]] void misuse(const char* what) const {
    throw std::logic_error(std::string(name()) + ": " + what);
  }

 private:
  void mark() {
    if (pending_ == nullptr) {
      request_update();
    } else if (!listed_) {
      listed_ = true;
      pending_->push_back(this);
    }
  }
  void update() override {
    // The event fires only on the transition a sleeping module can be waiting for: empty ->
    // not empty (a consumer sleeps only on an empty FIFO). Most beats fire none, which keeps
    // the kernel cheap.
    if (apply()) written_.notify(sc_core::SC_ZERO_TIME);
  }
  // The pushes and pops of the edge take effect; true when the FIFO was empty and now holds
  // an item.
  bool apply() {
    const int before = count_;
    bool written = false;
    if (popped_) {
      if (++head_ == depth_) head_ = 0;
      --count_;
      popped_ = false;
    }
    if (pushed_) {  // the item is already in its slot (push)
      ++count_;
      ++transfers_;
      pushed_ = false;
      written = before == 0;
    }
    if (watch_ != nullptr) publish_valid();
    return written;
  }
  void publish_valid() {
    if (watch_ == nullptr) return;
    if (count_ > 0)
      *watch_ |= watch_bit_;
    else
      *watch_ &= ~watch_bit_;
  }

  int depth_;
  int head_ = 0, count_ = 0;
  bool pushed_ = false, popped_ = false;
  uint64_t transfers_ = 0;
  uint64_t* watch_ = nullptr;  // watch_valid
  uint64_t watch_bit_ = 0;
  std::vector<RegFifoBase*>* pending_ = nullptr;  // drive_updates
  bool listed_ = false;                           // in *pending_ for this edge
  sc_core::sc_event written_;
};

template <typename T>
class RegFifo : public RegFifoBase {
 public:
  explicit RegFifo(const char* name, int depth = 2) : RegFifoBase(name, depth) {
    if (depth > kInline) {
      heap_.resize(size_t(depth));
      buf_ = heap_.data();
    }
  }

  // Producer side: ready(), then push(). The item goes into its slot at once; it becomes
  // visible in the update phase.
  void push(const T& item) { buf_[push_slot()] = item; }

  // Consumer side: valid(), then front() / pop().
  const T& front() const { return buf_[front_slot()]; }
  T pop() { return buf_[pop_slot()]; }

 private:
  // The items: in the object itself for the usual depths (one cache line fewer per access).
  static constexpr int kInline = 2;
  T small_[kInline] = {};
  std::vector<T> heap_;
  T* buf_ = small_;
};

// A 64-bit AXI-Stream beat (CIRCUITS.md: a beat is 8 bytes, little-endian).
struct StreamBeat {
  uint64_t data = 0;
  bool last = false;  // TLAST
};
using AxiStream = RegFifo<StreamBeat>;

}  // namespace bitsim::hw
