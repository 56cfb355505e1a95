#include "model/tensor_source.h"

#include <string_view>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "model/packed_release.h"

namespace bitsim::model {

TensorList expected_tensors(const ModelConfig& c) {
  const int64_t h = c.hidden_size, f = c.intermediate_size, v = c.vocab_size, kv = c.kv_dim();
  TensorList out;
  out.reserve(2 + 11 * static_cast<size_t>(c.num_layers > 0 ? c.num_layers : 0));
  out.push_back({"model.embed_tokens.weight", {v, h}});
  for (int n = 0; n < c.num_layers; ++n) {
    const std::string p = fmt::format("model.layers.{}.", n);
    out.push_back({p + "input_layernorm.weight", {h}});
    out.push_back({p + "self_attn.q_proj.weight", {h, h}});
    out.push_back({p + "self_attn.k_proj.weight", {kv, h}});  // num_kv_heads x head_dim rows
    out.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    out.push_back({p + "self_attn.o_proj.weight", {h, h}});
    out.push_back({p + c.attn_sub_norm_name() + ".weight", {h}});  // inner_attn_ln | attn_sub_norm
    out.push_back({p + "post_attention_layernorm.weight", {h}});
    out.push_back({p + "mlp.gate_proj.weight", {f, h}});
    out.push_back({p + "mlp.up_proj.weight", {f, h}});
    out.push_back({p + "mlp.down_proj.weight", {h, f}});
    out.push_back({p + c.ffn_sub_norm_name() + ".weight", {f}});  // ffn_layernorm | ffn_sub_norm
  }
  out.push_back({"model.norm.weight", {h}});
  return out;
}

bool is_ignored_tensor(const std::string& name) {
  constexpr std::string_view suffix = ".rotary_emb.inv_freq";
  return name.size() >= suffix.size() && std::string_view(name).substr(name.size() - suffix.size()) == suffix;
}

std::string shape_to_string(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

CheckpointSource::CheckpointSource(const std::filesystem::path& folder)
    : folder_(folder),
      config_(ModelConfig::from_file(folder / "config.json")),
      file_(SafetensorsFile::open(folder / "model.safetensors")) {
  const std::string file = file_.path().string();
  std::unordered_set<std::string> expected_names;
  for (const auto& [name, shape] : expected_tensors(config_)) {
    expected_names.insert(name);
    const TensorInfo* t = file_.find(name);
    if (t == nullptr)
      throw Error(fmt::format("{}: tensor '{}' is missing (expected shape {} for {})", file, name,
                              shape_to_string(shape), config_.shape_string()));
    if (t->dtype == DType::U8) {
      // The packed release: its shape and weight_scale now, its bytes when read.
      if (!is_projection_weight(name))
        throw Error(fmt::format("{}: tensor '{}' is U8: only the projections (*_proj.weight) may be packed ternary "
                                "weights; this one must be F32, F16 or BF16 of shape {}",
                                file, name, shape_to_string(shape)));
      read_packed_projection(file_, name, int(shape[0]), int(shape[1]), /*unpack=*/false);
      expected_names.insert(weight_scale_name(name));
      continue;
    }
    if (t->shape != shape)
      throw Error(fmt::format("{}: tensor '{}' has shape {}, expected {} (config.json: {})", file, name,
                              shape_to_string(t->shape), shape_to_string(shape), config_.shape_string()));
  }
  // A tensor bitsim does not know is refused rather than ignored: an lm_head.weight means the
  // embedding is not tied (MODEL.md: tie_word_embeddings), other names another architecture;
  // either way the logits would silently be those of a different model.
  for (const auto& t : file_.tensors()) {
    if (expected_names.count(t.name) != 0 || is_ignored_tensor(t.name)) continue;
    constexpr std::string_view scale_suffix = "_scale";
    if (t.name.size() > scale_suffix.size() &&
        std::string_view(t.name).substr(t.name.size() - scale_suffix.size()) == scale_suffix) {
      const std::string weight = t.name.substr(0, t.name.size() - scale_suffix.size());
      if (const TensorInfo* w = file_.find(weight); w != nullptr && is_projection_weight(weight))
        throw Error(fmt::format("{}: tensor '{}' is the scale of a packed projection, but '{}' is {}, not U8 (a "
                                "matrix is either packed, U8 with its weight_scale, or float without one)",
                                file, t.name, weight, dtype_name(w->dtype)));
    }
    throw Error(fmt::format("{}: unknown tensor '{}' {} (a {} checkpoint has exactly the MODEL.md tensors, the "
                            "embedding tied to the lm_head; *.rotary_emb.inv_freq are ignored)",
                            file, t.name, shape_to_string(t.shape), config_.shape_string()));
  }
}

void CheckpointSource::read(const std::string& name, const std::vector<int64_t>& shape, float* dst) const {
  const TensorInfo* t = file_.find(name);
  if (t == nullptr) throw Error(fmt::format("{}: no tensor '{}'", file_.path().string(), name));
  if (t->shape != shape)
    throw Error(fmt::format("{}: tensor '{}' has shape {}, but {} was asked for", file_.path().string(), name,
                            shape_to_string(t->shape), shape_to_string(shape)));
  file_.read_f32_into(name, dst);
}

std::optional<TernaryMatrix> CheckpointSource::read_ternary(const std::string& name, int rows, int cols) const {
  const TensorInfo* t = file_.find(name);
  if (t == nullptr || t->dtype != DType::U8) return std::nullopt;  // read() names a missing one
  return read_packed_projection(file_, name, rows, cols);
}

}  // namespace bitsim::model
