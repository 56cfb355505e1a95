#include "model/model_loader.h"

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "base/stop_signal.h"
#include "base/file_io.h"
#include "base/parse_number.h"
#include "model/synthetic.h"

namespace bitsim::model {

namespace {
constexpr uint64_t kDefaultSyntheticSeed = 0x5EED;

std::vector<float> read_vector(const TensorSource& src, const std::string& name, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  src.read(name, {n}, v.data());
  return v;
}

// `scratch` is the worker's float buffer, reused from tensor to tensor: a new 25 MB buffer
// per tensor would be fresh pages each time, which the kernel faults in and zeroes (2.9 GB
// for bitnet-large).
TernaryMatrix read_ternary(const TensorSource& src, const std::string& name, int rows, int cols,
                           std::vector<float>& scratch) {
  if (auto packed = src.read_ternary(name, rows, cols)) return std::move(*packed);  // the packed release
  const size_t n = static_cast<size_t>(rows) * cols;
  if (scratch.size() < n) scratch.resize(n);
  src.read(name, {rows, cols}, scratch.data());
  return ternarize(scratch.data(), rows, cols);
}
}  // namespace

uint64_t TernaryModel::parameter_count() const {
  const auto& c = config;
  const uint64_t h = c.hidden_size, f = c.intermediate_size, kv = uint64_t(c.kv_dim());
  const uint64_t per_layer = 2 * h * h + 2 * kv * h + 3 * h * f + 3 * h + f;
  return uint64_t(c.vocab_size) * h + c.num_layers * per_layer + h;
}

double TernaryModel::zero_fraction() const {
  uint64_t zeros = 0, total = 0;
  for (const auto& l : layers) {
    for (const TernaryMatrix* m : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) {
      for (int8_t t : m->trits) zeros += (t == 0);
      total += m->trits.size();
    }
  }
  return total ? double(zeros) / double(total) : 0.0;
}

std::unique_ptr<TensorSource> open_model_source(const std::string& spec) {
  const std::string prefix = "synthetic:";
  if (spec.rfind(prefix, 0) == 0) {
    std::string rest = spec.substr(prefix.size());
    uint64_t seed = kDefaultSyntheticSeed;
    if (auto colon = rest.find(':'); colon != std::string::npos) {
      const std::string seed_text = rest.substr(colon + 1);
      rest = rest.substr(0, colon);
      seed = parse_unsigned(seed_text, fmt::format("model '{}': seed", spec));
    }
    auto src = std::make_unique<SyntheticSource>(parse_shape(rest), seed);
    src->config().validate(spec);  // a shape no board can run (the unit's head_dim: sim's check)
    return src;
  }
  std::filesystem::path folder(spec);
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(folder, ec)))
    throw Error(fmt::format("model folder '{}' does not exist (use synthetic:SHAPE with SHAPE one of {}, or a folder "
                            "with config.json and model.safetensors)",
                            spec, fmt::join(shape_names(), ", ")));
  io::check_input_folder(folder, "model");
  return std::make_unique<CheckpointSource>(folder);
}

std::optional<std::filesystem::path> model_folder(const std::string& spec) {
  if (spec.rfind("synthetic:", 0) == 0) return std::nullopt;
  return std::filesystem::path(spec);
}

TernaryModel load_ternary_model(const TensorSource& src, int threads) {
  TernaryModel m;
  m.config = src.config();
  m.source = src.describe();
  const auto& c = m.config;
  const int h = c.hidden_size, f = c.intermediate_size, kv = c.kv_dim();
  m.layers.resize(c.num_layers);

  // Every tensor is an independent job; jobs write disjoint fields, so any number of
  // workers gives the same model.
  std::vector<std::function<void(std::vector<float>& scratch)>> jobs;
  jobs.push_back([&](std::vector<float>&) {
    m.embed = zero_buffer<float>(size_t(c.vocab_size) * h, "the embedding table");  // written once here
    src.read("model.embed_tokens.weight", {c.vocab_size, h}, m.embed.data());
    m.lm_head = ternarize(m.embed.data(), c.vocab_size, h);
  });
  jobs.push_back([&](std::vector<float>&) { m.final_norm = read_vector(src, "model.norm.weight", h); });
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    LayerWeights& L = m.layers[i];
    jobs.push_back([&, p](std::vector<float>&) {
      L.input_norm = read_vector(src, p + "input_layernorm.weight", h);
      L.inner_attn_norm = read_vector(src, p + c.attn_sub_norm_name() + ".weight", h);
      L.post_attn_norm = read_vector(src, p + "post_attention_layernorm.weight", h);
      L.ffn_norm = read_vector(src, p + c.ffn_sub_norm_name() + ".weight", f);
    });
    jobs.push_back([&, p](std::vector<float>& w) { L.q = read_ternary(src, p + "self_attn.q_proj.weight", h, h, w); });
    jobs.push_back([&, p](std::vector<float>& w) { L.k = read_ternary(src, p + "self_attn.k_proj.weight", kv, h, w); });
    jobs.push_back([&, p](std::vector<float>& w) { L.v = read_ternary(src, p + "self_attn.v_proj.weight", kv, h, w); });
    jobs.push_back([&, p](std::vector<float>& w) { L.o = read_ternary(src, p + "self_attn.o_proj.weight", h, h, w); });
    jobs.push_back([&, p](std::vector<float>& w) { L.gate = read_ternary(src, p + "mlp.gate_proj.weight", f, h, w); });
    jobs.push_back([&, p](std::vector<float>& w) { L.up = read_ternary(src, p + "mlp.up_proj.weight", f, h, w); });
    jobs.push_back([&, p](std::vector<float>& w) { L.down = read_ternary(src, p + "mlp.down_proj.weight", h, f, w); });
  }

  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto worker = [&] {
    std::vector<float> scratch;
    for (size_t j; (j = next.fetch_add(1)) < jobs.size();) {
      try {
        check_stop();  // SIGINT / SIGTERM: stop between tensors
        jobs[j](scratch);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next = jobs.size();
      }
    }
  };
  const int n = std::max(1, threads);
  std::vector<std::thread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  return m;
}

TernaryModel shape_only_model(const ModelConfig& c) {
  TernaryModel m;
  m.config = c;
  m.source = "shape only (" + c.shape_string() + ")";
  const int h = c.hidden_size, f = c.intermediate_size;
  auto shape = [](int rows, int cols) {
    TernaryMatrix t;
    t.rows = rows;
    t.cols = cols;
    t.scale = 1.0f;
    return t;
  };
  // Zero pages mapped on demand: a timing-only run touches a row per token (base/buffer.h).
  m.embed = zero_buffer<float>(size_t(c.vocab_size) * size_t(h), "the shape-only model's embeddings");
  m.final_norm.assign(size_t(h), 1.0f);
  m.lm_head = shape(c.vocab_size, h);
  m.layers.resize(size_t(c.num_layers));
  for (auto& L : m.layers) {
    L.input_norm.assign(size_t(h), 1.0f);
    L.inner_attn_norm.assign(size_t(h), 1.0f);
    L.post_attn_norm.assign(size_t(h), 1.0f);
    L.ffn_norm.assign(size_t(f), 1.0f);
    L.q = L.o = shape(h, h);
    L.k = L.v = shape(c.kv_dim(), h);
    L.gate = L.up = shape(f, h);
    L.down = shape(h, f);
  }
  return m;
}

}  // namespace bitsim::model
