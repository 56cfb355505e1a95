#pragma once
// The packed ternary release of BitNet b1.58 2B4T (microsoft/bitnet-b1.58-2B-4T): every
// BitLinear projection stored as its ternary values, four to a byte, with one scale. The
// layout is the one the public loader in Hugging Face transformers reads
// (src/transformers/integrations/bitnet.py: unpack_weights and BitLinear);
// docs/packed-image.md "The packed ternary release" has it with a worked example.
//
//   <proj>.weight        U8 [out/4, in]. Field i (bits 2i+1..2i, i = 0..3) of byte [r][c]
//                        holds W[i*(out/4) + r][c] + 1: code 0 = -1, 1 = 0, 2 = +1, 3 is
//                        invalid. The four row blocks of out/4 rows share a byte (field i
//                        is block i), not four consecutive rows 4r..4r+3.
//   <proj>.weight_scale  BF16 (or F16, F32), shape [1] or []. transformers' BitLinear computes
//                        y = (x_q . T) / (input_scale * weight_scale): weight_scale is
//                        1 / mean|W| (its WeightQuant), the dequantized weight T / weight_scale.
//
// bitsim's TernaryMatrix keeps w_scale = mean|W| (ternary.h), which its arithmetic multiplies
// by. A packed projection's w_scale is 1.0f / weight_scale: the scale read exactly as F32,
// then one IEEE float division rounded to nearest even; it must be finite and > 0, and it is
// not clamped (the release's scale is taken as it is).
//
// Only the seven projections (*_proj.weight) may be packed; the embedding and the norms stay
// float. A checkpoint may pack some projections and not others, never half a matrix.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model_config.h"
#include "model/safetensors.h"
#include "model/tensor_source.h"
#include "model/ternary.h"

namespace bitsim::model {

// Whether a MODEL.md tensor name is one of the projections the release packs (*_proj.weight).
bool is_projection_weight(const std::string& name);
// "<proj>.weight" -> "<proj>.weight_scale".
std::string weight_scale_name(const std::string& weight_name);

// The reader: the trits (rows*cols, row-major) of a packed U8 [rows/4, cols] tensor; rows a
// positive multiple of 4. Throws Error beginning with `what` ("FILE: tensor 'NAME'") on a
// code 3, naming the byte's row and column, the field and the weight row it would be.
void unpack_ternary(const uint8_t* packed, int rows, int cols, int8_t* trits, const std::string& what);

// w_scale = 1.0f / weight_scale. Error beginning with `what` unless weight_scale is finite and
// > 0 and its reciprocal finite.
float w_scale_of_weight_scale(float weight_scale, const std::string& what);

// The packed projection `name` of `file`, expected [rows, cols]: its shape, its weight_scale
// (present, float, shape [1] or [], finite and > 0) and, when `unpack`, its trits. Every
// failure is an Error naming the file and the tensor. With unpack false the matrix has its
// shape and scale but no trits (the check at open).
TernaryMatrix read_packed_projection(const SafetensorsFile& file, const std::string& name, int rows, int cols,
                                     bool unpack = true);

// The writer, a loop over W's rows written from the rule above (independent of
// unpack_ternary): row w of block i = w / (rows/4) goes to field i of packed row w % (rows/4).
// Error when rows is not a positive multiple of 4.
std::vector<uint8_t> pack_ternary(const TernaryMatrix& m);

// The release's weight_scale of a w_scale: bf16(1.0f / w_scale), rounded to nearest even.
// Reading it back gives 1.0f / that, equal to w_scale only when w_scale is the reciprocal of
// a BF16 value (then bit for bit); otherwise within BF16's precision (relative 2^-9).
uint16_t weight_scale_bf16(float w_scale);

// config.json of a packed checkpoint: the config and the release's quantization_config
// {"quant_method": "bitnet", "linear_class": "bitlinear", "quantization_mode": "offline"}.
nlohmann::json packed_config_json(const ModelConfig& c);

// Writes `src`'s model to `file` (a model.safetensors) in the release's layout, the tensors in
// expected_tensors() order, each projection followed by its weight_scale: the projections
// ternarized as load_ternary_model does (ternarize(): the same trits) and packed, weight_scale
// BF16 [1] by weight_scale_bf16; the embedding and the norms as F32, unchanged. Memory: the
// largest tensor as F32 (a synthetic source's embedding and norms are generated in pieces).
void write_packed_safetensors(const TensorSource& src, const std::filesystem::path& file,
                              const std::map<std::string, std::string>& metadata = {});

}  // namespace bitsim::model
