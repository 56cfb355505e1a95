#pragma once
// `bitsim membench`: UG585's "DDR Efficiency" set-up run through the DDR3 timing engine
// (hw::Ddr3Timing) with closed-loop HP masters, and the sweep of 1 to 4 HP ports naming the
// limit that binds (docs/ddr3.md, "What the model reproduces and what it does not").
#include <cstdint>
#include <string>
#include <vector>

#include "hw/memory/ddr3_config.h"
#include "hw/interconnect/hp_port.h"

namespace bitsim::study {

enum class MemPattern { SeqRead, RandRead, SeqWrite, RandWrite, SeqMixed, RandMixed };

struct MemPatternInfo {
  MemPattern pattern;
  const char* name;      // the --pattern value
  const char* label;     // UG585's row
  double ug585_percent;  // UG585 "DDR Efficiency" (board)
};
const std::vector<MemPatternInfo>& mem_patterns();
// The pattern of that name; bitsim::Error naming it (and the choices) otherwise.
MemPattern parse_mem_pattern(const std::string& name);
const MemPatternInfo& mem_pattern_info(MemPattern p);

struct MembenchSetup {
  hw::Ddr3Config ddr3;
  hw::HpPortConfig hp;   // burst length (hp.max_burst_beats) and outstanding limits per master
  double pl_mhz = 125;   // HP port clock (clock.mhz): each port moves 8 B per PL cycle
  int masters = 4;       // HP masters (HP0..HP3)
  bool port_rate = true; // limit each master to its HP port's rate (false: the controller alone)
  uint64_t bytes_per_master = 1 << 20;
  uint64_t seed = 1;     // random addresses (a fixed generator: same figures everywhere)
  // Sequential patterns: DRAM pages between consecutive masters' buffer starts beyond the
  // quarter boundaries. UG585 does not say where its buffers lay; 2 puts the four in
  // different banks under row-bank-col, 0 puts all four in one bank (docs/ddr3.md).
  int page_offset = 2;
};
// The largest page_offset run_membench takes.
inline constexpr int kMaxPageOffset = 1024;

struct MembenchResult {
  MemPattern pattern;
  int masters = 0;
  uint64_t bytes = 0;
  uint64_t device_cycles = 0;  // first request to last completion
  double gb_s = 0;             // bytes / device time (simulated)
  double efficiency = 0;       // gb_s / peak (simulated)
};

// HP port bytes per AXI beat (64-bit HP ports, UG585).
inline constexpr uint32_t kHpBeatBytes = 8;

double peak_gb_s(const hw::Ddr3Config& c);
double hp_port_gb_s(const MembenchSetup& s);
// The controller port an HP master uses: HP0/HP1 share one, HP2/HP3 another (ddr3.ports
// 4: ports 2 and 3; fewer ports: the last one).
uint32_t controller_port(const hw::Ddr3Config& c, int hp);

MembenchResult run_membench(const MembenchSetup& s, MemPattern p);

struct LimitRow {
  int ports = 0;
  double hp_gb_s = 0;          // the HP ports' own rate (derived: n x 8 B x PL clock)
  double controller_gb_s = 0;  // the controller and device with no port limit (simulated)
  double device_gb_s = 0;      // device peak less refresh, peak x (1 - tRFC / tREFI) (derived)
  double measured_gb_s = 0;    // both limits together (simulated)
  std::string binding;  // "HP ports" (their rate below the controller's), else "device" (the controller
                        // within 1% of the refresh-bound device ceiling), else "controller"
};
// Sequential reads (the board's streams) from 1 to 4 HP ports, with and without the ports' own rate
// (s.port_rate is ignored).
std::vector<LimitRow> limit_sweep(const MembenchSetup& s);

}  // namespace bitsim::study
