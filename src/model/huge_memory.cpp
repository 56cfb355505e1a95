#include "model/huge_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "model/error.h"

namespace bitsim::model {

namespace {
constexpr size_t kHugePage = size_t(2) << 20, kSmallPage = 4096;
}

HugeMemory::HugeMemory(size_t bytes, const char* what) : bytes_(bytes) {
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
  if (huge) ::madvise(p, mapped_, MADV_HUGEPAGE);  // advice only: without huge pages the memory is the same
#endif
  p_ = static_cast<uint8_t*>(p);
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
