#include "hw/circuits/engine_regs.h"

#include <cstring>

namespace bitsim::hw {

bool is_lane_register(uint32_t offset) {
  return offset <= engine_reg::kBeatsOut && offset % 4 == 0;
}

bool decode_reg_access(tlm::tlm_generic_payload& p, uint64_t base, int lanes, RegAccess* a) {
  if (p.get_command() == tlm::TLM_IGNORE_COMMAND) {
    p.set_response_status(tlm::TLM_OK_RESPONSE);
    return false;
  }
  if (p.get_byte_enable_ptr() != nullptr) {
    p.set_response_status(tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
    return false;
  }
  if (p.get_data_length() != 4 || (p.get_streaming_width() != 0 && p.get_streaming_width() != 4)) {
    p.set_response_status(tlm::TLM_BURST_ERROR_RESPONSE);
    return false;
  }
  const uint64_t addr = p.get_address();
  const uint64_t span = uint64_t(lanes) * engine_reg::kLaneStride;
  if (addr < base || addr - base >= span || (addr - base) % 4 != 0) {
    p.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return false;
  }
  const uint64_t rel = addr - base;
  a->lane = int(rel / engine_reg::kLaneStride);
  a->offset = uint32_t(rel % engine_reg::kLaneStride);
  if (!is_lane_register(a->offset)) {
    p.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return false;
  }
  a->write = p.get_command() == tlm::TLM_WRITE_COMMAND;
  a->value = 0;
  if (a->write) std::memcpy(&a->value, p.get_data_ptr(), 4);
  return true;
}

bool read_lane_register(const LaneRegisterView& v, uint32_t offset, uint32_t* value) {
  using namespace engine_reg;
  switch (offset) {
    case kStatus:
      *value = (v.busy ? kStatusBusy : 0) | (v.error ? kStatusError : 0) | (v.stopped ? kStatusStopped : 0);
      return true;
    case kErrorCode: *value = v.error_code; return true;
    case kErrorUnit: *value = v.error_unit; return true;
    case kErrorRow: *value = v.error_row; return true;
    case kControl: *value = 0; return true;
    case kUnitsDone: *value = uint32_t(v.units_done); return true;
    case kRowsDone: *value = uint32_t(v.rows_done); return true;
    case kBeatsIn: *value = uint32_t(v.beats_in); return true;
    case kBeatsOut: *value = uint32_t(v.beats_out); return true;
    default: return false;
  }
}

void complete_read(tlm::tlm_generic_payload& p, uint32_t value) {
  std::memcpy(p.get_data_ptr(), &value, 4);
  p.set_response_status(tlm::TLM_OK_RESPONSE);
}

void complete_write(tlm::tlm_generic_payload& p) { p.set_response_status(tlm::TLM_OK_RESPONSE); }

}  // namespace bitsim::hw
