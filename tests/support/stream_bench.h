#pragma once
// Test benches shared by the engine tests: a stream source and sink clocked like the
// modules (one beat per edge at most, with optional back-pressure patterns), a TLM
// register master, and an engine with all three on every lane. Test scaffolding only:
// never a stand-in for a bitsim module.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>

#include "hw/parts/clock.h"
#include "hw/circuits/engine_lane.h"
#include "hw/parts/reg_fifo.h"
#include "support/clocked_module.h"
#include "support/tlm_access.h"

namespace bitsim::hw::test_bench {

// Pushes prepared beats into a stream, one per edge when the FIFO is ready and `allow`
// says so; records the edge of every push.
class Source : public test::ClockedModule {
 public:
  Source(sc_core::sc_module_name n, Clock& clk, AxiStream& fifo) : ClockedModule(n, clk), fifo_(fifo) {}
  void append(const std::vector<StreamBeat>& b) { beats.insert(beats.end(), b.begin(), b.end()); }
  bool done() const { return next == beats.size(); }
  std::vector<StreamBeat> beats;
  std::vector<uint64_t> push_cycle;
  size_t next = 0;
  std::function<bool(uint64_t)> allow;

 private:
  void tick() override {
    if (next < beats.size() && fifo_.ready() && (!allow || allow(clock_.cycle()))) {
      fifo_.push(beats[next++]);
      push_cycle.push_back(clock_.cycle());
    }
  }
  AxiStream& fifo_;
};

// Pops result beats when valid and `ready` says so; records beats and edges.
class Sink : public test::ClockedModule {
 public:
  Sink(sc_core::sc_module_name n, Clock& clk, AxiStream& fifo) : ClockedModule(n, clk), fifo_(fifo) {}
  std::vector<StreamBeat> beats;
  std::vector<uint64_t> pop_cycle;
  int tlasts = 0;
  std::function<bool(uint64_t)> ready;

 private:
  void tick() override {
    if (fifo_.valid() && (!ready || ready(clock_.cycle()))) {
      beats.push_back(fifo_.pop());
      pop_cycle.push_back(clock_.cycle());
      if (beats.back().last) ++tlasts;
    }
  }
  AxiStream& fifo_;
};

// A register master on an engine's TLM target.
class RegMaster : public sc_core::sc_module {
 public:
  explicit RegMaster(sc_core::sc_module_name n) : sc_module(n), sock("sock") {}
  tlm_utils::simple_initiator_socket<RegMaster> sock;
  tlm::tlm_response_status access(tlm::tlm_command cmd, uint64_t addr, uint32_t* v, unsigned len = 4) {
    uint8_t buf[8] = {};
    if (cmd == tlm::TLM_WRITE_COMMAND) std::memcpy(buf, v, 4);
    const tlm::tlm_response_status r = test::tlm_access(sock, cmd, addr, buf, len, len);
    if (cmd == tlm::TLM_READ_COMMAND) std::memcpy(v, buf, 4);
    return r;
  }
  uint32_t read(uint64_t addr) {
    uint32_t v = 0;
    EXPECT_EQ(access(tlm::TLM_READ_COMMAND, addr, &v), tlm::TLM_OK_RESPONSE) << std::hex << addr;
    return v;
  }
  void write(uint64_t addr, uint32_t v) {
    EXPECT_EQ(access(tlm::TLM_WRITE_COMMAND, addr, &v), tlm::TLM_OK_RESPONSE) << std::hex << addr;
  }
};

// A copy of `good` with `change` applied, when there is one.
template <class T>
T changed(T good, const std::function<void(T&)>& change) {
  if (change) change(good);
  return good;
}

// A malformed copy of a good transfer: cut after `cut_at` beats (TLAST on the last one kept)
// when cut_at > 0; with `drop_tlast`, the final beat's TLAST cleared and `junk` beats of
// `filler` appended, TLAST on the last of them.
inline std::vector<StreamBeat> malformed(std::vector<StreamBeat> beats, size_t cut_at, bool drop_tlast = false,
                                         int junk = 0, uint64_t filler = 0) {
  if (cut_at) {
    beats.resize(cut_at);
    beats.back().last = true;
  }
  if (drop_tlast) {
    beats.back().last = false;
    for (int i = 0; i < junk; ++i) beats.push_back({filler, i == junk - 1});
  }
  return beats;
}

// After a malformed transfer: the source's every beat was taken (discarded up to TLAST)
// and a single zero beat with TLAST ends the sink's output.
inline void expect_discarded_to_tlast(const Source& src, const Sink& sink) {
  EXPECT_TRUE(src.done());
  const auto& out = sink.beats;
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back().data, 0u);
  EXPECT_TRUE(out.back().last);
  EXPECT_EQ(sink.tlasts, 1);
}

// One engine (MatmulEngine, AttentionUnit) on its own clock: a Source and a Sink on each
// lane and a RegMaster on its register target. A run stops at kMaxCycles unless the test
// names another bound.
template <class Engine, class Config, uint64_t kMaxCycles>
struct EngineBench {
  EngineBench(const char* name, const Config& cfg)
      : clock("clock", ClockConfig{}), engine(name, clock, cfg), regs("regs") {
    for (int l = 0; l < kLanes; ++l) {
      src.push_back(std::make_unique<Source>(("src" + std::to_string(l)).c_str(), clock, engine.in(l)));
      sink.push_back(std::make_unique<Sink>(("sink" + std::to_string(l)).c_str(), clock, engine.out(l)));
    }
    regs.sock.bind(engine.ctrl);
  }
  // Runs in bounded chunks until done() or the cycle limit; false on the limit.
  bool run(const std::function<bool()>& done, uint64_t max_cycles = kMaxCycles) {
    while (!done()) {
      if (clock.cycle() >= max_cycles) return false;
      sc_core::sc_start(clock.period() * 1000.0);
    }
    return true;
  }
  bool run_tlasts(int lane, int count, uint64_t max_cycles = kMaxCycles) {
    return run([&] { return sink[size_t(lane)]->tlasts >= count; }, max_cycles);
  }
  // Queues a transfer on lane 0 and the result beats it must give after those queued before.
  void feed(const std::vector<StreamBeat>& transfer, const std::vector<StreamBeat>& results) {
    src[0]->append(transfer);
    expected.insert(expected.end(), results.begin(), results.end());
  }
  // One transfer on each lane at once; runs until both lanes' results are out.
  bool run_both_lanes(const std::vector<StreamBeat>& lane0, const std::vector<StreamBeat>& lane1) {
    src[0]->append(lane0);
    src[1]->append(lane1);
    return run([&] { return sink[0]->tlasts == 1 && sink[1]->tlasts == 1; });
  }
  // Queues `transfers` transfers of 1 to 4 units each (random_unit(rng) makes one; encode and
  // expect give a transfer's beats and results) and runs until all their results are out.
  template <class Random, class Encode, class Expect>
  bool run_random_transfers(int transfers, std::mt19937& rng, Random random_unit, Encode encode, Expect expect) {
    for (int t = 0; t < transfers; ++t) {
      std::vector<decltype(random_unit(rng))> units;
      const int count = 1 + int(rng() % 4);
      for (int i = 0; i < count; ++i) units.push_back(random_unit(rng));
      feed(encode(units), expect(units));
    }
    return run_tlasts(0, transfers);
  }
  // Feeds one transfer to lane 0 and runs to its result's TLAST; false on a hang (20,000 edges).
  bool run_one_transfer(const std::vector<StreamBeat>& beats) {
    src[0]->append(beats);
    return run_tlasts(0, 1, 20'000);
  }
  // Lane 0's sink takes nothing for `edges` edges (the results back up), held() checks the
  // engine then; the sink then takes every beat up to the result's TLAST (false on a hang).
  bool run_with_sink_held(uint64_t edges, const std::function<void()>& held) {
    sink[0]->ready = [](uint64_t) { return false; };
    sc_core::sc_start(clock.period() * double(edges));
    held();
    sink[0]->ready = nullptr;
    return run_tlasts(0, 1);
  }
  uint32_t reg(int lane, uint32_t off) { return regs.read(engine.config().reg_base + lane * 0x100 + off); }
  // The response to an access of `len` bytes (a write writes zeros) at `offset` from the
  // engine's register base.
  tlm::tlm_response_status response(tlm::tlm_command cmd, int64_t offset, unsigned len = 4) {
    uint32_t v = 0;
    return regs.access(cmd, engine.config().reg_base + uint64_t(offset), &v, len);
  }

  Clock clock;
  Engine engine;
  RegMaster regs;
  std::vector<std::unique_ptr<Source>> src;
  std::vector<std::unique_ptr<Sink>> sink;
  std::vector<StreamBeat> expected;  // lane 0's results of what feed() queued
};

}  // namespace bitsim::hw::test_bench
