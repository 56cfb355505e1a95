#pragma once
// Two plain types the golden reference and the host's token loop both use, below both
// layers: the fixed K/V scales of the KV cache (golden::calibrate_kv_scales computes them)
// and the probe that observes a step's intermediate tensors (to locate a divergence).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace bitsim::model {

// Fixed K and V scales, one per (layer, head), index layer * heads + head.
struct KvScales {
  std::vector<float> k, v;
  // Per channel: max|K_d| over the calibration pass, index (layer * heads + head) * 96 + d
  // (kv.format = int4: the bank's K channel scales, docs/variants-attention.md 8.2).
  std::vector<float> k_channel;
  float k_scale(int layer, int head, int heads) const { return k[size_t(layer) * heads + head]; }
  float v_scale(int layer, int head, int heads) const { return v[size_t(layer) * heads + head]; }
};

// One intermediate tensor of a token step.
struct StepProbe {
  int layer;            // -1 for embedding / final steps
  const char* step;     // e.g. "attn_in_norm", "q", "attn_out", "logits"
  const float* data;    // float tensors
  const int32_t* idata; // or int32 tensors (matmul accumulators), one of the two is set
  int n;
  int position = 0;     // the context position the tensor belongs to (0-based)
};
using Probe = std::function<void(const StepProbe&)>;

}  // namespace bitsim::model
