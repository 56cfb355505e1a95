#include "base/huge_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::model {

namespace {
constexpr size_t kHugePage = size_t(2) << 20, kSmallPage = 4096;
}

HugeMemory::HugeMemory(size_t bytes, const char* what, Pages pages) : bytes_(bytes) {
  if (bytes == 0) return;
  // Whole huge pages, so that the last one can be a huge page as well; an array smaller
  // than one huge page keeps small pages (a huge page would back 2 MB for it).
  const bool huge = bytes >= kHugePage;
  const size_t unit = huge ? kHugePage : kSmallPage;
  mapped_ = (bytes + unit - 1) / unit * unit;
  void* p = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw Error(fmt::format("{}: cannot map {} bytes of memory: {}", what, mapped_, std::strerror(errno)));
#ifdef MADV_HUGEPAGE
  if (huge && pages == Pages::kHuge) ::madvise(p, mapped_, MADV_HUGEPAGE);  // advice only: the memory is the same
#endif
  p_ = static_cast<uint8_t*>(p);
}

void HugeMemory::advise_huge(size_t offset, size_t bytes) {
  if (!p_ || bytes == 0 || offset >= bytes_ || mapped_ < kHugePage) return;
#ifdef MADV_HUGEPAGE
  // The 2 MB-aligned addresses around the range, clipped to the mapping's whole 4 KB pages.
  const uintptr_t base = reinterpret_cast<uintptr_t>(p_), end_map = base + mapped_;
  uintptr_t lo = (base + offset) & ~uintptr_t(kHugePage - 1);
  uintptr_t hi = (base + std::min(offset + bytes, bytes_) + kHugePage - 1) & ~uintptr_t(kHugePage - 1);
  lo = std::max(lo, base);
  hi = std::min(hi, end_map);
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#endif
}

HugeMemory::~HugeMemory() {
  if (p_) ::munmap(p_, mapped_);
}

HugeMemory& HugeMemory::operator=(HugeMemory&& o) noexcept {
  if (this != &o) {
    if (p_) ::munmap(p_, mapped_);
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    mapped_ = std::exchange(o.mapped_, 0);
  }
  return *this;
}

}  // namespace bitsim::model
