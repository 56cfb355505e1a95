// Ddr (CIRCUITS.md 1, docs/hw-timing.md "DDR"): the lazy backdoor, read and write burst
// timing, DECERR, the write listener, and the bandwidth wall with two ports streaming at
// a clock where the ports bind and at one where the wall binds.
#include "hw/memory/ddr.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <vector>

#include "hw/parts/sim_context.h"
#include "support/ddr_port_driver.h"
#include "support/run_until.h"
#include "base/error.h"

namespace bitsim::hw {
namespace {

using test::PortDriver;
using test::run_until;

// The extents a copy into a zeroed memory has to write: runs of 4 KiB blocks not all zero,
// and nothing of a page that was written with zeros only.
TEST(PagedMemory, NonzeroExtentsAreTheBlocksACopyMustWrite) {
  PagedMemory mem(4 * PagedMemory::kPageBytes);
  const uint64_t page = PagedMemory::kPageBytes;
  const std::vector<uint8_t> zeros(5000, 0);
  mem.write(2 * page + 100, zeros.data(), zeros.size());          // written, but all zero
  const uint8_t one = 1;
  mem.write(10, &one, 1);                                         // block 0 of page 0
  mem.write(4096 * 3 + 4095, &one, 1);                            // blocks 3 and 4 as one run:
  mem.write(4096 * 4, &one, 1);                                   //   both hold a non-zero byte
  mem.write(page - 1, &one, 1);                                   // the page's last byte
  const std::vector<uint8_t> across(9000, 7);
  mem.write(3 * page - 4000, across.data(), across.size());       // across pages 2 and 3
  std::vector<std::pair<uint64_t, size_t>> got;
  mem.for_each_nonzero_extent([&](uint64_t a, size_t n) { got.emplace_back(a, n); });
  const std::vector<std::pair<uint64_t, size_t>> want = {
      {0, 4096}, {4096 * 3, 2 * 4096}, {page - 4096, 4096}, {3 * page - 4096, 4096}, {3 * page, 8192}};
  EXPECT_EQ(got, want);
  // Copied extent by extent into a zeroed memory, every byte reads the same.
  PagedMemory copy(mem.size());
  for (const auto& [a, n] : got) {
    std::vector<uint8_t> b(n);
    mem.read(a, b.data(), n);
    copy.write(a, b.data(), n);
  }
  std::vector<uint8_t> x(mem.size()), y(mem.size());
  mem.read(0, x.data(), x.size());
  copy.read(0, y.data(), y.size());
  EXPECT_TRUE(x == y);
}

// A backed memory reads the backing's pages until it writes one; its first write copies the
// backing's page in (the backing never changes), and the copied page's blocks count in its
// extents. A backing of another size, or one set after a write, is refused.
TEST(PagedMemory, ABackedMemoryReadsTheBackingAndCopiesAPageOnItsFirstWrite) {
  const uint64_t page = PagedMemory::kPageBytes;
  PagedMemory base(3 * page);
  const std::vector<uint8_t> data(6000, 0x5A);
  base.write(page + 1000, data.data(), data.size());              // page 1, blocks 0-1
  const uint8_t seven = 7;
  base.write(2 * page + 8, &seven, 1);                            // page 2
  PagedMemory mem(3 * page);
  mem.set_backing(&base);
  std::vector<uint8_t> got(data.size());
  mem.read(page + 1000, got.data(), got.size());
  EXPECT_EQ(got, data);
  EXPECT_EQ(mem.allocated_pages(), 0u);                           // reading copied nothing
  EXPECT_NE(mem.page(1), nullptr);
  EXPECT_EQ(mem.page(0), nullptr);                                // neither has page 0
  // A write into page 1: the rest of the page is still the backing's; the backing is as it was.
  const uint8_t one = 1;
  mem.write(page + 1500, &one, 1);
  mem.read(page + 1000, got.data(), got.size());
  std::vector<uint8_t> want = data;
  want[500] = 1;
  EXPECT_EQ(got, want);
  base.read(page + 1000, got.data(), got.size());
  EXPECT_EQ(got, data);
  EXPECT_EQ(mem.allocated_pages(), 1u);
  // A write into page 0, which the backing never wrote: zeros around it.
  mem.write(100, &one, 1);
  uint8_t around[3] = {9, 9, 9};
  mem.read(99, around, 3);
  EXPECT_EQ(around[0], 0);
  EXPECT_EQ(around[1], 1);
  EXPECT_EQ(around[2], 0);
  // Page 2 is still read through.
  uint8_t b = 0;
  mem.read(2 * page + 8, &b, 1);
  EXPECT_EQ(b, 7);
  // Its extents: what it wrote and the copied page's blocks (not page 2, never copied).
  std::vector<std::pair<uint64_t, size_t>> extents;
  mem.for_each_nonzero_extent([&](uint64_t a, size_t n) { extents.emplace_back(a, n); });
  const std::vector<std::pair<uint64_t, size_t>> want_extents = {{0, 4096}, {page, 2 * 4096}};
  EXPECT_EQ(extents, want_extents);
  PagedMemory other(2 * page);
  EXPECT_THROW(other.set_backing(&base), Error);
  EXPECT_THROW(mem.set_backing(&base), Error);                    // after a write
}

// Bytes written through span_for_write (the clocked DDR's beats) count as written as those
// of write() do; a memory whose size is not a whole block ends its last extent at its end.
TEST(PagedMemory, NonzeroExtentsSeeSpanWritesAndAShortLastBlock) {
  PagedMemory mem(PagedMemory::kPageBytes + 5000);
  const uint64_t page = PagedMemory::kPageBytes;
  EXPECT_EQ(mem.span_for_write(page - 4, 8), nullptr);            // across a page: refused
  EXPECT_EQ(mem.span_for_write(page + 4996, 8), nullptr);         // past the end: refused
  uint8_t* beat = mem.span_for_write(8192, 8);
  ASSERT_NE(beat, nullptr);
  beat[7] = 5;
  uint8_t* zero_beat = mem.span_for_write(3 * 4096, 8);           // written with zeros only
  ASSERT_NE(zero_beat, nullptr);
  zero_beat[0] = 0;
  const uint8_t one = 1;
  mem.write(page + 4999, &one, 1);                                // the last byte of the memory
  std::vector<std::pair<uint64_t, size_t>> got;
  mem.for_each_nonzero_extent([&](uint64_t a, size_t n) { got.emplace_back(a, n); });
  const std::vector<std::pair<uint64_t, size_t>> want = {{8192, 4096}, {page + 4096, 904}};
  EXPECT_EQ(got, want);
  uint8_t b = 0;
  mem.read(8199, &b, 1);
  EXPECT_EQ(b, 5);
}

TEST(Ddr, BackdoorAllocatesLazily) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{});
  Ddr ddr("ddr", clock, DdrConfig{});
  EXPECT_EQ(ddr.allocated_pages(), 0u);

  // An untouched page reads as zero and stays unallocated.
  std::vector<uint8_t> buf(4096, 0xAA);
  ddr.read(0x0123'4560, buf.data(), buf.size());
  EXPECT_TRUE(std::all_of(buf.begin(), buf.end(), [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(ddr.read64(0x1FFF'FFF8), 0u);
  EXPECT_EQ(ddr.allocated_pages(), 0u);

  // Touching one page allocates only that one.
  ddr.write64(0x0123'4568, 0x1122'3344'5566'7788ull);
  EXPECT_EQ(ddr.allocated_pages(), 1u);
  EXPECT_EQ(ddr.read64(0x0123'4568), 0x1122'3344'5566'7788ull);
  uint8_t b = 0;
  ddr.read(0x0123'456F, &b, 1);
  EXPECT_EQ(b, 0x11);  // little-endian

  // A write across a page boundary allocates both pages and reads back whole.
  std::vector<uint8_t> pattern(300);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = uint8_t(i * 7 + 1);
  const uint64_t across = 3 * Ddr::kPageBytes - 100;
  ddr.write(across, pattern.data(), pattern.size());
  EXPECT_EQ(ddr.allocated_pages(), 3u);
  std::vector<uint8_t> back(pattern.size());
  ddr.read(across, back.data(), back.size());
  EXPECT_EQ(back, pattern);
  // Unaligned 8-byte access within and across pages.
  EXPECT_EQ(ddr.read64(across + 1), [&] {
    uint64_t v;
    std::memcpy(&v, pattern.data() + 1, 8);
    return v;
  }());
}

TEST(Ddr, BackdoorOutsideThrowsNamingTheRange) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{});
  Ddr ddr("ddr", clock, DdrConfig{});
  uint8_t buf[16] = {};
  try {
    ddr.read(0x1FFF'FFFC, buf, 8);
    FAIL() << "expected bitsim::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("0x1ffffffc"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ddr"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ddr.write(0x2000'0000, buf, 1), Error);
  EXPECT_THROW(ddr.read64(0xFFFF'FFFF'FFFF'FFF8ull), Error);
  EXPECT_THROW(ddr.write64(0x1FFF'FFFC, 1), Error);
  EXPECT_NO_THROW(ddr.write(0x1FFF'FFF8, buf, 8));
  EXPECT_THROW(ddr.port(2), Error);
}

TEST(Ddr, ConfigErrorsNameTheField) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{});
  const auto expect_error = [&](DdrConfig c, const char* field) {
    try {
      Ddr ddr("ddr", clock, c);
      ADD_FAILURE() << "no error for " << field;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  DdrConfig c;
  c.size_bytes = 1000;
  expect_error(c, "ddr.size_mib");
  c = {};
  c.size_bytes = (512ull << 20) + 4096;  // not a whole number of MiB
  expect_error(c, "ddr.size_mib");
  c = {};
  c.size_bytes = 2ull << 30;  // past the 1 GiB a Zynq-7000 addresses
  expect_error(c, "ddr.size_mib");
  c = {};
  c.wall_bytes_per_s = 0;
  expect_error(c, "ddr.wall_gb_s");
  c = {};
  c.read_latency_ns = -1;
  expect_error(c, "read_latency_ns");
  c = {};
  c.write_latency_ns = -1;
  expect_error(c, "write_latency_ns");
  c = {};
  c.ports = 0;
  expect_error(c, "ports");
  c = {};
  c.max_pending_bursts = 0;
  expect_error(c, "max_pending_bursts");
}

TEST(Ddr, LatenciesRoundUpToWholeCycles) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{});  // 8 ns
  DdrConfig c;
  c.read_latency_ns = 100;  // 12.5 cycles -> 13
  c.write_latency_ns = 48;  // exactly 6
  Ddr ddr("ddr", clock, c);
  EXPECT_EQ(ddr.read_latency_cycles(), 13u);
  EXPECT_EQ(ddr.write_latency_cycles(), 6u);
}

// A read burst pushed at edge e is accepted at e+1 and its first beat leaves at
// e+1+read_latency (seen by the driver one edge later); the following beats leave one per
// edge; the data is the DDR's content.
TEST(Ddr, ReadBurstTiming) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{});
  Ddr ddr("ddr", clock, DdrConfig{});
  PortDriver drv("drv", clock, ddr.port(1));
  for (uint64_t i = 0; i < 16; ++i) ddr.write64(0x4000 + 8 * i, 0xABC0'0000ull + i);
  drv.reads.push_back(DdrBurst{0x4000, 16, 42});
  ASSERT_TRUE(run_until(clock, [&] { return drv.rbeats.size() == 16; }, 1000));
  const uint64_t rl = ddr.read_latency_cycles();
  const uint64_t e = drv.ar_cycles.at(0);
  for (uint64_t i = 0; i < 16; ++i) {
    EXPECT_EQ(drv.rcycles[i], e + 1 + rl + 1 + i) << "beat " << i;
    EXPECT_EQ(drv.rbeats[i].data, 0xABC0'0000ull + i);
    EXPECT_EQ(drv.rbeats[i].tag, 42u);
    EXPECT_EQ(drv.rbeats[i].last, i == 15);
    EXPECT_FALSE(drv.rbeats[i].error);
  }
  EXPECT_EQ(ddr.stats().ports[1].bytes_read, 128u);
  EXPECT_EQ(ddr.stats().ports[1].read_bursts, 1u);
  EXPECT_EQ(ddr.stats().ports[1].busy_cycles, 16u);
  EXPECT_EQ(ddr.stats().ports[0].busy_cycles, 0u);
}

// Write beats are taken as they arrive (from the edge the burst is accepted); the response
// leaves write_latency cycles after the last beat was taken. Byte strobes are honoured and
// the listener sees the burst.
TEST(Ddr, WriteBurstTimingStrobesAndListener) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{});
  Ddr ddr("ddr", clock, DdrConfig{});
  std::vector<std::pair<uint64_t, size_t>> heard;
  ddr.set_write_listener([&](uint64_t a, size_t n) { heard.emplace_back(a, n); });
  ddr.write64(0x8018, 0xFFFF'FFFF'FFFF'FFFFull);
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0], std::make_pair(uint64_t(0x8018), size_t(8)));

  PortDriver drv("drv", clock, ddr.port(0));
  drv.writes.push_back(DdrBurst{0x8000, 4, 3});
  for (uint64_t i = 0; i < 4; ++i) {
    WriteBeat w;
    w.data = 0x1111'1111'1111'1111ull * (i + 1);
    w.strobe = i == 3 ? 0x0F : 0xFF;
    w.last = i == 3;
    drv.wdata.push_back(w);
  }
  ASSERT_TRUE(run_until(clock, [&] { return drv.bresps.size() == 1; }, 1000));
  const uint64_t e = drv.aw_cycles.at(0);
  // The driver pushes the beats at e..e+3; the DDR accepts the burst at e+1 and takes beat
  // i at e+1+i; the response leaves at e+4+write_latency and is seen one edge later.
  EXPECT_EQ(drv.w_cycles.back(), e + 3);
  EXPECT_EQ(drv.bcycles[0], e + 4 + ddr.write_latency_cycles() + 1);
  EXPECT_FALSE(drv.bresps[0].error);
  EXPECT_EQ(drv.bresps[0].tag, 3u);
  EXPECT_EQ(ddr.read64(0x8000), 0x1111'1111'1111'1111ull);
  EXPECT_EQ(ddr.read64(0x8010), 0x3333'3333'3333'3333ull);
  EXPECT_EQ(ddr.read64(0x8018), 0xFFFF'FFFF'4444'4444ull);  // upper four bytes kept
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[1], std::make_pair(uint64_t(0x8000), size_t(32)));
  EXPECT_EQ(ddr.stats().ports[0].bytes_written, 32u);
}

TEST(Ddr, OutsideAddressesAnswerDecerr) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{});
  Ddr ddr("ddr", clock, DdrConfig{});
  int heard = 0;
  ddr.set_write_listener([&](uint64_t, size_t) { ++heard; });
  PortDriver drv("drv", clock, ddr.port(0));
  drv.reads.push_back(DdrBurst{0x2000'0000, 4, 1});
  drv.reads.push_back(DdrBurst{0x1FFF'FFE0, 4, 2});  // the last 32 bytes: fine
  ddr.write64(0x1FFF'FFE0, 77);
  heard = 0;
  drv.writes.push_back(DdrBurst{0x4000'0000, 2, 5});
  for (int i = 0; i < 2; ++i) {
    WriteBeat w;
    w.data = 0xDEAD;
    w.last = i == 1;
    drv.wdata.push_back(w);
  }
  ASSERT_TRUE(run_until(clock, [&] { return drv.rbeats.size() == 8 && drv.bresps.size() == 1; }, 1000));
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(drv.rbeats[i].error);
    EXPECT_EQ(drv.rbeats[i].data, 0u);
  }
  EXPECT_FALSE(drv.rbeats[4].error);
  EXPECT_EQ(drv.rbeats[4].data, 77u);
  EXPECT_TRUE(drv.bresps[0].error);
  EXPECT_EQ(heard, 0);
  EXPECT_EQ(ddr.allocated_pages(), 1u);  // nothing stored for the DECERR write
  EXPECT_EQ(ddr.stats().ports[0].decerr_bursts, 2u);
  EXPECT_EQ(ddr.stats().ports[0].bytes_read, 32u);
  EXPECT_EQ(ddr.stats().ports[0].bytes_written, 0u);
}

// Two ports stream `bursts_per_port` read bursts of 16 beats each; returns what the DDR saw.
struct WallResult {
  double gbps = 0, port0 = 0, port1 = 0;
  uint64_t bytes = 0, span_cycles = 0, stall_beats = 0;
  uint64_t bytes0 = 0, bytes1 = 0;
};

// Port 1 streams only when `both`.
WallResult stream_two_ports(double mhz, uint64_t bursts_per_port, const DdrConfig& config = {}, bool both = true) {
  Clock clock("clock", ClockConfig{mhz});
  Ddr ddr("ddr", clock, config);
  PortDriver d0("d0", clock, ddr.port(0)), d1("d1", clock, ddr.port(1));
  d0.stream_addr = 0;
  d1.stream_addr = 0x1000'0000;
  d0.stream_bursts = bursts_per_port;
  d1.stream_bursts = both ? bursts_per_port : 0;
  const size_t beats = size_t(bursts_per_port * 16);
  run_until(clock, [&] { return d0.rbeats.size() == beats && d1.rbeats.size() == (both ? beats : 0); },
            bursts_per_port * 64);
  WallResult r;
  const auto& s = ddr.stats();
  r.bytes0 = s.ports[0].bytes_read;
  r.bytes1 = s.ports[1].bytes_read;
  r.bytes = r.bytes0 + r.bytes1;
  r.span_cycles = s.last_busy_cycle - s.first_busy_cycle + 1;
  r.gbps = ddr.achieved_gbps();
  r.port0 = ddr.achieved_gbps(0);
  r.port1 = ddr.achieved_gbps(1);
  r.stall_beats = s.ports[0].wall_stall_beats + s.ports[1].wall_stall_beats;
  return r;
}

// At 125 MHz two 64-bit ports carry 2.000 GB/s, under the 2.009 GB/s wall: the ports bind.
TEST(Ddr, WallTwoPortsSlowerThanWall) {
  FreshSimContext ctx;
  const double mhz = 125.0;
  const WallResult r = stream_two_ports(mhz, 500);
  std::printf("[ wall ] %.0f MHz: %.4f GB/s (%.4f + %.4f) over %llu cycles\n", mhz, r.gbps, r.port0, r.port1,
              (unsigned long long)r.span_cycles);
  const double period_s = 1e-6 / mhz;
  const double expected_bytes = 2.0 * 8.0 * double(r.span_cycles);  // both ports, one beat per edge
  EXPECT_NEAR(double(r.bytes), expected_bytes, 2 * 128.0);
  EXPECT_NEAR(r.gbps, 2 * 8 * mhz * 1e6 / 1e9, 2 * 128.0 / (double(r.span_cycles) * period_s) / 1e9);
  EXPECT_EQ(r.stall_beats, 0u);
  EXPECT_EQ(r.bytes0, r.bytes1);
}

// At 200 MHz the ports could carry 3.2 GB/s; the wall (2.009 GB/s) binds, shared fairly.
TEST(Ddr, WallTwoPortsFasterThanWall) {
  FreshSimContext ctx;
  const double mhz = 200.0;
  const WallResult r = stream_two_ports(mhz, 500);
  std::printf("[ wall ] %.0f MHz: %.4f GB/s (%.4f + %.4f) over %llu cycles\n", mhz, r.gbps, r.port0, r.port1,
              (unsigned long long)r.span_cycles);
  const double period_s = 1e-6 / mhz;
  const double expected_bytes = 2.009e9 * double(r.span_cycles) * period_s;
  EXPECT_NEAR(double(r.bytes), expected_bytes, 2 * 128.0);
  EXPECT_NEAR(r.gbps, 2.009, 2 * 128.0 / (double(r.span_cycles) * period_s) / 1e9);
  EXPECT_GT(r.stall_beats, 0u);
  // Round-robin: each port within a burst of half the wall.
  EXPECT_NEAR(r.port0, 2.009 / 2, 0.01);
  EXPECT_NEAR(r.port1, 2.009 / 2, 0.01);
}

// Reads and writes pay into the same wall.
TEST(Ddr, WallIsSharedByReadsAndWrites) {
  FreshSimContext ctx;
  const double mhz = 250.0;  // wall: 2.009e9 / (8 x 250e6) = 1.0045 beats per edge
  Clock clock("clock", ClockConfig{mhz});
  DdrConfig c;
  c.read_latency_ns = 100;  // short enough that the reads keep up with the wall
  Ddr ddr("ddr", clock, c);
  PortDriver rd("rd", clock, ddr.port(0)), wr("wr", clock, ddr.port(1));
  rd.stream_bursts = 200;
  const int bursts = 200;
  for (int b = 0; b < bursts; ++b) {
    wr.writes.push_back(DdrBurst{0x100000 + uint64_t(b) * 128, 16, 0});
    for (int i = 0; i < 16; ++i) {
      WriteBeat w;
      w.data = uint64_t(b * 16 + i);
      w.last = i == 15;
      wr.wdata.push_back(w);
    }
  }
  ASSERT_TRUE(run_until(clock, [&] { return rd.rbeats.size() == 3200 && wr.bresps.size() == size_t(bursts); }, 20000));
  const auto& s = ddr.stats();
  const double span = double(s.last_busy_cycle - s.first_busy_cycle + 1);
  const double bytes = double(s.ports[0].bytes_read + s.ports[1].bytes_written);
  EXPECT_NEAR(bytes, 2.009e9 * span * (1e-6 / mhz), 2 * 128.0);
  EXPECT_EQ(ddr.read64(0x100000 + 8 * 1234), 1234u);
}

// ddr.model = latency-bandwidth: each port has its own bucket at ddr.port_gb_s, and there is
// no shared wall: two ports at 1.2 GB/s each carry 2.4 GB/s together, above the wall.
TEST(Ddr, LatencyBandwidthGivesEachPortItsOwnBandwidth) {
  FreshSimContext ctx;
  DdrConfig c;
  c.model = "latency-bandwidth";
  c.port_bytes_per_s = 1.2e9;
  c.read_latency_ns = 100;  // short enough that a port keeps up with its bandwidth
  const WallResult r = stream_two_ports(200.0, 500, c);
  EXPECT_NEAR(r.port0, 1.2, 0.01);
  EXPECT_NEAR(r.port1, 1.2, 0.01);
  EXPECT_NEAR(r.gbps, 2.4, 0.02);
  EXPECT_GT(r.stall_beats, 0u);  // each port's bucket binds (the port could take 1.6 GB/s)
  EXPECT_EQ(r.bytes0, r.bytes1);
}

// A port alone gets its own bandwidth only, where the wall would give it all it can take.
TEST(Ddr, LatencyBandwidthOnePortAloneGetsOnlyItsOwn) {
  DdrConfig c;
  c.model = "latency-bandwidth";
  c.port_bytes_per_s = 1.2e9;
  c.read_latency_ns = 100;  // short enough that a port keeps up with its bandwidth
  WallResult lb, wall;
  {
    FreshSimContext ctx;
    lb = stream_two_ports(200.0, 300, c, false);
  }
  {
    FreshSimContext ctx;
    DdrConfig w;
    w.read_latency_ns = c.read_latency_ns;
    wall = stream_two_ports(200.0, 300, w, false);
  }
  EXPECT_NEAR(lb.port0, 1.2, 0.01);
  EXPECT_EQ(lb.bytes1, 0u);
  EXPECT_NEAR(wall.port0, 1.6, 0.01);  // 8 bytes per edge at 200 MHz, under the wall
}

}  // namespace
}  // namespace bitsim::hw
