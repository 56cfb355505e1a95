#include "hw/attention_resources.h"

#include <algorithm>

#include <fmt/format.h>

#include "model/board_shape.h"

namespace bitsim::hw {

int dsp48_count(int a_bits, int b_bits) {
  const int a = std::max(a_bits, b_bits), b = std::min(a_bits, b_bits);
  if (a <= 25 && b <= 18) return 1;
  return (a + 23) / 24 * ((b + 16) / 17);
}

namespace {

// Stated LUT costs (model; docs/variants-attention.md 8.7), LUT6 on the 7-series fabric:
constexpr int kAddLutPerBit = 1;  // adder, subtractor, comparator, accumulator: one LUT per bit (carry chain)
constexpr int kFp16DecodeLut = 15;  // binary16 -> (E, M): E = max(e, 1), hidden bit, exponent 31 read as 30
// A barrel shifter of `bits` bits over `positions` shift amounts: one 4:1 mux (one LUT6)
// per bit and stage, ceil(log4(positions)) stages.
int shifter_lut(int bits, int positions) {
  int stages = 0;
  for (int reach = 1; reach < positions; reach *= 4) ++stages;
  return stages * bits;
}
// A pipelined restoring divider: one stage per quotient bit, each a (divisor + 1)-bit
// subtract with its restore mux folded into the same LUT.
int divider_lut(int quotient_bits, int divisor_bits) { return quotient_bits * (divisor_bits + 1) * kAddLutPerBit; }

AttentionResourceRow dsp_row(const std::string& name, int a, int b, int per_lane, int lut = -1) {
  const int n = per_lane > 0 ? per_lane * model::kLanes : 1;
  return {name, fmt::format("{} x {}", a, b), per_lane, n * dsp48_count(a, b), lut, 0};
}
AttentionResourceRow lut_row(const std::string& name, int per_lane, int lut_each) {
  return {name, "", per_lane, 0, per_lane * model::kLanes * lut_each, 0};
}

}  // namespace

AttentionResources attention_resources(const AttentionUnitConfig& c) {
  AttentionResources r;
  const bool online = c.kind() == model::AttentionVariant::OnlineSoftmax;
  if (!online) {
    // The board's two-phase unit (BOARD.md: 8 MACs per lane and the m multiplier, 17 DSP).
    AttentionResourceRow macs = dsp_row("q.K and p.V MACs", 15, 8, 8);
    macs.width = "8 x 8, 15 x 8";
    r.rows.push_back(macs);
    r.rows.push_back(dsp_row("m multiplier", 23, 18, 0));
    // The scores of a head, 512 x 32 bits per lane: one BRAM36 (1K x 36) each.
    r.rows.push_back({"score buffer (512 x 32 bits)", "", 1, 0, -1, model::kLanes});
  } else if (!c.int4()) {
    // The online-softmax unit with int8 KV (docs/variants-attention.md 5).
    AttentionResourceRow macs = dsp_row("q.K and p.V MACs", 15, 8, 8);
    macs.width = "8 x 8, 15 x 8";
    r.rows.push_back(macs);
    r.rows.push_back(dsp_row("m multiplier", 23, 18, 0));
    r.rows.push_back(dsp_row("interpolation", 11, 8, 0));
    r.rows.push_back(dsp_row("rescale of acc (acc x alpha)", 32, 15, 8));
    r.rows.push_back(dsp_row("rescale of sum", 24, 15, 1));
    r.rows.push_back(dsp_row("normalizer (acc x r)", 32, 31, 1));
  } else {
    // The online-softmax unit reading INT4 KV (docs/variants-attention.md 8.3, 8.4, 8.7). The
    // rows with LUTs form the INT4 read path; m, the interpolation and the sum's rescale are
    // the int8 unit's.
    // A K beat: 16 nibbles, k12 = 16 k (wiring), 16 products q8 x k12 summed in the DSP cascade.
    r.rows.push_back(dsp_row("q.K multipliers (nibbles)", 8, 12, 16, 0));
    // The 16 q bytes of a K beat out of the 96: a 6:1 mux per bit (two LUT6).
    r.rows.push_back(lut_row("q operand select", 1, 128 * 2));
    r.rows.push_back(dsp_row("m multiplier", 23, 18, 0));
    r.rows.push_back(dsp_row("interpolation", 11, 8, 0));
    // An outlier lane's fp16 value -> k12 (num::kv_outlier_fixed), one lane per clock:
    // decode the lane and the bank scale, sh = E_h - E_s + 4, shift the numerator (33 bits,
    // 23 amounts) or the denominator (24 bits, 14), 13 quotient bits over a 24-bit divisor,
    // the saturation compare (33), round half even (remainder compare 25, increment 13),
    // sign and clamp (13 + 12); the outlier channel's q byte from a 96 x 8 LUTRAM (16).
    const int outlier = 2 * kFp16DecodeLut + 6 * kAddLutPerBit + shifter_lut(33, 23) + shifter_lut(24, 14) +
                        divider_lut(13, 24) + 33 * kAddLutPerBit + (25 + 13) * kAddLutPerBit +
                        (13 + 12) * kAddLutPerBit + 16;
    r.rows.push_back(lut_row("outlier lane -> 12-bit K", 1, outlier));
    r.rows.push_back(dsp_row("outlier lane product q8 x k12", 8, 12, 1, 0));
    // A V group's weight: P = p_t x M (15 x 11 bits), then aligned by the scale's exponent
    // (26 -> 48 bits, 31 shift amounts) and rounded half up (48-bit add); the scale decoded.
    r.rows.push_back(dsp_row("V weight p x M", 15, 11, 1, model::kLanes * (kFp16DecodeLut + shifter_lut(48, 31) +
                                                                          48 * kAddLutPerBit)));
    // w x v with v a signed nibble: shift-adds in LUTs (two adders and a conditional
    // negation, 51 bits each), not 2 DSP48E1 for a 4-bit operand; 16 per clock per lane.
    r.rows.push_back(lut_row("V products w x v (48 x 4)", 16, 3 * 51 * kAddLutPerBit));
    // The 96 accumulators of 60 bits per lane (flip-flops, rotated 16 at a time: no read
    // mux); 16 adds of 60 bits per clock.
    r.rows.push_back(lut_row("60-bit accumulate", 16, 60 * kAddLutPerBit));
    r.rows.push_back(dsp_row("rescale of acc (acc x alpha)", 60, 15, 16, 0));
    r.rows.push_back(dsp_row("rescale of sum", 24, 15, 1));
    r.rows.push_back(dsp_row("normalizer (acc x r)", 60, 31, 1, 0));
  }
  r.lut_complete = true;
  for (const auto& row : r.rows) {
    r.dsp += row.dsp;
    r.bram36 += row.bram36;
    if (row.lut >= 0) r.lut += row.lut;
    else r.lut_complete = false;
  }
  return r;
}

}  // namespace bitsim::hw
