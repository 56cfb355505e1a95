#include "host/token_loop.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "model/attention_stream.h"
#include "model/error.h"
#include "model/packed_image.h"

namespace bitsim::host {

namespace {
using model::kHeadDim;

void emit(const golden::Probe& probe, int layer, const char* step, const float* d, int n) {
  if (probe) probe(golden::StepProbe{layer, step, d, nullptr, n});
}
void emit_int(const golden::Probe& probe, int layer, const char* step, const int32_t* d, int n) {
  if (probe) probe(golden::StepProbe{layer, step, nullptr, d, n});
}

// The matrices of a group, stacked: qkv = [q; k; v], gate_up = [gate; up].
struct Stack {
  std::vector<const model::TernaryMatrix*> parts;
  const int8_t* row(int r) const {
    for (const auto* m : parts) {
      if (r < m->rows) return m->row(r);
      r -= m->rows;
    }
    return nullptr;
  }
};

Stack stack_of(const model::TernaryModel& m, size_t group_index) {
  if (group_index == m.layers.size() * 4) return {{&m.lm_head}};
  const auto& L = m.layers[group_index / 4];
  switch (group_index % 4) {
    case 0: return {{&L.q, &L.k, &L.v}};
    case 1: return {{&L.o}};
    case 2: return {{&L.gate, &L.up}};
    default: return {{&L.down}};
  }
}

}  // namespace

TokenLoop::TokenLoop(Platform& platform, const MemoryMap& map, const model::TernaryModel& model,
                     const golden::KvScales& scales, const CpuModelConfig& cpu, const DriverConfig& driver,
                     TokenLoopOptions options)
    : ps_(platform),
      map_(map),
      model_(model),
      scales_(scales),
      cpu_(cpu),
      driver_(platform, map, driver),
      options_(options),
      rope_(kHeadDim, model.config.rope_theta, model::kKvPositions) {
  if (model.config.head_dim() != kHeadDim)
    throw Error(fmt::format("model {}: head_dim {} but the attention unit needs {}", model.source,
                            model.config.head_dim(), kHeadDim));
}

void TokenLoop::load_weights() {
  const auto& groups = map_.groups();
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const MatmulGroup& g = groups[gi];
    const Stack st = stack_of(model_, gi);
    // A shape-only model (no trits: timing-only runs) leaves the rows as DDR zeros,
    // which decode as valid trits; the timing does not depend on them.
    if (st.parts.front()->trits.empty()) continue;
    const size_t row_bytes = model::packed_row_bytes(g.n);
    for (const MatmulCall& call : g.calls) {
      for (const LaneStream& s : call.lane) {
        scratch_.assign(size_t(s.rows) * row_bytes, 0);
        for (int r = 0; r < s.rows; ++r)
          model::pack_row(st.row(s.row_begin + r), g.n, scratch_.data() + size_t(r) * row_bytes);
        ps_.mem_write(s.rows_addr, scratch_.data(), scratch_.size());
      }
    }
  }
}

void TokenLoop::init() { driver_.init(); }

void TokenLoop::set_position(int pos) {
  if (pos < 0 || pos >= model::kKvPositions)
    throw Error(fmt::format("position {} is outside the KV cache (0..{})", pos, model::kKvPositions - 1));
  pos_ = pos;
}

void TokenLoop::cpu(CpuStep step, uint64_t elements, uint64_t bytes) {
  const uint64_t ps = cpu_.step_ps(step, elements, bytes);
  const uint64_t begin = ps_.now_ps();
  ps_.spend(ps);
  t_->cpu_ps += ps;
  if (observer_) observer_->cpu_step(step, elements, bytes, pos_, layer_, begin, ps_.now_ps());
}

void TokenLoop::matmul(const MatmulGroup& g, const int8_t* xq, int32_t* acc) {
  // CPU: header + x into each lane's stream slot.
  const size_t xbytes = (size_t(g.n) + 7) / 8 * 8;
  int part = 0;
  for (const MatmulCall& call : g.calls) {
    for (const LaneStream& s : call.lane) {
      scratch_.assign(16 + xbytes, 0);
      model::write_group_header({uint32_t(s.rows), uint32_t(g.n), true}, scratch_.data());
      std::memcpy(scratch_.data() + 16, xq, size_t(g.n));
      ps_.mem_write(s.addr, scratch_.data(), scratch_.size());
    }
    cpu(CpuStep::WriteHeaders, 0, 2 * (16 + xbytes));
    const uint64_t t0 = ps_.now_ps();
    driver_.matmul(call, g.n);
    t_->matmul_ps += ps_.now_ps() - t0;
    if (observer_) observer_->call("matmul", g.name, part, pos_, layer_, t0, ps_.now_ps());
    ++part;
    ++t_->matmul_calls;
    t_->dma_transfers += 4;
    for (int lane = 0; lane < kLanes; ++lane)
      ps_.mem_read(map_.matmul_result(lane), acc + call.lane[lane].row_begin,
                        size_t(call.lane[lane].rows) * 4);
  }
}

std::vector<float> TokenLoop::step(int token, TokenTiming* timing, const golden::Probe& probe) {
  const auto& c = model_.config;
  const int H = c.hidden_size, F = c.intermediate_size, heads = c.num_heads;
  const float eps = c.rms_norm_eps;
  if (pos_ >= model::kKvPositions)
    throw Error(fmt::format("context full: the board's KV cache holds {} positions", model::kKvPositions));
  if (token < 0 || token >= c.vocab_size)
    throw Error(fmt::format("token id {} is outside the vocabulary (0..{})", token, c.vocab_size - 1));
  TokenTiming local;
  t_ = timing ? timing : &local;
  *t_ = {};
  const uint64_t read0 = ps_.pl_bytes_read();
  const uint64_t begin = ps_.now_ps();
  token_ = token;
  layer_ = -1;
  const int T = pos_ + 1;

  std::vector<float> h(model_.embedding(token), model_.embedding(token) + H);
  cpu(CpuStep::Embed, uint64_t(H));
  emit(probe, -1, "embedding", h.data(), H);
  std::vector<float> a(size_t(std::max(H, F))), q(H), k(H), v(H), o(H), g(F), u(F), d(H);
  std::vector<int8_t> xq(size_t(std::max(H, F)));
  std::vector<int32_t> acc(size_t(std::max(3 * H, 2 * F)));
  std::vector<int8_t> qq(kHeadDim);
  std::vector<int32_t> res(size_t(model::kAttentionResultWords * map_.heads_per_lane()));

  for (int l = 0; l < c.num_layers; ++l) {
    layer_ = l;
    const model::LayerWeights& L = model_.layers[l];
    // 1. input RMSNorm, quantize x.
    num::rmsnorm(h.data(), L.input_norm.data(), H, eps, a.data());
    cpu(CpuStep::RmsNorm, H);
    float s = num::quantize_activations(a.data(), H, xq.data());
    cpu(CpuStep::Quantize, H);
    // 2. q, k, v rows in one group per lane.
    matmul(map_.qkv(l), xq.data(), acc.data());
    emit_int(probe, l, "q_acc", acc.data(), H);
    emit_int(probe, l, "k_acc", acc.data() + H, H);
    emit_int(probe, l, "v_acc", acc.data() + 2 * H, H);
    // 3. dequantize, RoPE, quantize q per head, K and V with the fixed scales, append.
    num::dequantize(acc.data(), H, L.q.scale, s, q.data());
    num::dequantize(acc.data() + H, H, L.k.scale, s, k.data());
    num::dequantize(acc.data() + 2 * H, H, L.v.scale, s, v.data());
    cpu(CpuStep::Dequantize, 3 * uint64_t(H));
    for (int hd = 0; hd < heads; ++hd) {
      num::rope_apply(q.data() + hd * kHeadDim, pos_, rope_);
      num::rope_apply(k.data() + hd * kHeadDim, pos_, rope_);
    }
    cpu(CpuStep::Rope, 2 * uint64_t(H));
    emit(probe, l, "q_rope", q.data(), H);
    emit(probe, l, "k_rope", k.data(), H);
    emit(probe, l, "v", v.data(), H);
    std::vector<HeadWork> work[kLanes];
    uint64_t written = 0;
    for (int hd = 0; hd < heads; ++hd) {
      const int lane = hd / map_.heads_per_lane(), slot = hd % map_.heads_per_lane();
      const float sk = scales_.k_scale(l, hd, heads), sv = scales_.v_scale(l, hd, heads);
      const float sq = num::quantize_symmetric(q.data() + hd * kHeadDim, kHeadDim, qq.data());
      int8_t row[kHeadDim];
      num::quantize_fixed(k.data() + hd * kHeadDim, kHeadDim, sk, row);
      ps_.mem_write(map_.k_area(l, hd) + uint64_t(pos_) * kHeadDim, row, kHeadDim);
      num::quantize_fixed(v.data() + hd * kHeadDim, kHeadDim, sv, row);
      ps_.mem_write(map_.v_area(l, hd) + uint64_t(pos_) * kHeadDim, row, kHeadDim);
      const num::AttnMultiplier mul = num::attention_multiplier(sq, sk, kHeadDim);
      t_->multiplier_lowered += mul.lowered > 0;
      model::AttentionHeadHeader hdr;
      hdr.T = uint32_t(T);
      hdr.m = mul.m;
      hdr.shift = uint32_t(mul.shift);
      hdr.legacy = options_.legacy_attention;
      hdr.last = slot == map_.heads_per_lane() - 1 || hd == heads - 1;
      uint8_t buf[model::kAttentionHeaderQBytes];
      model::write_attention_header(hdr, buf);
      std::memcpy(buf + model::kHeaderBytes, qq.data(), kHeadDim);
      ps_.mem_write(map_.head_buffer(lane, slot), buf, sizeof buf);
      written += 2 * kHeadDim + sizeof buf;
      work[lane].push_back({map_.head_buffer(lane, slot), map_.k_area(l, hd), map_.v_area(l, hd),
                            uint32_t(T * kHeadDim)});
    }
    cpu(CpuStep::QuantizeHeads, 3 * uint64_t(H), written);
    // 4. attention call: SG chains, per lane its heads x 3 descriptors.
    const uint64_t t0 = ps_.now_ps();
    const uint64_t b0 = ps_.pl_bytes_read();
    driver_.attention(work, written);
    t_->attention_ps += ps_.now_ps() - t0;
    if (observer_) observer_->call("attention", fmt::format("layer {} attention", l), 0, pos_, l, t0, ps_.now_ps());
    t_->attention_bytes += ps_.pl_bytes_read() - b0;
    ++t_->attention_calls;
    t_->dma_transfers += 4;
    // 5. CPU: finish attention per head.
    for (int lane = 0; lane < kLanes; ++lane) {
      ps_.mem_read(map_.attention_result(lane), res.data(), work[lane].size() * model::kAttentionResultBytes);
      for (size_t i = 0; i < work[lane].size(); ++i) {
        const int hd = lane * map_.heads_per_lane() + int(i);
        const int32_t* r = res.data() + i * model::kAttentionResultWords;
        num::attention_finish(r, uint32_t(r[model::kAttentionSumWord]), scales_.v_scale(l, hd, heads), kHeadDim,
                              o.data() + hd * kHeadDim);
      }
    }
    cpu(CpuStep::AttnFinish, H);
    emit(probe, l, "attn_out", o.data(), H);
    // 5. inner_attn_ln RMSNorm, quantize. 6. o_proj, dequantize, residual.
    num::rmsnorm(o.data(), L.inner_attn_norm.data(), H, eps, a.data());
    cpu(CpuStep::RmsNorm, H);
    s = num::quantize_activations(a.data(), H, xq.data());
    cpu(CpuStep::Quantize, H);
    matmul(map_.o(l), xq.data(), acc.data());
    emit_int(probe, l, "o_acc", acc.data(), H);
    num::dequantize(acc.data(), H, L.o.scale, s, d.data());
    cpu(CpuStep::Dequantize, H);
    num::add_inplace(h.data(), d.data(), H);
    cpu(CpuStep::Residual, H);
    // 6. post-attention RMSNorm, quantize. 7. gate and up.
    num::rmsnorm(h.data(), L.post_attn_norm.data(), H, eps, a.data());
    cpu(CpuStep::RmsNorm, H);
    s = num::quantize_activations(a.data(), H, xq.data());
    cpu(CpuStep::Quantize, H);
    matmul(map_.gate_up(l), xq.data(), acc.data());
    emit_int(probe, l, "gate_acc", acc.data(), F);
    emit_int(probe, l, "up_acc", acc.data() + F, F);
    num::dequantize(acc.data(), F, L.gate.scale, s, g.data());
    num::dequantize(acc.data() + F, F, L.up.scale, s, u.data());
    cpu(CpuStep::Dequantize, 2 * uint64_t(F));
    // 8. SiLU(gate) * up, ffn_layernorm, quantize.
    num::silu_gate(g.data(), u.data(), F, g.data());
    cpu(CpuStep::SiluGate, F);
    num::rmsnorm(g.data(), L.ffn_norm.data(), F, eps, a.data());
    cpu(CpuStep::RmsNorm, F);
    s = num::quantize_activations(a.data(), F, xq.data());
    cpu(CpuStep::Quantize, F);
    // 9. down_proj, dequantize, residual.
    matmul(map_.down(l), xq.data(), acc.data());
    emit_int(probe, l, "down_acc", acc.data(), H);
    num::dequantize(acc.data(), H, L.down.scale, s, d.data());
    cpu(CpuStep::Dequantize, H);
    num::add_inplace(h.data(), d.data(), H);
    cpu(CpuStep::Residual, H);
    emit(probe, l, "residual", h.data(), H);
  }
  // Final RMSNorm, quantize, lm_head (split by lane and by the length limit), dequantize.
  layer_ = -1;
  num::rmsnorm(h.data(), model_.final_norm.data(), H, eps, a.data());
  cpu(CpuStep::RmsNorm, H);
  const float s = num::quantize_activations(a.data(), H, xq.data());
  cpu(CpuStep::Quantize, H);
  std::vector<int32_t> lm(size_t(c.vocab_size));
  matmul(map_.lm_head(), xq.data(), lm.data());
  emit_int(probe, -1, "lm_head_acc", lm.data(), c.vocab_size);
  std::vector<float> logits(size_t(c.vocab_size));
  num::dequantize(lm.data(), c.vocab_size, model_.lm_head.scale, s, logits.data());
  cpu(CpuStep::Dequantize, uint64_t(c.vocab_size));
  cpu(CpuStep::Argmax, uint64_t(c.vocab_size));
  emit(probe, -1, "logits", logits.data(), c.vocab_size);
  t_->bytes_read = ps_.pl_bytes_read() - read0;
  if (observer_) observer_->token(pos_, token_, begin, ps_.now_ps());
  ++pos_;
  t_ = nullptr;
  return logits;
}

}  // namespace bitsim::host
