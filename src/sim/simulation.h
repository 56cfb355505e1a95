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
#include "host/mmio_program.h"
#include "host/platform.h"
#include "host/token_loop.h"
#include "hw/fast/fast_board.h"
#include "model/ternary.h"
#include "sim/board_config.h"

namespace bitsim::sim {

enum class Fidelity { kCycle, kFast, kTimingOnly };
// "cycle", "fast", "timing-only".
const char* fidelity_name(Fidelity f);
// The fidelity of one of those names; a bitsim::Error naming the value and the choices.
Fidelity fidelity_of(const std::string& name);
// True when a run's times are approximate: a fast fidelity under ddr.model = ddr3 with
// ddr3.fast_reuse = approximate (docs/ddr3.md, "Approximate reuse"). The cycle fidelity has
// no records to reuse: it is always exact.
bool approximate_timing(const hw::BoardConfig& board, Fidelity f);
// The evidence label of a run's timed figures: "simulated", or "simulated, approximate
// (ddr3.fast_reuse)".
const char* timing_evidence(bool approximate);

struct SimulationOptions {
  SimulationOptions() = default;
  explicit SimulationOptions(Fidelity f, int host_threads = 2, bool legacy = false)
      : fidelity(f), threads(host_threads), legacy_attention(legacy) {}
  Fidelity fidelity = Fidelity::kFast;
  int threads = 2;                  // host threads of the fast kernels
  bool legacy_attention = false;    // the earlier attention unit's fixed >> 8 shift
  std::string vcd_file;             // cycle only: a VCD of the clocked signals (hw/parts/vcd_probe.h)
  std::string dram_trace_file;      // cycle only: every request the memory accepts (hw/memory/dram_trace.h)
  std::string dram_commands_file;   // cycle only, ddr3: every DRAM command (hw/memory/dram_command_trace.h)
  uint64_t vcd_start = 0, vcd_end = 20000;  // its window of PL cycles
  // Cycle only: check at every register write on a quiet board that the board is in its
  // state after reset (host::CyclePlatform::check_idle_board); violations are appended here.
  std::vector<std::string>* idle_violations = nullptr;
  // Record every register access and DDR load and store of the host program here
  // (host/mmio_program.h; `bitsim run --record-mmio`).
  host::MmioProgram* record = nullptr;
};

// A board of a fidelity and the host platform on it: what runs a host program, with or
// without a model (`bitsim replay` runs MMIO programs on one).
class Machine {
 public:
  virtual ~Machine() = default;
  Fidelity fidelity() const { return fidelity_; }
  // The platform the host program uses; with SimulationOptions::record, it records every
  // access into that program.
  host::Platform& platform() { return recorder_ ? *recorder_ : *platform_; }
  // Runs the host program to its end (in the PS thread on the clocked board) and rethrows
  // what it threw. A cycle-fidelity machine runs one program.
  virtual void run(const std::function<void()>& program) = 0;
  // The fast board's batches and timing-cache figures (all zero on the clocked board).
  virtual hw::FastBoardStats fast_stats() const { return {}; }
  // The fast board (fast and timing-only), for its timing cache (sim/timing_cache.h); null
  // on the clocked board.
  virtual hw::FastBoard* fast_board() { return nullptr; }

 protected:
  Machine(Fidelity f, host::MmioProgram* record) : fidelity_(f), record_(record) {}
  void set_platform(host::Platform& p);

 private:
  Fidelity fidelity_;
  host::MmioProgram* record_;
  host::Platform* platform_ = nullptr;
  std::unique_ptr<host::RecordingPlatform> recorder_;
};

// Validates the board config (bitsim::Error naming the key) and builds the machine.
std::unique_ptr<Machine> make_machine(const hw::BoardConfig& board, const SimulationOptions& options);

// A machine with the memory map and the token loop of a model on it.
class Simulation {
 public:
  Simulation(std::unique_ptr<Machine> machine, const SimConfig& config, const model::TernaryModel& model,
             const model::KvScales& scales, const SimulationOptions& options);
  ~Simulation();
  Fidelity fidelity() const { return machine_->fidelity(); }
  const host::MemoryMap& map() const { return *map_; }
  host::TokenLoop& loop() { return *loop_; }
  host::Platform& platform() { return machine_->platform(); }
  // Runs the host program to its end (in the PS thread on the clocked board) and rethrows
  // what it threw. The program drives loop(); call load_weights() on it first.
  void run(const std::function<void(host::TokenLoop&)>& program) {
    machine_->run([&] { program(*loop_); });
  }
  hw::FastBoardStats fast_stats() const { return machine_->fast_stats(); }
  hw::FastBoard* fast_board() { return machine_->fast_board(); }

 private:
  std::unique_ptr<Machine> machine_;
  std::unique_ptr<host::MemoryMap> map_;
  std::unique_ptr<host::TokenLoop> loop_;
};

// Validates the config (bitsim::Error naming the key) and builds the simulation. The model
// and scales must outlive it. The clocked board lives in its own SystemC context: one
// cycle-fidelity simulation at a time per thread.
std::unique_ptr<Simulation> make_simulation(const SimConfig& config, const model::TernaryModel& model,
                                            const model::KvScales& scales, const SimulationOptions& options);

}  // namespace bitsim::sim
