// libFuzzer target: a `bitsim regress` suite file (TOML, configs/regress.toml;
// study/regress.h). A suite that loads has scenarios, each with a unique name, a known kind
// and fidelity, a grid exactly when it is a sweep, and a timing context within the KV cache.
#include <set>
#include <string>

#include "fuzz_common.h"
#include "study/regress.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bitsim::fuzz::ScratchFile scratch("regress.toml");
  const auto& path = scratch.write(data, size);
  bitsim::fuzz::expect_only_bitsim_errors([&] {
    const bitsim::study::RegressSuite suite = bitsim::study::load_regress_suite(path);
    if (suite.scenarios.empty()) bitsim::fuzz::fail("a suite without scenarios loaded");
    std::set<std::string> names;
    for (const auto& s : suite.scenarios) {
      if (!names.insert(s.name).second) bitsim::fuzz::fail("two scenarios of one name loaded");
      if (s.kind != "run" && s.kind != "timing" && s.kind != "sweep" && s.kind != "validate")
        bitsim::fuzz::fail("a scenario of an unknown kind loaded");
      if (s.fidelity != "fast" && s.fidelity != "cycle") bitsim::fuzz::fail("a scenario of an unknown fidelity loaded");
      if ((s.kind == "sweep") != !s.grid.empty()) bitsim::fuzz::fail("a grid on a scenario that is not a sweep, or none on one");
      if (s.kind != "run" && s.context + s.tokens - 1 > 512) bitsim::fuzz::fail("a timing context past the KV cache loaded");
    }
  });
  return 0;
}
