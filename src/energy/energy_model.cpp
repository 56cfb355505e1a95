#include "energy/energy_model.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <stdexcept>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::energy {

// ENERGY.md's table: the two published 4 Gb x16 sets (mA, VDD 1.5 V).
const std::vector<DramIdd>& dram_idd_presets() {
  static const std::vector<DramIdd> presets = {
      {"alliance-as4c256m16d3b", "Alliance AS4C256M16D3B datasheet (4 Gb x16)", 1.5, 55, 25, 32, 135, 150, 160},
      {"samsung-k4b4g1646q", "DRAMSys memspec SAMSUNG_K4B4G1646Q (4 Gb x16, DDR3-1066)", 1.5, 125, 34, 60, 412, 402,
       395},
  };
  return presets;
}

const DramIdd& dram_idd_preset(const std::string& name) {
  std::vector<std::string> names;
  for (const DramIdd& p : dram_idd_presets()) {
    if (p.name == name) return p;
    names.push_back(p.name);
  }
  throw Error(fmt::format("energy.dram.idd_set = '{}' is not a published set: {}", name, fmt::join(names, ", ")));
}

void EnergyConfig::apply(const DramIdd& idd) {
  idd_set = idd.name;
  vdd_v = idd.vdd_v;
  idd0_ma = idd.idd0_ma, idd2n_ma = idd.idd2n_ma, idd3n_ma = idd.idd3n_ma;
  idd4r_ma = idd.idd4r_ma, idd4w_ma = idd.idd4w_ma, idd5b_ma = idd.idd5b_ma;
}

void EnergyConfig::validate(const std::string& who) const {
  check_fields(*this, who);
  if (!(vdd_v > 0))
    throw Error(fmt::format("{}: energy.dram.vdd_v = {} V: the DRAM's supply must be above 0 V", who, vdd_v));
  // Each energy above background is a difference of two currents (docs/energy.md, "DRAM");
  // a set in which it is negative is not a DDR3 device's.
  struct Relation {
    const char* key;
    double value;
    const char* below_key;
    double below;
    const char* why;
  };
  const Relation relations[] = {
      {"energy.dram.idd0_ma", idd0_ma, "energy.dram.idd3n_ma", idd3n_ma, "an ACT would cost negative energy (IDD0 - IDD3N)"},
      {"energy.dram.idd0_ma", idd0_ma, "energy.dram.idd2n_ma", idd2n_ma, "a PRE would cost negative energy (IDD0 - IDD2N)"},
      {"energy.dram.idd4r_ma", idd4r_ma, "energy.dram.idd3n_ma", idd3n_ma,
       "a read burst would cost negative energy (IDD4R - IDD3N)"},
      {"energy.dram.idd4w_ma", idd4w_ma, "energy.dram.idd3n_ma", idd3n_ma,
       "a write burst would cost negative energy (IDD4W - IDD3N)"},
      {"energy.dram.idd5b_ma", idd5b_ma, "energy.dram.idd3n_ma", idd3n_ma,
       "a refresh would cost negative energy (IDD5B - IDD3N)"},
      {"energy.dram.idd3n_ma", idd3n_ma, "energy.dram.idd2n_ma", idd2n_ma,
       "an open bank would draw less than all banks precharged"},
  };
  for (const Relation& r : relations)
    if (r.value < r.below)
      throw Error(fmt::format("{}: {} = {} mA is below {} = {} mA: {}", who, r.key, r.value, r.below_key, r.below, r.why));
  if (idd_set != "custom") {
    const DramIdd& p = dram_idd_preset(idd_set);
    const std::pair<const char*, std::pair<double, double>> fields[] = {
        {"energy.dram.vdd_v", {vdd_v, p.vdd_v}},         {"energy.dram.idd0_ma", {idd0_ma, p.idd0_ma}},
        {"energy.dram.idd2n_ma", {idd2n_ma, p.idd2n_ma}}, {"energy.dram.idd3n_ma", {idd3n_ma, p.idd3n_ma}},
        {"energy.dram.idd4r_ma", {idd4r_ma, p.idd4r_ma}}, {"energy.dram.idd4w_ma", {idd4w_ma, p.idd4w_ma}},
        {"energy.dram.idd5b_ma", {idd5b_ma, p.idd5b_ma}}};
    for (const auto& [key, v] : fields)
      if (std::fabs(v.first - v.second) > 1e-9)
        throw Error(fmt::format("{}: {} = {} is not the value of energy.dram.idd_set = {} ({}): set "
                                "energy.dram.idd_set = custom for a set of your own",
                                who, key, v.first, idd_set, v.second));
  }
  if (ps_static_w > ps_active_w)
    throw Error(fmt::format("{}: energy.ps.static_w = {} W is above energy.ps.active_w = {} W: the PS7 idle cannot "
                            "draw more than the PS7 busy",
                            who, ps_static_w, ps_active_w));
  if (ps_busy_cores > ps_cores)
    throw Error(fmt::format("{}: energy.ps.busy_cores = {} is more than energy.ps.cores = {}", who, ps_busy_cores,
                            ps_cores));
}

const char* circuit_name(Circuit c) {
  switch (c) {
    case Circuit::kMatmul: return "matmul";
    case Circuit::kAttention: return "attention";
    case Circuit::kDma: return "dma";
    case Circuit::kWalker: return "walker";
    case Circuit::kPrefill: return "prefill";
    case Circuit::kCount: break;
  }
  return "?";
}

DramTiming dram_timing(const hw::Ddr3Config& c) {
  DramTiming t;
  t.clock_mhz = c.clock_mhz;
  t.bus_bytes = c.bus_bytes, t.burst_length = c.burst_length, t.columns = c.columns, t.banks = c.banks;
  t.tras = c.tras, t.trc = c.trc, t.trfc = c.trfc, t.trefi = c.trefi;
  return t;
}

DramModel dram_model(const std::string& m) {
  if (m == "ddr3") return DramModel::kCommands;
  if (m == "wall" || m == "latency-bandwidth") return DramModel::kBytes;
  throw Error(fmt::format("ddr.model = '{}' is not one of: wall, latency-bandwidth, ddr3", m));
}

double Breakdown::pl() const {
  double s = pl_static;
  for (int i = 0; i < kCircuits; ++i) s += pl_clock[size_t(i)] + pl_dynamic[size_t(i)];
  return s;
}

double Breakdown::background() const {
  double s = dram_background + dram_refresh + pl_static + ps_static + board_other;
  for (const double x : pl_clock) s += x;
  return s;
}

Breakdown& Breakdown::operator+=(const Breakdown& o) {
  dram_act_pre += o.dram_act_pre, dram_read += o.dram_read, dram_write += o.dram_write;
  dram_refresh += o.dram_refresh, dram_background += o.dram_background, dram_io += o.dram_io;
  pl_static += o.pl_static;
  for (size_t i = 0; i < size_t(kCircuits); ++i) pl_clock[i] += o.pl_clock[i], pl_dynamic[i] += o.pl_dynamic[i];
  ps_static += o.ps_static, ps_compute += o.ps_compute, ps_wait += o.ps_wait;
  board_other += o.board_other;
  return *this;
}

DramEnergies dram_energies(const EnergyConfig& c, const DramTiming& t) {
  // mA x V x ns = pJ; mW x ns = pJ (docs/energy.md, "DRAM").
  const double tck = t.tck_ns(), v = c.vdd_v, burst = t.burst_length / 2.0 * tck;
  DramEnergies e;
  e.act = v * (c.idd0_ma - c.idd3n_ma) * t.tras * tck;
  e.pre = v * (c.idd0_ma - c.idd2n_ma) * double(t.trc - t.tras) * tck;
  e.rd = v * (c.idd4r_ma - c.idd3n_ma) * burst;
  e.wr = v * (c.idd4w_ma - c.idd3n_ma) * burst;
  e.ref = v * (c.idd5b_ma - c.idd3n_ma) * t.trfc * tck;
  e.io_rd = c.io_read_mw_per_pin * c.io_read_pins * burst;
  e.io_wr = c.io_write_mw_per_pin * c.io_write_pins * burst;
  e.open_mw = v * c.idd3n_ma;
  e.precharged_mw = v * c.idd2n_ma;
  return e;
}

Resources dma_resources(const EnergyConfig& c) {
  Resources r;
  r.lut = c.dma_lut;
  r.ff = c.dma_ff;
  r.bram36 = c.dma_bram36;
  return r;
}

namespace {

constexpr double kPjToMj = 1e-9;       // pJ -> mJ
constexpr double kWattPsToMj = 1e-9;   // W x ps -> mJ
constexpr double kUwPsToMj = 1e-15;    // uW x ps -> mJ
constexpr double kReferenceToggle = 0.125;  // the toggle rate the PL coefficients are given at

void check_activity(const EnergyConfig& c, const Activity& a) {
  auto refuse = [](const std::string& what) { throw Error("energy activity: " + what); };
  if (a.pl_period_ps == 0) refuse("pl_period_ps = 0: the PL clock has no period");
  if (a.cpu_compute_ps + a.cpu_wait_ps > a.duration_ps)
    refuse(fmt::format("cpu_compute_ps + cpu_wait_ps = {} ps exceed duration_ps = {} ps", a.cpu_compute_ps + a.cpu_wait_ps,
                       a.duration_ps));
  const uint64_t cycles = (a.duration_ps + a.pl_period_ps - 1) / a.pl_period_ps;  // PL edges in the interval
  for (int i = 0; i < kCircuits; ++i) {
    const CircuitActivity& ca = a.circuits[size_t(i)];
    if (ca.busy_cycles > uint64_t(ca.instances) * cycles)
      refuse(fmt::format("circuits.{}.busy_cycles = {} exceed {} instance(s) x {} PL cycles of the interval",
                         circuit_name(Circuit(i)), ca.busy_cycles, ca.instances, cycles));
    const Resources& r = ca.resources;
    if (r.lut < 0 || r.bram36 < 0 || r.dsp < 0 || r.ff.value_or(0) < 0)
      refuse(fmt::format("circuits.{}.resources: a negative count", circuit_name(Circuit(i))));
  }
  if (a.dram.bus_bytes == 0 || a.dram.bus_bytes % c.device_bytes != 0)
    throw Error(fmt::format("energy: ddr3.bus_bytes = {} is not a whole number of devices of energy.dram.device_bytes "
                            "= {}",
                            a.dram.bus_bytes, c.device_bytes));
  if (a.dram.trc < a.dram.tras)
    throw Error(fmt::format("energy: ddr3.trc = {} is below ddr3.tras = {}: a PRE would cost negative energy", a.dram.trc,
                            a.dram.tras));
  if (!(a.dram.clock_mhz > 0)) throw Error("energy: ddr3.clock_mhz is not above 0");
  const double device_cycles = double(a.duration_ps) * a.dram.clock_mhz * 1e-6;
  if (a.dram_model == DramModel::kCommands && double(a.commands.open_cycles) > device_cycles + 1)
    refuse(fmt::format("commands.open_cycles = {} exceed the {:.0f} device cycles of the interval",
                       a.commands.open_cycles, device_cycles));
  if (a.dram_model == DramModel::kBytes && a.dram_busy_ps > a.duration_ps)
    refuse(fmt::format("dram_busy_ps = {} ps exceed duration_ps = {} ps", a.dram_busy_ps, a.duration_ps));
}

void add_dram(const EnergyConfig& c, const Activity& a, Breakdown& b) {
  const double dur = double(a.duration_ps);
  // DRAM: per device, times the devices side by side on the bus (each sees every command).
  const DramTiming& t = a.dram;
  const double devices = double(t.bus_bytes / c.device_bytes);
  const DramEnergies e = dram_energies(c, t);
  const double device_cycles = dur * t.clock_mhz * 1e-6;
  double act = 0, pre = 0, rd = 0, wr = 0, ref = 0, open = 0;
  if (a.dram_model == DramModel::kCommands) {
    const DramCommands& k = a.commands;
    act = double(k.act), pre = double(k.pre + k.prea_banks), rd = double(k.rd), wr = double(k.wr), ref = double(k.ref);
    open = std::min(double(k.open_cycles), device_cycles);
  } else {
    // The approximation of docs/energy.md ("DRAM under the wall models"): every byte in BL8
    // bursts of the whole bus, one ACT/PRE pair per page of sequential data, a refresh every
    // tREFI, a bank open while the memory moves data and through each refresh.
    const double burst_bytes = double(t.bus_bytes) * t.burst_length;
    const double page_bytes = double(t.columns) * t.bus_bytes;
    rd = std::ceil(double(a.dram_bytes_read) / burst_bytes);
    wr = std::ceil(double(a.dram_bytes_written) / burst_bytes);
    act = pre = std::ceil(double(a.dram_bytes_read + a.dram_bytes_written) / page_bytes);
    ref = std::floor(device_cycles / t.trefi);
    open = std::min(device_cycles, double(a.dram_busy_ps) * t.clock_mhz * 1e-6 + ref * t.trfc);
  }
  const double tck = t.tck_ns();
  b.dram_act_pre = devices * (act * e.act + pre * e.pre) * kPjToMj;
  b.dram_read = devices * rd * e.rd * kPjToMj;
  b.dram_write = devices * wr * e.wr * kPjToMj;
  b.dram_refresh = devices * ref * e.ref * kPjToMj;
  b.dram_background = devices * (open * e.open_mw + (device_cycles - open) * e.precharged_mw) * tck * kPjToMj;
  b.dram_io = devices * (rd * e.io_rd + wr * e.io_wr) * kPjToMj;
}

void add_pl(const EnergyConfig& c, const Activity& a, Breakdown& b) {
  const double dur = double(a.duration_ps);
  // PL: static over the interval; per circuit the clock tree over the interval and the logic
  // while busy (docs/energy.md, "PL").
  b.pl_static = c.pl_static_w * dur * kWattPsToMj;
  const double mhz = 1e6 / double(a.pl_period_ps);
  const double toggle = c.pl_toggle_rate / kReferenceToggle;
  for (int i = 0; i < kCircuits; ++i) {
    const CircuitActivity& ca = a.circuits[size_t(i)];
    const Resources& r = ca.resources;
    const double ff = r.ff.value_or(r.lut * c.ff_per_lut);
    const double clock_uw = c.clock_uw_per_mhz_per_ff * ff * mhz;
    const double busy_uw =
        mhz * (toggle * (r.lut * c.lut_uw_per_mhz + ff * c.ff_uw_per_mhz + r.dsp * c.dsp_uw_per_mhz) +
               r.bram36 * c.bram36_uw_per_mhz);
    b.pl_clock[size_t(i)] = double(ca.instances) * clock_uw * dur * kUwPsToMj;
    b.pl_dynamic[size_t(i)] = busy_uw * double(ca.busy_cycles) * double(a.pl_period_ps) * kUwPsToMj;
  }
}

void add_ps(const EnergyConfig& c, const Activity& a, Breakdown& b) {
  const double dur = double(a.duration_ps);
  // PS: the idle figure over the interval; the busy cores' increment while computing, and
  // while polling a fraction of it (docs/energy.md, "PS").
  b.ps_static = c.ps_static_w * dur * kWattPsToMj;
  const double cores_w = double(c.ps_busy_cores) * c.ps_core_w();
  b.ps_compute = cores_w * double(a.cpu_compute_ps) * kWattPsToMj;
  b.ps_wait = c.ps_wait == "poll" ? cores_w * c.ps_poll_fraction * double(a.cpu_wait_ps) * kWattPsToMj : 0.0;
}

}  // namespace

Breakdown energy(const EnergyConfig& c, const Activity& a) {
  c.validate("energy");
  check_activity(c, a);
  Breakdown b;
  add_dram(c, a, b);
  add_pl(c, a, b);
  add_ps(c, a, b);
  b.board_other = c.board_other_w * double(a.duration_ps) * kWattPsToMj;
  return b;
}

namespace {

int strength(Evidence e) {
  switch (e) {
    case Evidence::kBoard: return 5;
    case Evidence::kCalibrated: return 4;
    case Evidence::kDatasheet: return 3;
    case Evidence::kVendorEstimate: return 2;
    case Evidence::kSimulated: return 1;
  }
  return 0;
}

// The weakest label of the keys named.
Evidence weakest(const EnergyConfig& c, std::initializer_list<const char*> keys) {
  Evidence w = Evidence::kBoard;
  for (const char* key : keys) {
    bool found = false;
    EnergyConfig::visit(c, [&](const auto&, const FieldInfo& f) {
      if (f.key != key) return;
      found = true;
      if (strength(f.evidence) < strength(w)) w = f.evidence;
    });
    if (!found) throw std::logic_error(fmt::format("energy: no key {}", key));
  }
  return w;
}

}  // namespace

std::vector<Component> components(const Breakdown& b, const EnergyConfig& c, DramModel model) {
  // Under the wall models the DRAM's counts are an approximation: simulated whatever the IDDs.
  auto dram = [&](std::initializer_list<const char*> keys) {
    return model == DramModel::kBytes ? Evidence::kSimulated : weakest(c, keys);
  };
  std::vector<Component> out = {
      {"dram.act_pre", b.dram_act_pre,
       dram({"energy.dram.vdd_v", "energy.dram.idd0_ma", "energy.dram.idd3n_ma", "energy.dram.idd2n_ma"})},
      {"dram.read", b.dram_read, dram({"energy.dram.vdd_v", "energy.dram.idd4r_ma", "energy.dram.idd3n_ma"})},
      {"dram.write", b.dram_write, dram({"energy.dram.vdd_v", "energy.dram.idd4w_ma", "energy.dram.idd3n_ma"})},
      {"dram.refresh", b.dram_refresh, dram({"energy.dram.vdd_v", "energy.dram.idd5b_ma", "energy.dram.idd3n_ma"})},
      {"dram.background", b.dram_background,
       dram({"energy.dram.vdd_v", "energy.dram.idd3n_ma", "energy.dram.idd2n_ma"})},
      {"dram.io", b.dram_io,
       dram({"energy.dram.io_read_mw_per_pin", "energy.dram.io_write_mw_per_pin", "energy.dram.io_read_pins",
             "energy.dram.io_write_pins"})},
      {"pl.static", b.pl_static, weakest(c, {"energy.pl.static_w"})},
  };
  const Evidence clock = weakest(c, {"energy.pl.clock_uw_per_mhz_per_ff", "energy.pl.ff_per_lut"});
  const Evidence logic = weakest(c, {"energy.pl.toggle_rate", "energy.pl.lut_uw_per_mhz", "energy.pl.ff_uw_per_mhz",
                                     "energy.pl.bram36_uw_per_mhz", "energy.pl.dsp_uw_per_mhz"});
  for (int i = 0; i < kCircuits; ++i)
    out.push_back({std::string("pl.clock.") + circuit_name(Circuit(i)), b.pl_clock[size_t(i)], clock});
  for (int i = 0; i < kCircuits; ++i)
    out.push_back({std::string("pl.dynamic.") + circuit_name(Circuit(i)), b.pl_dynamic[size_t(i)], logic});
  out.push_back({"ps.static", b.ps_static, weakest(c, {"energy.ps.static_w"})});
  out.push_back({"ps.compute", b.ps_compute,
                 weakest(c, {"energy.ps.active_w", "energy.ps.static_w", "energy.ps.busy_cores"})});
  out.push_back({"ps.wait", b.ps_wait,
                 weakest(c, {"energy.ps.active_w", "energy.ps.static_w", "energy.ps.busy_cores", "energy.ps.wait",
                             "energy.ps.poll_fraction"})});
  out.push_back({"board.other", b.board_other, weakest(c, {"energy.board.other_w"})});
  return out;
}

Evidence total_evidence(const EnergyConfig& c, DramModel model) {
  Evidence w = Evidence::kBoard;
  for (const Component& k : components(Breakdown{}, c, model))
    if (strength(k.evidence) < strength(w)) w = k.evidence;
  return w;
}

}  // namespace bitsim::energy
