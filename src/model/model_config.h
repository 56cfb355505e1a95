#pragma once
// ModelConfig: the shape of a BitNet b1.58 checkpoint (the keys of its config.json, MODEL.md
// "Shape"), and the checks that say whether the board can run it. head_dim must be one an
// attention unit can be built for (a multiple of 8 in 8..256); whether it is the one the
// board's unit is built for (attention.head_dim) is checked where the board config and the
// model meet (sim::check_model_on_board); num_key_value_heads must divide num_attention_heads (grouped-query
// attention, HF repeat_kv: query head h reads K/V head h / group()); lm_head is tied to embed_tokens,
// and RoPE is unscaled; a config that needs anything else is rejected with a bitsim::Error
// naming the file and the key.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "model/board_shape.h"

namespace bitsim::model {

// The FFN's activation (config.json hidden_act): silu, x * sigmoid(x) (MODEL.md, bitnet-large),
// or relu2, max(x, 0)^2 (BitNet b1.58 2B4T); both gate the up projection: act(gate) * up.
enum class HiddenAct { Silu, Relu2 };
const char* hidden_act_name(HiddenAct a);  // "silu" | "relu2"
enum class ModelType { Llama, Bitnet };
const char* model_type_name(ModelType t);  // "llama" | "bitnet"

struct ModelConfig {
  int hidden_size = 0, intermediate_size = 0, num_layers = 0, num_heads = 0, num_kv_heads = 0;
  int vocab_size = 0, max_position_embeddings = 0;
  float rms_norm_eps = 1e-5f, rope_theta = 10000.0f;
  bool tie_word_embeddings = true;
  HiddenAct hidden_act = HiddenAct::Silu;
  // config.json model_type: "llama" (1bitLLM's bitnet_b1_58 checkpoints) or "bitnet" (BitNet
  // b1.58 2B4T, HF BitNetForCausalLM). Both have the two sub-layer RMSNorms, on the attention's
  // output before o_proj and on act(gate) * up before down_proj; the types name them
  // self_attn.inner_attn_ln / mlp.ffn_layernorm and self_attn.attn_sub_norm / mlp.ffn_sub_norm.
  ModelType model_type = ModelType::Llama;
  // Special token ids. pad_token_id is kNoPad when config.json has no pad_token_id (or null).
  int bos_token_id = 1, eos_token_id = 2, pad_token_id = 32000;

  static constexpr int kNoPad = -1;

  int head_dim() const { return hidden_size / num_heads; }
  // Query heads per K/V head (1: multi-head attention), and the K/V head query head h reads.
  int group() const { return num_heads / num_kv_heads; }
  int kv_head(int h) const { return h / group(); }
  // Rows of k_proj and of v_proj: num_key_value_heads x head_dim (MODEL.md / HF layout).
  int kv_dim() const { return num_kv_heads * head_dim(); }
  // The sub-layer norms' tensor names within a layer (model_type): "self_attn.inner_attn_ln"
  // or "self_attn.attn_sub_norm", and "mlp.ffn_layernorm" or "mlp.ffn_sub_norm".
  const char* attn_sub_norm_name() const;
  const char* ffn_sub_norm_name() const;

  // MODEL.md values of 1bitLLM/bitnet_b1_58-large.
  static ModelConfig bitnet_large();
  // A small model in the same layout for fast tests: hidden 192, 2 heads x 96 (2 kv heads),
  // FFN 512, 2 layers, vocab 512, max_pos 2048, bos 1 / eos 2 / pad 0.
  static ModelConfig tiny();
  // Grouped-query siblings: tiny with 4 query heads and 2 K/V heads (hidden 384, so that
  // head_dim stays the board's 96), and bitnet-large with 16 query heads and 4 K/V heads.
  static ModelConfig tiny_gqa();
  static ModelConfig bitnet_large_gqa4();
  // BitNet b1.58 2B4T's published shape (hidden 2560, FFN 6912, 30 layers, 20 heads x 128, 5
  // K/V heads, vocab 128256, relu2, sub-norms, rope_theta 500000, 4096 positions), and a small
  // one of the same layer for tests: tiny_gqa with relu2 and the sub-norms.
  static ModelConfig bitnet_2b4t();
  static ModelConfig tiny_2b4t();
  // tiny_2b4t with 2B4T's FFN of 6912: the down projection's rows are longer than the matmul
  // engine's 4096 and go to it in two segments (model::row_segments).
  static ModelConfig tiny_ffn6912();
  // 2B4T's head_dim 128 in a small model for tests (a unit built for attention.head_dim =
  // 128): tiny_2b4t with 2 query heads of 128 and 1 K/V head (hidden 256, FFN 512).
  static ModelConfig tiny_2b4t_hd128();

  // Parses a checkpoint's config.json object. Required keys: hidden_size, intermediate_size,
  // num_hidden_layers, num_attention_heads, vocab_size, rms_norm_eps, max_position_embeddings.
  // Optional keys (defaults as in HF LlamaConfig / MODEL.md): num_key_value_heads (=
  // num_attention_heads), rope_theta (10000), tie_word_embeddings (true), bos_token_id (1),
  // eos_token_id (2), pad_token_id (absent/null -> kNoPad), rope_scaling (must be null),
  // hidden_act (must be "silu"). Other keys (model_type, torch_dtype, ...) are ignored.
  // Validates the result. `source` (the file path) is named in every error message.
  static ModelConfig from_json(const nlohmann::json& j, const std::string& source);
  // Reads and parses a config.json file; malformed JSON is an Error naming the file and the
  // parse position.
  static ModelConfig from_file(const std::filesystem::path& config_json);

  // The checkpoint's config.json keys (see from_json), plus model_type "llama",
  // torch_dtype "float16", architectures ["BitnetForCausalLM"], hidden_act "silu",
  // rope_scaling null. pad_token_id kNoPad is written as null.
  nlohmann::json to_json() const;

  // Throws bitsim::Error naming `source` and the config.json key at fault.
  void validate(const std::string& source) const;

  // e.g. "hidden 1536, FFN 4096, 24 layers, 16 heads x 96, vocab 32002"; with grouped-query
  // attention "... 16 heads x 96 (4 K/V heads), ..."
  std::string shape_string() const;

  bool operator==(const ModelConfig&) const = default;
};

}  // namespace bitsim::model
