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
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "support/packable_checkpoint.h"
#include "support/temp_dir.h"
#include "model/model_loader.h"
#include "model/packed_release.h"
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


// ---- The packed ternary release (model/packed_release.h, docs/packed-image.md) ------------

// Worked by hand from the rule "field i (bits 2i+1..2i) of packed[r][c] holds W[i*R + r][c] + 1,
// R = out/4; code 0 = -1, 1 = 0, 2 = +1". out = 8, in = 2, so R = 2 packed rows of 2 bytes:
//
//   W row:  0: [+1 -1]   1: [ 0 +1]   2: [-1  0]   3: [+1 +1]     (all eight rows distinct)
//           4: [ 0  0]   5: [-1 -1]   6: [+1  0]   7: [ 0 -1]
//
//   packed[0][0]: fields 0..3 = W[0][0], W[2][0], W[4][0], W[6][0] = +1 -1 0 +1 -> codes 2 0 1 2
//                 = 2 | 0<<2 | 1<<4 | 2<<6 = 0b10'01'00'10 = 0x92
//   packed[0][1]: W[0][1], W[2][1], W[4][1], W[6][1] = -1 0 0 0 -> codes 0 1 1 1 = 0b01'01'01'00 = 0x54
//   packed[1][0]: W[1][0], W[3][0], W[5][0], W[7][0] = 0 +1 -1 0 -> codes 1 2 0 1 = 0b01'00'10'01 = 0x49
//   packed[1][1]: W[1][1], W[3][1], W[5][1], W[7][1] = +1 +1 -1 -1 -> codes 2 2 0 0 = 0b00'00'10'10 = 0x0A
//
// Read as four consecutive rows per byte (4r + i) instead, 0x92 would make rows 0..3 of
// column 0 +1 -1 0 +1 instead of +1 0 -1 +1.
const std::vector<uint8_t> kHandPacked{0x92, 0x54, 0x49, 0x0A};
const std::vector<int8_t> kHandTrits{+1, -1, 0, +1, -1, 0, +1, +1, 0, 0, -1, -1, +1, 0, 0, -1};

TEST(PackedRelease, HandWorkedBytesUnpackToTheirMatrixAndBack) {
  std::vector<int8_t> trits(16, 9);
  unpack_ternary(kHandPacked.data(), 8, 2, trits.data(), "hand");
  EXPECT_EQ(trits, kHandTrits);
  TernaryMatrix m;
  m.rows = 8;
  m.cols = 2;
  m.trits = kHandTrits;
  EXPECT_EQ(pack_ternary(m), kHandPacked);
  // The hand case through a checkpoint file: a one-layer-free check of the reader's indexing
  // (packed row r, column c at byte r * cols + c).
  TempDir dir;
  const uint16_t scale = 0x4200;  // BF16 32.0
  write_safetensors(dir.path / "m.safetensors",
                    {{"p.q_proj.weight", DType::U8, {2, 2}, kHandPacked.data(), kHandPacked.size()},
                     {"p.q_proj.weight_scale", DType::BF16, {1}, &scale, sizeof scale}});
  const SafetensorsFile f = SafetensorsFile::open(dir.path / "m.safetensors");
  const TernaryMatrix r = read_packed_projection(f, "p.q_proj.weight", 8, 2);
  EXPECT_EQ(r.trits, kHandTrits);
  EXPECT_EQ(r.scale, 1.0f / 32.0f);
  // The code 3 and a non-ternary value are refused.
  std::vector<uint8_t> bad = kHandPacked;
  bad[3] |= 0x30;  // field 2 of packed[1][1]: weight row 2 * 2 + 1 = 5
  expect_error_mentions([&] { unpack_ternary(bad.data(), 8, 2, trits.data(), "F: tensor 'T'"); },
                        {"F: tensor 'T'", "byte [1, 1]", "code 3", "field 2", "weight row 5"});
  m.trits[5] = 2;
  EXPECT_THROW(pack_ternary(m), Error);
  m.rows = 6;
  EXPECT_THROW(pack_ternary(m), Error);
}

TEST(PackedRelease, ScaleIsTheReciprocalOfWeightScale) {
  EXPECT_EQ(w_scale_of_weight_scale(4.0f, "x"), 0.25f);
  EXPECT_EQ(w_scale_of_weight_scale(3.0f, "x"), 1.0f / 3.0f);
  EXPECT_EQ(f32_to_bf16(30.5f), 0x41F4);                 // exact
  EXPECT_EQ(f32_to_bf16(bf16_to_f32(0x3F80) + 0x1p-8f), 0x3F80);  // a tie: to even
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);     // above the tie
  EXPECT_EQ(f32_to_bf16(bf16_to_f32(0x3F81) + 0x1p-8f), 0x3F82);  // a tie from odd: up
  EXPECT_EQ(weight_scale_bf16(0.25f), 0x4080);            // bf16(4.0)
  for (float bad : {0.0f, -0.0f, -2.0f, std::nanf(""), INFINITY, 1e-45f})
    expect_error_mentions([&] { w_scale_of_weight_scale(bad, "F: tensor 'S'"); }, {"F: tensor 'S'", "weight_scale"});
}

// make-model --format packed: the trits of every projection are the ones the latent weights
// ternarize to (rows all distinct, so a row-order mistake shows), each scale 1.0f / the
// weight_scale written, within BF16's precision of the latent mean|W|; the rest unchanged.
TEST(PackedRelease, SyntheticCheckpointReadsBackTheTritsAndScales) {
  TempDir dir;
  write_synthetic_checkpoint(Shape::Tiny2b4t, 7, dir.path, CheckpointFormat::Packed);
  const CheckpointSource cp(dir.path);
  EXPECT_EQ(cp.config(), ModelConfig::tiny_2b4t());
  const TensorInfo& q = cp.file().at("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(q.dtype, DType::U8);
  EXPECT_EQ(q.shape, (std::vector<int64_t>{96, 384}));
  EXPECT_EQ(cp.file().at("model.layers.1.mlp.down_proj.weight").shape, (std::vector<int64_t>{96, 512}));
  EXPECT_EQ(cp.file().at("model.layers.0.self_attn.k_proj.weight").shape, (std::vector<int64_t>{48, 384}));
  const TensorInfo& qs = cp.file().at("model.layers.0.self_attn.q_proj.weight_scale");
  EXPECT_EQ(qs.dtype, DType::BF16);
  EXPECT_EQ(qs.shape, (std::vector<int64_t>{1}));
  EXPECT_EQ(cp.file().at("model.embed_tokens.weight").dtype, DType::F32);
  std::ifstream cfg_in(dir.path / "config.json");
  const auto cfg = nlohmann::json::parse(cfg_in);
  EXPECT_EQ(cfg.at("quantization_config").at("quant_method"), "bitnet");
  EXPECT_EQ(cfg.at("quantization_config").at("quantization_mode"), "offline");

  const TernaryModel latent = load_ternary_model(SyntheticSource(Shape::Tiny2b4t, 7));
  const TernaryModel packed = load_ternary_model(cp);
  ASSERT_EQ(packed.layers.size(), latent.layers.size());
  const char* names[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                         "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
  for (size_t l = 0; l < latent.layers.size(); ++l) {
    const auto& A = latent.layers[l];
    const auto& B = packed.layers[l];
    const TernaryMatrix* a[] = {&A.q, &A.k, &A.v, &A.o, &A.gate, &A.up, &A.down};
    const TernaryMatrix* b[] = {&B.q, &B.k, &B.v, &B.o, &B.gate, &B.up, &B.down};
    for (int k = 0; k < 7; ++k) {
      const std::string name = fmt::format("model.layers.{}.{}.weight", l, names[k]);
      std::set<std::string> rows;
      for (int r = 0; r < a[k]->rows; ++r)
        rows.insert(std::string(reinterpret_cast<const char*>(a[k]->row(r)), size_t(a[k]->cols)));
      ASSERT_EQ(rows.size(), size_t(a[k]->rows)) << name << ": rows not distinct, the test would miss a row order";
      ASSERT_EQ(b[k]->rows, a[k]->rows) << name;
      ASSERT_EQ(b[k]->cols, a[k]->cols) << name;
      EXPECT_TRUE(b[k]->trits == a[k]->trits) << name;
      const float ws = cp.file().read_f32(weight_scale_name(name)).at(0);
      EXPECT_EQ(b[k]->scale, 1.0f / ws) << name;
      EXPECT_NEAR(double(ws) * double(a[k]->scale), 1.0, 1.0 / 256) << name;
    }
    EXPECT_EQ(B.input_norm, A.input_norm);
    EXPECT_EQ(B.inner_attn_norm, A.inner_attn_norm);
    EXPECT_EQ(B.post_attn_norm, A.post_attn_norm);
    EXPECT_EQ(B.ffn_norm, A.ffn_norm);
  }
  EXPECT_TRUE(packed.embed == latent.embed);
  EXPECT_EQ(packed.final_norm, latent.final_norm);
  EXPECT_TRUE(packed.lm_head.trits == latent.lm_head.trits);
  EXPECT_EQ(packed.lm_head.scale, latent.lm_head.scale);
}

bool same_ternary(const TernaryMatrix& a, const TernaryMatrix& b) {
  return a.rows == b.rows && a.cols == b.cols && std::bit_cast<uint32_t>(a.scale) == std::bit_cast<uint32_t>(b.scale) &&
         a.trits == b.trits;
}

// A model whose every w_scale is the reciprocal of a BF16 value (support/packable_checkpoint.h)
// packs without loss: its packed copy loads to the same model, scales bit for bit.
TEST(PackedRelease, PackableCheckpointAndItsPackedCopyLoadTheSameModel) {
  TempDir latent_dir, packed_dir;
  test::write_packable_checkpoint(Shape::Tiny2b4t, 11, latent_dir.path);
  test::write_packed_copy(latent_dir.path, packed_dir.path);
  const CheckpointSource lsrc(latent_dir.path), psrc(packed_dir.path);
  EXPECT_EQ(psrc.file().at("model.layers.1.mlp.up_proj.weight").dtype, DType::U8);
  const TernaryModel a = load_ternary_model(lsrc), b = load_ternary_model(psrc);
  for (size_t l = 0; l < a.layers.size(); ++l) {
    const auto& A = a.layers[l];
    const auto& B = b.layers[l];
    EXPECT_TRUE(same_ternary(A.q, B.q) && same_ternary(A.k, B.k) && same_ternary(A.v, B.v) && same_ternary(A.o, B.o) &&
                same_ternary(A.gate, B.gate) && same_ternary(A.up, B.up) && same_ternary(A.down, B.down))
        << "layer " << l;
    // The construction holds: q of layer l is the checkpoint's matrix 7 l, b = 30 + 0.5 * 7 l.
    EXPECT_EQ(A.q.scale, 1.0f / (30.0f + 3.5f * float(l))) << "layer " << l;
    EXPECT_EQ(zero_fraction(A.q), 0.5) << "layer " << l;
    EXPECT_TRUE(A.input_norm == B.input_norm && A.ffn_norm == B.ffn_norm && A.inner_attn_norm == B.inner_attn_norm &&
                A.post_attn_norm == B.post_attn_norm);
  }
  EXPECT_TRUE(a.embed == b.embed);
  EXPECT_TRUE(same_ternary(a.lm_head, b.lm_head));
}

// A packed checkpoint's tensors as bytes, to damage one and write the file again.
struct RawTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
void rewrite_tensors(const fs::path& file, const std::function<void(std::vector<RawTensor>&)>& edit) {
  std::vector<RawTensor> tensors;
  std::map<std::string, std::string> metadata;
  {
    const SafetensorsFile f = SafetensorsFile::open(file);
    for (const auto& t : f.tensors()) {
      const auto* p = reinterpret_cast<const uint8_t*>(f.raw(t));
      tensors.push_back({t.name, t.dtype, t.shape, std::vector<uint8_t>(p, p + (t.data_end - t.data_begin))});
    }
    for (const auto& [k, v] : f.metadata().items()) metadata[k] = v.get<std::string>();
  }
  edit(tensors);
  std::vector<TensorToWrite> w;
  for (const auto& t : tensors) w.push_back({t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size()});
  write_safetensors(file, w, metadata);
}
RawTensor& tensor_named(std::vector<RawTensor>& tensors, const std::string& name) {
  for (auto& t : tensors)
    if (t.name == name) return t;
  throw std::runtime_error("test: no tensor " + name);
}

// Bad packed tensors: each an Error naming the file and the tensor, at open (shape, scale) or
// at load (a code 3), never a wrong model.
TEST(PackedRelease, BadPackedTensorsAreRefusedNamingFileAndTensor) {
  TempDir good;
  write_synthetic_checkpoint(Shape::Tiny2b4t, 2, good.path, CheckpointFormat::Packed);
  const std::string q = "model.layers.0.self_attn.q_proj.weight", qs = q + "_scale";
  const std::string down = "model.layers.1.mlp.down_proj.weight";
  int n = 0;
  // A copy of the good checkpoint, edited; `load` also loads the model (where the bytes are read).
  auto refused = [&](const std::function<void(std::vector<RawTensor>&)>& edit, const std::vector<std::string>& needles,
                     bool load = false) {
    const fs::path dir = good.path.parent_path() / (good.path.filename().string() + "_bad" + std::to_string(n++));
    fs::remove_all(dir);
    fs::copy(good.path, dir);
    rewrite_tensors(dir / "model.safetensors", edit);
    std::vector<std::string> all = needles;
    all.push_back((dir / "model.safetensors").string());
    expect_error_mentions(
        [&] {
          const CheckpointSource cp(dir);
          if (load) load_ternary_model(cp);
        },
        all);
    fs::remove_all(dir);
  };

  // The code 3 in field 2 of down_proj's byte [1, 2] (R = 96: weight row 2 * 96 + 1 = 193).
  refused([&](auto& t) { tensor_named(t, down).bytes[1 * 512 + 2] |= 0x30; },
          {"'" + down + "'", "byte [1, 2]", "code 3", "field 2", "weight row 193"}, /*load=*/true);
  // Its shape: rows * 4 != out_features, columns != in_features, or the unpacked shape in U8.
  refused([&](auto& t) {
    auto& x = tensor_named(t, q);
    x.shape = {95, 384};
    x.bytes.resize(95 * 384);
  }, {"'" + q + "'", "shape [95, 384]", "expected [96, 384]"});
  refused([&](auto& t) {
    auto& x = tensor_named(t, q);
    x.shape = {96, 383};
    x.bytes.resize(96 * 383);
  }, {"'" + q + "'", "shape [96, 383]", "expected [96, 384]"});
  refused([&](auto& t) {
    auto& x = tensor_named(t, q);
    x.shape = {384, 384};
    x.bytes.assign(384 * 384, 0x55);
  }, {"'" + q + "'", "shape [384, 384]", "expected [96, 384]"});
  // Its weight_scale: missing, of another shape or dtype, zero, negative, NaN, Inf.
  refused([&](auto& t) { std::erase_if(t, [&](const RawTensor& x) { return x.name == qs; }); },
          {"'" + q + "'", "'" + qs + "'", "missing"});
  refused([&](auto& t) {
    auto& x = tensor_named(t, qs);
    x.shape = {2};
    x.bytes = {0x80, 0x40, 0x80, 0x40};
  }, {"'" + qs + "'", "shape [2]"});
  refused([&](auto& t) { tensor_named(t, qs).shape = {1, 1}; }, {"'" + qs + "'", "shape [1, 1]"});
  refused([&](auto& t) {
    auto& x = tensor_named(t, qs);
    x.dtype = DType::U8;
    x.bytes = {4};
  }, {"'" + qs + "'", "U8"});
  for (const uint16_t bits : {uint16_t(0x0000), uint16_t(0x8000), uint16_t(0xC200), uint16_t(0x7FC0), uint16_t(0x7F80),
                              uint16_t(0xFF80)})
    refused([&](auto& t) {
      auto& x = tensor_named(t, qs);
      std::memcpy(x.bytes.data(), &bits, 2);
    }, {"'" + qs + "'"});
  // A U8 norm, and a scale beside a float projection (one matrix in two conventions).
  refused([&](auto& t) {
    auto& x = tensor_named(t, "model.norm.weight");
    x.dtype = DType::U8;
    x.bytes.assign(384, 0x55);
  }, {"'model.norm.weight'", "U8", "only the projections"});
  TempDir latent;
  write_synthetic_checkpoint(Shape::Tiny2b4t, 2, latent.path);
  rewrite_tensors(latent.path / "model.safetensors", [&](auto& t) {
    const uint16_t one = 0x3F80;
    t.push_back({qs, DType::BF16, {1}, {uint8_t(one & 0xff), uint8_t(one >> 8)}});
  });
  expect_error_mentions([&] { CheckpointSource cp(latent.path); },
                        {(latent.path / "model.safetensors").string(), "'" + qs + "'", "'" + q + "' is F32, not U8"});
  // The good one loads, and a scale of shape [] is as good as [1].
  EXPECT_NO_THROW(load_ternary_model(CheckpointSource(good.path)));
  rewrite_tensors(good.path / "model.safetensors", [&](auto& t) { tensor_named(t, qs).shape = {}; });
  EXPECT_NO_THROW(load_ternary_model(CheckpointSource(good.path)));
}

}  // namespace
}  // namespace bitsim::model
