// libFuzzer target: the MMIO program text parser (host/mmio_program.h, docs/mmio-record.md).
// A program that reads must write out and read back unchanged.
#include <sstream>

#include "fuzz_common.h"
#include "host/mmio_program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace host = bitsim::host;
  bitsim::fuzz::expect_only_bitsim_errors([&] {
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    const host::MmioProgram p = host::read_program(in, "fuzz.mmio");
    std::ostringstream out;
    host::write_program(p, out);
    std::istringstream again(out.str());
    const host::MmioProgram back = host::read_program(again, "round trip");
    if (back.config != p.config || back.ops != p.ops) bitsim::fuzz::fail("write_program -> read_program changed the program");
    for (const auto& op : p.ops) (void)host::register_name(op.addr);
  });
  return 0;
}
