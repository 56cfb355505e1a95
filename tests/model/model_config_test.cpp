#include "model/model_config.h"


#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "base/error.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

namespace bitsim::model {
namespace {

namespace fs = std::filesystem;

using TempDir = test::MadeTempDir;

// The message of the bitsim::Error that ModelConfig::from_file(p) throws ("" if none).
std::string from_file_error(const fs::path& p) {
  return test::error_of([&] { ModelConfig::from_file(p); });
}

// The config.json of 1bitLLM/bitnet_b1_58-large as published (with keys bitsim ignores).
nlohmann::json checkpoint_json() {
  return nlohmann::json::parse(R"({
    "architectures": ["BitnetForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 1536,
    "initializer_range": 0.02, "input_bits": 8, "intermediate_size": 4096,
    "max_position_embeddings": 2048, "model_type": "llama", "num_attention_heads": 16,
    "num_hidden_layers": 24, "num_key_value_heads": 16, "pad_token_id": 32000,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 10000.0,
    "tie_word_embeddings": true, "torch_dtype": "float16", "transformers_version": "4.39.3",
    "use_cache": true, "vocab_size": 32002, "weight_bits": 1})");
}

const std::string kSource = "/ckpt/config.json";

// from_json must throw a bitsim::Error whose message names the file and `key`.
void expect_error(const nlohmann::json& j, const std::string& key, const std::string& also = "") {
  try {
    ModelConfig::from_json(j, kSource);
    ADD_FAILURE() << "no error for key " << key << " in " << j.dump();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(kSource), std::string::npos) << msg;
    EXPECT_NE(msg.find("'" + key + "'"), std::string::npos) << msg;
    if (!also.empty()) {
      EXPECT_NE(msg.find(also), std::string::npos) << msg;
    }
  }
}

nlohmann::json with(const std::string& key, const nlohmann::json& value) {
  nlohmann::json j = checkpoint_json();
  j[key] = value;
  return j;
}

TEST(ModelConfig, BitnetLargeMatchesModelMd) {
  const ModelConfig c = ModelConfig::bitnet_large();
  EXPECT_EQ(c.hidden_size, 1536);
  EXPECT_EQ(c.intermediate_size, 4096);
  EXPECT_EQ(c.num_layers, 24);
  EXPECT_EQ(c.num_heads, 16);
  EXPECT_EQ(c.num_kv_heads, 16);
  EXPECT_EQ(c.head_dim(), 96);
  EXPECT_EQ(c.vocab_size, 32002);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_EQ(c.rope_theta, 10000.0f);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ(c.pad_token_id, 32000);
  EXPECT_NO_THROW(c.validate("bitnet_large()"));
  EXPECT_EQ(c.shape_string(), "hidden 1536, FFN 4096, 24 layers, 16 heads x 96, vocab 32002");
  // The published config.json gives exactly this config.
  EXPECT_EQ(ModelConfig::from_json(checkpoint_json(), kSource), c);
}

TEST(ModelConfig, TinyIsValid) {
  const ModelConfig c = ModelConfig::tiny();
  EXPECT_NO_THROW(c.validate("tiny()"));
  EXPECT_EQ(c.head_dim(), 96);
  EXPECT_EQ(c.num_kv_heads, c.num_heads);
  EXPECT_LT(c.pad_token_id, c.vocab_size);
  EXPECT_EQ(c.shape_string(), "hidden 192, FFN 512, 2 layers, 2 heads x 96, vocab 512");
}

TEST(ModelConfig, JsonRoundTrip) {
  for (const ModelConfig& c : {ModelConfig::bitnet_large(), ModelConfig::tiny()}) {
    const nlohmann::json j = c.to_json();
    EXPECT_EQ(j.at("model_type"), "llama");
    EXPECT_EQ(j.at("torch_dtype"), "float16");
    EXPECT_EQ(j.at("architectures"), nlohmann::json::array({"BitnetForCausalLM"}));
    EXPECT_EQ(j.at("hidden_act"), "silu");
    EXPECT_TRUE(j.at("rope_scaling").is_null());
    EXPECT_EQ(j.at("num_hidden_layers"), c.num_layers);
    EXPECT_EQ(j.at("rms_norm_eps").get<double>(), 1e-5);  // written as 1e-05, not 9.99999974e-06
    EXPECT_EQ(ModelConfig::from_json(j, "roundtrip"), c);
    // and through text
    EXPECT_EQ(ModelConfig::from_json(nlohmann::json::parse(j.dump(2)), "roundtrip"), c);
  }
  ModelConfig no_pad = ModelConfig::tiny();
  no_pad.pad_token_id = ModelConfig::kNoPad;
  EXPECT_TRUE(no_pad.to_json().at("pad_token_id").is_null());
  EXPECT_EQ(ModelConfig::from_json(no_pad.to_json(), "roundtrip"), no_pad);
}

TEST(ModelConfig, FromFileReadsCheckpointConfig) {
  TempDir dir;
  const fs::path p = dir.path / "config.json";
  std::ofstream(p) << checkpoint_json().dump(2);
  EXPECT_EQ(ModelConfig::from_file(p), ModelConfig::bitnet_large());
}

TEST(ModelConfig, MissingRequiredKeyIsNamed) {
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                          "vocab_size", "rms_norm_eps", "max_position_embeddings"}) {
    nlohmann::json j = checkpoint_json();
    j.erase(key);
    expect_error(j, key, "missing");
  }
}

TEST(ModelConfig, OptionalKeysDefault) {
  nlohmann::json j = checkpoint_json();
  for (const char* key : {"num_key_value_heads", "rope_theta", "tie_word_embeddings", "bos_token_id", "eos_token_id",
                          "rope_scaling", "hidden_act", "model_type", "torch_dtype"})
    j.erase(key);
  ModelConfig expected = ModelConfig::bitnet_large();
  EXPECT_EQ(ModelConfig::from_json(j, kSource), expected);
  j.erase("pad_token_id");  // absent pad -> kNoPad
  expected.pad_token_id = ModelConfig::kNoPad;
  EXPECT_EQ(ModelConfig::from_json(j, kSource), expected);
  j["pad_token_id"] = nullptr;  // null pad -> kNoPad
  EXPECT_EQ(ModelConfig::from_json(j, kSource), expected);
}

TEST(ModelConfig, WrongJsonTypeIsNamed) {
  expect_error(with("hidden_size", "1536"), "hidden_size", "integer");
  expect_error(with("hidden_size", 1536.5), "hidden_size", "integer");
  expect_error(with("num_hidden_layers", nullptr), "num_hidden_layers");
  expect_error(with("vocab_size", nlohmann::json::array({32002})), "vocab_size");
  expect_error(with("vocab_size", 1ll << 40), "vocab_size", "out of range");
  expect_error(with("rms_norm_eps", "1e-5"), "rms_norm_eps", "number");
  expect_error(with("rope_theta", true), "rope_theta");
  expect_error(with("tie_word_embeddings", 1), "tie_word_embeddings", "true or false");
  expect_error(with("eos_token_id", nlohmann::json::array({2})), "eos_token_id");
  expect_error(with("hidden_act", 7), "hidden_act", "string");
  EXPECT_THROW(ModelConfig::from_json(nlohmann::json::array(), kSource), Error);
}

TEST(ModelConfig, NonPositiveSizesAreNamed) {
  expect_error(with("hidden_size", 0), "hidden_size", "positive");
  expect_error(with("intermediate_size", -4096), "intermediate_size", "positive");
  expect_error(with("num_hidden_layers", 0), "num_hidden_layers", "positive");
  expect_error(with("num_attention_heads", 0), "num_attention_heads", "positive");
  expect_error(with("num_key_value_heads", -1), "num_key_value_heads", "positive");
  expect_error(with("vocab_size", 0), "vocab_size", "positive");
  expect_error(with("max_position_embeddings", 0), "max_position_embeddings", "positive");
}

// A layer count (or width) whose weights could never be on the board is refused before
// anything is allocated by the shape, naming the field (2^31 - 1 layers once ran out of
// memory, 1e6 took 12 s and 1.6 GB to fail).
TEST(ModelConfig, AbsurdSizesAreRefusedBeforeAllocation) {
  for (int layers : {2147483647, 1000000, 50000}) expect_error(with("num_hidden_layers", layers), "num_hidden_layers", "4 GiB");
  expect_error(with("vocab_size", 2147483647), "vocab_size", "4 GiB");
  expect_error(with("intermediate_size", 2147483647), "intermediate_size", "4 GiB");
  expect_error(with("hidden_size", 2147483520), "hidden_size", "4 GiB");
  EXPECT_NO_THROW(ModelConfig::from_json(with("num_hidden_layers", 48), kSource));
  // Rows longer than the matmul engine's 4096 are split across calls (model::row_segments).
  EXPECT_NO_THROW(ModelConfig::from_json(with("intermediate_size", 8192), kSource));
}

TEST(ModelConfig, HeadShapeMustFitTheBoard) {
  // 1536 / 7 is not an integer
  expect_error(with("num_attention_heads", 7), "num_attention_heads", "multiple");
  // 1536 / 12 = 128: a head_dim a unit can be built for (attention.head_dim = 128; whether
  // the board's is, is the board config's check: host::check_model_head_dim)
  nlohmann::json j = with("num_attention_heads", 12);
  j["num_key_value_heads"] = 12;
  EXPECT_EQ(ModelConfig::from_json(j, kSource).head_dim(), 128);
  // 1536 / 16 = 96 is the board's; 1536 / 256 = 6 is no whole beat, 1536 / 4 = 384 wider
  // than any unit: refused naming the key and the range
  j = with("num_attention_heads", 256);
  j["num_key_value_heads"] = 256;
  expect_error(j, "num_attention_heads", "a multiple of 8 in [8, 256]");
  j = with("num_attention_heads", 4);
  j["num_key_value_heads"] = 4;
  expect_error(j, "num_attention_heads", "head_dim = hidden_size / num_attention_heads = 1536 / 4 = 384");
}

// Grouped-query attention: num_key_value_heads dividing num_attention_heads is accepted, with
// k_proj/v_proj of num_kv_heads x 96 rows; one that does not divide, or is < 1, is refused.
TEST(ModelConfig, GroupedQueryAttention) {
  const ModelConfig c = ModelConfig::from_json(with("num_key_value_heads", 4), kSource);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.group(), 4);
  EXPECT_EQ(c.kv_dim(), 384);
  EXPECT_EQ(c.kv_head(0), 0);
  EXPECT_EQ(c.kv_head(3), 0);
  EXPECT_EQ(c.kv_head(4), 1);
  EXPECT_EQ(c.kv_head(15), 3);
  EXPECT_EQ(c, ModelConfig::bitnet_large_gqa4());
  EXPECT_NE(c.shape_string().find("16 heads x 96 (4 K/V heads)"), std::string::npos) << c.shape_string();
  EXPECT_EQ(ModelConfig::from_json(with("num_key_value_heads", 1), kSource).kv_dim(), 96);
  expect_error(with("num_key_value_heads", 5), "num_key_value_heads", "does not divide num_attention_heads 16");
  expect_error(with("num_key_value_heads", 32), "num_key_value_heads", "does not divide");
  expect_error(with("num_key_value_heads", 0), "num_key_value_heads", "positive");
  const ModelConfig tiny = ModelConfig::tiny_gqa();
  EXPECT_EQ(tiny.hidden_size, 384);
  EXPECT_EQ(tiny.head_dim(), 96);
  EXPECT_EQ(tiny.num_heads, 4);
  EXPECT_EQ(tiny.num_kv_heads, 2);
  EXPECT_EQ(tiny.kv_dim(), 192);
  EXPECT_EQ(ModelConfig::from_json(tiny.to_json(), kSource), tiny);
}

TEST(ModelConfig, TokenIdsMustBeInsideVocabulary) {
  expect_error(with("bos_token_id", 32002), "bos_token_id", "vocab");
  expect_error(with("eos_token_id", -2), "eos_token_id");
  expect_error(with("pad_token_id", 40000), "pad_token_id", "vocab");
  expect_error(with("vocab_size", 32000), "pad_token_id");  // pad 32000 no longer < vocab
}

TEST(ModelConfig, EpsThetaAndScalingChecked) {
  expect_error(with("rms_norm_eps", 0.0), "rms_norm_eps", "(0, 1)");
  expect_error(with("rms_norm_eps", -1e-5), "rms_norm_eps");
  expect_error(with("rms_norm_eps", 1.0), "rms_norm_eps");
  expect_error(with("rope_theta", 0), "rope_theta");
  expect_error(with("rope_theta", -10000.0), "rope_theta");
  expect_error(with("rope_scaling", nlohmann::json{{"type", "linear"}, {"factor", 2.0}}), "rope_scaling",
               "not supported");
}

TEST(ModelConfig, UntiedEmbeddingsAndOtherActivationsRejected) {
  expect_error(with("tie_word_embeddings", false), "tie_word_embeddings", "lm_head");
  expect_error(with("hidden_act", "gelu"), "hidden_act", "silu");
  expect_error(with("hidden_act", "gelu"), "hidden_act", "relu2");
  expect_error(with("model_type", "mistral"), "model_type", "\"llama\" or \"bitnet\"");
  expect_error(with("model_type", 3), "model_type", "string");
}

// BitNet b1.58 2B4T's config.json (microsoft/bitnet-b1.58-2B-4T, docs/numerics.md): relu2,
// model_type bitnet, its GQA shape, rope_theta. It reads: its FFN rows of 6912 go to the matmul
// engine in two segment calls (model::row_segments), and its head_dim 128 is one an attention
// unit can be built for (attention.head_dim = 128; a unit of another d refuses it).
TEST(ModelConfig, Bitnet2b4tConfigIsRead) {
  const nlohmann::json j = nlohmann::json::parse(R"({
    "architectures": ["BitNetForCausalLM"], "bos_token_id": 128000, "eos_token_id": 128001,
    "hidden_act": "relu2", "hidden_size": 2560, "intermediate_size": 6912,
    "max_position_embeddings": 4096, "model_type": "bitnet", "num_attention_heads": 20,
    "num_hidden_layers": 30, "num_key_value_heads": 5, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16", "vocab_size": 128256})");
  const ModelConfig c = ModelConfig::bitnet_2b4t();
  EXPECT_EQ(c.head_dim(), 128);
  EXPECT_EQ(c.group(), 4);
  EXPECT_EQ(c.hidden_act, HiddenAct::Relu2);
  EXPECT_EQ(c.model_type, ModelType::Bitnet);
  EXPECT_STREQ(c.attn_sub_norm_name(), "self_attn.attn_sub_norm");
  EXPECT_STREQ(c.ffn_sub_norm_name(), "mlp.ffn_sub_norm");
  // The config reads whole: the FFN's rows of 6,912 are split across matmul calls, and
  // head_dim 128 is attention.head_dim's question, asked where the board meets the model.
  const ModelConfig read = ModelConfig::from_json(j, kSource);
  EXPECT_EQ(read.intermediate_size, 6912);
  EXPECT_EQ(read.head_dim(), 128);
  // Its head_dim 128 in a small model: tiny_2b4t_hd128 (2 query heads of 128, 1 K/V head).
  const ModelConfig h = ModelConfig::tiny_2b4t_hd128();
  EXPECT_EQ(h.head_dim(), 128);
  EXPECT_EQ(h.group(), 2);
  EXPECT_LE(h.intermediate_size, 4096);
  EXPECT_NO_THROW(h.validate("tiny_2b4t_hd128()"));
  // The same layer at the board's head_dim reads back as tiny-2b4t does.
  const ModelConfig t = ModelConfig::tiny_2b4t();
  EXPECT_NO_THROW(t.validate("tiny_2b4t()"));
  EXPECT_EQ(ModelConfig::from_json(t.to_json(), "roundtrip"), t);
  EXPECT_EQ(t.to_json().at("model_type"), "bitnet");
  EXPECT_EQ(t.to_json().at("hidden_act"), "relu2");
  EXPECT_EQ(t.to_json().at("architectures"), nlohmann::json::array({"BitNetForCausalLM"}));
  EXPECT_EQ(t.rope_theta, 500000.0f);
  EXPECT_EQ(t.shape_string(), "hidden 384, FFN 512, relu2, 2 layers, 4 heads x 96 (2 K/V heads), vocab 512");
  EXPECT_STREQ(ModelConfig::tiny().attn_sub_norm_name(), "self_attn.inner_attn_ln");
}

TEST(ModelConfig, ValidateNamesSourceAndKey) {
  ModelConfig c = ModelConfig::tiny();
  c.num_kv_heads = 3;  // does not divide tiny's 2 query heads
  try {
    c.validate("my-source");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("my-source"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("num_key_value_heads"), std::string::npos);
  }
}

TEST(ModelConfig, MalformedJsonNamesFileAndPosition) {
  TempDir dir;
  const fs::path p = dir.path / "config.json";
  std::ofstream(p) << "{\n  \"hidden_size\": 1536,\n  \"vocab_size\": ,\n}";
  const std::string msg = from_file_error(p);
  EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("byte"), std::string::npos) << msg;
}

// Found by tests/fuzz/fuzz_model_config: a number beyond a double made the JSON library
// throw out_of_range (not parse_error), which escaped as an internal error.
TEST(ModelConfig, NumberOverflowInJsonIsAnErrorNamingTheFile) {
  TempDir dir;
  const fs::path p = dir.path / "config.json";
  std::ofstream(p) << R"({"hidden_size": 192, "rms_norm_eps": 1e2000})";
  const std::string msg = from_file_error(p);
  EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("1e2000"), std::string::npos) << msg;
}

TEST(ModelConfig, MissingFileIsNamed) {
  TempDir dir;
  const fs::path p = dir.path / "nope" / "config.json";
  const std::string msg = from_file_error(p);
  EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
}

}  // namespace
}  // namespace bitsim::model
