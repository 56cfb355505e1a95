#pragma once
// The energy model of the board (docs/energy.md is its contract; the facts and their sources
// are ../shared/spec/ENERGY.md): what an interval of the simulated board (a token, a prefill
// chunk, a run, an idle gap) costs in joules, by component, from the activity the simulator
// already counts. Nothing here is measured: no power of the real board exists, so every
// coefficient is labelled datasheet, vendor-estimate or simulated (hw/config_field.h), never
// board or calibrated.
//
//   energy(config, activity) -> Breakdown (mJ per component; total() is their sum)
//
// The inputs are plain numbers (Activity): durations in ps, cycle and command counts, bytes,
// resources. Where each comes from in the simulator is the integrator's note; this module
// knows no simulator object beyond the ddr3 engine's command names and the ddr3.* config.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/config_field.h"
#include "hw/memory/ddr3_config.h"

namespace bitsim::energy {

// ---------------------------------------------------------------------------------------
// The config: the energy.* keys.

// One published IDD set of a 4 Gb x16 DDR3 device (ENERGY.md's table), currents in mA at
// vdd_v. The model charges no power-down (the ddr3 controller model issues none), so IDD2P
// is not part of it.
struct DramIdd {
  std::string name;    // the energy.dram.idd_set value
  std::string source;  // where the figures are published
  double vdd_v = 1.5;
  double idd0_ma = 0, idd2n_ma = 0, idd3n_ma = 0, idd4r_ma = 0, idd4w_ma = 0, idd5b_ma = 0;
};

// The presets: "alliance-as4c256m16d3b" (the shipped default) and "samsung-k4b4g1646q".
const std::vector<DramIdd>& dram_idd_presets();
// The preset named `name`; another name is a bitsim::Error naming energy.dram.idd_set.
const DramIdd& dram_idd_preset(const std::string& name);

// The shipped default is the Alliance IDD set and the PS/PL figures of docs/energy.md;
// visit() gives each field's key, range, unit, evidence label and meaning (hw/config_field.h).
struct EnergyConfig {
  // DRAM (per device; the bus holds ddr3.bus_bytes / device_bytes devices side by side).
  std::string idd_set = "alliance-as4c256m16d3b";  // or samsung-k4b4g1646q, or custom
  double vdd_v = 1.5;
  double idd0_ma = 55, idd2n_ma = 25, idd3n_ma = 32, idd4r_ma = 135, idd4w_ma = 150, idd5b_ma = 160;
  uint32_t device_bytes = 2;          // data width of one device (x16: 2 bytes)
  double io_read_mw_per_pin = 1.1;    // DRAM-side I/O power per pin while the bus reads, mW
  double io_write_mw_per_pin = 8.2;   // DRAM-side termination (ODT) power per pin while it writes, mW
  uint32_t io_read_pins = 20;         // pins driven on a read: DQ 16 + DQS 2 pairs
  uint32_t io_write_pins = 22;        // pins terminated on a write: DQ 16 + DQS 2 pairs + DM 2
  // PL.
  double pl_static_w = 0.145;         // device static (leakage) of the xc7z020, W
  double pl_toggle_rate = 0.125;      // fraction of a busy circuit's nets toggling per cycle
  double lut_uw_per_mhz = 0.030;      // per LUT (logic and its routing) at 12.5% toggle
  double ff_uw_per_mhz = 0.005;       // per FF (its output net) at 12.5% toggle
  double bram36_uw_per_mhz = 10.0;    // per BRAM36 enabled every cycle
  double dsp_uw_per_mhz = 6.0;        // per DSP48E1 at 12.5% toggle
  double clock_uw_per_mhz_per_ff = 0.015;  // clock tree load per FF, every cycle the clock runs
  double ff_per_lut = 1.3;            // FFs of a circuit whose FF count is not given
  double dma_lut = 1500, dma_ff = 2200, dma_bram36 = 2;  // one AXI DMA v7.1 (the board has 4)
  // PS.
  double ps_active_w = 1.533;         // PS7 with its Cortex-A9s busy (the Vivado report), W
  double ps_static_w = 0.933;         // PS7 with both cores idle in WFI, W
  uint32_t ps_cores = 2;
  uint32_t ps_busy_cores = 1;         // cores the token loop keeps busy (one thread)
  std::string ps_wait = "poll";       // how the driver waits for a DMA: poll (DMASR) or idle (WFI)
  double ps_poll_fraction = 0.5;      // a polling core's draw as a fraction of a computing core's
  // The rest of the board.
  double board_other_w = 0;           // regulators, Ethernet PHY, USB, HDMI, LEDs: not modelled

  // The increment of one core computing over the PS7's idle figure, W.
  double ps_core_w() const { return (ps_active_w - ps_static_w) / double(ps_cores); }
  // The IDD set's fields from a preset (idd_set, vdd_v and the six currents).
  void apply(const DramIdd& idd);

  template <typename Self, typename Visitor>
  static void visit(Self& c, Visitor&& v) {
    visit_dram(c, v);
    visit_pl(c, v);
    visit_ps(c, v);
  }
  // The DRAM, PL and PS fields, in that order.
  template <typename Self, typename Visitor>
  static void visit_dram(Self& c, Visitor&& v) {
    const auto D = Evidence::kDatasheet, S = Evidence::kSimulated, B = Evidence::kBoard;
    std::vector<std::string> sets;
    for (const DramIdd& p : dram_idd_presets()) sets.push_back(p.name);
    sets.push_back("custom");
    v(c.idd_set, FieldInfo{"energy.dram.idd_set", 0, 0, "", D,
                           "the DDR3 IDD set the energy.dram.idd* keys hold: a published 4 Gb x16 set (their "
                           "values must then be the preset's) or custom (docs/energy.md)",
                           1, true, sets});
    v(c.vdd_v, FieldInfo{"energy.dram.vdd_v", 0, 2, "V", D, "DDR3 supply VDD = VDDQ (JEDEC DDR3: 1.5 V)"});
    auto idd = [&](auto& f, const char* key, const char* what) {
      v(f, FieldInfo{std::string("energy.dram.") + key, 0, 2000, "mA", D,
                     std::string(what) + " of one device (the IDD set's datasheet figure)"});
    };
    idd(c.idd0_ma, "idd0_ma", "IDD0, one bank ACT-PRE cycling at tRC,");
    idd(c.idd2n_ma, "idd2n_ma", "IDD2N, precharge standby (all banks closed),");
    idd(c.idd3n_ma, "idd3n_ma", "IDD3N, active standby (a bank open),");
    idd(c.idd4r_ma, "idd4r_ma", "IDD4R, burst read, I/O excluded,");
    idd(c.idd4w_ma, "idd4w_ma", "IDD4W, burst write, termination excluded,");
    idd(c.idd5b_ma, "idd5b_ma", "IDD5B, burst refresh,");
    v(c.device_bytes, FieldInfo{"energy.dram.device_bytes", 1, 16, "bytes", B,
                                "data width of one DDR3 device (the board's 4 Gb x16 part: 2); the bus holds "
                                "ddr3.bus_bytes / this many devices"});
    v(c.io_read_mw_per_pin, FieldInfo{"energy.dram.io_read_mw_per_pin", 0, 100, "mW", S,
                                      "DRAM-side output driver power per pin while the bus carries reads (TN-41-01's "
                                      "method; value of its order, docs/energy.md)"});
    v(c.io_write_mw_per_pin, FieldInfo{"energy.dram.io_write_mw_per_pin", 0, 100, "mW", S,
                                       "DRAM-side on-die termination power per pin while the bus carries writes "
                                       "(TN-41-01's method; value of its order, docs/energy.md)"});
    v(c.io_read_pins, FieldInfo{"energy.dram.io_read_pins", 0, 128, "pins", D,
                                "pins a x16 device drives on a read: DQ 16 + DQS 2 differential pairs"});
    v(c.io_write_pins, FieldInfo{"energy.dram.io_write_pins", 0, 128, "pins", D,
                                 "pins a x16 device terminates on a write: DQ 16 + DQS 2 pairs + DM 2"});
  }
  template <typename Self, typename Visitor>
  static void visit_pl(Self& c, Visitor&& v) {
    const auto V = Evidence::kVendorEstimate, S = Evidence::kSimulated;
    v(c.pl_static_w, FieldInfo{"energy.pl.static_w", 0, 10, "W", V,
                               "device static power of the xc7z020 (Vivado report_power of a Zynq-7020 design: "
                               "0.145 W)"});
    v(c.pl_toggle_rate, FieldInfo{"energy.pl.toggle_rate", 0, 1, "", S,
                                  "fraction of a busy circuit's LUT, FF and DSP nets toggling each cycle (XPE's "
                                  "default 12.5%); the per-resource coefficients are at 12.5% and scale with it"});
    v(c.lut_uw_per_mhz, FieldInfo{"energy.pl.lut_uw_per_mhz", 0, 10, "uW/MHz", S,
                                  "dynamic power of one busy LUT with its routing, at 12.5% toggle (XPE class)"});
    v(c.ff_uw_per_mhz, FieldInfo{"energy.pl.ff_uw_per_mhz", 0, 10, "uW/MHz", S,
                                 "dynamic power of one busy FF's output net, at 12.5% toggle (XPE class)"});
    v(c.bram36_uw_per_mhz, FieldInfo{"energy.pl.bram36_uw_per_mhz", 0, 1000, "uW/MHz", S,
                                     "dynamic power of one BRAM36 enabled every cycle of a busy circuit (XPE class)"});
    v(c.dsp_uw_per_mhz, FieldInfo{"energy.pl.dsp_uw_per_mhz", 0, 1000, "uW/MHz", S,
                                  "dynamic power of one busy DSP48E1 at 12.5% toggle (XPE class)"});
    v(c.clock_uw_per_mhz_per_ff, FieldInfo{"energy.pl.clock_uw_per_mhz_per_ff", 0, 10, "uW/MHz", S,
                                           "clock tree power per FF it drives, drawn every cycle the PL clock "
                                           "runs, busy or idle (XPE class)"});
    v(c.ff_per_lut, FieldInfo{"energy.pl.ff_per_lut", 0, 16, "", S,
                              "FFs per LUT of a circuit whose resource estimate counts no FFs"});
    v(c.dma_lut, FieldInfo{"energy.pl.dma_lut", 0, 1e5, "LUT", S,
                           "LUTs of one AXI DMA v7.1 with its DataMover (PG021 class)"});
    v(c.dma_ff, FieldInfo{"energy.pl.dma_ff", 0, 1e5, "FF", S, "FFs of one AXI DMA v7.1 (PG021 class)"});
    v(c.dma_bram36, FieldInfo{"energy.pl.dma_bram36", 0, 140, "BRAM36", S,
                              "BRAM36 of one AXI DMA v7.1's FIFOs (PG021 class)"});
  }
  template <typename Self, typename Visitor>
  static void visit_ps(Self& c, Visitor&& v) {
    const auto V = Evidence::kVendorEstimate, S = Evidence::kSimulated, B = Evidence::kBoard;
    v(c.ps_active_w, FieldInfo{"energy.ps.active_w", 0, 10, "W", V,
                               "PS7 power with its Cortex-A9s busy, DDR controller, interconnect, HP ports and "
                               "DDR PHY included (Vivado report_power of a Zynq-7020 design: 1.533 W)"});
    v(c.ps_static_w, FieldInfo{"energy.ps.static_w", 0, 10, "W", S,
                               "PS7 power with both cores idle in WFI: energy.ps.active_w less two cores of about "
                               "0.3 W each at 650 MHz (docs/energy.md)"});
    v(c.ps_cores, FieldInfo{"energy.ps.cores", 1, 8, "cores", B, "Cortex-A9 cores (BOARD.md: 2)"});
    v(c.ps_busy_cores, FieldInfo{"energy.ps.busy_cores", 0, 8, "cores", S,
                                 "cores the token loop keeps busy (one thread; the other core idles)"});
    v(c.ps_wait, FieldInfo{"energy.ps.wait", 0, 0, "", S,
                           "how the driver waits for a DMA: poll (the board's C and Python drivers read DMASR "
                           "in a loop) or idle (an interrupt-driven what-if: the core in WFI)",
                           1, true, {"poll", "idle"}});
    v(c.ps_poll_fraction, FieldInfo{"energy.ps.poll_fraction", 0, 1, "", S,
                                    "a core polling DMASR draws this fraction of a computing core's power over "
                                    "the PS7's idle figure (it stalls on uncached device reads)"});
    v(c.board_other_w, FieldInfo{"energy.board.other_w", 0, 50, "W", S,
                                 "the rest of the board (regulator losses, Ethernet PHY, USB, HDMI, LEDs); not "
                                 "modelled: 0"});
  }

  // check_fields, and the relations between the keys (docs/energy.md, "Bad input"): a VDD
  // of 0; IDD0, IDD4R, IDD4W or IDD5B below IDD3N, IDD3N or IDD0 below IDD2N (an energy
  // above background would be negative); a preset's name with values not its own; the PS's
  // static power above its active power; more busy cores than cores. Throws bitsim::Error
  // naming `who` and the key(s).
  void validate(const std::string& who) const;
};

// ---------------------------------------------------------------------------------------
// The activity of an interval.

// The PL circuits the model prices (docs/energy.md, "PL").
enum class Circuit { kMatmul, kAttention, kDma, kWalker, kPrefill, kCount };
constexpr int kCircuits = int(Circuit::kCount);
const char* circuit_name(Circuit c);  // "matmul", "attention", "dma", "walker", "prefill"

// One instance's resources; ff empty: lut x energy.pl.ff_per_lut.
struct Resources {
  double lut = 0;
  std::optional<double> ff;
  double bram36 = 0, dsp = 0;
};

struct CircuitActivity {
  Resources resources;     // of one instance; all 0: not in the design
  uint32_t instances = 1;  // e.g. the 4 DMAs (resources of one each)
  uint64_t busy_cycles = 0;  // PL cycles it toggles, summed over its instances
};

// The DRAM's geometry and timing, from the ddr3.* keys (the wall models use them too: the
// board's device is the same whichever model times it).
struct DramTiming {
  double clock_mhz = 525;
  uint32_t bus_bytes = 2, burst_length = 8, columns = 1024, banks = 8;
  uint32_t tras = 19, trc = 26, trfc = 158, trefi = 4064;  // device cycles
  double tck_ns() const { return 1000.0 / clock_mhz; }
};
DramTiming dram_timing(const hw::Ddr3Config& c);

// ddr.model = ddr3: the commands the engine issued in the interval (hw::Ddr3CommandCounts,
// differenced over the interval) and the device cycles with a bank open (a refresh's tRFC
// included) or all banks precharged (hw::DramLedger, hw/memory/dram_ledger.h).
struct DramCommands {
  uint64_t act = 0, pre = 0, prea_banks = 0, rd = 0, wr = 0, ref = 0;
  uint64_t open_cycles = 0, precharged_cycles = 0;
};

enum class DramModel { kBytes, kCommands };  // wall / latency-bandwidth, or ddr3
// From ddr.model ("wall", "latency-bandwidth", "ddr3"); another is a bitsim::Error naming it.
DramModel dram_model(const std::string& ddr_model);

struct Activity {
  uint64_t duration_ps = 0;     // the interval
  uint64_t pl_period_ps = 8000; // PL clock (125 MHz)
  std::array<CircuitActivity, kCircuits> circuits{};
  // DRAM.
  DramModel dram_model = DramModel::kBytes;
  DramTiming dram;
  uint64_t dram_bytes_read = 0, dram_bytes_written = 0;  // bytes the memory moved (kBytes)
  uint64_t dram_busy_ps = 0;    // kBytes: time the memory moved data (a bank counted open)
  DramCommands commands;        // kCommands
  // PS.
  uint64_t cpu_compute_ps = 0;  // the CPU computing: token-loop steps and driver work
  uint64_t cpu_wait_ps = 0;     // the driver waiting for DMAs (or the PL walker); the rest idle

  CircuitActivity& circuit(Circuit c) { return circuits[size_t(c)]; }
  const CircuitActivity& circuit(Circuit c) const { return circuits[size_t(c)]; }
};

// ---------------------------------------------------------------------------------------
// The result, mJ per component.

struct Breakdown {
  // DRAM (all devices): the core's command energies above background, background by bank
  // state, refresh above background, I/O and termination.
  double dram_act_pre = 0, dram_read = 0, dram_write = 0, dram_refresh = 0, dram_background = 0, dram_io = 0;
  // PL: static; per circuit the clock tree over the whole interval and the logic while busy.
  double pl_static = 0;
  std::array<double, kCircuits> pl_clock{}, pl_dynamic{};
  // PS: its idle figure over the interval; the busy cores' increments while computing and waiting.
  double ps_static = 0, ps_compute = 0, ps_wait = 0;
  double board_other = 0;

  double dram_core() const { return dram_act_pre + dram_read + dram_write; }
  double dram() const { return dram_core() + dram_refresh + dram_background + dram_io; }
  double pl() const;
  double ps() const { return ps_static + ps_compute + ps_wait; }
  // What an idle board draws whatever it does: static power and background (DRAM standby
  // and refresh, the PL's running clock, the PS's idle figure, the rest of the board).
  double background() const;
  double total() const { return dram() + pl() + ps() + board_other; }
  Breakdown& operator+=(const Breakdown& o);
};

// One named component of a Breakdown with its evidence label: the weakest label of the keys
// its figure rests on (datasheet > vendor-estimate > simulated); the DRAM's under the wall
// models is simulated (an approximation). components() lists every field of the Breakdown
// once, in a fixed order; their mJ sum to total().
struct Component {
  std::string name;  // "dram.read", "pl.clock.matmul", "ps.wait", ...
  double mj = 0;
  Evidence evidence = Evidence::kSimulated;
};
std::vector<Component> components(const Breakdown& b, const EnergyConfig& c, DramModel model);
// The weakest label of a whole figure (the total's): simulated unless every key is stronger.
Evidence total_evidence(const EnergyConfig& c, DramModel model);

// The per-command energies of one device, pJ (docs/energy.md, "DRAM"), and the background
// power by state, mW.
struct DramEnergies {
  double act = 0, pre = 0, rd = 0, wr = 0, ref = 0;  // above background
  double io_rd = 0, io_wr = 0;                       // I/O per RD and WR burst
  double open_mw = 0, precharged_mw = 0;             // IDD3N x VDD, IDD2N x VDD
};
DramEnergies dram_energies(const EnergyConfig& c, const DramTiming& t);

// The energy of the interval (config validated; the activity checked: its CPU times and each
// circuit's busy cycles within the duration, the bus a whole number of devices; bitsim::Error
// naming the field). An activity with no busy cycles, bytes, commands or CPU time gives only
// background() components.
Breakdown energy(const EnergyConfig& c, const Activity& a);

// Average power over `duration_ps`, W (0 for an empty interval).
inline double average_power_w(const Breakdown& b, uint64_t duration_ps) {
  return duration_ps == 0 ? 0.0 : b.total() * 1e-3 / (double(duration_ps) * 1e-12);
}

// The DMA circuit's resources of one AXI DMA from the config (the board has 4).
Resources dma_resources(const EnergyConfig& c);

}  // namespace bitsim::energy
