#pragma once
// A test driver of one DdrPortLink (standing in for an HP port), shared by the memory
// models' tests.
#include <cstdint>
#include <deque>
#include <vector>

#include <systemc>

#include "hw/parts/clock.h"
#include "hw/memory/memory.h"

namespace bitsim::test {

using hw::Clock;
using hw::DdrBurst;
using hw::DdrPortLink;
using hw::DdrReadBeat;
using hw::DdrWriteResponse;
using hw::WriteBeat;

// Drives one DdrPortLink directly (test scaffolding, standing in for an HP port): issues
// queued read and write bursts, keeps at most `max_outstanding` reads in flight, pops every
// read beat and response at once, and records their edges.
class PortDriver : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(PortDriver);
  PortDriver(sc_core::sc_module_name n, Clock& clock, DdrPortLink& link) : sc_module(n), clock_(clock), l_(link) {
    SC_METHOD(tick);
    sensitive << clock.listen();
    dont_initialize();
  }
  // Streaming mode: `stream_bursts` sequential read bursts of 16 beats from stream_addr.
  uint64_t stream_addr = 0;
  uint64_t stream_bursts = 0;
  int max_outstanding = 4;

  std::deque<DdrBurst> reads, writes;
  std::deque<uint64_t> read_edges;  // when given: the front read is issued no sooner than this edge
  std::deque<WriteBeat> wdata;
  std::vector<DdrReadBeat> rbeats;
  std::vector<uint64_t> rcycles, ar_cycles, aw_cycles, w_cycles, bcycles;
  std::vector<DdrWriteResponse> bresps;
  uint64_t beats_expected = 0;

 private:
  void tick() {
    const uint64_t now = clock_.cycle();
    if (l_.r.valid()) {
      rbeats.push_back(l_.r.pop());
      rcycles.push_back(now);
      if (rbeats.back().last) --outstanding_;
    }
    if (l_.b.valid()) {
      bresps.push_back(l_.b.pop());
      bcycles.push_back(now);
    }
    if (l_.ar.ready() && outstanding_ < max_outstanding) {
      if (!reads.empty() && (read_edges.empty() || read_edges.front() <= now)) {
        if (!read_edges.empty()) read_edges.pop_front();
        l_.ar.push(reads.front());
        reads.pop_front();
        ++outstanding_;
        ar_cycles.push_back(now);
      } else if (stream_bursts > 0) {
        l_.ar.push(DdrBurst{stream_addr, 16, 7});
        stream_addr += 128;
        --stream_bursts;
        ++outstanding_;
      }
    }
    if (l_.aw.ready() && !writes.empty()) {
      l_.aw.push(writes.front());
      writes.pop_front();
      aw_cycles.push_back(now);
    }
    if (l_.w.ready() && !wdata.empty() && !aw_cycles.empty()) {
      l_.w.push(wdata.front());
      wdata.pop_front();
      w_cycles.push_back(now);
    }
  }
  Clock& clock_;
  DdrPortLink& l_;
  int outstanding_ = 0;
};

}  // namespace bitsim::test
