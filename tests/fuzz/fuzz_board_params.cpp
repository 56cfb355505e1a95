// libFuzzer target: the board config parser (sim::ParamSet): a TOML board file
// (load_toml_string) and `--set KEY=VALUE` assignments, on the real key table
// (sim::board_params()). Input: TOML text, optionally followed by a line "%%" and then one
// assignment per line. A config that loads must build the typed configs (make_sim_config)
// or fail with bitsim::Error, and must survive dump_toml -> load_toml_string unchanged.
// The key table does not depend on the input: it is built once and copied per input, so
// each input starts from the same fresh table (building it twice per input was a third of
// the target's time).
#include <sstream>

#include "fuzz_common.h"
#include "sim/board_config.h"
#include "sim/params.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bitsim::sim::ParamSet table = bitsim::sim::board_params();
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::string toml = input, sets;
  if (const size_t sep = input.find("\n%%\n"); sep != std::string::npos) {
    toml = input.substr(0, sep);
    sets = input.substr(sep + 4);
  } else if (input.rfind("%%\n", 0) == 0) {
    toml.clear();
    sets = input.substr(3);
  }
  bitsim::fuzz::expect_only_bitsim_errors([&] {
    bitsim::sim::ParamSet p = table;
    p.load_toml_string(toml, "fuzz.toml");
    std::istringstream lines(sets);
    for (std::string line; std::getline(lines, line);) p.set(line, "--set");
    // The effective config written out and read back is the same config.
    bitsim::sim::ParamSet back = table;
    back.load_toml_string(p.dump_toml(), "dump");
    for (const auto& key : p.keys())
      if (p.to_string(key) != back.to_string(key)) bitsim::fuzz::fail("dump_toml -> load_toml_string changed a key");
    (void)bitsim::sim::make_sim_config(p);
  });
  return 0;
}
