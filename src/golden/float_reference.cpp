#include "golden/float_reference.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::golden {

namespace {
Eigen::MatrixXf dequantized(const model::TernaryMatrix& m) {
  Eigen::MatrixXf w(m.rows, m.cols);
  for (int r = 0; r < m.rows; ++r)
    for (int c = 0; c < m.cols; ++c) w(r, c) = float(m.row(r)[c]) * m.scale;
  return w;
}
}  // namespace

FloatReference::FloatReference(const model::TernaryModel& model, FloatReferenceOptions options)
    : model_(model), options_(options) {
  for (const auto& L : model.layers)
    layers_.push_back(Layer{dequantized(L.q), dequantized(L.k), dequantized(L.v), dequantized(L.o),
                            dequantized(L.gate), dequantized(L.up), dequantized(L.down)});
  const auto& c = model.config;
  Eigen::MatrixXf ternary = dequantized(model.lm_head);
  Eigen::MatrixXf tied = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      model.embed.data(), c.vocab_size, c.hidden_size);
  lm_head_ = options_.ternary_lm_head ? std::move(ternary) : std::move(tied);
  other_head_ = options_.ternary_lm_head ? std::move(tied) : std::move(ternary);
  k_cache_.resize(c.num_layers);
  v_cache_.resize(c.num_layers);
}

// activation_quant: s = 127 / max|x|.clamp(1e-5); x' = round(x*s).clamp(-128,127) / s.
Eigen::VectorXf FloatReference::bitlinear(const Eigen::MatrixXf& w, const Eigen::VectorXf& x) const {
  const float s = 127.0f / std::max(x.cwiseAbs().maxCoeff(), 1e-5f);
  Eigen::VectorXf xq(x.size());
  for (Eigen::Index i = 0; i < x.size(); ++i)
    xq[i] = std::clamp(std::nearbyint(x[i] * s), -128.0f, 127.0f) / s;
  return w * xq;
}

Eigen::VectorXf FloatReference::rmsnorm(const Eigen::VectorXf& x, const std::vector<float>& w) const {
  const float ms = x.squaredNorm() / float(x.size());
  const float r = 1.0f / std::sqrt(ms + model_.config.rms_norm_eps);
  Eigen::VectorXf y(x.size());
  for (Eigen::Index i = 0; i < x.size(); ++i) y[i] = x[i] * r * w[size_t(i)];
  return y;
}

// rotate_half pairing: dim i with i + d/2.
void FloatReference::rope(Eigen::Ref<Eigen::VectorXf> head, int pos) const {
  const int d = int(head.size()), half = d / 2;
  for (int i = 0; i < half; ++i) {
    const float inv_freq = 1.0f / std::pow(model_.config.rope_theta, float(2 * i) / float(d));
    const float angle = float(pos) * inv_freq;
    const float c = std::cos(angle), s = std::sin(angle);
    const float a = head[i], b = head[i + half];
    head[i] = a * c - b * s;
    head[i + half] = b * c + a * s;
  }
}

std::vector<float> FloatReference::step(int token) {
  const auto& c = model_.config;
  if (token < 0 || token >= c.vocab_size)
    throw Error(fmt::format("token id {} is outside the vocabulary", token));
  const int H = c.hidden_size, heads = c.num_heads, hd = c.head_dim();
  Eigen::VectorXf h = Eigen::Map<const Eigen::VectorXf>(model_.embedding(token), H);
  for (int l = 0; l < c.num_layers; ++l) {
    const Layer& W = layers_[l];
    const auto& L = model_.layers[l];
    Eigen::VectorXf a = rmsnorm(h, L.input_norm);
    Eigen::VectorXf q = bitlinear(W.q, a), k = bitlinear(W.k, a), v = bitlinear(W.v, a);
    for (int i = 0; i < heads; ++i) rope(q.segment(i * hd, hd), pos_);
    for (int g = 0; g < c.num_kv_heads; ++g) rope(k.segment(g * hd, hd), pos_);  // k, v: kv_heads x hd
    k_cache_[l].push_back(k);
    v_cache_[l].push_back(v);
    const int T = pos_ + 1;
    Eigen::VectorXf o(H);
    const float scale = 1.0f / std::sqrt(float(hd));
    for (int i = 0; i < heads; ++i) {
      // Grouped-query attention (HF repeat_kv): query head i reads K/V head i / (heads / kv_heads).
      const int kv = c.kv_head(i) * hd;
      Eigen::VectorXf scores(T);
      for (int t = 0; t < T; ++t) scores[t] = q.segment(i * hd, hd).dot(k_cache_[l][t].segment(kv, hd)) * scale;
      const float mx = scores.maxCoeff();
      for (int t = 0; t < T; ++t) scores[t] = std::exp(scores[t] - mx);
      scores /= scores.sum();
      Eigen::VectorXf oh = Eigen::VectorXf::Zero(hd);
      for (int t = 0; t < T; ++t) oh += scores[t] * v_cache_[l][t].segment(kv, hd);
      o.segment(i * hd, hd) = oh;
    }
    o = rmsnorm(o, L.inner_attn_norm);
    h += bitlinear(W.o, o);
    a = rmsnorm(h, L.post_attn_norm);
    Eigen::VectorXf g = bitlinear(W.gate, a), u = bitlinear(W.up, a);
    // act(gate) * up: SiLU, or ReLU^2 (hidden_act relu2).
    const bool relu2 = c.hidden_act == model::HiddenAct::Relu2;
    for (Eigen::Index i = 0; i < g.size(); ++i) {
      const float r = std::max(g[i], 0.0f);
      g[i] = relu2 ? r * r * u[i] : g[i] / (1.0f + std::exp(-g[i])) * u[i];
    }
    g = rmsnorm(g, L.ffn_norm);
    h += bitlinear(W.down, g);
  }
  const Eigen::VectorXf a = rmsnorm(h, model_.final_norm);
  last_normed_ = a;
  const Eigen::VectorXf logits = options_.ternary_lm_head ? bitlinear(lm_head_, a) : Eigen::VectorXf(lm_head_ * a);
  ++pos_;
  return std::vector<float>(logits.data(), logits.data() + logits.size());
}

}  // namespace bitsim::golden

namespace bitsim::golden {

std::vector<float> FloatReference::last_logits(bool ternary_lm_head) const {
  if (last_normed_.size() == 0) return {};
  const Eigen::MatrixXf& w = ternary_lm_head == options_.ternary_lm_head ? lm_head_ : other_head_;
  const Eigen::VectorXf logits = ternary_lm_head ? bitlinear(w, last_normed_) : Eigen::VectorXf(w * last_normed_);
  return std::vector<float>(logits.data(), logits.data() + logits.size());
}

void FloatReference::reset() {
  for (auto& c : k_cache_) c.clear();
  for (auto& c : v_cache_) c.clear();
  pos_ = 0;
}

}  // namespace bitsim::golden
