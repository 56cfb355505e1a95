#pragma once
// PagedMemory: the DDR's contents, in both fidelities (hw::Ddr for the clocked board, the
// fast board's memory): one zero-filled mapping of the whole size (model::HugeMemory, in
// 2 MB huge pages where the kernel allows), of which the host only backs what is touched;
// its 1 MiB pages are marked when first written (an untouched page reads as zero and costs
// no memory), and so are its 4 KiB blocks (for_each_nonzero_extent looks at those only),
// accesses checked against the size (bitsim::Error naming the range), and a write listener
// that hears every write. A memory may be backed by another of the same size
// (set_backing): a page it never wrote reads as the backing's, and its first write copies the
// backing's page in (copy on write); the backing is only read, and must not change while the
// memory uses it. The timing oracle's clocked board reads the fast board's DDR this way,
// instead of a copy of every region a batch reads.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/huge_memory.h"

namespace bitsim::hw {

class PagedMemory {
 public:
  static constexpr uint64_t kPageBytes = 1ull << 20;
  static constexpr uint64_t kBlockBytes = 4096;  // the unit of for_each_nonzero_extent
  // A write of at least this many bytes advises huge pages where it lands (base/huge_memory.h).
  static constexpr size_t kDenseWriteBytes = size_t(64) << 10;

  explicit PagedMemory(uint64_t size_bytes = 0, std::string name = "ddr");
  uint64_t size() const { return size_; }
  // Reads the pages this memory has not written from `backing` (nullptr: none, they read as
  // zero). Throws bitsim::Error if the sizes differ or a page was written already.
  void set_backing(const PagedMemory* backing);
  void read(uint64_t addr, void* dst, size_t n) const;
  void write(uint64_t addr, const void* src, size_t n);
  // A pointer to n contiguous bytes if they lie in one page (allocated if needed), else nullptr.
  const uint8_t* span(uint64_t addr, size_t n) const;
  void set_write_listener(std::function<void(uint64_t, size_t)> f) { listener_ = std::move(f); }
  // Tells the listener of a write made through page_for_write.
  void notify(uint64_t addr, size_t n) const {
    if (listener_ && n > 0) listener_(addr, n);
  }
  // Page `index`, or nullptr if it was never written (here or, with a backing, there).
  const uint8_t* page(uint64_t index) const {
    if (written_[size_t(index)]) return memory_.data() + index * kPageBytes;
    return backing_ ? backing_->page(index) : nullptr;
  }
  // The n bytes at addr, for the caller to write, if they lie in one page (allocated,
  // zero-filled, if it was never written; their blocks are marked written), else nullptr.
  // No listener hears it: the caller calls notify() when its write is whole.
  uint8_t* span_for_write(uint64_t addr, size_t n);
  size_t allocated_pages() const;
  // Calls f(address, bytes) for every page that was ever written (here: a backing's pages
  // are not visited).
  template <class F>
  void for_each_page(F f) const {
    for (size_t i = 0; i < written_.size(); ++i)
      if (written_[i]) f(uint64_t(i) * kPageBytes, size_t(std::min<uint64_t>(kPageBytes, size_ - uint64_t(i) * kPageBytes)));
  }
  // Calls f(address, bytes) for every run of 4 KiB blocks holding a byte other than zero
  // (runs end at page boundaries), in address order: what a copy of this memory into a
  // zeroed one has to write. Only blocks ever written are looked at (the others are zero),
  // so its cost follows what was written, not the pages it touched. With a backing: the
  // blocks written here, and those a page copied from the backing brought with it.
  void for_each_nonzero_extent(const std::function<void(uint64_t, size_t)>& f) const;

 private:
  void check(uint64_t addr, size_t n, const char* what) const;
  uint8_t* page_for_write(uint64_t index) const;
  void mark_blocks(uint64_t addr, size_t n);
  uint64_t size_;
  std::string name_;
  mutable model::HugeMemory memory_;       // size_ bytes, zero until written
  mutable std::vector<uint8_t> written_;   // per page: ever written (span() marks the page it points into)
  mutable std::vector<uint64_t> blocks_;   // per 4 KiB block, a bit: ever written
  std::function<void(uint64_t, size_t)> listener_;
  const PagedMemory* backing_ = nullptr;
};

}  // namespace bitsim::hw
