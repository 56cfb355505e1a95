#pragma once
// Test benches shared by the engine tests: a stream source and sink clocked like the
// modules (one beat per edge at most, with optional back-pressure patterns) and a TLM
// register master. Test scaffolding only: never a stand-in for a bitsim module.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>

#include "hw/clock.h"
#include "hw/reg_fifo.h"

namespace bitsim::hw::test_bench {

// Pushes prepared beats into a stream, one per edge when the FIFO is ready and `allow`
// says so; records the edge of every push.
class Source : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Source);
  Source(sc_core::sc_module_name n, Clock& clk, AxiStream& fifo) : sc_module(n), clk_(clk), fifo_(fifo) {
    SC_METHOD(tick);
    sensitive << clk.listen();
    dont_initialize();
  }
  void append(const std::vector<StreamBeat>& b) { beats.insert(beats.end(), b.begin(), b.end()); }
  bool done() const { return next == beats.size(); }
  std::vector<StreamBeat> beats;
  std::vector<uint64_t> push_cycle;
  size_t next = 0;
  std::function<bool(uint64_t)> allow;

 private:
  void tick() {
    if (next < beats.size() && fifo_.ready() && (!allow || allow(clk_.cycle()))) {
      fifo_.push(beats[next++]);
      push_cycle.push_back(clk_.cycle());
    }
  }
  Clock& clk_;
  AxiStream& fifo_;
};

// Pops result beats when valid and `ready` says so; records beats and edges.
class Sink : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Sink);
  Sink(sc_core::sc_module_name n, Clock& clk, AxiStream& fifo) : sc_module(n), clk_(clk), fifo_(fifo) {
    SC_METHOD(tick);
    sensitive << clk.listen();
    dont_initialize();
  }
  std::vector<StreamBeat> beats;
  std::vector<uint64_t> pop_cycle;
  int tlasts = 0;
  std::function<bool(uint64_t)> ready;

 private:
  void tick() {
    if (fifo_.valid() && (!ready || ready(clk_.cycle()))) {
      beats.push_back(fifo_.pop());
      pop_cycle.push_back(clk_.cycle());
      if (beats.back().last) ++tlasts;
    }
  }
  Clock& clk_;
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
    tlm::tlm_generic_payload p;
    p.set_command(cmd);
    p.set_address(addr);
    p.set_data_ptr(buf);
    p.set_data_length(len);
    p.set_streaming_width(len);
    p.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    sc_core::sc_time d = sc_core::SC_ZERO_TIME;
    sock->b_transport(p, d);
    if (cmd == tlm::TLM_READ_COMMAND) std::memcpy(v, buf, 4);
    return p.get_response_status();
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

}  // namespace bitsim::hw::test_bench
