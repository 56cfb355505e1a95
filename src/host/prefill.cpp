#include "host/prefill.h"

#include <cmath>

#include <fmt/format.h>

#include "base/error.h"
#include "hw/circuits/attention_resources.h"
#include "model/board_shape.h"
#include "model/packed_image.h"

namespace bitsim::host {

std::string PrefillResources::overflow() const {
  using W = WalkerResources;
  std::string out;
  auto over = [&](const char* what, int used, int device) {
    if (used <= device) return;
    out += fmt::format("{}{} {} > {}", out.empty() ? "" : ", ", what, used, device);
  };
  over("BRAM36", total_bram36(), W::kDeviceBram36);
  over("LUT", total_lut(), W::kDeviceLut);
  over("DSP48E1", total_dsp(), W::kDeviceDsp);
  return out;
}

PrefillResources prefill_resources(int P, const hw::AttentionUnitConfig& attention,
                                   const std::optional<WalkerResources>& walker) {
  if (P < 1 || P > model::kMaxVectors)
    throw FieldError("prefill.tokens_per_pass", fmt::format("{} is outside 1..{}", P, model::kMaxVectors));
  PrefillResources r;
  r.tokens_per_pass = P;
  const int extra = P - 1, lanes = model::kLanes;
  auto row = [&](const char* name, int per_lane, int lut_each, int bram_each) {
    r.rows.push_back({name, per_lane, lanes * per_lane * lut_each, lanes * per_lane * bram_each});
  };
  row("activation buffer", extra, 0, kPrefillXBram36PerVector);
  row("trit x int8 select", extra * kPrefillProductsPerVector, kPrefillProductLut, 0);
  row("adder tree", extra * kPrefillTreeAdders, kPrefillAdderLut, 0);
  row("accumulator", extra, kPrefillAccumulatorLut, 0);
  row("result shift register", extra, kPrefillResultLut, 0);
  for (const auto& x : r.rows) {
    r.lut += x.lut;
    r.bram36 += x.bram36;
  }
  // The board: its share of the LUTs (the attention unit's inside it), the matmul engine's
  // one x buffer per lane, the configured attention unit's BRAM36 and DSPs; the walker's
  // all three when it runs.
  const hw::AttentionResources at = hw::attention_resources(attention);
  const int board_unit_lut = hw::attention_resources(hw::AttentionUnitConfig{}).lut;
  r.board_lut = int(std::lround(WalkerResources::kBoardLutShare * WalkerResources::kDeviceLut)) - board_unit_lut + at.lut;
  r.board_bram36 = lanes * kPrefillXBram36PerVector + at.bram36;
  r.board_dsp = at.dsp;
  if (walker) {
    r.board_lut += walker->lut;
    r.board_bram36 += walker->bram36;
    r.board_dsp += walker->dsp;
  }
  return r;
}

}  // namespace bitsim::host
