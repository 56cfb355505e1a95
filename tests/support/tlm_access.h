#pragma once
// One blocking TLM access from a test's initiator socket, as a CPU's register access:
// no byte enables, the delay starting at zero. Returns the target's response.
#include <cstdint>

#include <systemc>
#include <tlm>

namespace bitsim::test {

template <class Socket>
tlm::tlm_response_status tlm_access(Socket& socket, tlm::tlm_command cmd, uint64_t addr, unsigned char* data,
                                    unsigned len, unsigned streaming_width) {
  tlm::tlm_generic_payload p;
  sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
  p.set_command(cmd);
  p.set_address(addr);
  p.set_data_ptr(data);
  p.set_data_length(len);
  p.set_streaming_width(streaming_width);
  p.set_byte_enable_ptr(nullptr);
  p.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  socket->b_transport(p, delay);
  return p.get_response_status();
}

}  // namespace bitsim::test
