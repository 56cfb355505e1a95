#include "host/ps.h"

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::host {

Ps::Ps(sc_core::sc_module_name name, std::function<void(Ps&)> program)
    : sc_core::sc_module(name), bus("bus"), program_(std::move(program)) {
  SC_THREAD(thread);
}

void Ps::thread() {
  try {
    program_(*this);
  } catch (...) {
    failure_ = std::current_exception();
  }
  finished_ = true;
  sc_core::sc_stop();
}

void Ps::access(tlm::tlm_command cmd, uint64_t addr, uint32_t* data) {
  trans_.set_command(cmd);
  trans_.set_address(addr);
  trans_.set_data_ptr(reinterpret_cast<unsigned char*>(data));
  trans_.set_data_length(4);
  trans_.set_streaming_width(4);
  trans_.set_byte_enable_ptr(nullptr);
  trans_.set_byte_enable_length(0);
  trans_.set_dmi_allowed(false);
  trans_.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
  bus->b_transport(trans_, delay);
  if (trans_.is_response_error())
    throw Error(fmt::format("AXI-Lite {} of register 0x{:08x} failed: {}",
                            cmd == tlm::TLM_READ_COMMAND ? "read" : "write", addr,
                            trans_.get_response_string()));
  if (delay != sc_core::SC_ZERO_TIME) wait(delay);
}

uint32_t Ps::read32(uint64_t addr, uint64_t access_ps) {
  uint32_t v = 0;
  access(tlm::TLM_READ_COMMAND, addr, &v);
  ++stats_.reg_reads;
  spend(access_ps);
  return v;
}

void Ps::write32(uint64_t addr, uint32_t value, uint64_t access_ps) {
  access(tlm::TLM_WRITE_COMMAND, addr, &value);
  ++stats_.reg_writes;
  spend(access_ps);
}

void Ps::spend(uint64_t ps) {
  if (ps == 0) return;
  stats_.busy_ps += ps;
  wait(sc_core::sc_time::from_value(ps));
}

}  // namespace bitsim::host
