#include "model/synthetic.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "base/stop_signal.h"
#include "base/file_io.h"
#include "model/packed_release.h"
#include "model/safetensors.h"

namespace bitsim::model {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr float kLinearStep = 2.6429e-7f;    // (2 s - 262140) * step has std 0.02
constexpr float kNormStep = 0x1p-23f;        // norm = 1 + k * 2^-23, |k| <= 2^19
constexpr int64_t kThreadThreshold = 1 << 20;  // elements; below this one thread is faster
constexpr int64_t kWriteChunk = 1 << 20;       // elements per write (4 MiB of F32)

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t tensor_key(uint64_t seed, const std::string& name) { return mix64(seed + mix64(fnv1a64(name))); }

void gen_linear(uint64_t key, int64_t begin, int64_t count, float* dst) {
  uint64_t ctr = key + static_cast<uint64_t>(begin + 1) * kGolden;
  for (int64_t i = 0; i < count; ++i, ctr += kGolden) {
    const uint64_t r = mix64(ctr);
    // Sum of the four 16-bit fields: pairwise in two 32-bit lanes, then the lanes.
    const uint64_t pairs = (r & 0x0000ffff0000ffffull) + ((r >> 16) & 0x0000ffff0000ffffull);
    const auto s = static_cast<int32_t>((pairs & 0xffffffffull) + (pairs >> 32));
    dst[i] = static_cast<float>(2 * s - 262140) * kLinearStep;
  }
}

void gen_norm(uint64_t key, int64_t begin, int64_t count, float* dst) {
  uint64_t ctr = key + static_cast<uint64_t>(begin + 1) * kGolden;
  for (int64_t i = 0; i < count; ++i, ctr += kGolden) {
    const uint64_t r = mix64(ctr);
    const auto k = static_cast<int32_t>(r >> 44) - (1 << 19);
    dst[i] = 1.0f + static_cast<float>(k) * kNormStep;  // exact: no rounding
  }
}

constexpr Shape kShapes[] = {Shape::BitnetLarge,     Shape::Tiny,       Shape::TinyGqa,
                             Shape::BitnetLargeGqa4, Shape::Bitnet2b4t, Shape::Tiny2b4t,
                             Shape::TinyFfn6912, Shape::Tiny2b4tHd128};

}  // namespace

std::vector<std::string> shape_names() {
  std::vector<std::string> names;
  for (Shape shape : kShapes) names.emplace_back(shape_name(shape));
  return names;
}

Shape parse_shape(const std::string& s) {
  for (Shape shape : kShapes)
    if (s == shape_name(shape)) return shape;
  throw Error(fmt::format("unknown model shape '{}' (valid: {})", s, fmt::join(shape_names(), ", ")));
}

const char* shape_name(Shape s) {
  switch (s) {
    case Shape::BitnetLarge: return "bitnet-large";
    case Shape::Tiny: return "tiny";
    case Shape::TinyGqa: return "tiny-gqa";
    case Shape::BitnetLargeGqa4: return "bitnet-large-gqa4";
    case Shape::Bitnet2b4t: return "bitnet-2b4t";
    case Shape::Tiny2b4t: return "tiny-2b4t";
    case Shape::TinyFfn6912: return "tiny-ffn6912";
    case Shape::Tiny2b4tHd128: return "tiny-2b4t-hd128";
  }
  return "?";
}

ModelConfig config_for(Shape s) {
  switch (s) {
    case Shape::BitnetLarge: return ModelConfig::bitnet_large();
    case Shape::Tiny: return ModelConfig::tiny();
    case Shape::TinyGqa: return ModelConfig::tiny_gqa();
    case Shape::BitnetLargeGqa4: return ModelConfig::bitnet_large_gqa4();
    case Shape::Bitnet2b4t: return ModelConfig::bitnet_2b4t();
    case Shape::Tiny2b4t: return ModelConfig::tiny_2b4t();
    case Shape::TinyFfn6912: return ModelConfig::tiny_ffn6912();
    case Shape::Tiny2b4tHd128: return ModelConfig::tiny_2b4t_hd128();
  }
  throw Error("config_for: invalid Shape value");
}

SyntheticSource::SyntheticSource(Shape shape, uint64_t seed)
    : shape_(shape), seed_(seed), config_(config_for(shape)), tensors_(expected_tensors(config_)) {
  for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].first, i);
}

std::string SyntheticSource::describe() const { return fmt::format("synthetic:{} (seed {})", shape_name(shape_), seed_); }

const std::vector<int64_t>& SyntheticSource::shape_of(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw Error(fmt::format("{}: no tensor '{}'", describe(), name));
  return tensors_[it->second].second;
}

void SyntheticSource::generate(const std::string& name, int64_t begin, int64_t count, float* dst) const {
  const std::vector<int64_t>& shape = shape_of(name);
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (begin < 0 || count < 0 || begin > numel || count > numel - begin)
    throw Error(fmt::format("{}: tensor '{}': elements [{}, {}) are outside its {} elements", describe(), name, begin,
                            begin + count, numel));
  const uint64_t key = tensor_key(seed_, name);
  if (shape.size() == 1)
    gen_norm(key, begin, count, dst);
  else
    gen_linear(key, begin, count, dst);
}

void SyntheticSource::read(const std::string& name, const std::vector<int64_t>& shape, float* dst) const {
  const std::vector<int64_t>& actual = shape_of(name);
  if (actual != shape)
    throw Error(fmt::format("{}: tensor '{}' has shape {}, but {} was asked for", describe(), name,
                            shape_to_string(actual), shape_to_string(shape)));
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (numel < kThreadThreshold) {
    generate(name, 0, numel, dst);
    return;
  }
  // In pieces of 4 M elements, each shared by two threads, SIGINT / SIGTERM looked at between
  // them (the embedding of bitnet-large is a second of work); the values do not depend on it.
  constexpr int64_t kPiece = int64_t(1) << 22;
  for (int64_t at = 0; at < numel; at += kPiece) {
    check_stop();
    const int64_t n = std::min(kPiece, numel - at), half = n / 2;
    std::thread helper([&] { generate(name, at + half, n - half, dst + at + half); });
    try {
      generate(name, at, half, dst + at);
    } catch (...) {
      helper.join();
      throw;
    }
    helper.join();
  }
}

CheckpointFormat parse_checkpoint_format(const std::string& s) {
  if (s == "latent") return CheckpointFormat::Latent;
  if (s == "packed") return CheckpointFormat::Packed;
  throw Error(fmt::format("unknown checkpoint format '{}' (latent or packed)", s));
}

void write_synthetic_checkpoint(Shape shape, uint64_t seed, const std::filesystem::path& out_dir,
                                CheckpointFormat format) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw Error(fmt::format("{}: cannot create the checkpoint folder: {}", out_dir.string(), ec.message()));

  const SyntheticSource src(shape, seed);
  const bool packed = format == CheckpointFormat::Packed;
  auto write_text = [](const std::filesystem::path& p, const std::string& text) {
    io::write_file(p, text, "checkpoint file");
  };
  write_text(out_dir / "config.json",
             (packed ? packed_config_json(src.config()) : src.config().to_json()).dump(2) + "\n");
  write_text(out_dir / "TOKENIZER.md",
             fmt::format(
                 "# Tokenizer of this synthetic checkpoint\n\n"
                 "This folder was written by bitsim as a synthetic checkpoint ({}). It has the real\n"
                 "layout of 1bitLLM/bitnet_b1_58-large (config.json, model.safetensors with the MODEL.md\n"
                 "tensor names, {}, tied lm_head) but random weights, so generated text is noise.\n\n"
                 "There is no tokenizer.model here. bitsim then uses a byte-level tokenizer on the\n"
                 "LLaMA byte-fallback ids (<0x00>..<0xFF> = ids 3..258), plus BOS {} and EOS {}.\n"
                 "To use SentencePiece, put the real tokenizer.model (LLaMA-2's) in this folder.\n",
                 src.describe(),
                 packed ? "the projections packed ternary as in BitNet b1.58 2B4T's release (U8 and a\n"
                          "weight_scale), the embedding and the norms F32"
                        : "F32",
                 src.config().bos_token_id, src.config().eos_token_id));

  const std::map<std::string, std::string> metadata{
      {"format", "pt"}, {"bitsim.synthetic", shape_name(shape)}, {"bitsim.seed", std::to_string(seed)}};
  if (packed) {
    write_packed_safetensors(src, out_dir / "model.safetensors", metadata);
    return;
  }
  std::vector<TensorSpec> specs;
  for (const auto& [name, tshape] : src.tensors()) specs.push_back({name, DType::F32, tshape});
  SafetensorsWriter writer(out_dir / "model.safetensors", std::move(specs), metadata);
  std::vector<float> chunk(static_cast<size_t>(kWriteChunk));
  for (const auto& [name, tshape] : src.tensors()) {
    int64_t numel = 1;
    for (int64_t d : tshape) numel *= d;
    for (int64_t begin = 0; begin < numel; begin += kWriteChunk) {
      const int64_t n = std::min(kWriteChunk, numel - begin);
      src.generate(name, begin, n, chunk.data());
      writer.append(chunk.data(), static_cast<size_t>(n) * sizeof(float));
    }
  }
  writer.finish();
}

}  // namespace bitsim::model
