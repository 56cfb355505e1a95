#include "hw/memory/memory_registry.h"

#include <fmt/format.h>

#include "base/error.h"
#include "hw/memory/ddr.h"
#include "hw/memory/ddr3_memory.h"

namespace bitsim::hw {

const MemoryRegistry& MemoryRegistry::board() {
  // The registration of each shipped model: one line each (its entry lives in its own files).
  static const MemoryRegistry shipped = [] {
    MemoryRegistry r;
    r.add(wall_memory_kind());
    r.add(latency_bandwidth_memory_kind());
    r.add(ddr3_memory_kind());
    return r;
  }();
  return shipped;
}

std::shared_ptr<const MemoryRegistry> MemoryRegistry::board_handle() {
  static const std::shared_ptr<const MemoryRegistry> handle(&board(), [](const MemoryRegistry*) {});
  return handle;
}

void MemoryRegistry::add(MemoryKind k) {
  if (k.name.empty()) throw Error("memory registry: a memory model without a name");
  if (find(k.name)) throw Error(fmt::format("memory registry: memory model '{}' is registered twice", k.name));
  if (!k.clocked) throw Error(fmt::format("memory registry: memory model '{}' lacks its clocked half", k.name));
  if (k.calibration.key.empty() || k.calibration.steps < 1 || !(k.calibration.bracket_ns > 0))
    throw Error(fmt::format("memory registry: memory model '{}' names no latency key, bracket or steps to calibrate",
                            k.name));
  kinds_.push_back(std::move(k));
}

const MemoryKind* MemoryRegistry::find(const std::string& name) const {
  for (const auto& k : kinds_)
    if (k.name == name) return &k;
  return nullptr;
}

const MemoryKind& MemoryRegistry::at(const std::string& name, const std::string& who) const {
  if (const MemoryKind* k = find(name)) return *k;
  throw Error(fmt::format("{}: ddr.model = '{}' is not one of: {}", who, name, fmt::join(names(), ", ")));
}

std::vector<std::string> MemoryRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& k : kinds_) out.push_back(k.name);
  return out;
}

}  // namespace bitsim::hw
