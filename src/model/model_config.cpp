#include "model/model_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "base/json_parse.h"
#include "base/error.h"
#include "base/file_io.h"
#include "model/packed_image.h"

namespace bitsim::model {
namespace {

[[noreturn]] void fail(const std::string& source, const std::string& key, const std::string& why) {
  throw Error(fmt::format("{}: config key '{}': {}", source, key, why));
}

const char* json_type(const nlohmann::json& v) { return v.type_name(); }

// An integer key. Floats (1536.0), strings and out-of-range values are wrong types.
int get_int(const nlohmann::json& j, const char* key, const std::string& source) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer())
    fail(source, key, fmt::format("expected an integer, found {} {}", json_type(v), v.dump()));
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int>::max()))
      fail(source, key, fmt::format("value {} is out of range", u));
    return static_cast<int>(u);
  }
  const auto s = v.get<int64_t>();
  if (s < std::numeric_limits<int>::min() || s > std::numeric_limits<int>::max())
    fail(source, key, fmt::format("value {} is out of range", s));
  return static_cast<int>(s);
}

float get_float(const nlohmann::json& j, const char* key, const std::string& source) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number())
    fail(source, key, fmt::format("expected a number, found {} {}", json_type(v), v.dump()));
  const double d = v.get<double>();
  if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max())
    fail(source, key, fmt::format("value {} is out of range", v.dump()));
  return static_cast<float>(d);
}

bool get_bool(const nlohmann::json& j, const char* key, const std::string& source) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_boolean())
    fail(source, key, fmt::format("expected true or false, found {} {}", json_type(v), v.dump()));
  return v.get<bool>();
}

// The shortest decimal that reads back as `f`, as a double, so that config.json says 1e-05 and
// not 9.999999747378752e-06.
double float_for_json(float f) {
  const std::string text = fmt::format("{}", f);
  double d = 0.0;
  std::from_chars(text.data(), text.data() + text.size(), d);
  return d;
}

void require(const nlohmann::json& j, const char* key, const std::string& source) {
  if (!j.contains(key)) fail(source, key, "missing (required)");
}

// Bounded before anything is allocated by the shape: every packed ternary weight must lie
// below 4 GiB, the reach of the AXI DMA's 32-bit addresses (the board's DDR is 512 MB).
// Rows longer than the matmul engine's 4,096 are split across calls (model::row_segments).
void check_dma_reach(const ModelConfig& c, const std::string& source) {
  constexpr uint64_t kReach = uint64_t(1) << 32;
  // k_proj and v_proj rows; the heads are checked after this (kv heads <= heads bounds it).
  const int kv_rows = c.hidden_size / c.num_heads * std::min(c.num_kv_heads, c.num_heads);
  const ImageSize img =
      packed_image_size(c.hidden_size, c.intermediate_size, c.num_layers, c.vocab_size, std::max(1, kv_rows));
  const double gib = 1024.0 * 1024.0 * 1024.0;
  if (img.layer_bytes > kReach)
    fail(source,
         img.layer_bytes / 4 > uint64_t(c.hidden_size) * uint64_t(c.hidden_size) ? "intermediate_size" : "hidden_size",
         fmt::format("one layer of hidden {} and FFN {} needs {:.1f} GiB of packed ternary weights, over the 4 GiB "
                     "that the DMA's 32-bit addresses reach",
                     c.hidden_size, c.intermediate_size, img.layer_bytes / gib));
  if (img.lm_head_bytes > kReach)
    fail(source, "vocab_size",
         fmt::format("{} rows of hidden {} need {:.1f} GiB of packed ternary weights, over the 4 GiB that the "
                     "DMA's 32-bit addresses reach",
                     c.vocab_size, c.hidden_size, img.lm_head_bytes / gib));
  if (img.total_bytes > kReach)
    fail(source, "num_hidden_layers",
         fmt::format("{} layers of {:.2f} MiB packed ternary weights each need {:.1f} GiB, over the 4 GiB that the "
                     "DMA's 32-bit addresses reach (at most {} layers of this shape)",
                     c.num_layers, img.layer_bytes / (1024.0 * 1024.0), img.total_bytes / gib,
                     (kReach - img.lm_head_bytes) / img.layer_bytes));
}

// The heads the board's attention unit takes.
void check_heads(const ModelConfig& c, const std::string& source) {
  if (c.hidden_size % c.num_heads != 0)
    fail(source, "num_attention_heads",
         fmt::format("hidden_size {} is not a multiple of num_attention_heads {}", c.hidden_size, c.num_heads));
  // Whether head_dim is the one the attention unit is built for (attention.head_dim) is the
  // board config's question (sim::check_model_on_board); here only whether any unit could be.
  if (!head_dim_in_range(c.head_dim()))
    fail(source, "num_attention_heads",
         fmt::format("head_dim = hidden_size / num_attention_heads = {} / {} = {}, but an attention unit is built "
                     "for a head_dim that is a multiple of {} in [{}, {}]",
                     c.hidden_size, c.num_heads, c.head_dim(), kHeadDimStep, kHeadDimStep, kMaxHeadDim));
  // Grouped-query attention (HF repeat_kv): each K/V head serves num_attention_heads /
  // num_key_value_heads query heads, so the count must divide the query heads.
  if (c.num_heads % c.num_kv_heads != 0)
    fail(source, "num_key_value_heads",
         fmt::format("{} does not divide num_attention_heads {}: grouped-query attention shares each K/V head "
                     "among a whole number of query heads",
                     c.num_kv_heads, c.num_heads));
}

void check_norm_rope_and_tying(const ModelConfig& c, const std::string& source) {
  // (0, 1) written so that NaN fails too.
  if (!(c.rms_norm_eps > 0.0f && c.rms_norm_eps < 1.0f))
    fail(source, "rms_norm_eps", fmt::format("must be in (0, 1), found {}", c.rms_norm_eps));
  if (!(c.rope_theta > 0.0f) || !std::isfinite(c.rope_theta))
    fail(source, "rope_theta", fmt::format("must be positive and finite, found {}", c.rope_theta));
  if (!c.tie_word_embeddings)
    fail(source, "tie_word_embeddings",
         "must be true: bitsim uses embed_tokens as lm_head (the checkpoint has no separate "
         "lm_head.weight, and the board ternarizes that shared matrix)");
}

// hidden_act ("silu" | "relu2", default silu) and model_type ("llama" | "bitnet", default
// llama): any other value is an Error naming the key and the values bitsim runs.
template <typename E>
E read_choice(const nlohmann::json& j, const char* key, const std::string& source,
              std::initializer_list<std::pair<const char*, E>> choices, E fallback) {
  if (!j.contains(key)) return fallback;
  const nlohmann::json& v = j.at(key);
  if (!v.is_string()) fail(source, key, fmt::format("expected a string, found {} {}", json_type(v), v.dump()));
  std::string names;
  for (const auto& [name, value] : choices) {
    if (v.get<std::string>() == name) return value;
    names += fmt::format("{}\"{}\"", names.empty() ? "" : " or ", name);
  }
  fail(source, key, fmt::format("must be {}, found {}", names, v.dump()));
}

void read_architecture(const nlohmann::json& j, const std::string& source, ModelConfig& c) {
  if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null())
    fail(source, "rope_scaling",
         fmt::format("must be null: scaled RoPE is not supported (found {})", j.at("rope_scaling").dump()));
  c.hidden_act = read_choice<HiddenAct>(j, "hidden_act", source,
                                        {{"silu", HiddenAct::Silu}, {"relu2", HiddenAct::Relu2}}, HiddenAct::Silu);
  c.model_type = read_choice<ModelType>(j, "model_type", source,
                                        {{"llama", ModelType::Llama}, {"bitnet", ModelType::Bitnet}}, ModelType::Llama);
}

}  // namespace

ModelConfig ModelConfig::bitnet_large() {
  // The norm, RoPE, tying and token id defaults of ModelConfig are bitnet-large's.
  return {.hidden_size = 1536, .intermediate_size = 4096, .num_layers = 24, .num_heads = 16, .num_kv_heads = 16,
          .vocab_size = 32002, .max_position_embeddings = 2048};
}

ModelConfig ModelConfig::tiny() {
  // The same architecture, positions and token ids as bitnet-large, smaller; no pad token id 32000.
  return {.hidden_size = 192, .intermediate_size = 512, .num_layers = 2, .num_heads = 2, .num_kv_heads = 2,
          .vocab_size = 512, .max_position_embeddings = bitnet_large().max_position_embeddings, .pad_token_id = 0};
}

ModelConfig ModelConfig::tiny_gqa() {
  // 4 query heads of the board's head_dim 96 need hidden 384 (tiny's 192 would give head_dim 48).
  ModelConfig c = tiny();
  c.hidden_size = 4 * kBoardHeadDim;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  return c;
}

ModelConfig ModelConfig::bitnet_large_gqa4() {
  ModelConfig c = bitnet_large();
  c.num_kv_heads = 4;
  return c;
}

ModelConfig ModelConfig::bitnet_2b4t() {
  // microsoft/bitnet-b1.58-2B-4T's config.json (docs/numerics.md "BitNet b1.58 2B4T").
  return {.hidden_size = 2560, .intermediate_size = 6912, .num_layers = 30, .num_heads = 20, .num_kv_heads = 5,
          .vocab_size = 128256, .max_position_embeddings = 4096, .rms_norm_eps = 1e-5f, .rope_theta = 500000.0f,
          .hidden_act = HiddenAct::Relu2, .model_type = ModelType::Bitnet, .bos_token_id = 128000,
          .eos_token_id = 128001, .pad_token_id = kNoPad};
}

ModelConfig ModelConfig::tiny_2b4t() {
  ModelConfig c = tiny_gqa();
  c.hidden_act = HiddenAct::Relu2;
  c.model_type = ModelType::Bitnet;
  c.rope_theta = bitnet_2b4t().rope_theta;
  return c;
}

ModelConfig ModelConfig::tiny_ffn6912() {
  ModelConfig c = tiny_2b4t();
  c.intermediate_size = bitnet_2b4t().intermediate_size;
  return c;
}

ModelConfig ModelConfig::tiny_2b4t_hd128() {
  ModelConfig c = tiny_2b4t();
  c.hidden_size = 2 * bitnet_2b4t().head_dim();  // 2 query heads of 2B4T's 128
  c.num_heads = 2;
  c.num_kv_heads = 1;
  return c;
}

const char* hidden_act_name(HiddenAct a) { return a == HiddenAct::Relu2 ? "relu2" : "silu"; }
const char* model_type_name(ModelType t) { return t == ModelType::Bitnet ? "bitnet" : "llama"; }

const char* ModelConfig::attn_sub_norm_name() const {
  return model_type == ModelType::Bitnet ? "self_attn.attn_sub_norm" : "self_attn.inner_attn_ln";
}
const char* ModelConfig::ffn_sub_norm_name() const {
  return model_type == ModelType::Bitnet ? "mlp.ffn_sub_norm" : "mlp.ffn_layernorm";
}

ModelConfig ModelConfig::from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object())
    throw Error(fmt::format("{}: config.json must be a JSON object, found {}", source, json_type(j)));
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "vocab_size", "rms_norm_eps",
                          "max_position_embeddings"})
    require(j, key, source);

  ModelConfig c;
  c.hidden_size = get_int(j, "hidden_size", source);
  c.intermediate_size = get_int(j, "intermediate_size", source);
  c.num_layers = get_int(j, "num_hidden_layers", source);
  c.num_heads = get_int(j, "num_attention_heads", source);
  c.num_kv_heads = j.contains("num_key_value_heads") ? get_int(j, "num_key_value_heads", source)
                                                     : c.num_heads;
  c.vocab_size = get_int(j, "vocab_size", source);
  c.max_position_embeddings = get_int(j, "max_position_embeddings", source);
  c.rms_norm_eps = get_float(j, "rms_norm_eps", source);
  if (j.contains("rope_theta")) c.rope_theta = get_float(j, "rope_theta", source);
  if (j.contains("tie_word_embeddings"))
    c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", source);
  if (j.contains("bos_token_id")) c.bos_token_id = get_int(j, "bos_token_id", source);
  if (j.contains("eos_token_id")) c.eos_token_id = get_int(j, "eos_token_id", source);
  if (!j.contains("pad_token_id") || j.at("pad_token_id").is_null())
    c.pad_token_id = kNoPad;
  else
    c.pad_token_id = get_int(j, "pad_token_id", source);

  if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null())
    fail(source, "rope_scaling",
         fmt::format("must be null: scaled RoPE is not supported (found {})", j.at("rope_scaling").dump()));
  read_architecture(j, source, c);
  c.validate(source);
  return c;
}

ModelConfig ModelConfig::from_file(const std::filesystem::path& config_json) {
  const std::string source = config_json.string();
  const std::string text = io::read_file(config_json, "model config", io::kMaxSmallFileBytes);
  nlohmann::json j;
  try {
    j = io::parse_json_unique_keys(text, source);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() carries "at line L, column C" and e.byte the byte position.
    throw Error(fmt::format("{}: malformed JSON at byte {}: {}", source, e.byte, e.what()));
  } catch (const nlohmann::json::exception& e) {
    // e.g. out_of_range 406, a number beyond a double ("1e2000"): not a parse_error.
    throw Error(fmt::format("{}: malformed JSON: {}", source, e.what()));
  }
  return from_json(j, source);
}

nlohmann::json ModelConfig::to_json() const {
  nlohmann::json j;
  // 1bitLLM's checkpoints name BitnetForCausalLM; 2B4T's (model_type bitnet) BitNetForCausalLM.
  j["architectures"] = nlohmann::json::array({model_type == ModelType::Bitnet ? "BitNetForCausalLM" : "BitnetForCausalLM"});
  j["model_type"] = model_type_name(model_type);
  j["torch_dtype"] = model_type == ModelType::Bitnet ? "bfloat16" : "float16";
  j["hidden_act"] = hidden_act_name(hidden_act);
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_layers;
  j["num_attention_heads"] = num_heads;
  j["num_key_value_heads"] = num_kv_heads;
  j["vocab_size"] = vocab_size;
  j["max_position_embeddings"] = max_position_embeddings;
  j["rms_norm_eps"] = float_for_json(rms_norm_eps);
  j["rope_theta"] = float_for_json(rope_theta);
  j["rope_scaling"] = nullptr;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["bos_token_id"] = bos_token_id;
  j["eos_token_id"] = eos_token_id;
  if (pad_token_id == kNoPad)
    j["pad_token_id"] = nullptr;
  else
    j["pad_token_id"] = pad_token_id;
  return j;
}

void ModelConfig::validate(const std::string& source) const {
  const std::pair<const char*, int> sizes[] = {
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"num_hidden_layers", num_layers},
      {"num_attention_heads", num_heads},
      {"num_key_value_heads", num_kv_heads},
      {"vocab_size", vocab_size},
      {"max_position_embeddings", max_position_embeddings},
  };
  for (const auto& [key, value] : sizes)
    if (value <= 0) fail(source, key, fmt::format("must be positive, found {}", value));

  check_dma_reach(*this, source);
  check_heads(*this, source);

  const std::pair<const char*, int> ids[] = {
      {"bos_token_id", bos_token_id}, {"eos_token_id", eos_token_id}, {"pad_token_id", pad_token_id}};
  for (const auto& [key, id] : ids) {
    if (id == kNoPad && std::string(key) == "pad_token_id") continue;
    if (id < 0 || id >= vocab_size)
      fail(source, key, fmt::format("token id {} is outside the vocabulary [0, vocab_size {})", id, vocab_size));
  }

  check_norm_rope_and_tying(*this, source);
}

std::string ModelConfig::shape_string() const {
  const std::string kv =
      num_kv_heads != num_heads ? fmt::format(" ({} K/V heads)", num_kv_heads) : std::string();
  const std::string act = hidden_act != HiddenAct::Silu ? fmt::format(", {}", hidden_act_name(hidden_act)) : "";
  return fmt::format("hidden {}, FFN {}{}, {} layers, {} heads x {}{}, vocab {}", hidden_size, intermediate_size, act,
                     num_layers, num_heads, num_heads > 0 ? head_dim() : 0, kv, vocab_size);
}

}  // namespace bitsim::model
