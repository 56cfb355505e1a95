#include "study/membench.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/error.h"
#include "base/stop_signal.h"
#include "hw/memory/ddr3_timing.h"

namespace bitsim::study {

const std::vector<MemPatternInfo>& mem_patterns() {
  static const std::vector<MemPatternInfo> k = {
      {MemPattern::SeqRead, "seq-read", "sequential reads", 97},
      {MemPattern::RandRead, "rand-read", "random reads", 92},
      {MemPattern::SeqWrite, "seq-write", "sequential writes", 90},
      {MemPattern::RandWrite, "rand-write", "random writes", 87},
      {MemPattern::SeqMixed, "seq-mixed", "mixed sequential", 87},
      {MemPattern::RandMixed, "rand-mixed", "mixed random", 79},
  };
  return k;
}

MemPattern parse_mem_pattern(const std::string& name) {
  std::string names;
  for (const auto& p : mem_patterns()) {
    if (name == p.name) return p.pattern;
    names += names.empty() ? p.name : std::string(", ") + p.name;
  }
  throw Error(fmt::format("membench: unknown pattern '{}' (one of {})", name, names));
}

const MemPatternInfo& mem_pattern_info(MemPattern p) {
  for (const auto& i : mem_patterns())
    if (i.pattern == p) return i;
  throw Error("membench: unknown pattern");
}

double peak_gb_s(const hw::Ddr3Config& c) { return c.peak_bytes_per_cycle() * c.clock_mhz * 1e6 / 1e9; }

double hp_port_gb_s(const MembenchSetup& s) { return kHpBeatBytes * s.pl_mhz * 1e6 / 1e9; }

uint32_t controller_port(const hw::Ddr3Config& c, int hp) { return std::min<uint32_t>(c.ports - 1, 2 + hp / 2); }

namespace {

// splitmix64: a fixed generator, so random addresses are the same on every platform.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct Master {
  bool write = false;
  int limit = 0, outstanding = 0;
  uint64_t issued = 0, next_addr = 0;
  double port_free = 0;  // device cycle the HP port's data channel is free again
};


void check_setup(const MembenchSetup& s) {
  if (s.masters < 1 || s.masters > 4) throw Error(fmt::format("membench: {} HP masters (1 to 4)", s.masters));
  if (s.page_offset < 0 || s.page_offset > kMaxPageOffset)
    throw Error(fmt::format("membench: page offset {} between the masters' buffers, expected 0..{}", s.page_offset,
                            kMaxPageOffset));
  s.ddr3.validate("membench");
  s.hp.validate("membench");
}

// The masters of pattern p, each with its own region of the device.
std::vector<Master> make_masters(const MembenchSetup& s, MemPattern p, uint64_t region, uint64_t page) {
  std::vector<Master> m(size_t(s.masters));
  for (int i = 0; i < s.masters; ++i) {
    m[i].write = p == MemPattern::SeqWrite || p == MemPattern::RandWrite ||
                 ((p == MemPattern::SeqMixed || p == MemPattern::RandMixed) && i % 2 == 1);
    m[i].limit = m[i].write ? s.hp.max_outstanding_writes : s.hp.max_outstanding_reads;
    // By default each master's buffer starts in its own bank (two pages apart under
    // row-bank-col), as separately allocated buffers do; region starts alone (page_offset 0)
    // all fall in bank 0.
    m[i].next_addr = uint64_t(i) * region + uint64_t(s.page_offset) * uint64_t(i) * page;
  }
  return m;
}

}  // namespace

MembenchResult run_membench(const MembenchSetup& s, MemPattern p) {
  check_setup(s);
  const bool random = p == MemPattern::RandRead || p == MemPattern::RandWrite || p == MemPattern::RandMixed;
  const uint32_t bytes = uint32_t(s.hp.max_burst_beats) * kHpBeatBytes;
  const uint64_t size = uint64_t(s.ddr3.banks) * s.ddr3.rows * s.ddr3.columns * s.ddr3.bus_bytes;
  const uint64_t page = uint64_t(s.ddr3.columns) * s.ddr3.bus_bytes;
  const uint64_t region = size / uint64_t(s.masters) / page * page - 8 * page;
  // Device cycles one request's data occupies its HP port (8 B per PL cycle).
  const double port_cycles = double(s.hp.max_burst_beats) * s.ddr3.clock_mhz / s.pl_mhz;
  std::vector<Master> m = make_masters(s, p, region, page);
  uint64_t rng = s.seed;
  hw::Ddr3Timing ddr(s.ddr3);
  auto issue = [&](int i, uint64_t t) {
    Master& x = m[i];
    uint64_t arrival = t;
    if (s.port_rate) {
      arrival = std::max<uint64_t>(t, uint64_t(std::ceil(x.port_free - 1e-9)));
      x.port_free = std::max(x.port_free, double(arrival)) + port_cycles;
    }
    uint64_t addr;
    if (random) {
      addr = next_random(rng) % (size / bytes) * bytes;
    } else {
      addr = x.next_addr;
      x.next_addr += bytes;
    }
    ddr.submit(hw::Ddr3Request{arrival, controller_port(s.ddr3, i), x.write, addr, bytes}, uint64_t(i));
    x.issued += bytes;
    ++x.outstanding;
  };
  for (int i = 0; i < s.masters; ++i)
    while (m[i].outstanding < m[i].limit && m[i].issued < s.bytes_per_master) issue(i, 0);
  MembenchResult r;
  r.pattern = p;
  r.masters = s.masters;
  while (const auto sv = ddr.step()) {
    if (!sv->last) continue;
    check_stop();  // SIGINT / SIGTERM: nothing of a pattern is kept (each takes under a second)
    const int i = int(sv->id);
    --m[i].outstanding;
    r.bytes += bytes;
    r.device_cycles = std::max(r.device_cycles, sv->end);
    if (m[i].issued < s.bytes_per_master) issue(i, sv->end);
  }
  const double seconds = double(r.device_cycles) / (s.ddr3.clock_mhz * 1e6);
  r.gb_s = r.bytes / seconds / 1e9;
  r.efficiency = r.gb_s / peak_gb_s(s.ddr3);
  return r;
}

std::vector<LimitRow> limit_sweep(const MembenchSetup& s) {
  std::vector<LimitRow> rows;
  const double device = peak_gb_s(s.ddr3) * (1.0 - double(s.ddr3.trfc) / s.ddr3.trefi);
  for (int n = 1; n <= 4; ++n) {
    MembenchSetup a = s;
    a.masters = n;
    LimitRow row;
    row.ports = n;
    row.hp_gb_s = n * hp_port_gb_s(s);
    row.device_gb_s = device;
    a.port_rate = true;
    row.measured_gb_s = run_membench(a, MemPattern::SeqRead).gb_s;
    a.port_rate = false;
    row.controller_gb_s = run_membench(a, MemPattern::SeqRead).gb_s;
    if (row.hp_gb_s <= row.controller_gb_s)
      row.binding = "HP ports";
    else
      row.binding = row.controller_gb_s >= 0.99 * device ? "device" : "controller";
    rows.push_back(row);
  }
  return rows;
}

}  // namespace bitsim::study
