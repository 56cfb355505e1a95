#include "model/synthetic.h"

#include <sys/wait.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "support/temp_dir.h"
#include "model/safetensors.h"
#include "model/tensor_source.h"

namespace bitsim::model {
namespace {

namespace fs = std::filesystem;

using TempDir = test::MadeTempDir;

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<float> read_all(const TensorSource& src, const std::string& name, const std::vector<int64_t>& shape) {
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  src.read(name, shape, v.data());
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_error_mentions(const std::function<void()>& fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  }
}

// Writes a tiny checkpoint by hand from the synthetic weights, after `edit` may change the list.
struct OwnedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};
void write_tiny_checkpoint(const fs::path& dir, const std::function<void(std::vector<OwnedTensor>&)>& edit) {
  const SyntheticSource src(Shape::Tiny, 1);
  std::vector<OwnedTensor> tensors;
  for (const auto& [name, shape] : src.tensors()) tensors.push_back({name, shape, read_all(src, name, shape)});
  edit(tensors);
  std::vector<TensorToWrite> w;
  for (const auto& t : tensors)
    w.push_back({t.name, DType::F32, t.shape, t.data.data(), t.data.size() * sizeof(float)});
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << src.config().to_json().dump(2);
  write_safetensors(dir / "model.safetensors", w);
}

TEST(Synthetic, ParseShapeAndConfig) {
  EXPECT_EQ(parse_shape("bitnet-large"), Shape::BitnetLarge);
  EXPECT_EQ(parse_shape("tiny"), Shape::Tiny);
  EXPECT_STREQ(shape_name(Shape::BitnetLarge), "bitnet-large");
  EXPECT_STREQ(shape_name(Shape::Tiny), "tiny");
  expect_error_mentions([] { parse_shape("huge"); }, {"'huge'", "bitnet-large", "tiny", "tiny-gqa", "bitnet-large-gqa4"});
  EXPECT_EQ(config_for(Shape::BitnetLarge), ModelConfig::bitnet_large());
  EXPECT_EQ(config_for(Shape::Tiny), ModelConfig::tiny());
  EXPECT_EQ(parse_shape("tiny-gqa"), Shape::TinyGqa);
  EXPECT_EQ(parse_shape("bitnet-large-gqa4"), Shape::BitnetLargeGqa4);
  EXPECT_STREQ(shape_name(Shape::TinyGqa), "tiny-gqa");
  EXPECT_STREQ(shape_name(Shape::BitnetLargeGqa4), "bitnet-large-gqa4");
  EXPECT_EQ(config_for(Shape::TinyGqa), ModelConfig::tiny_gqa());
  EXPECT_EQ(config_for(Shape::BitnetLargeGqa4), ModelConfig::bitnet_large_gqa4());
  const SyntheticSource s(Shape::Tiny, 1);
  EXPECT_EQ(s.describe(), "synthetic:tiny (seed 1)");
  EXPECT_EQ(SyntheticSource(Shape::BitnetLarge, 42).describe(), "synthetic:bitnet-large (seed 42)");
}

TEST(Synthetic, ExpectedTensorsFollowModelMd) {
  const ModelConfig c = ModelConfig::bitnet_large();
  const TensorList t = expected_tensors(c);
  ASSERT_EQ(t.size(), 2u + 11u * 24u);
  EXPECT_EQ(t.front().first, "model.embed_tokens.weight");
  EXPECT_EQ(t.front().second, (std::vector<int64_t>{32002, 1536}));
  EXPECT_EQ(t.back().first, "model.norm.weight");
  const std::vector<std::pair<std::string, std::vector<int64_t>>> layer0 = {
      {"model.layers.0.input_layernorm.weight", {1536}},
      {"model.layers.0.self_attn.q_proj.weight", {1536, 1536}},
      {"model.layers.0.self_attn.k_proj.weight", {1536, 1536}},
      {"model.layers.0.self_attn.v_proj.weight", {1536, 1536}},
      {"model.layers.0.self_attn.o_proj.weight", {1536, 1536}},
      {"model.layers.0.self_attn.inner_attn_ln.weight", {1536}},
      {"model.layers.0.post_attention_layernorm.weight", {1536}},
      {"model.layers.0.mlp.gate_proj.weight", {4096, 1536}},
      {"model.layers.0.mlp.up_proj.weight", {4096, 1536}},
      {"model.layers.0.mlp.down_proj.weight", {1536, 4096}},
      {"model.layers.0.mlp.ffn_layernorm.weight", {4096}}};
  for (size_t i = 0; i < layer0.size(); ++i) EXPECT_EQ(t[1 + i], layer0[i]);
  EXPECT_EQ(t[1 + 11 * 23].first, "model.layers.23.input_layernorm.weight");
  int64_t params = 0;
  for (const auto& [name, shape] : t) params += numel(shape);
  EXPECT_EQ(params, 728842752);  // MODEL.md
  EXPECT_TRUE(is_ignored_tensor("model.layers.3.self_attn.rotary_emb.inv_freq"));
  EXPECT_FALSE(is_ignored_tensor("lm_head.weight"));
}

TEST(Synthetic, DeterministicAndSeedDependent) {
  const SyntheticSource a(Shape::Tiny, 1), b(Shape::Tiny, 1), c(Shape::Tiny, 2);
  for (const auto& [name, shape] : a.tensors()) {
    const auto va = read_all(a, name, shape);
    EXPECT_TRUE(same_bits(va, read_all(b, name, shape))) << name;
    EXPECT_FALSE(same_bits(va, read_all(c, name, shape))) << name;
  }
  // Different tensors of the same shape differ.
  const std::vector<int64_t> sq = {192, 192};
  EXPECT_FALSE(same_bits(read_all(a, "model.layers.0.self_attn.q_proj.weight", sq),
                         read_all(a, "model.layers.0.self_attn.k_proj.weight", sq)));
  EXPECT_FALSE(same_bits(read_all(a, "model.layers.0.self_attn.q_proj.weight", sq),
                         read_all(a, "model.layers.1.self_attn.q_proj.weight", sq)));
}

// Pinned values: the generator is integer arithmetic plus one IEEE multiply, so these bits are
// the same on every host and compiler. A change here changes every synthetic checkpoint.
TEST(Synthetic, PinnedValues) {
  const SyntheticSource s(Shape::Tiny, 1);
  float v[4];
  s.generate("model.embed_tokens.weight", 0, 4, v);
  const uint32_t embed_bits[4] = {0x3c4b62d7u, 0x3c33e87cu, 0xbc986852u, 0x3c7b77c3u};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(std::bit_cast<uint32_t>(v[i]), embed_bits[i]) << i << " " << v[i];
  s.generate("model.norm.weight", 188, 4, v);
  const uint32_t norm_bits[4] = {0x3f7b30a6u, 0x3f7ba442u, 0x3f854469u, 0x3f733392u};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(std::bit_cast<uint32_t>(v[i]), norm_bits[i]) << i << " " << v[i];
  // A checksum over every value of tiny seed 1.
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& [name, shape] : s.tensors()) {
    const auto vals = read_all(s, name, shape);
    for (float x : vals) {
      h ^= std::bit_cast<uint32_t>(x);
      h *= 0x100000001b3ull;
    }
  }
  EXPECT_EQ(h, 0xe21aef5287953203ull) << std::hex << h;
}

TEST(Synthetic, GenerateRangesEqualThreadedRead) {
  const SyntheticSource s(Shape::BitnetLarge, 7);
  const std::string name = "model.layers.5.mlp.gate_proj.weight";
  const std::vector<int64_t> shape = {4096, 1536};
  const auto all = read_all(s, name, shape);  // 6.3M elements: the 2-thread path
  const int64_t n = numel(shape);
  for (int64_t begin : {int64_t{0}, int64_t{1}, n / 2 - 3, n / 2, n - 1000}) {
    std::vector<float> part(std::min<int64_t>(1000, n - begin));
    s.generate(name, begin, static_cast<int64_t>(part.size()), part.data());
    EXPECT_EQ(std::memcmp(part.data(), all.data() + begin, part.size() * sizeof(float)), 0) << begin;
  }
  float x;
  expect_error_mentions([&] { s.generate(name, n, 1, &x); }, {"'" + name + "'", "outside"});
  expect_error_mentions([&] { s.generate(name, -1, 1, &x); }, {"'" + name + "'"});
}

TEST(Synthetic, WeightDistributions) {
  const SyntheticSource s(Shape::BitnetLarge, 1);
  const auto w = read_all(s, "model.layers.0.self_attn.q_proj.weight", {1536, 1536});
  double sum = 0, sum_sq = 0, sum_abs = 0;
  float max_abs = 0;
  for (float x : w) {
    sum += x;
    sum_sq += static_cast<double>(x) * x;
    sum_abs += std::fabs(x);
    max_abs = std::max(max_abs, std::fabs(x));
  }
  const double n = static_cast<double>(w.size());
  const double mean = sum / n, stddev = std::sqrt(sum_sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 1e-4);
  EXPECT_NEAR(stddev, 0.02, 0.0005);
  EXPECT_LE(max_abs, 0.0693f);
  // MODEL.md weight_quant: t = clamp(round(W / mean|W|), -1, 1).
  const float scale = 1.0f / std::max(static_cast<float>(sum_abs / n), 1e-5f);
  size_t zeros = 0, plus = 0, minus = 0;
  for (float x : w) {
    const float t = std::clamp(std::nearbyint(x * scale), -1.0f, 1.0f);
    zeros += t == 0.0f;
    plus += t == 1.0f;
    minus += t == -1.0f;
  }
  const double zero_fraction = static_cast<double>(zeros) / n;
  EXPECT_GE(zero_fraction, 0.25);
  EXPECT_LE(zero_fraction, 0.40);
  EXPECT_NEAR(static_cast<double>(plus) / static_cast<double>(minus), 1.0, 0.01);
  std::printf("q_proj: std %.5f, mean|W| %.5f, zero fraction %.4f\n", stddev, sum_abs / n, zero_fraction);

  const auto e = read_all(s, "model.embed_tokens.weight", {32002, 1536});
  double e_sq = 0;
  for (float x : e) e_sq += static_cast<double>(x) * x;
  EXPECT_NEAR(std::sqrt(e_sq / static_cast<double>(e.size())), 0.02, 0.0005);

  for (const char* norm : {"model.layers.3.mlp.ffn_layernorm.weight", "model.norm.weight"}) {
    const std::vector<int64_t> shape = {std::string(norm) == "model.norm.weight" ? 1536 : 4096};
    const auto g = read_all(s, norm, shape);
    double gs = 0;
    for (float x : g) {
      EXPECT_GE(x, 1.0f - 0.0625f);
      EXPECT_LT(x, 1.0f + 0.0625f);
      gs += x;
    }
    EXPECT_NEAR(gs / static_cast<double>(g.size()), 1.0, 0.005) << norm;
  }
}

TEST(Synthetic, ReadErrorsNameSourceAndTensor) {
  const SyntheticSource s(Shape::Tiny, 3);
  std::vector<float> buf(192 * 512);
  expect_error_mentions([&] { s.read("lm_head.weight", {512, 192}, buf.data()); },
                        {"synthetic:tiny (seed 3)", "'lm_head.weight'"});
  expect_error_mentions([&] { s.read("model.layers.0.mlp.down_proj.weight", {512, 192}, buf.data()); },
                        {"synthetic:tiny (seed 3)", "'model.layers.0.mlp.down_proj.weight'", "[192, 512]"});
}

TEST(Synthetic, CheckpointRoundTripEqualsSyntheticSource) {
  TempDir dir;
  const fs::path ckpt = dir.path / "tiny";
  write_synthetic_checkpoint(Shape::Tiny, 5, ckpt);
  EXPECT_TRUE(fs::exists(ckpt / "config.json"));
  EXPECT_TRUE(fs::exists(ckpt / "model.safetensors"));
  EXPECT_FALSE(fs::exists(ckpt / "tokenizer.model"));
  std::ifstream note_in(ckpt / "TOKENIZER.md");
  std::stringstream note;
  note << note_in.rdbuf();
  EXPECT_NE(note.str().find("tokenizer.model"), std::string::npos);
  EXPECT_NE(note.str().find("noise"), std::string::npos);

  const SyntheticSource syn(Shape::Tiny, 5);
  const CheckpointSource cp(ckpt);
  EXPECT_EQ(cp.config(), syn.config());
  EXPECT_EQ(cp.describe(), ckpt.string());
  EXPECT_EQ(cp.file().find("lm_head.weight"), nullptr);
  EXPECT_EQ(cp.file().metadata().at("format"), "pt");
  ASSERT_EQ(cp.file().tensors().size(), syn.tensors().size());
  for (size_t i = 0; i < syn.tensors().size(); ++i) {
    const auto& [name, shape] = syn.tensors()[i];
    EXPECT_EQ(cp.file().tensors()[i].name, name);  // file order = MODEL.md order
    EXPECT_EQ(cp.file().tensors()[i].dtype, DType::F32);
    EXPECT_TRUE(same_bits(read_all(cp, name, shape), read_all(syn, name, shape))) << name;
  }
  expect_error_mentions([&] { read_all(cp, "model.norm.weight", {193}); }, {"model.safetensors", "'model.norm.weight'"});
  expect_error_mentions([&] { read_all(cp, "lm_head.weight", {512, 192}); }, {"model.safetensors", "'lm_head.weight'"});
}

TEST(Synthetic, CheckpointWithWrongShapeNamesTensor) {
  TempDir dir;
  write_tiny_checkpoint(dir.path, [](std::vector<OwnedTensor>& t) {
    for (auto& x : t)
      if (x.name == "model.layers.1.mlp.up_proj.weight") x.shape = {192, 512};
  });
  expect_error_mentions([&] { CheckpointSource cp(dir.path); },
                        {(dir.path / "model.safetensors").string(), "'model.layers.1.mlp.up_proj.weight'",
                         "shape [192, 512], expected [512, 192]"});
}

// Grouped-query shapes: k_proj and v_proj have num_kv_heads x 96 rows (the MODEL.md / HF
// layout), the checkpoint round-trips, and a full-width k_proj under a GQA config.json is refused
// naming the tensor and the expected shape.
std::vector<int64_t> shape_in(const SyntheticSource& src, const std::string& name) {
  for (const auto& [n, shape] : src.tensors())
    if (n == name) return shape;
  return {};
}

TEST(Synthetic, GroupedQueryCheckpoint) {
  const SyntheticSource src(Shape::TinyGqa, 2);
  EXPECT_EQ(shape_in(src, "model.layers.0.self_attn.q_proj.weight"), (std::vector<int64_t>{384, 384}));
  EXPECT_EQ(shape_in(src, "model.layers.1.self_attn.k_proj.weight"), (std::vector<int64_t>{192, 384}));
  EXPECT_EQ(shape_in(src, "model.layers.1.self_attn.v_proj.weight"), (std::vector<int64_t>{192, 384}));
  EXPECT_EQ(shape_in(SyntheticSource(Shape::BitnetLargeGqa4, 1), "model.layers.23.self_attn.v_proj.weight"),
            (std::vector<int64_t>{384, 1536}));
  TempDir dir;
  write_synthetic_checkpoint(Shape::TinyGqa, 2, dir.path);
  const CheckpointSource cp(dir.path);
  EXPECT_EQ(cp.config(), ModelConfig::tiny_gqa());
  const std::string k = "model.layers.0.self_attn.k_proj.weight";
  EXPECT_TRUE(same_bits(read_all(cp, k, {192, 384}), read_all(src, k, {192, 384})));
  nlohmann::json j = ModelConfig::tiny_gqa().to_json();
  j["num_key_value_heads"] = 4;  // the file's k_proj has 192 rows, this config says 384
  std::ofstream(dir.path / "config.json") << j.dump();
  expect_error_mentions([&] { CheckpointSource bad(dir.path); },
                        {(dir.path / "model.safetensors").string(), "'model.layers.0.self_attn.k_proj.weight'",
                         "shape [192, 384], expected [384, 384]"});
}

// The 2B4T layer (model_type bitnet): its sub-norms under the published names, in a
// checkpoint that reads back; bitnet-2b4t's published shape is named and sized.
TEST(Synthetic, Bitnet2b4tShapesUseThePublishedNames) {
  EXPECT_EQ(parse_shape("bitnet-2b4t"), Shape::Bitnet2b4t);
  EXPECT_EQ(parse_shape("tiny-2b4t"), Shape::Tiny2b4t);
  EXPECT_EQ(config_for(Shape::Bitnet2b4t), ModelConfig::bitnet_2b4t());
  const SyntheticSource big(Shape::Bitnet2b4t, 1);
  EXPECT_EQ(shape_in(big, "model.layers.29.self_attn.k_proj.weight"), (std::vector<int64_t>{640, 2560}));
  EXPECT_EQ(shape_in(big, "model.layers.0.mlp.ffn_sub_norm.weight"), (std::vector<int64_t>{6912}));
  EXPECT_EQ(shape_in(big, "model.embed_tokens.weight"), (std::vector<int64_t>{128256, 2560}));
  const SyntheticSource src(Shape::Tiny2b4t, 3);
  EXPECT_EQ(shape_in(src, "model.layers.1.self_attn.attn_sub_norm.weight"), (std::vector<int64_t>{384}));
  EXPECT_EQ(shape_in(src, "model.layers.1.mlp.ffn_sub_norm.weight"), (std::vector<int64_t>{512}));
  EXPECT_TRUE(shape_in(src, "model.layers.1.self_attn.inner_attn_ln.weight").empty());
  TempDir dir;
  write_synthetic_checkpoint(Shape::Tiny2b4t, 3, dir.path);
  const CheckpointSource cp(dir.path);
  EXPECT_EQ(cp.config(), ModelConfig::tiny_2b4t());
  const std::string n = "model.layers.0.mlp.ffn_sub_norm.weight";
  EXPECT_TRUE(same_bits(read_all(cp, n, {512}), read_all(src, n, {512})));
  // A llama-named checkpoint read as model_type bitnet lacks the bitnet names.
  nlohmann::json j = ModelConfig::tiny_2b4t().to_json();
  TempDir llama;
  write_synthetic_checkpoint(Shape::TinyGqa, 3, llama.path);
  std::ofstream(llama.path / "config.json") << j.dump();
  expect_error_mentions([&] { CheckpointSource bad(llama.path); },
                        {"'model.layers.0.self_attn.attn_sub_norm.weight'", "missing"});
}

TEST(Synthetic, CheckpointWithMissingTensorNamesTensor) {
  TempDir dir;
  write_tiny_checkpoint(dir.path, [](std::vector<OwnedTensor>& t) {
    std::erase_if(t, [](const OwnedTensor& x) { return x.name == "model.layers.0.self_attn.inner_attn_ln.weight"; });
  });
  expect_error_mentions([&] { CheckpointSource cp(dir.path); },
                        {"'model.layers.0.self_attn.inner_attn_ln.weight'", "missing", "[192]"});
}

TEST(Synthetic, CheckpointIgnoresInvFreq) {
  TempDir dir;
  write_tiny_checkpoint(dir.path, [](std::vector<OwnedTensor>& t) {
    t.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", {48}, std::vector<float>(48, 0.5f)});
    t.push_back({"model.layers.1.self_attn.rotary_emb.inv_freq", {48}, std::vector<float>(48, 0.5f)});
  });
  const CheckpointSource cp(dir.path);
  EXPECT_EQ(cp.config().num_layers, 2);
}

// An unknown tensor would be ignored, so the logits would be another model's (an
// lm_head.weight means the embedding is not tied): it is refused, naming tensor and file.
TEST(Synthetic, CheckpointWithAnUnknownTensorIsRefusedNamingIt) {
  TempDir dir;
  write_tiny_checkpoint(dir.path, [](std::vector<OwnedTensor>& t) {
    t.push_back({"lm_head.weight", {512, 192}, std::vector<float>(512 * 192, 0.01f)});
  });
  expect_error_mentions([&] { CheckpointSource cp(dir.path); },
                        {(dir.path / "model.safetensors").string(), "unknown tensor 'lm_head.weight'", "[512, 192]"});
}

TEST(Synthetic, CheckpointWithBadConfigNamesConfigFile) {
  TempDir dir;
  write_tiny_checkpoint(dir.path, [](std::vector<OwnedTensor>&) {});
  nlohmann::json j = ModelConfig::tiny().to_json();
  j["num_key_value_heads"] = 3;  // does not divide tiny's 2 query heads
  std::ofstream(dir.path / "config.json") << j.dump();
  expect_error_mentions([&] { CheckpointSource cp(dir.path); },
                        {(dir.path / "config.json").string(), "num_key_value_heads"});
  fs::remove(dir.path / "config.json");
  expect_error_mentions([&] { CheckpointSource cp(dir.path); }, {(dir.path / "config.json").string()});
  std::ofstream(dir.path / "config.json") << ModelConfig::tiny().to_json().dump();
  fs::remove(dir.path / "model.safetensors");
  expect_error_mentions([&] { CheckpointSource cp(dir.path); }, {(dir.path / "model.safetensors").string()});
}

TEST(Synthetic, PythonReaderListsModelMdNames) {
  if (std::system("python3 --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not available";
  TempDir dir;
  write_synthetic_checkpoint(Shape::Tiny, 1, dir.path);
  const fs::path tool = fs::path(BITSIM_SOURCE_DIR) / "tools" / "read_safetensors.py";
  const fs::path out = dir.path / "listing.txt";
  auto run = [&](const fs::path& file) {
    const std::string cmd = "python3 '" + tool.string() + "' '" + file.string() + "' > '" + out.string() + "' 2>&1";
    const int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  ASSERT_EQ(run(dir.path / "model.safetensors"), 0);
  std::ifstream in(out);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const TensorList expected = expected_tensors(ModelConfig::tiny());
  ASSERT_EQ(lines.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    std::string shape = "[";
    for (size_t k = 0; k < expected[i].second.size(); ++k)
      shape += (k ? ", " : "") + std::to_string(expected[i].second[k]);
    shape += "]";
    EXPECT_EQ(lines[i], expected[i].first + "\tF32\t" + shape);
  }

  // A corrupted file: non-zero exit.
  const fs::path bad = dir.path / "bad.safetensors";
  fs::copy_file(dir.path / "model.safetensors", bad);
  fs::resize_file(bad, fs::file_size(bad) - 4);
  EXPECT_NE(run(bad), 0);
}

}  // namespace
}  // namespace bitsim::model
