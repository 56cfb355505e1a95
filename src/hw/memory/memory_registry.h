#pragma once
// The registry of memory models (ddr.model's choices). A memory model is its own files (its
// clocked half, a Memory; its fast half, a MemoryTiming, when it carries state across an idle
// gap or its timing depends on where a buffer lies) plus one MemoryKind: the entry that
// builds both halves and names what the tools ask of it: the key `bitsim calibrate` fits for
// its latency, and the keys that shape a stalled transfer for the progress watchdog's hint.
//
// The registry is a value: DdrConfig::models holds the one a board is built from
// (MemoryRegistry::board(): wall, latency-bandwidth and ddr3, unless a caller adds one; the
// toy model of tests/hw/registry_test.cpp is added that way). The key table and
// `bitsim config --dump` list the shipped registry's names as ddr.model's choices.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <systemc>

namespace bitsim::hw {

struct DdrConfig;
class Clock;
class Memory;
class MemoryTiming;

struct MemoryKind {
  std::string name;  // ddr.model's value
  // The clocked half (validates the config, naming the key at fault).
  std::function<std::unique_ptr<Memory>(sc_core::sc_module_name, Clock&, const DdrConfig&)> clocked;
  // The fast half, for a PL clock of `pl_period_ps`; empty: a MemoryTiming that carries nothing
  // and keys on nothing (hw/memory/memory_model.h).
  std::function<std::unique_ptr<MemoryTiming>(const DdrConfig&, uint64_t pl_period_ps)> fast;
  // What `bitsim calibrate` fits of this model (study/calibrate.cpp): the latency key, its
  // meaning, the bracket of the bisection (ns) and its steps; and whether the host's costs
  // (the driver's and the CPU's) are fitted too, or taken from the wall's calibration.
  struct Calibration {
    std::string key;
    std::string meaning;
    double bracket_ns = 0;
    int steps = 0;
    bool fits_host = true;
  } calibration;
  // "key = value" of this model's keys that shape a transfer that cannot finish (the progress
  // watchdog's hint).
  std::function<std::vector<std::string>(const DdrConfig&)> watchdog_keys;
};

class MemoryRegistry {
 public:
  // The shipped models: wall, latency-bandwidth, ddr3 (ddr.model's choices, in that order).
  static const MemoryRegistry& board();
  static std::shared_ptr<const MemoryRegistry> board_handle();

  // Adds a model. Throws bitsim::Error naming it when its name is taken or a half or its
  // calibration key is missing.
  void add(MemoryKind kind);
  // The model of that name; throws bitsim::Error naming `who`, ddr.model and the choices.
  const MemoryKind& at(const std::string& name, const std::string& who) const;
  const MemoryKind* find(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::vector<MemoryKind> kinds_;
};

}  // namespace bitsim::hw
