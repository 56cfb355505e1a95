#pragma once
// FloatReference: the checkpoint's own semantics in fp32 (MODEL.md "Forward pass"), with
// Eigen: float BitLinear (weight_quant and activation_quant as fake quantization, then a
// float matrix-vector product), RoPE with libm sin/cos, an fp32 softmax over an fp32 KV
// cache, and the tied float lm_head (or, as an option, the board's ternary lm_head with
// BitLinear semantics). It is the yardstick for the board arithmetic's quality, not for bit
// equality: libm and Eigen are allowed here.
#include <vector>

#include <Eigen/Dense>

#include "model/model_loader.h"

namespace bitsim::golden {

struct FloatReferenceOptions {
  bool ternary_lm_head = false;   // false: tied float lm_head (the checkpoint); true: as the board
};

class FloatReference {
 public:
  // Builds W' = t * w_scale for every linear layer: memory is 4 bytes per parameter, so this
  // is meant for small models (tiny) and single layers.
  explicit FloatReference(const model::TernaryModel& model, FloatReferenceOptions options = {});
  std::vector<float> step(int token);
  int position() const { return pos_; }
  // Empties the KV cache: the next step is position 0 again.
  void reset();
  // The logits of the last step() with the tied float lm_head (ternary_lm_head false) or the
  // board's ternary lm_head (true), whichever the options chose for step(): both heads read
  // the same final hidden state, so one pass gives both. Empty before the first step.
  std::vector<float> last_logits(bool ternary_lm_head) const;

 private:
  struct Layer {
    Eigen::MatrixXf q, k, v, o, gate, up, down;
  };
  Eigen::VectorXf bitlinear(const Eigen::MatrixXf& w, const Eigen::VectorXf& x) const;
  Eigen::VectorXf rmsnorm(const Eigen::VectorXf& x, const std::vector<float>& w) const;
  void rope(Eigen::Ref<Eigen::VectorXf> head, int pos) const;

  const model::TernaryModel& model_;
  FloatReferenceOptions options_;
  std::vector<Layer> layers_;
  Eigen::MatrixXf lm_head_;                       // [vocab, hidden]
  Eigen::MatrixXf other_head_;                    // the other head choice, for last_logits()
  Eigen::VectorXf last_normed_;                   // final RMSNorm output of the last step
  std::vector<std::vector<Eigen::VectorXf>> k_cache_, v_cache_;  // [layer][pos] -> [hidden]
  int pos_ = 0;
};

}  // namespace bitsim::golden
