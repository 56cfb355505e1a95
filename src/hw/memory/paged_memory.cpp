#include "hw/memory/paged_memory.h"

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::hw {

PagedMemory::PagedMemory(uint64_t size_bytes, std::string name)
    : size_(size_bytes),
      name_(std::move(name)),
      memory_(size_t(size_bytes), name_.c_str(), model::HugeMemory::Pages::kOnDemand),
      written_(size_t((size_bytes + kPageBytes - 1) / kPageBytes), 0),
      blocks_(size_t((size_bytes + kBlockBytes * 64 - 1) / (kBlockBytes * 64)), 0) {}

void PagedMemory::set_backing(const PagedMemory* backing) {
  if (backing && backing->size() != size_)
    throw Error(fmt::format("{}: a backing memory of {:#x} bytes for a DDR of {:#x}", name_, backing->size(), size_));
  if (allocated_pages() != 0) throw Error(fmt::format("{}: a backing set after a write", name_));
  backing_ = backing;
}

void PagedMemory::mark_blocks(uint64_t addr, size_t n) {
  if (n == 0) return;
  for (uint64_t b = addr / kBlockBytes, last = (addr + n - 1) / kBlockBytes; b <= last; ++b)
    blocks_[size_t(b / 64)] |= uint64_t(1) << (b % 64);
}

uint8_t* PagedMemory::span_for_write(uint64_t addr, size_t n) {
  if (addr > size_ || n > size_ - addr || n == 0) return nullptr;
  const uint64_t off = addr % kPageBytes;
  if (off + n > kPageBytes) return nullptr;
  mark_blocks(addr, n);
  return page_for_write(addr / kPageBytes) + off;
}

void PagedMemory::check(uint64_t addr, size_t n, const char* what) const {
  if (addr > size_ || n > size_ - addr)
    throw Error(fmt::format("{}: {} of [{:#x}, {:#x}) is outside the DDR [0x0, {:#x})", name_, what, addr, addr + n,
                            size_));
}

const uint8_t* PagedMemory::span(uint64_t addr, size_t n) const {
  if (addr > size_ || n > size_ - addr || n == 0) return nullptr;
  const uint64_t off = addr % kPageBytes;
  if (off + n > kPageBytes) return nullptr;
  return page_for_write(addr / kPageBytes) + off;
}

uint8_t* PagedMemory::page_for_write(uint64_t index) const {
  uint8_t* p = memory_.data() + index * kPageBytes;
  if (written_[size_t(index)]) return p;
  written_[size_t(index)] = 1;  // the mapping is zero until written
  if (const uint8_t* b = backing_ ? backing_->page(index) : nullptr) {
    // Copy on write: the backing's page, and its written blocks (for_each_nonzero_extent).
    const uint64_t bytes = std::min<uint64_t>(kPageBytes, size_ - index * kPageBytes);
    std::memcpy(p, b, size_t(bytes));
    constexpr uint64_t kWordsPerPage = kPageBytes / kBlockBytes / 64;
    for (uint64_t w = index * kWordsPerPage; w < (index + 1) * kWordsPerPage && w < blocks_.size(); ++w)
      blocks_[size_t(w)] |= backing_->blocks_[size_t(w)];
  }
  return p;
}

void PagedMemory::read(uint64_t addr, void* dst, size_t n) const {
  check(addr, n, "read");
  auto* out = static_cast<uint8_t*>(dst);
  while (n > 0) {
    const uint64_t index = addr / kPageBytes, off = addr % kPageBytes;
    const size_t chunk = size_t(std::min<uint64_t>(n, kPageBytes - off));
    if (const uint8_t* p = page(index))
      std::memcpy(out, p + off, chunk);
    else
      std::memset(out, 0, chunk);
    out += chunk;
    addr += chunk;
    n -= chunk;
  }
}

void PagedMemory::write(uint64_t addr, const void* src, size_t n) {
  check(addr, n, "write");
  const uint64_t start = addr;
  const size_t total = n;
  // A large write (a weights image's lane stream) fills its pages densely: huge pages for
  // them. Small ones (headers, x, KV rows) keep small pages.
  if (n >= kDenseWriteBytes) memory_.advise_huge(size_t(addr), n);
  auto* in = static_cast<const uint8_t*>(src);
  while (n > 0) {
    const uint64_t index = addr / kPageBytes, off = addr % kPageBytes;
    const size_t chunk = size_t(std::min<uint64_t>(n, kPageBytes - off));
    std::memcpy(page_for_write(index) + off, in, chunk);
    mark_blocks(addr, chunk);
    in += chunk;
    addr += chunk;
    n -= chunk;
  }
  notify(start, total);
}

size_t PagedMemory::allocated_pages() const {
  return size_t(std::count(written_.begin(), written_.end(), uint8_t(1)));
}

namespace {

// True when any of the n bytes at p is not zero. Words of 64 bytes at a time, stopping at the
// first that is not zero: as fast as a memcmp against a zero block once vectorised, and it
// does not go through memcmp, which the fuzz build's libFuzzer hook records at every call
// that finds a difference (about 7% of fuzz_mmio_replay's time went there).
bool any_nonzero(const uint8_t* p, size_t n) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    uint64_t w[8];
    std::memcpy(w, p + i, 64);
    if ((w[0] | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7]) != 0) return true;
  }
  uint8_t acc = 0;
  for (; i < n; ++i) acc |= p[i];
  return acc != 0;
}

}  // namespace

void PagedMemory::for_each_nonzero_extent(const std::function<void(uint64_t, size_t)>& f) const {
  uint64_t run = 0, end = 0;  // the open run [run, end); end == 0: none
  for (size_t w = 0; w < blocks_.size(); ++w)
    for (uint64_t bits = blocks_[w]; bits != 0; bits &= bits - 1) {
      const uint64_t addr = (uint64_t(w) * 64 + uint64_t(__builtin_ctzll(bits))) * kBlockBytes;
      const size_t n = size_t(std::min<uint64_t>(kBlockBytes, size_ - addr));
      if (!any_nonzero(page(addr / kPageBytes) + addr % kPageBytes, n)) continue;
      if (end != 0 && (end != addr || addr % kPageBytes == 0)) {
        f(run, size_t(end - run));
        end = 0;
      }
      if (end == 0) run = addr;
      end = addr + n;
    }
  if (end != 0) f(run, size_t(end - run));
}

}  // namespace bitsim::hw
