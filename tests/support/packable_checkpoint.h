#pragma once
// A latent checkpoint that the packed ternary release (model/packed_release.h) can hold
// exactly, for the tests that compare a model with its packed copy.
//
// The release stores weight_scale = 1 / w_scale in BF16, and bitsim reads w_scale back as
// 1.0f / weight_scale: a packed copy has the latent model's w_scale bit for bit only when
// w_scale is 1.0f / b for a BF16 value b. Here every projection is W = 2 s T with
//   s = 1.0f / b, b a BF16 value of its own per matrix (30, 30.5, 31, ...),
//   T ternary with exactly half of every row non-zero (random positions and signs),
// so that ternarize() gives T and w_scale = s exactly: the sum of |W| is (N/2) * 2s without
// rounding (a float times an integer below 2^29), the mean (N/2 * 2s) / N = s, and
// W / s = +-2 or 0. The embedding and the norms are SyntheticSource's (F32).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "model/packed_release.h"
#include "model/safetensors.h"
#include "model/synthetic.h"
#include "model/tensor_source.h"

namespace bitsim::test {

// Writes dir/config.json and dir/model.safetensors (F32) as above; the shape's rows must have
// an even number of columns.
inline void write_packable_checkpoint(model::Shape shape, uint64_t seed, const std::filesystem::path& dir) {
  const model::SyntheticSource src(shape, seed);
  std::vector<std::vector<float>> data;
  std::vector<model::TensorToWrite> tensors;
  std::mt19937_64 rng(seed);
  int matrix = 0;
  for (const auto& [name, tshape] : src.tensors()) {
    int64_t numel = 1;
    for (int64_t d : tshape) numel *= d;
    std::vector<float> v(static_cast<size_t>(numel));
    if (model::is_projection_weight(name)) {
      const float b = model::bf16_to_f32(model::f32_to_bf16(30.0f + 0.5f * float(matrix++)));
      const float two_s = 2.0f * (1.0f / b);
      const auto rows = static_cast<size_t>(tshape[0]), cols = static_cast<size_t>(tshape[1]);
      std::vector<size_t> order(cols);
      for (size_t r = 0; r < rows; ++r) {
        for (size_t c = 0; c < cols; ++c) order[c] = c;
        for (size_t c = cols - 1; c > 0; --c) std::swap(order[c], order[size_t(rng() % (c + 1))]);  // Fisher-Yates
        for (size_t k = 0; k < cols / 2; ++k) v[r * cols + order[k]] = (rng() & 1) ? two_s : -two_s;
      }
    } else {
      src.read(name, tshape, v.data());
    }
    data.push_back(std::move(v));
    tensors.push_back({name, model::DType::F32, tshape, data.back().data(), data.back().size() * sizeof(float)});
  }
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << src.config().to_json().dump(2);
  // Marked synthetic, so that bitsim run takes the byte tokenizer (model/tokenizer.h).
  model::write_safetensors(dir / "model.safetensors", tensors,
                           {{"format", "pt"}, {"bitsim.synthetic", model::shape_name(shape)}});
}

// The packed copy of the checkpoint folder `latent` in `dir` (config.json with the release's
// quantization_config, model.safetensors by write_packed_safetensors).
inline void write_packed_copy(const std::filesystem::path& latent, const std::filesystem::path& dir) {
  const model::CheckpointSource src(latent);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << model::packed_config_json(src.config()).dump(2);
  std::map<std::string, std::string> metadata;
  for (const auto& [key, value] : src.file().metadata().items()) metadata[key] = value.get<std::string>();
  model::write_packed_safetensors(src, dir / "model.safetensors", metadata);
}

}  // namespace bitsim::test
