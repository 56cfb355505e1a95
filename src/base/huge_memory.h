#pragma once
// HugeMemory: a large zero-filled byte array, mapped anonymously and advised into 2 MB
// transparent huge pages (madvise MADV_HUGEPAGE; Linux only, a plain mapping elsewhere).
// The simulator's big arrays (the simulated DDR, the fast kernels' decoded rows, the golden
// reference's compact trits) are written once at start-up: in 4 KB pages that first write
// costs one page fault per 4 KB, which on a virtual machine is most of the start-up time.
// The memory is zero when mapped (the kernel's pages), so a caller that needs zeros does not
// write them; pages are only backed once touched. An array written sparsely (the simulated
// DDR of a timing-only run: a few header and x slots spread over the CMA) maps small pages
// and advises huge pages only where a large write is about to land, so that a 100-byte
// store does not zero a 2 MB page.
#include <cstddef>
#include <cstdint>

namespace bitsim::model {

class HugeMemory {
 public:
  HugeMemory() = default;
  enum class Pages {
    kHuge,      // the whole array advised into huge pages (an array written densely)
    kOnDemand,  // small pages until advise_huge() names a range (an array written sparsely)
  };
  // `bytes` zero bytes (none for 0). Throws bitsim::Error naming `what` if it cannot map them.
  HugeMemory(size_t bytes, const char* what, Pages pages = Pages::kHuge);
  ~HugeMemory();
  HugeMemory(HugeMemory&& o) noexcept : p_(o.p_), bytes_(o.bytes_), mapped_(o.mapped_) {
    o.p_ = nullptr;
    o.bytes_ = o.mapped_ = 0;
  }
  HugeMemory& operator=(HugeMemory&& o) noexcept;
  HugeMemory(const HugeMemory&) = delete;
  HugeMemory& operator=(const HugeMemory&) = delete;

  // Advises the 2 MB pages that [offset, offset + bytes) touches into huge pages (a dense
  // write about to fill them). Advice only: the contents are the same either way.
  void advise_huge(size_t offset, size_t bytes);

  uint8_t* data() { return p_; }
  const uint8_t* data() const { return p_; }
  size_t size() const { return bytes_; }

 private:
  uint8_t* p_ = nullptr;
  size_t bytes_ = 0, mapped_ = 0;
};

}  // namespace bitsim::model
