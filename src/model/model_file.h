#pragma once
// The ternary model as one flat byte image: what the start-up cache (sim/cache_store.h)
// stores so that a later run maps the model instead of ternarizing 728 M latent weights.
//
// Layout (little-endian; every array starts on a 64-byte boundary of the image):
//   header (64 bytes): magic "BSTMODEL", u32 layout version (kModelFileVersion), u32 array
//     count A, then u32 hidden, ffn, layers, heads, vocab; zero padding
//   table: A entries of 32 bytes: u64 offset (from the image start), u64 element count,
//     u32 element size (1 = int8 trits, 4 = float), f32 w_scale (0 for float arrays),
//     u64 reserved (0)
//   arrays, in this order: embed [vocab*hidden] f32, final_norm [hidden] f32, lm_head trits;
//     per layer: input_norm, inner_attn_norm, post_attn_norm, ffn_norm (f32), then the trits
//     of q, k, v, o, gate, up, down.
// The model's config, source and tokenizer are not in the image: the reader takes them
// from the model source, and checks that the image's shape is that config's.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/model_loader.h"

namespace bitsim::model {

constexpr uint32_t kModelFileVersion = 1;

// A byte range of the image; `data` null means zero padding.
struct ImagePart {
  const void* data;
  size_t bytes;
};
// The image of m as parts to write one after another: the header and table (owned here),
// then the arrays (pointing into m, which must outlive this).
struct ModelImage {
  std::vector<uint8_t> head;
  std::vector<ImagePart> parts;
  size_t bytes() const;
};
ModelImage model_image(const TernaryModel& m);

// The model of an image, viewing its arrays in place (trits and embed) or copying them
// (the small norm vectors). `keep` keeps the image's memory alive for as long as any view
// exists. The image must be writable memory private to this process (a MAP_PRIVATE mapping
// or a heap buffer) and 64-byte aligned. Throws bitsim::Error naming what is wrong with it
// (magic, version, shape, table) if the image is not one of `config`'s.
TernaryModel model_from_image(const ModelConfig& config, const std::string& source, std::shared_ptr<void> keep,
                              uint8_t* image, size_t bytes);

}  // namespace bitsim::model
