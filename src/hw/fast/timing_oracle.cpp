#include "hw/fast/timing_oracle.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <tlm_utils/simple_initiator_socket.h>

#include "hw/circuits/engine_regs.h"
#include "hw/edge_loop.h"
#include "hw/parts/sim_context.h"
#include "hw/parts/progress_watchdog.h"
#include "hw/parts/sc_kernel.h"
#include "base/error.h"
#include "base/stop_signal.h"

namespace bitsim::hw {

namespace {

namespace R = dma_reg;

// Every DMA channel quiet and no engine lane busy or holding an error (a lane still holding
// input, results or an error carries the batch into the next one: the fast board then keeps
// the batch open until it is quiet).
bool board_quiet(Board& board) {
  for (int d = 0; d < board.dma_count(); ++d)
    for (int c = 0; c < 2; ++c)
      if (board.dma(d).active(DmaChannel(c))) return false;
  for (int e = 0; e < board.engine_count(); ++e)
    for (int lane = 0; lane < 2; ++lane) {
      const LaneRegisterView v = board.engine(e).registers(lane);
      if (v.busy || v.error) return false;
    }
  return true;
}

// The oracle's PS: performs the actions at their times, then waits until the board is
// quiet. Live (LiveOracle): the actions grow while the simulation is paused; the PS pauses
// whenever it has performed them all (so after each probe, which the host adds last) and
// never settles. In the edge loop (run_in_loop) it has no thread: the loop performs the
// actions through it, at their times.
class OraclePs : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(OraclePs);
  OraclePs(sc_core::sc_module_name name, Board& board, const std::vector<OracleAction>& actions, uint64_t max_cycles,
           OracleResult& result, bool live, bool thread = true)
      : sc_core::sc_module(name),
        bus("bus"),
        board_(board),
        actions_(actions),
        max_cycles_(max_cycles),
        result_(result),
        live_(live),
        watchdog_(board) {
    if (thread) SC_THREAD(run);
  }
  tlm_utils::simple_initiator_socket<OraclePs> bus;
  std::exception_ptr failure;
  size_t performed() const { return next_; }
  uint64_t bytes_read_at_start() const { return bytes_read_at_start_; }
  // Live: end the thread at the next resume.
  void finish() { finish_ = true; }

 private:
  uint32_t access(bool write, uint64_t addr, uint32_t v, uint64_t delay_ps) {
    tlm::tlm_generic_payload t;
    t.set_command(write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND);
    t.set_address(addr);
    t.set_data_ptr(reinterpret_cast<unsigned char*>(&v));
    t.set_data_length(4);
    t.set_streaming_width(4);
    t.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    sc_core::sc_time d = sc_core::sc_time::from_value(delay_ps);
    bus->b_transport(t, d);
    if (t.is_response_error()) throw Error(fmt::format("timing oracle: access to 0x{:08x} failed", addr));
    return v;
  }

  void count_bytes_at_start() {
    for (const auto& p : board_.memory().stats().ports) bytes_read_at_start_ += p.bytes_read;
  }

  // Performs one action, `delay_ps` after the simulation's time (the edge loop's PS, whose
  // simulation time stays 0, gives the action's time); true for a probe.
  bool perform(const OracleAction& a, uint64_t delay_ps = 0) {
    switch (a.kind) {
      case OracleAction::Kind::kWrite:
        access(true, a.addr, a.value, delay_ps);
        return false;
      case OracleAction::Kind::kCpuStore:
        board_.memory().write(a.addr, a.bytes.data(), a.bytes.size());
        return false;
      case OracleAction::Kind::kProbeRegister: {
        const uint32_t v = access(false, a.addr, 0, delay_ps);
        result_.probes.emplace_back(reinterpret_cast<const uint8_t*>(&v), reinterpret_cast<const uint8_t*>(&v) + 4);
        // As the cycle fidelity's PS at a status poll: a poll that can never end is an error.
        if (live_) watchdog_.check(board_.clock().cycle());
        return true;
      }
      case OracleAction::Kind::kProbeMemory:
        result_.probes.emplace_back(a.size);
        board_.memory().read(a.addr, result_.probes.back().data(), a.size);
        return true;
    }
    return false;
  }

  // What the run says once the board has settled (or the last probe is done): the quiet
  // edge, the bytes read, the engines' registers, the memory's state and DRAM commands.
  void conclude() {
    uint64_t last_active = 0;
    for (int d = 0; d < board_.dma_count(); ++d) last_active = std::max(last_active, board_.dma(d).last_active_cycle());
    result_.quiet_edge = last_active + 1 > kOracleFirstEdge ? last_active + 1 - kOracleFirstEdge : 0;
    uint64_t bytes = 0;
    for (const auto& p : board_.memory().stats().ports) bytes += p.bytes_read;
    result_.bytes_read = bytes - bytes_read_at_start_;
    result_.engines.resize(size_t(board_.engine_count()));
    for (int e = 0; e < board_.engine_count(); ++e)
      for (int lane = 0; lane < 2; ++lane) result_.engines[size_t(e)][size_t(lane)] = board_.engine(e).registers(lane);
    // The memory's state as of the batch's quiet edge, not the end of the settling: the next
    // batch may open before that end, and the memory is idle from the quiet edge on (every
    // request it served was for a transfer that has completed by then).
    const uint64_t quiet = std::max<uint64_t>(last_active + 1, kOracleFirstEdge);
    result_.dram = board_.memory().close_dram_activity(quiet, &result_.dram_tail);
    result_.memory_after = board_.memory().carried_state(quiet);
    result_.memory_after_edge = quiet - kOracleFirstEdge;
  }

 public:
  // The batch in the edge loop (hw/edge_loop.h), as run() does it under SystemC: each action
  // at its time (after every edge before it), then the settling in the same steps of 64
  // periods, with the same checks. `now_ps`: the PS's time, for the register observer.
  void run_in_loop(EdgeLoop& loop, uint64_t& now_ps) {
    const uint64_t period = board_.clock().period().value();
    count_bytes_at_start();
    bool probes = false;
    uint64_t t = 0;
    for (const OracleAction& a : actions_) {
      t = std::max(t, a.time_ps);  // the PS's wait for a time already past does not wait
      loop.run_before(t);
      now_ps = t;
      if (a.kind == OracleAction::Kind::kWrite) loop.wrote(a.addr, t);
      probes |= perform(a, t);
      ++next_;
    }
    result_.settled = !probes;
    if (!probes)
      settle(period, [&](uint64_t step_ps) {
        t += step_ps;
        loop.run_before(t);
        return t / period;  // the edge SystemC's clock reports at that time
      });
    conclude();
  }

 private:
  // Waits until every channel is quiet and the DDR has settled, looking every 64 periods;
  // `advance(ps)` runs the board that much further and gives the clock's edge then (the
  // SystemC thread waits, the edge loop runs its edges).
  template <typename Advance>
  void settle(uint64_t period, Advance&& advance) {
    const uint64_t limit = kOracleFirstEdge + max_cycles_;
    ProgressWatchdog watchdog(board_);  // a batch that can never settle is an error naming its channels
    do {
      const uint64_t cycle = advance(64 * period);
      check_stop();  // SIGINT / SIGTERM: a long batch stops here (the caller rethrows the failure)
      watchdog.check(cycle);
      if (cycle > limit)
        throw Error(fmt::format("timing oracle: the batch did not settle within {} cycles", max_cycles_));
    } while (!board_quiet(board_));
    advance(64 * period);
  }

  // Waits until `due` (ps), in steps of kStopCheckCycles looking at the stop signal between
  // them: the PS does nothing at the steps, so no cycle count moves.
  void wait_until(uint64_t due, uint64_t period) {
    constexpr uint64_t kStopCheckCycles = uint64_t(1) << 14;
    for (uint64_t now = sc_core::sc_time_stamp().value(); due > now; now = sc_core::sc_time_stamp().value()) {
      check_stop();
      wait(sc_core::sc_time::from_value(std::min(due - now, kStopCheckCycles * period)));
    }
  }

  void run() {
    try {
      const uint64_t period = board_.clock().period().value();
      count_bytes_at_start();
      bool probes = false;
      for (;;) {
        if (next_ == actions_.size()) {
          if (!live_ || finish_) break;
          sc_core::sc_pause();  // the host adds actions; the next delta cycle goes on with them
          wait(sc_core::SC_ZERO_TIME);
          continue;
        }
        // (No reference into actions_ across a wait: the host appends to it while paused.)
        wait_until(actions_[next_].time_ps, period);
        probes |= perform(actions_[next_++]);
      }
      if (live_) {
        sc_core::sc_stop();
        return;
      }
      result_.settled = !probes;
      if (!probes)
        settle(period, [&](uint64_t step_ps) {
          wait(sc_core::sc_time::from_value(step_ps));
          return board_.clock().cycle();
        });
      conclude();
    } catch (...) {
      failure = std::current_exception();
    }
    sc_core::sc_stop();
  }
  Board& board_;
  const std::vector<OracleAction>& actions_;
  uint64_t max_cycles_;
  OracleResult& result_;
  bool live_;
  ProgressWatchdog watchdog_;  // live: checked at every register probe
  size_t next_ = 0;
  bool finish_ = false;
  uint64_t bytes_read_at_start_ = 0;
};

// Records every register change of every channel, and every transfer that completes. A
// change in a clock edge is seen by reads after the edge; a change by a register write at
// once (AxiDma reports those with cycle UINT64_MAX), at the PS's time: SystemC's, or in the
// edge loop `*loop_now_ps`.
void observe_registers(Board& board, OracleResult& result, const uint64_t* loop_now_ps = nullptr) {
  const uint64_t period = board.clock().period().value();
  result.channels.resize(size_t(board.dma_count()));
  for (int d = 0; d < board.dma_count(); ++d) {
    AxiDma& dma = board.dma(d);
    dma.set_register_observer(
        [&dma, &result, d, period, loop_now_ps, seen = std::array<uint64_t, 2>{}](DmaChannel ch, uint64_t cycle) mutable {
          const int c = int(ch);
          OracleChannelResult& r = result.channels[d][c];
          const uint64_t write_ps = loop_now_ps != nullptr ? *loop_now_ps : sc_core::sc_time_stamp().value();
          const uint64_t t = cycle == UINT64_MAX ? write_ps : cycle * period + 1;
          r.changes.push_back({t, cycle == UINT64_MAX, dma.registers(ch)});
          if (cycle != UINT64_MAX) result.cycles = std::max(result.cycles, cycle - kOracleFirstEdge);
          const AxiDmaChannelStats& st = dma.stats(ch);
          if (st.transfers > seen[size_t(c)]) {
            seen[size_t(c)] = st.transfers;
            r.transfers.emplace_back(st.last_start_cycle - kOracleFirstEdge, st.last_completion_cycle - kOracleFirstEdge);
          }
        });
  }
}

// Merges the ranges the PL wrote and reads back their final contents.
std::vector<MemoryRegion> written_regions(Board& board, const std::map<uint64_t, uint64_t>& written) {
  std::vector<MemoryRegion> out;
  uint64_t cur_b = 0, cur_e = 0;
  auto flush = [&] {
    if (cur_e <= cur_b) return;
    MemoryRegion r;
    r.addr = cur_b;
    r.bytes.resize(cur_e - cur_b);
    board.memory().read(cur_b, r.bytes.data(), r.bytes.size());
    out.push_back(std::move(r));
  };
  for (const auto& [b, e] : written) {
    if (b <= cur_e && cur_e > cur_b) {
      cur_e = std::max(cur_e, e);
    } else {
      flush();
      cur_b = b;
      cur_e = e;
    }
  }
  flush();
  return out;
}

}  // namespace

OracleResult run_timing_oracle(const BoardConfig& config, const OracleBatch& batch, uint64_t max_cycles) {
  OracleResult result;
  FreshSimContext context;
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  Board board("board", config);
  board.memory().set_backing(batch.backing);
  if (!batch.arithmetic) board.skip_arithmetic();
  for (const auto& r : batch.memory) board.memory().write(r.addr, r.bytes.data(), r.bytes.size());
  board.memory().restore_state(batch.memory_state);
  if (batch.memory_trace) board.memory().record_trace();
  if (batch.initial.size() != size_t(board.dma_count()))
    throw Error(fmt::format("timing oracle: the batch opens {} DMAs' registers, the board has {}", batch.initial.size(),
                            board.dma_count()));
  for (int d = 0; d < board.dma_count(); ++d)
    for (int c = 0; c < 2; ++c) board.dma(d).restore_registers(DmaChannel(c), batch.initial.at(size_t(d))[size_t(c)]);
  // The edge loop runs from edge 1 on, after SystemC has elaborated the board and run its
  // edge 0 (idle: the first start is at edge kOracleFirstEdge).
  const bool loop = batch.driver == OracleDriver::kEdgeLoop && EdgeLoop::can_drive(board) &&
                    (batch.actions.empty() || batch.actions.front().time_ps > 0);
  uint64_t loop_now_ps = 0;
  observe_registers(board, result, loop ? &loop_now_ps : nullptr);
  std::map<uint64_t, uint64_t> written;  // begin -> end of every range the PL writes
  board.memory().set_write_listener([&](uint64_t a, size_t n) {
    auto& end = written[a];
    end = std::max<uint64_t>(end, a + n);
  });
  OraclePs ps("oracle_ps", board, batch.actions, max_cycles, result, false, !loop);
  ps.bus.bind(board.ps_bus);
  if (loop) {
    start_simulation(sc_core::SC_ZERO_TIME);
    EdgeLoop edges(board);
    ps.run_in_loop(edges, loop_now_ps);
    result.driver = OracleDriver::kEdgeLoop;
  } else {
    start_simulation();
    if (ps.failure) std::rethrow_exception(ps.failure);
    result.driver = OracleDriver::kSystemC;
  }
  result.writes = written_regions(board, written);
  result.memory_trace = board.memory().take_trace();
  return result;
}

// ---- LiveOracle --------------------------------------------------------------------------

// One run of the batch: its own SystemC context (made current only while the run is being
// built, resumed or taken apart: between steps the caller's context is current again), the
// board loaded with the opening, and the PS.
struct LiveOracle::Run {
  // Makes the run's context current for the scope, then the one before again.
  class Current {
   public:
    explicit Current(sc_core::sc_simcontext* c) : previous_(sc_core::sc_curr_simcontext) { make(c); }
    ~Current() { make(previous_); }
    Current(const Current&) = delete;
    Current& operator=(const Current&) = delete;

   private:
    static void make(sc_core::sc_simcontext* c) {
      sc_core::sc_curr_simcontext = c;
      sc_core::sc_default_global_context = c;
    }
    sc_core::sc_simcontext* previous_;
  };

  Run(const BoardConfig& config, const OracleBatch& opening) : context(new sc_core::sc_simcontext) {
    try {
      build(config, opening);
    } catch (...) {
      {
        Current current(context);
        ps.reset();
        board.reset();
        delete context;
      }
      throw;
    }
  }
  void build(const BoardConfig& config, const OracleBatch& opening) {
    Current current(context);
    sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
    // A live run lasts while the caller's DDR changes: it holds its own copy.
    if (opening.backing) throw Error("timing oracle: a live run reads a copy of the DDR, not a backing");
    board = std::make_unique<Board>("board", config);
    if (!opening.arithmetic) board->skip_arithmetic();
    for (const auto& r : opening.memory) board->memory().write(r.addr, r.bytes.data(), r.bytes.size());
    board->memory().restore_state(opening.memory_state);
    if (opening.initial.size() != size_t(board->dma_count()))
      throw Error(fmt::format("timing oracle: the batch opens {} DMAs' registers, the board has {}", opening.initial.size(),
                              board->dma_count()));
    for (int d = 0; d < board->dma_count(); ++d)
      for (int c = 0; c < 2; ++c) board->dma(d).restore_registers(DmaChannel(c), opening.initial.at(size_t(d))[size_t(c)]);
    observe_registers(*board, result);
    board->memory().set_write_listener([this](uint64_t a, size_t n) {
      auto& end = written[a];
      end = std::max<uint64_t>(end, a + n);
    });
    ps = std::make_unique<OraclePs>("oracle_ps", *board, opening.actions, uint64_t(1) << 28, result, true);
    ps->bus.bind(board->ps_bus);
  }
  ~Run() {
    Current current(context);
    // End the PS's thread (it is waiting for actions) before the modules go away.
    if (!stopped && sc_core::sc_get_status() == sc_core::SC_PAUSED) {
      ps->finish();
      try {
        start_simulation();
      } catch (...) {  // ending a run that failed: its error was thrown already
      }
    }
    ps.reset();
    board.reset();
    // While it is current: SystemC's clean-up asks for the current context, and would make
    // a new one (never freed) if there were none.
    delete context;
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  // Runs until the PS has performed every action it has (it then pauses).
  void resume() {
    if (stopped) throw Error("timing oracle: the live run already ended with an error");
    Current current(context);
    try {
      start_simulation();
    } catch (...) {
      stopped = true;
      throw;
    }
    if (ps->failure) {
      stopped = true;
      std::rethrow_exception(ps->failure);
    }
    paused_ps = sc_core::sc_time_stamp().value();
    started = true;
  }

  sc_core::sc_simcontext* context;
  std::unique_ptr<Board> board;
  std::unique_ptr<OraclePs> ps;
  OracleResult result;
  std::map<uint64_t, uint64_t> written;  // begin -> end of every range written since the opening
  uint64_t paused_ps = 0;
  bool started = false, stopped = false;
};

LiveOracle::LiveOracle(const BoardConfig& config, OracleBatch opening)
    : config_(config), opening_(std::move(opening)) {
  start();
}

LiveOracle::~LiveOracle() = default;

void LiveOracle::start() {
  run_.reset();
  run_ = std::make_unique<Run>(config_, opening_);
}

void LiveOracle::add(OracleAction a) { opening_.actions.push_back(std::move(a)); }

std::vector<uint8_t> LiveOracle::probe(OracleAction a) {
  opening_.actions.push_back(std::move(a));
  // An action at the time of the pause, when that time is an edge, or before it: a whole run.
  const Run& r = *run_;
  if (r.started) {
    const uint64_t first = opening_.actions[r.ps->performed()].time_ps;
    const uint64_t period = clock_period_ps(config_.clock.mhz);
    if (first < r.paused_ps || (first == r.paused_ps && r.paused_ps % period == 0)) {
      ++restarts_;
      start();
    }
  }
  run_->resume();
  // Handed over, not kept: a long batch probes many times.
  std::vector<uint8_t> v = std::move(run_->result.probes.back());
  run_->result.probes.pop_back();
  return v;
}

bool LiveOracle::quiet() const { return board_quiet(*run_->board); }

DmaChannelRegisters LiveOracle::registers(int dma, int channel) const {
  return run_->board->dma(dma).registers(DmaChannel(channel));
}

LaneRegisterView LiveOracle::lane(int engine, int lane) const {
  return run_->board->engine(engine).registers(lane);
}

const OracleChannelResult& LiveOracle::channel(int dma, int channel) const { return run_->result.channels[dma][channel]; }

uint64_t LiveOracle::bytes_read() const {
  uint64_t bytes = 0;
  for (const auto& p : run_->board->memory().stats().ports) bytes += p.bytes_read;
  return bytes - run_->ps->bytes_read_at_start();
}

uint64_t LiveOracle::cycles() const {
  const uint64_t c = run_->board->clock().cycle();
  return c > kOracleFirstEdge ? c - kOracleFirstEdge : 0;
}

MemoryState LiveOracle::memory_state() const { return run_->board->memory().carried_state(run_->board->clock().cycle()); }

DramActivity LiveOracle::dram_activity(std::vector<uint64_t>& tail) {
  return run_->board->memory().close_dram_activity(run_->board->clock().cycle(), &tail);
}

std::vector<MemoryRegion> LiveOracle::writes() const { return written_regions(*run_->board, run_->written); }

}  // namespace bitsim::hw
