#pragma once
// Ps: the simulated Cortex-A9 as the PL sees it. Its program (the token loop) runs in one
// SC_THREAD; every register access is a TLM-2.0 transaction on the AXI-Lite bus (GP0) that
// costs the CPU `reg_access` time; CPU work advances simulated time by its modelled
// duration (`spend`). Loads and stores to DDR go through the Board's backdoor: the CPU's
// own DDR traffic is not timed against the wall (CIRCUITS.md 1).
#include <cstdint>
#include <functional>
#include <string>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>

namespace bitsim::host {

struct PsStats {
  uint64_t reg_reads = 0, reg_writes = 0;
  uint64_t busy_ps = 0;  // CPU time spent in modelled work and register accesses
};

class Ps : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Ps);
  // `program` runs once in the PS thread; when it returns (or throws) the simulation stops.
  Ps(sc_core::sc_module_name name, std::function<void(Ps&)> program);

  tlm_utils::simple_initiator_socket<Ps> bus;

  // Register access, each a TLM transaction, then `access_ps` of CPU time. A bus error is a
  // bitsim::Error naming the address.
  uint32_t read32(uint64_t addr, uint64_t access_ps);
  void write32(uint64_t addr, uint32_t value, uint64_t access_ps);
  // CPU time passes.
  void spend(uint64_t ps);
  uint64_t now_ps() const { return sc_core::sc_time_stamp().value(); }

  const PsStats& stats() const { return stats_; }
  // The exception the program ended with, if any (rethrown by the session after sc_start).
  std::exception_ptr failure() const { return failure_; }
  bool finished() const { return finished_; }

 private:
  void thread();
  void access(tlm::tlm_command cmd, uint64_t addr, uint32_t* data);
  std::function<void(Ps&)> program_;
  PsStats stats_;
  std::exception_ptr failure_;
  bool finished_ = false;
  tlm::tlm_generic_payload trans_;
};

}  // namespace bitsim::host
