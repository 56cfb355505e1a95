#pragma once
// detail::FixedRing: a fixed-capacity FIFO ring (no allocation after construction), for the
// per-burst bookkeeping queues of the memory-side modules (Ddr, HpPort, AxiDma).
#include <cstddef>
#include <vector>

namespace bitsim::hw {

namespace detail {
template <typename T>
class FixedRing {
 public:
  explicit FixedRing(size_t capacity = 1) : buf_(capacity), cap_(capacity) {}
  void reset(size_t capacity) {
    buf_.assign(capacity, T{});
    cap_ = capacity;
    head_ = count_ = 0;
  }
  bool empty() const { return count_ == 0; }
  bool full() const { return count_ == cap_; }
  size_t size() const { return count_; }
  size_t capacity() const { return cap_; }
  T& front() { return buf_[head_]; }
  const T& front() const { return buf_[head_]; }
  T& at(size_t i) { return buf_[wrap(head_ + i)]; }
  T& back() { return at(count_ - 1); }
  void push_back(const T& item) {
    buf_[wrap(head_ + count_)] = item;
    ++count_;
  }
  void pop_front() {
    if (++head_ == cap_) head_ = 0;
    --count_;
  }
  void clear() { head_ = count_ = 0; }
  void truncate(size_t n) {  // keep the n oldest items
    if (n < count_) count_ = n;
  }

 private:
  size_t wrap(size_t i) const { return i >= cap_ ? i - cap_ : i; }  // i < 2 cap
  std::vector<T> buf_;
  size_t cap_ = 0;
  size_t head_ = 0, count_ = 0;
};
}  // namespace detail

}  // namespace bitsim::hw
