#pragma once
// TensorSource: where the latent (float, pre-quantization) weights of a model come from,
// by MODEL.md tensor name, or a projection's ternary values when the source holds those
// instead (the packed ternary release, packed_release.h). Two implementations: CheckpointSource (a checkpoint folder with
// config.json + model.safetensors) and SyntheticSource (synthetic.h, generated on demand).
// Consumers (ternary quantization, the packed weight image, the float reference) ask for a
// tensor by name and expected shape and get F32 values, or a bitsim::Error naming the source
// and the tensor.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/model_config.h"
#include "model/safetensors.h"
#include "model/ternary.h"

namespace bitsim::model {

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual const ModelConfig& config() const = 0;
  virtual std::string describe() const = 0;  // "synthetic:tiny (seed 1)" or the folder path
  // Fills dst (numel floats) with the latent F32 weights of `name`; throws Error (naming the
  // source and the tensor) when missing or when its shape differs from `shape`.
  // Implementations are safe to call from several threads at once.
  virtual void read(const std::string& name, const std::vector<int64_t>& shape, float* dst) const = 0;
  // A projection [rows, cols] the source holds as ternary values (the packed release): its
  // trits and w_scale (packed_release.h); nullopt when `name` holds latent weights, which
  // read() gives. Throws Error (naming the source and the tensor) on a bad packed tensor.
  virtual std::optional<TernaryMatrix> read_ternary(const std::string& name, int rows, int cols) const {
    (void)name, (void)rows, (void)cols;
    return std::nullopt;
  }
};

using TensorList = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// MODEL.md names and shapes, in a fixed order: model.embed_tokens.weight; per layer N:
// input_layernorm, self_attn.{q,k,v,o}_proj, self_attn.inner_attn_ln,
// post_attention_layernorm, mlp.{gate,up,down}_proj, mlp.ffn_layernorm; then model.norm.weight.
// model_type bitnet (2B4T) names the two sub-norms self_attn.attn_sub_norm and mlp.ffn_sub_norm.
// 2 + 11 * num_layers tensors (no lm_head: it is tied to embed_tokens).
TensorList expected_tensors(const ModelConfig& c);

// Whether `name` is a tensor the model ignores: *.rotary_emb.inv_freq buffers (MODEL.md).
bool is_ignored_tensor(const std::string& name);

std::string shape_to_string(const std::vector<int64_t>& shape);  // "[4096, 1536]"

// A checkpoint folder: config.json + model.safetensors (F32, F16 or BF16 tensors; a projection
// may be packed: U8 [out/4, in] with its weight_scale, packed_release.h).
class CheckpointSource : public TensorSource {
 public:
  // Loads and validates config.json, opens model.safetensors, and checks that every expected
  // tensor is present with the right shape (the Error names the first missing or mismatched
  // tensor, with expected vs found shape); a packed projection's shape and weight_scale are
  // checked here too, its bytes when read. *.rotary_emb.inv_freq tensors are ignored; any
  // other tensor is an Error naming it.
  explicit CheckpointSource(const std::filesystem::path& folder);

  const ModelConfig& config() const override { return config_; }
  std::string describe() const override { return folder_.string(); }
  void read(const std::string& name, const std::vector<int64_t>& shape, float* dst) const override;
  std::optional<TernaryMatrix> read_ternary(const std::string& name, int rows, int cols) const override;

  const std::filesystem::path& folder() const { return folder_; }
  const SafetensorsFile& file() const { return file_; }

 private:
  std::filesystem::path folder_;
  ModelConfig config_;
  SafetensorsFile file_;
};

}  // namespace bitsim::model
