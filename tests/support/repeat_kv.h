#pragma once
// Grouped-query attention's reference semantics (HF repeat_kv) as a model transform: the
// multi-head model in which every query head has its own copy of its group's K/V head, that
// is k_proj and v_proj with each K/V head's 96 rows repeated group() times, and the K/V
// scales repeated the same way. A GQA model and its repeat_kv expansion compute the same
// attention; the tests compare the two. Test scaffolding only.
#include <algorithm>
#include <vector>

#include "model/board_shape.h"
#include "model/kv_scales.h"
#include "model/model_loader.h"

namespace bitsim::testing {

// w's rows of K/V head kv_head(h) for every query head h, in query-head order.
inline model::TernaryMatrix repeat_kv_rows(const model::TernaryMatrix& w, const model::ModelConfig& c) {
  model::TernaryMatrix out;
  out.rows = c.num_heads * c.head_dim();
  out.cols = w.cols;
  out.scale = w.scale;
  std::vector<int8_t> trits;
  for (int h = 0; h < c.num_heads; ++h)
    for (int r = 0; r < c.head_dim(); ++r) {
      const int8_t* row = w.row(c.kv_head(h) * c.head_dim() + r);
      trits.insert(trits.end(), row, row + w.cols);
    }
  out.trits = std::move(trits);
  return out;
}

inline model::TernaryModel repeat_kv(const model::TernaryModel& gqa) {
  model::TernaryModel m = gqa;
  for (model::LayerWeights& L : m.layers) {
    L.k = repeat_kv_rows(L.k, gqa.config);
    L.v = repeat_kv_rows(L.v, gqa.config);
  }
  m.config.num_kv_heads = m.config.num_heads;
  m.source = gqa.source + " (repeat_kv)";
  return m;
}

// Per (layer, K/V head) scales to per (layer, query head): each query head takes its group's.
inline model::KvScales repeat_kv(const model::KvScales& s, const model::ModelConfig& c) {
  model::KvScales out;
  for (int l = 0; l < c.num_layers; ++l)
    for (int h = 0; h < c.num_heads; ++h) {
      const size_t g = size_t(l) * size_t(c.num_kv_heads) + size_t(c.kv_head(h));
      out.k.push_back(s.k[g]);
      out.v.push_back(s.v[g]);
      if (!s.k_channel.empty())
        out.k_channel.insert(out.k_channel.end(), s.k_channel.begin() + std::ptrdiff_t(g * c.head_dim()),
                             s.k_channel.begin() + std::ptrdiff_t((g + 1) * c.head_dim()));
    }
  return out;
}

}  // namespace bitsim::testing
