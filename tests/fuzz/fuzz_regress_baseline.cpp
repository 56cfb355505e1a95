// libFuzzer target: a `bitsim regress` baseline file (bitsim.regress-baseline/1;
// study/regress.h). A baseline that reads must write back (regress_baseline_text) to a file
// that reads as the same figures.
#include <fstream>

#include "fuzz_common.h"
#include "study/regress.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bitsim::fuzz::ScratchFile scratch("baseline.json");
  static bitsim::fuzz::ScratchFile again("baseline-again.json");
  const auto& path = scratch.write(data, size);
  bitsim::fuzz::expect_only_bitsim_errors([&] {
    const auto figures = bitsim::study::read_regress_baseline(path);
    const std::string text = bitsim::study::regress_baseline_text("fuzz", figures);
    const auto& back_path = again.write(reinterpret_cast<const uint8_t*>(text.data()), text.size());
    if (bitsim::study::read_regress_baseline(back_path) != figures)
      bitsim::fuzz::fail("a baseline written back reads as other figures");
  });
  return 0;
}
