// libFuzzer target: the model config parser (config.json, model/model_config.h). A config
// that parses must validate, survive to_json -> from_json unchanged, and give a packed
// image size.
#include "fuzz_common.h"
#include "model/model_config.h"
#include "model/packed_image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bitsim::fuzz::ScratchFile scratch("config.json");
  const auto& path = scratch.write(data, size);
  bitsim::fuzz::expect_only_bitsim_errors([&] {
    const auto c = bitsim::model::ModelConfig::from_file(path);
    c.validate("round trip");
    const auto back = bitsim::model::ModelConfig::from_json(c.to_json(), "round trip");
    if (!(back == c)) bitsim::fuzz::fail("to_json -> from_json changed the config");
    (void)c.shape_string();
    (void)bitsim::model::packed_image_size(c.hidden_size, c.intermediate_size, c.num_layers, c.vocab_size, c.kv_dim());
  });
  return 0;
}
