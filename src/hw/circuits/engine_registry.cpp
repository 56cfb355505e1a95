#include "hw/circuits/engine_registry.h"

#include <fmt/format.h>

#include "base/error.h"
#include "hw/circuits/attention_unit.h"
#include "hw/circuits/matmul_engine.h"

namespace bitsim::hw {

namespace {
bool overlaps(uint64_t a, uint64_t b) { return a < b + EngineRegistry::kWindow && b < a + EngineRegistry::kWindow; }
}  // namespace

const EngineRegistry& EngineRegistry::board() {
  // The registration of each shipped circuit: one line each (its entry lives in its own files).
  static const EngineRegistry shipped = [] {
    EngineRegistry r;
    r.add(matmul_engine_kind());
    r.add(attention_unit_kind());
    return r;
  }();
  return shipped;
}

std::shared_ptr<const EngineRegistry> EngineRegistry::board_handle() {
  static const std::shared_ptr<const EngineRegistry> handle(&board(), [](const EngineRegistry*) {});
  return handle;
}

int EngineRegistry::add(EngineKind k) {
  if (k.name.empty()) throw Error("engine registry: an engine without a name");
  if (!k.clocked || !k.fast || !k.dma_sg)
    throw Error(fmt::format("engine registry: engine '{}' lacks its clocked face, fast face or DMA choice", k.name));
  if (find(k.name) >= 0) throw Error(fmt::format("engine registry: engine '{}' is registered twice", k.name));
  std::vector<uint64_t> windows{k.regs, k.dma_bases[0], k.dma_bases[1]};
  for (const auto& o : kinds_)
    for (const uint64_t mine : windows)
      for (const uint64_t theirs : {o.regs, o.dma_bases[0], o.dma_bases[1]})
        if (overlaps(mine, theirs))
          throw Error(fmt::format("engine registry: engine '{}' has a register window at 0x{:08x} that overlaps "
                                  "engine '{}''s at 0x{:08x}",
                                  k.name, mine, o.name, theirs));
  if (overlaps(k.regs, k.dma_bases[0]) || overlaps(k.regs, k.dma_bases[1]) || overlaps(k.dma_bases[0], k.dma_bases[1]))
    throw Error(fmt::format("engine registry: engine '{}''s own register windows overlap", k.name));
  kinds_.push_back(std::move(k));
  return count() - 1;
}

int EngineRegistry::find(const std::string& name) const {
  for (int e = 0; e < count(); ++e)
    if (kinds_[size_t(e)].name == name) return e;
  return -1;
}

int EngineRegistry::dma_at(uint64_t addr) const {
  for (int d = 0; d < dma_count(); ++d)
    if (addr >= dma_base(d) && addr < dma_base(d) + kWindow) return d;
  return -1;
}

int EngineRegistry::engine_at(uint64_t addr) const {
  for (int e = 0; e < count(); ++e)
    if (addr >= kinds_[size_t(e)].regs && addr < kinds_[size_t(e)].regs + kWindow) return e;
  return -1;
}

}  // namespace bitsim::hw
