// libFuzzer target: the safetensors reader (model/safetensors.h) on arbitrary file bytes.
// Opens the file, then converts every float tensor (up to a size cap) to F32; bad files and
// non-finite values must be bitsim::Error.
#include "fuzz_common.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bitsim::fuzz::ScratchFile scratch("model.safetensors");
  const auto& path = scratch.write(data, size);
  bitsim::fuzz::expect_only_bitsim_errors([&] {
    const auto f = bitsim::model::SafetensorsFile::open(path);
    for (const auto& t : f.tensors()) {
      if (f.find(t.name) != &t) bitsim::fuzz::fail("find() does not return the tensor listed");
      if (t.data_end < t.data_begin) bitsim::fuzz::fail("tensor ends before it begins");
      if (t.numel() > (1 << 16)) continue;
      bitsim::fuzz::expect_only_bitsim_errors([&] {
        const std::vector<float> v = f.read_f32(t.name);
        if (int64_t(v.size()) != t.numel()) bitsim::fuzz::fail("read_f32 size != numel");
      });
    }
  });
  return 0;
}
