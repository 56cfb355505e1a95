#pragma once
// The model as the board runs it: every linear layer ternarized (MODEL.md weight_quant,
// CIRCUITS.md section 4), the lm_head ternarized as on the board (BOARD.md), norms and the
// embedding table kept in F32. Built from any TensorSource (a checkpoint folder or a
// synthetic generator) one tensor at a time, so a 2.9 GB checkpoint never sits in memory
// as floats.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/tensor_source.h"
#include "model/ternary.h"

namespace bitsim::model {

struct LayerWeights {
  std::vector<float> input_norm;        // model.layers.N.input_layernorm.weight [hidden]
  std::vector<float> inner_attn_norm;   // model.layers.N.self_attn.inner_attn_ln.weight [hidden]
  std::vector<float> post_attn_norm;    // model.layers.N.post_attention_layernorm.weight [hidden]
  std::vector<float> ffn_norm;          // model.layers.N.mlp.ffn_layernorm.weight [ffn]
  TernaryMatrix q, k, v, o;             // [hidden, hidden]
  TernaryMatrix gate, up;               // [ffn, hidden]
  TernaryMatrix down;                   // [hidden, ffn]
};

struct TernaryModel {
  ModelConfig config;
  std::string source;                   // where the weights came from (for reports)
  Buffer<float> embed;                  // [vocab, hidden], F32 (the tied embedding; owned or a mapped view)
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;        // model.norm.weight [hidden]
  TernaryMatrix lm_head;                // ternarized embed_tokens (tied), as on the board

  uint64_t parameter_count() const;     // latent parameters (embedding counted once: tied)
  double zero_fraction() const;         // over all ternary matrices except lm_head
  const float* embedding(int token) const { return embed.data() + size_t(token) * config.hidden_size; }
};

// "synthetic:SHAPE" (seed 0x5EED by default), "synthetic:SHAPE:SEED", or a folder holding
// config.json and model.safetensors. A missing folder or an unknown shape is an Error.
std::unique_ptr<TensorSource> open_model_source(const std::string& spec);

// The folder of a spec, when the spec names one (for tokenizer.model lookup).
std::optional<std::filesystem::path> model_folder(const std::string& spec);

// Reads every tensor of MODEL.md from the source and ternarizes the linear layers.
// `threads` >= 1 workers quantize tensors in parallel (results do not depend on it).
TernaryModel load_ternary_model(const TensorSource& source, int threads = 2);

// A model with the shape of `config` and no weights (empty trits, zero norms and
// embeddings, allocated lazily): enough for timing-only runs, whose cycle counts do not
// depend on the data.
TernaryModel shape_only_model(const ModelConfig& config);

}  // namespace bitsim::model
