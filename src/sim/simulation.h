#pragma once
// The one place that builds a simulation: the board of a fidelity, the host platform on it,
// the memory map and the token loop, from a SimConfig. `bitsim run`, bench, sweep,
// calibrate and validate all build theirs here; a new fidelity is one more Simulation
// subclass in simulation.cpp and one more Fidelity value.
//
//   cycle        every module clocked, beat by beat (hw::Board under SystemC; the host
//                program runs in the PS thread)
//   fast         whole buffers on hw::FastBoard, the clocked board's cycle counts
//   timing-only  fast without the engines' arithmetic (the same cycle counts; no results)
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "golden/board_reference.h"
#include "host/memory_map.h"
#include "host/platform.h"
#include "host/token_loop.h"
#include "hw/fast_board.h"
#include "model/ternary.h"
#include "sim/board_config.h"

namespace bitsim::sim {

enum class Fidelity { kCycle, kFast, kTimingOnly };
// "cycle", "fast", "timing-only".
const char* fidelity_name(Fidelity f);

struct SimulationOptions {
  SimulationOptions() = default;
  explicit SimulationOptions(Fidelity f, int host_threads = 2, bool legacy = false)
      : fidelity(f), threads(host_threads), legacy_attention(legacy) {}
  Fidelity fidelity = Fidelity::kFast;
  int threads = 2;                  // host threads of the fast kernels
  bool legacy_attention = false;    // the earlier attention unit's fixed >> 8 shift
  std::string vcd_file;             // cycle only: a VCD of the clocked signals (hw/vcd_probe.h)
  uint64_t vcd_start = 0, vcd_end = 20000;  // its window of PL cycles
  // Cycle only: check at every register write on a quiet board that the board is in its
  // state after reset (host::CyclePlatform::check_idle_board); violations are appended here.
  std::vector<std::string>* idle_violations = nullptr;
};

class Simulation {
 public:
  virtual ~Simulation() = default;
  Fidelity fidelity() const { return fidelity_; }
  const host::MemoryMap& map() const { return *map_; }
  host::TokenLoop& loop() { return *loop_; }
  host::Platform& platform() { return *platform_; }
  // Runs the host program to its end (in the PS thread on the clocked board) and rethrows
  // what it threw. The program drives loop(); call load_weights() on it first.
  virtual void run(const std::function<void(host::TokenLoop&)>& program) = 0;
  // The fast board's batches and timing-cache figures (all zero on the clocked board).
  virtual hw::FastBoardStats fast_stats() const { return {}; }

 protected:
  explicit Simulation(Fidelity f) : fidelity_(f) {}
  Fidelity fidelity_;
  std::unique_ptr<host::MemoryMap> map_;
  host::Platform* platform_ = nullptr;
  std::unique_ptr<host::TokenLoop> loop_;
};

// Validates the config (bitsim::Error naming the key) and builds the simulation. The model
// and scales must outlive it. The clocked board lives in its own SystemC context: one
// cycle-fidelity simulation at a time per thread.
std::unique_ptr<Simulation> make_simulation(const SimConfig& config, const model::TernaryModel& model,
                                            const golden::KvScales& scales, const SimulationOptions& options);

}  // namespace bitsim::sim
