#include "sim/replay.h"

#include "host/cycle_platform.h"
#include "host/fast_platform.h"
#include "host/ps.h"
#include "hw/fast_board.h"
#include "hw/sim_context.h"
#include "model/error.h"

namespace bitsim::sim {

host::ReplayResult replay_program(const host::MmioProgram& program, const hw::BoardConfig& config, bool cycle) {
  host::ReplayResult result;
  if (!cycle) {
    hw::FastBoard board(config, hw::FastBoardOptions{false, 1});
    host::FastPlatform platform(board);
    return host::run_program(program, platform);
  }
  hw::FreshSimContext context;
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  hw::Board board("board", config);
  host::Platform* platform = nullptr;
  host::Ps ps("ps", [&](host::Ps&) { result = host::run_program(program, *platform); });
  ps.bus.bind(board.ps_bus);
  host::CyclePlatform cycle_platform(ps, board);
  platform = &cycle_platform;
  sc_core::sc_start();
  if (ps.failure()) std::rethrow_exception(ps.failure());
  if (!ps.finished()) throw Error("replay: the simulation ended before the program did");
  return result;
}

}  // namespace bitsim::sim
