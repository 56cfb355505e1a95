#include "hw/memory/memory.h"

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "base/error.h"
#include "hw/memory/memory_registry.h"

namespace bitsim::hw {

Memory::Memory(sc_core::sc_module_name name, Clock& clock, const DdrConfig& config)
    : sc_core::sc_module(name), clock_(clock), config_(config) {
  config_.validate(this->name());
  mem_ = PagedMemory(config_.size_bytes, this->name());
  stats_.ports.resize(size_t(config_.ports));
  for (int i = 0; i < config_.ports; ++i) links_.push_back(std::make_unique<DdrPortLink>("port" + std::to_string(i)));
}

DdrPortLink& Memory::port(int i) {
  if (i < 0 || i >= config_.ports)
    throw Error(fmt::format("{}: port {} does not exist (ddr.ports = {})", name(), i, config_.ports));
  return *links_[size_t(i)];
}

void Memory::end_of_elaboration() {
  for (auto& l : links_) {
    wake_ |= l->ar.written_event();
    wake_ |= l->aw.written_event();
  }
}

bool Memory::edge(uint64_t) { throw std::logic_error(std::string(name()) + ": this memory model has no edge()"); }

bool Memory::request_waiting() const {
  for (const auto& l : links_)
    if (l->ar.valid() || l->aw.valid()) return true;
  return false;
}

uint64_t Memory::read64(uint64_t addr) const {
  uint64_t v = 0;
  read(addr, &v, sizeof v);
  return v;
}

void Memory::write64(uint64_t addr, uint64_t value) { write(addr, &value, sizeof value); }

void Memory::set_write_listener(std::function<void(uint64_t, size_t)> listener) {
  mem_.set_write_listener(std::move(listener));
}

double Memory::achieved_gbps(int port) const {
  uint64_t bytes = 0, first = 0, last = 0, busy = 0;
  if (port < 0) {
    for (const auto& s : stats_.ports) bytes += s.bytes_read + s.bytes_written;
    busy = stats_.busy_cycles;
    first = stats_.first_busy_cycle;
    last = stats_.last_busy_cycle;
  } else {
    if (port >= config_.ports) throw Error(fmt::format("{}: port {} does not exist", name(), port));
    const DdrPortStats& s = stats_.ports[size_t(port)];
    bytes = s.bytes_read + s.bytes_written;
    busy = s.busy_cycles;
    first = s.first_busy_cycle;
    last = s.last_busy_cycle;
  }
  if (busy == 0) return 0.0;
  const double seconds = double(last - first + 1) * clock_.period().to_seconds();
  return double(bytes) / seconds / 1e9;
}

MemoryState Memory::carried_state(uint64_t) const { return {}; }

void Memory::restore_state(const MemoryState& state) {
  if (!state.empty())
    throw Error(fmt::format("{}: ddr.model = {} carries no state across an idle gap, but a state of {} words "
                            "was given to restore",
                            name(), config_.model, state.words.size()));
}

DramActivity Memory::close_dram_activity(uint64_t, std::vector<uint64_t>* tail) {
  if (tail) tail->clear();
  return {};
}

void Memory::set_command_listener(Ddr3CommandListener listener) {
  if (listener)
    throw Error(fmt::format("{}: ddr.model = {} issues no DRAM commands (a command trace needs ddr.model = ddr3)",
                            name(), config_.model));
}

// The clocked half of the model ddr.model names in the config's memory registry
// (hw/memory/memory_registry.h; validate refuses any other name, naming the choices).
std::unique_ptr<Memory> make_memory(sc_core::sc_module_name name, Clock& clock, const DdrConfig& config) {
  config.validate(std::string(name));
  return config.kind().clocked(name, clock, config);
}

}  // namespace bitsim::hw
