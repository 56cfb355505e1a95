#pragma once
// Prefill (docs/prefill.md): the prompt in chunks of P = prefill.tokens_per_pass tokens, each
// weight row streamed once per chunk. Its keys live in one config, hw::PrefillConfig
// (hw/circuits/prefill_config.h); here the resource estimate of the P-vector engine beside
// the Zynq-7020 and what the board uses.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "host/walker.h"
#include "hw/circuits/attention_unit.h"
#include "base/config_field.h"

namespace bitsim::host {

// The resource estimate of the matmul engine built for P vectors (model: stated
// per-operator costs, docs/prefill.md 4), the extra P - 1 vectors of both lanes, beside the
// device and what the board already uses.
struct PrefillResourceRow {
  std::string name;    // the operator
  int per_lane = 0;    // instances per lane (for the extra vectors)
  int lut = 0, bram36 = 0;  // both lanes
};
struct PrefillResources {
  int tokens_per_pass = 1;
  std::vector<PrefillResourceRow> rows;
  int lut = 0, bram36 = 0, dsp = 0;  // the extra vectors' totals (no DSP: LUT adders)
  // What the board uses today beside them (model): its LUT share (BOARD.md 34%), the matmul
  // engine's x buffers, the configured attention unit's BRAM36 and DSP, the walker's.
  int board_lut = 0, board_bram36 = 0, board_dsp = 0;
  int total_lut() const { return board_lut + lut; }
  int total_bram36() const { return board_bram36 + bram36; }
  int total_dsp() const { return board_dsp + dsp; }
  // The Zynq-7020's verdict: empty when it fits, else the resources that overflow
  // ("BRAM36 170 > 140").
  std::string overflow() const;
  bool fits() const { return overflow().empty(); }
  // "fits", or "DOES NOT FIT (BRAM36 170 > 140)": the verdict every report prints.
  std::string verdict() const { return fits() ? "fits" : "DOES NOT FIT (" + overflow() + ")"; }
};

// Per-operator costs (docs/prefill.md 4).
constexpr int kPrefillXBram36PerVector = 5;  // SDP 512 x 72: 320 bits of x per clock, by width
constexpr int kPrefillProductsPerVector = 40, kPrefillProductLut = 8;  // trit x int8 select
constexpr int kPrefillTreeAdders = 39, kPrefillAdderLut = 12;         // 40-input adder tree
constexpr int kPrefillAccumulatorLut = 32;                            // int32 accumulator
constexpr int kPrefillResultLut = 16;                                 // a result word's shift register

// The prompt chunk that starts at position `step` (docs/prefill.md 6): P = tokens_per_pass
// positions, the last chunk of the prompt shorter, never past `capacity` positions. The one
// rule of the prompt's chunks: the run's token loop and the prefill measurement both take it.
inline int prompt_chunk(int step, int prompt_tokens, int tokens_per_pass, int capacity = INT32_MAX) {
  return std::max(1, std::min({std::max(1, tokens_per_pass), prompt_tokens - step, capacity - step}));
}

// P in 1..model::kMaxVectors (else bitsim::Error naming prefill.tokens_per_pass);
// `walker`: the layer walker's estimate when host.walker = pl.
PrefillResources prefill_resources(int tokens_per_pass, const hw::AttentionUnitConfig& attention,
                                   const std::optional<WalkerResources>& walker = std::nullopt);

}  // namespace bitsim::host
