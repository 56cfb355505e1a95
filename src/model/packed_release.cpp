#include "model/packed_release.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "base/error.h"
#include "base/stop_signal.h"
#include "model/synthetic.h"

namespace bitsim::model {

bool is_projection_weight(const std::string& name) {
  constexpr std::string_view suffix = "_proj.weight";
  return name.size() > suffix.size() && std::string_view(name).substr(name.size() - suffix.size()) == suffix;
}

std::string weight_scale_name(const std::string& weight_name) { return weight_name + "_scale"; }

void unpack_ternary(const uint8_t* packed, int rows, int cols, int8_t* trits, const std::string& what) {
  if (rows <= 0 || cols <= 0 || rows % 4 != 0)
    throw Error(fmt::format("{}: cannot unpack [{}, {}]: rows must be a positive multiple of 4", what, rows, cols));
  const size_t block = size_t(rows / 4), n = size_t(cols);
  // One packed row fills row r of each of the four blocks.
  for (size_t r = 0; r < block; ++r) {
    const uint8_t* in = packed + r * n;
    for (size_t c = 0; c < n; ++c) {
      const unsigned byte = in[c];
      for (unsigned field = 0; field < 4; ++field) {
        const unsigned code = (byte >> (2 * field)) & 3u;
        if (code == 3)
          throw Error(fmt::format("{}: byte [{}, {}] = 0x{:02x} holds the invalid code 3 in field {} (bits {}..{}, "
                                  "weight row {}); the codes are 0 (-1), 1 (0) and 2 (+1)",
                                  what, r, c, byte, field, 2 * field + 1, 2 * field, field * block + r));
        trits[(field * block + r) * n + c] = int8_t(int(code) - 1);
      }
    }
  }
}

float w_scale_of_weight_scale(float weight_scale, const std::string& what) {
  if (!std::isfinite(weight_scale) || !(weight_scale > 0.0f))
    throw Error(fmt::format("{}: weight_scale is {}; it must be finite and > 0 (it is 1 / mean|W|)", what,
                            weight_scale));
  const float w_scale = 1.0f / weight_scale;  // one IEEE division, round to nearest even
  if (!std::isfinite(w_scale))
    throw Error(fmt::format("{}: weight_scale {} is too small: its reciprocal is not a finite float", what,
                            weight_scale));
  return w_scale;
}

TernaryMatrix read_packed_projection(const SafetensorsFile& file, const std::string& name, int rows, int cols,
                                     bool unpack) {
  const std::string what = fmt::format("{}: tensor '{}'", file.path().string(), name);
  const TensorInfo& t = file.at(name);
  if (t.dtype != DType::U8)
    throw Error(fmt::format("{} is {}, not a packed projection (U8)", what, dtype_name(t.dtype)));
  if (!is_projection_weight(name))
    throw Error(fmt::format("{} is U8: only the projections (*_proj.weight) may be packed ternary weights", what));
  if (rows % 4 != 0)
    throw Error(fmt::format("{} is U8 (packed, 4 rows to a byte), but the projection has {} rows, not a multiple of "
                            "4",
                            what, rows));
  const std::vector<int64_t> packed_shape{rows / 4, cols};
  if (t.shape != packed_shape)
    throw Error(fmt::format("{} is U8 of shape {}, expected {}: a packed [{}, {}] projection has out_features / 4 "
                            "rows (4 ternary values to a byte) and in_features columns",
                            what, shape_to_string(t.shape), shape_to_string(packed_shape), rows, cols));

  const std::string scale_name = weight_scale_name(name);
  const std::string scale_what = fmt::format("{}: tensor '{}'", file.path().string(), scale_name);
  const TensorInfo* s = file.find(scale_name);
  if (s == nullptr)
    throw Error(fmt::format("{} is packed (U8), but its scale '{}' is missing", what, scale_name));
  if (s->dtype == DType::U8)
    throw Error(fmt::format("{} is U8; a weight_scale is BF16, F16 or F32", scale_what));
  if (!(s->shape.empty() || s->shape == std::vector<int64_t>{1}))
    throw Error(fmt::format("{} has shape {}; a weight_scale is one value, shape [1] (or [])", scale_what,
                            shape_to_string(s->shape)));
  float weight_scale = 0;
  file.read_f32_into(scale_name, &weight_scale);  // Error naming the tensor on NaN or Inf

  TernaryMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.scale = w_scale_of_weight_scale(weight_scale, scale_what);
  if (unpack) {
    m.trits.resize(size_t(rows) * size_t(cols));
    unpack_ternary(reinterpret_cast<const uint8_t*>(file.raw(t)), rows, cols, m.trits.data(), what);
  }
  return m;
}

std::vector<uint8_t> pack_ternary(const TernaryMatrix& m) {
  if (m.rows <= 0 || m.cols <= 0 || m.rows % 4 != 0)
    throw Error(fmt::format("pack_ternary: [{}, {}] cannot be packed: rows must be a positive multiple of 4", m.rows,
                            m.cols));
  const int block = m.rows / 4;
  std::vector<uint8_t> packed(size_t(block) * size_t(m.cols), 0);
  for (int w = 0; w < m.rows; ++w) {
    const int field = w / block, r = w % block;
    for (int c = 0; c < m.cols; ++c) {
      const int t = m.row(w)[c];
      if (t < -1 || t > 1) throw Error(fmt::format("pack_ternary: value {} at [{}, {}] is not ternary", t, w, c));
      packed[size_t(r) * size_t(m.cols) + size_t(c)] |= uint8_t((t + 1) << (2 * field));
    }
  }
  return packed;
}

uint16_t weight_scale_bf16(float w_scale) { return f32_to_bf16(1.0f / w_scale); }

nlohmann::json packed_config_json(const ModelConfig& c) {
  nlohmann::json j = c.to_json();
  j["quantization_config"] = {{"quant_method", "bitnet"}, {"linear_class", "bitlinear"},
                              {"quantization_mode", "offline"}};
  return j;
}

void write_packed_safetensors(const TensorSource& src, const std::filesystem::path& file,
                              const std::map<std::string, std::string>& metadata) {
  const TensorList tensors = expected_tensors(src.config());
  std::vector<TensorSpec> specs;
  for (const auto& [name, shape] : tensors) {
    if (!is_projection_weight(name)) {
      specs.push_back({name, DType::F32, shape});
      continue;
    }
    if (shape[0] % 4 != 0)
      throw Error(fmt::format("{}: tensor '{}' of shape {} cannot be packed: its rows are not a multiple of 4",
                              file.string(), name, shape_to_string(shape)));
    specs.push_back({name, DType::U8, {shape[0] / 4, shape[1]}});
    specs.push_back({weight_scale_name(name), DType::BF16, {1}});
  }
  SafetensorsWriter writer(file, std::move(specs), metadata);

  const auto* synthetic = dynamic_cast<const SyntheticSource*>(&src);
  constexpr int64_t kPiece = int64_t(1) << 20;
  std::vector<float> scratch;
  for (const auto& [name, shape] : tensors) {
    check_stop();
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    if (!is_projection_weight(name) && synthetic != nullptr) {
      scratch.resize(size_t(std::min(numel, kPiece)));
      for (int64_t at = 0; at < numel; at += kPiece) {
        const int64_t n = std::min(kPiece, numel - at);
        synthetic->generate(name, at, n, scratch.data());
        writer.append(scratch.data(), size_t(n) * sizeof(float));
      }
      continue;
    }
    if (!is_projection_weight(name)) {
      scratch.resize(size_t(numel));
      src.read(name, shape, scratch.data());
      writer.append(scratch.data(), size_t(numel) * sizeof(float));
      continue;
    }
    const int rows = int(shape[0]), cols = int(shape[1]);
    TernaryMatrix m;
    if (auto packed_already = src.read_ternary(name, rows, cols)) {
      m = std::move(*packed_already);
    } else {
      scratch.resize(size_t(numel));
      src.read(name, shape, scratch.data());
      m = ternarize(scratch.data(), rows, cols);
    }
    const std::vector<uint8_t> packed = pack_ternary(m);
    writer.append(packed.data(), packed.size());
    const uint16_t scale = weight_scale_bf16(m.scale);
    writer.append(&scale, sizeof scale);
  }
  writer.finish();
}

}  // namespace bitsim::model
