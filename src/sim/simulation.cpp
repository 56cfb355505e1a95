#include "sim/simulation.h"

#include <fmt/format.h>

#include "host/cycle_platform.h"
#include "host/fast_platform.h"
#include "host/ps.h"
#include "hw/board.h"
#include "hw/parts/sim_context.h"
#include "hw/parts/sc_kernel.h"
#include "hw/memory/dram_command_trace.h"
#include "hw/memory/dram_trace.h"
#include "hw/parts/vcd_probe.h"
#include "base/error.h"

namespace bitsim::sim {

const char* fidelity_name(Fidelity f) {
  switch (f) {
    case Fidelity::kCycle: return "cycle";
    case Fidelity::kFast: return "fast";
    case Fidelity::kTimingOnly: return "timing-only";
  }
  return "?";
}

bool approximate_timing(const hw::BoardConfig& board, Fidelity f) {
  return f != Fidelity::kCycle && board.ddr.model == "ddr3" && board.ddr.ddr3.approximate_reuse();
}

const char* timing_evidence(bool approximate) {
  return approximate ? "simulated, approximate (ddr3.fast_reuse)" : "simulated";
}

Fidelity fidelity_of(const std::string& name) {
  for (const Fidelity f : {Fidelity::kCycle, Fidelity::kFast, Fidelity::kTimingOnly})
    if (name == fidelity_name(f)) return f;
  throw Error(fmt::format("fidelity '{}': expected one of cycle, fast, timing-only", name));
}

void Machine::set_platform(host::Platform& p) {
  platform_ = &p;
  if (record_)
    recorder_ = std::make_unique<host::RecordingPlatform>(p, *record_, /*loads_computed=*/fidelity_ != Fidelity::kTimingOnly);
}

namespace {

// Fast and timing-only: hw::FastBoard, the host program called directly.
class FastMachine : public Machine {
 public:
  FastMachine(const hw::BoardConfig& c, const SimulationOptions& o)
      : Machine(o.fidelity, o.record),
        board_(c, hw::FastBoardOptions{o.fidelity == Fidelity::kTimingOnly, o.threads}),
        platform_impl_(board_) {
    set_platform(platform_impl_);
  }
  void run(const std::function<void()>& program) override { program(); }
  hw::FastBoardStats fast_stats() const override { return board_.stats(); }
  hw::FastBoard* fast_board() override { return &board_; }

 private:
  hw::FastBoard board_;
  host::FastPlatform platform_impl_;
};

// Cycle: hw::Board in a fresh SystemC context; the host program runs in the PS thread.
class CycleMachine : public Machine {
 public:
  CycleMachine(const hw::BoardConfig& c, const SimulationOptions& o)
      : Machine(Fidelity::kCycle, o.record),
        board_("board", c),
        ps_("ps", [this](host::Ps&) { program_(); }),
        platform_impl_(ps_, board_) {
    ps_.bus.bind(board_.ps_bus);
    if (o.idle_violations) platform_impl_.check_idle_board(o.idle_violations);
    if (!o.vcd_file.empty())
      vcd_ = std::make_unique<hw::VcdProbe>("vcd", board_, hw::VcdConfig{o.vcd_file, o.vcd_start, o.vcd_end});
    if (!o.dram_trace_file.empty())
      dram_trace_ = std::make_unique<hw::DramTrace>(o.dram_trace_file, board_.memory(), c.clock.mhz);
    if (!o.dram_commands_file.empty())
      dram_commands_ = std::make_unique<hw::DramCommandTrace>(o.dram_commands_file, board_.memory());
    set_platform(platform_impl_);
  }

  // One run per machine: the PS thread runs the program once.
  void run(const std::function<void()>& program) override {
    if (ran_) throw std::logic_error("cycle fidelity: a simulation runs one host program");
    ran_ = true;
    program_ = program;
    sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
    hw::start_simulation();
    if (ps_.failure()) std::rethrow_exception(ps_.failure());
    if (!ps_.finished()) throw Error("cycle fidelity: the simulation ended before the host program finished");
    if (vcd_) vcd_->close();
    if (dram_trace_) dram_trace_->close();
    if (dram_commands_) dram_commands_->close();
  }

 private:
  hw::FreshSimContext context_;  // first: the modules below live in it
  hw::Board board_;
  host::Ps ps_;
  std::unique_ptr<hw::VcdProbe> vcd_;
  std::unique_ptr<hw::DramTrace> dram_trace_;
  std::unique_ptr<hw::DramCommandTrace> dram_commands_;
  host::CyclePlatform platform_impl_;
  std::function<void()> program_;
  bool ran_ = false;
};

}  // namespace

std::unique_ptr<Machine> make_machine(const hw::BoardConfig& board, const SimulationOptions& options) {
  board.validate("board");
  if (!options.vcd_file.empty() && options.fidelity != Fidelity::kCycle)
    throw Error(fmt::format("vcd file {}: the clocked signals exist in the cycle fidelity only", options.vcd_file));
  if (!options.dram_trace_file.empty() && options.fidelity != Fidelity::kCycle)
    throw Error(fmt::format("dram trace file {}: the memory's requests are traced in the cycle fidelity only",
                            options.dram_trace_file));
  if (!options.dram_commands_file.empty() && options.fidelity != Fidelity::kCycle)
    throw Error(fmt::format("dram commands file {}: the DRAM's commands are traced in the cycle fidelity only",
                            options.dram_commands_file));
  if (options.fidelity == Fidelity::kCycle) return std::make_unique<CycleMachine>(board, options);
  return std::make_unique<FastMachine>(board, options);
}

Simulation::Simulation(std::unique_ptr<Machine> machine, const SimConfig& c, const model::TernaryModel& m,
                       const model::KvScales& s, const SimulationOptions& o)
    : machine_(std::move(machine)) {
  map_ = std::make_unique<host::MemoryMap>(m.config, c.memory);
  host::TokenLoopOptions lo{o.legacy_attention, c.board.attention.kind(), c.walker,
                            hw::clock_period_ps(c.board.clock.mhz)};
  lo.kv_format = c.board.attention.kv();
  lo.kv_outlier_channels = c.board.attention.kv_outlier_channels;
  lo.tip = c.board.attention.tip;
  lo.attention_shared = c.board.attention.shared_stream();
  loop_ = std::make_unique<host::TokenLoop>(machine_->platform(), *map_, m, s, c.cpu, c.driver, lo);
}

Simulation::~Simulation() { loop_.reset(); }

std::unique_ptr<Simulation> make_simulation(const SimConfig& config, const model::TernaryModel& model,
                                            const model::KvScales& scales, const SimulationOptions& options) {
  validate(config);
  return std::make_unique<Simulation>(make_machine(config.board, options), config, model, scales, options);
}

}  // namespace bitsim::sim
