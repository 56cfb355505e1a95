#pragma once
// Buffer<T>: the storage of a model's large arrays (ternary trits, the embedding table).
// Either it owns its elements (a std::vector<T>, what loading and tests build) or it views
// elements that something else keeps alive: a memory-mapped start-up cache entry
// (sim/cache_store.h), mapped MAP_PRIVATE so that a write through data() stays in this
// process (copy on write by the kernel) and never reaches the file. Changing the size of a
// view first copies it into owned storage. Copies of a view share the mapping.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "base/huge_memory.h"

namespace bitsim::model {

template <class T>
class Buffer {
 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;
  using size_type = size_t;

  Buffer() = default;
  Buffer(std::vector<T> v) : own_(std::move(v)) { sync(); }  // NOLINT: implicit by design
  Buffer(const Buffer& o) : own_(o.own_), keep_(o.keep_) {
    if (keep_) {
      p_ = o.p_;
      n_ = o.n_;
    } else {
      sync();
    }
  }
  Buffer(Buffer&& o) noexcept : own_(std::move(o.own_)), keep_(std::move(o.keep_)), p_(o.p_), n_(o.n_) {
    o.own_.clear();
    o.keep_.reset();
    o.sync();
  }
  Buffer& operator=(Buffer o) noexcept {
    swap(o);
    return *this;
  }
  Buffer& operator=(std::vector<T> v) {
    keep_.reset();
    own_ = std::move(v);
    sync();
    return *this;
  }
  void swap(Buffer& o) noexcept {
    std::swap(own_, o.own_);
    std::swap(keep_, o.keep_);
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
  }

  // n elements at p, kept alive by `keep` (e.g. the mapping of a cache entry).
  static Buffer view(std::shared_ptr<void> keep, T* p, size_t n) {
    Buffer b;
    b.keep_ = std::move(keep);
    b.p_ = p;
    b.n_ = n;
    return b;
  }
  bool is_view() const { return bool(keep_); }

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T* data() { return p_; }
  const T* data() const { return p_; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }
  T* begin() { return p_; }
  T* end() { return p_ + n_; }
  const T* begin() const { return p_; }
  const T* end() const { return p_ + n_; }

  void resize(size_t n) { own(); own_.resize(n); sync(); }
  void resize(size_t n, const T& v) { own(); own_.resize(n, v); sync(); }
  void assign(size_t n, const T& v) { keep_.reset(); own_.assign(n, v); sync(); }
  template <class It>
  void assign(It first, It last) { keep_.reset(); own_.assign(first, last); sync(); }
  void push_back(const T& v) { own(); own_.push_back(v); sync(); }
  void clear() { keep_.reset(); own_.clear(); sync(); }

  friend bool operator==(const Buffer& a, const Buffer& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator==(const Buffer& a, const std::vector<T>& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

 private:
  void own() {
    if (!keep_) return;
    own_.assign(p_, p_ + n_);
    keep_.reset();
  }
  void sync() {
    p_ = own_.data();
    n_ = own_.size();
  }
  std::vector<T> own_;
  std::shared_ptr<void> keep_;
  T* p_ = nullptr;
  size_t n_ = 0;
};

// n zero elements in pages the kernel maps on demand (base/huge_memory.h), held as a view:
// no up-front zero fill (a large table's fill is a stretch no signal can interrupt). For an
// array written once and then only read: copies of the Buffer share it.
template <class T>
Buffer<T> zero_buffer(size_t n, const char* what) {
  auto mem = std::make_shared<HugeMemory>(n * sizeof(T), what);
  T* p = reinterpret_cast<T*>(mem->data());
  return Buffer<T>::view(std::move(mem), p, n);
}

}  // namespace bitsim::model
