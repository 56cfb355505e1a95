#pragma once
// A small random ternary model with the board's head dim, and fixed K/V scales, for the
// host and fast-board tests (the same construction as tests/sim/fidelity_test.cpp's).
// Test scaffolding only.
#include <random>
#include <vector>

#include "golden/board_reference.h"
#include "model/board_shape.h"
#include "model/model_loader.h"

namespace bitsim::testing {

inline model::TernaryMatrix random_ternary(std::mt19937& g, int rows, int cols) {
  model::TernaryMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.scale = 0.02f + 0.01f * float(g() % 10);
  m.trits.resize(size_t(rows) * size_t(cols));
  for (auto& t : m.trits) t = int8_t(int(g() % 3) - 1);
  return m;
}

// kv_heads: K/V heads (grouped-query attention; 0: heads, multi-head attention).
// head_dim: the attention unit's d (attention.head_dim; the board's 96).
inline model::TernaryModel random_model(std::mt19937& g, int heads, int ffn, int layers, int vocab, int kv_heads = 0,
                                        int head_dim = model::kBoardHeadDim) {
  model::TernaryModel m;
  auto& c = m.config;
  c.hidden_size = head_dim * heads;
  c.intermediate_size = ffn;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads > 0 ? kv_heads : heads;
  c.vocab_size = vocab;
  c.max_position_embeddings = 2048;
  c.pad_token_id = 0;
  m.source = "random";
  const int H = c.hidden_size;
  std::normal_distribution<float> nd(0.0f, 0.02f);
  m.embed.resize(size_t(vocab) * size_t(H));
  for (auto& v : m.embed) v = nd(g);
  auto ones = [](int n) { return std::vector<float>(size_t(n), 1.0f); };
  for (int l = 0; l < layers; ++l) {
    model::LayerWeights L;
    L.input_norm = L.inner_attn_norm = L.post_attn_norm = ones(H);
    L.ffn_norm = ones(ffn);
    L.q = random_ternary(g, H, H);
    L.k = random_ternary(g, c.kv_dim(), H);
    L.v = random_ternary(g, c.kv_dim(), H);
    L.o = random_ternary(g, H, H);
    L.gate = random_ternary(g, ffn, H);
    L.up = random_ternary(g, ffn, H);
    L.down = random_ternary(g, H, ffn);
    m.layers.push_back(std::move(L));
  }
  m.final_norm = ones(H);
  m.lm_head = random_ternary(g, vocab, H);
  return m;
}

inline model::KvScales fixed_scales(const model::TernaryModel& m) {
  model::KvScales s;
  s.k.assign(size_t(m.config.num_layers) * size_t(m.config.num_kv_heads), 0.04f);  // per (layer, K/V head)
  s.v.assign(s.k.size(), 0.03f);
  // kv.format = int4: per-channel K maxima of the same scale, a few channels larger (the
  // outlier lanes' candidates).
  for (size_t i = 0; i < s.k.size(); ++i)
    for (int d = 0; d < m.config.head_dim(); ++d) s.k_channel.push_back(0.04f * 127.0f * (1.0f + float((d * 7 + int(i)) % 11) / 4.0f));
  return s;
}

}  // namespace bitsim::testing
