#include "hw/circuits/attention_resources.h"

#include <algorithm>
#include <optional>

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
// A ROM of `entries` x `bits` in LUT6 (64 x 1 each): entries / 64 LUTs per bit, then a
// 4:1 mux (one LUT6) per bit and stage over them.
int rom_lut(int entries, int bits) { return (entries / 64 + shifter_lut(1, entries / 64)) * bits; }

// The EXP table read (256 x 15, CIRCUITS.md 3): 4 LUTs a bit and one 4:1 mux: 75.
constexpr int kExpBits = 15;
// The online units' exponent: z8 = ((diff * m) << 8) >> S (the m product, 41 bits, then
// 49 bits over S = 0..63), and EXPI (variants-attention.md 3): two table reads (EXP[i],
// EXP[i+1]), their difference (15 bits), the fraction's rounding add (19), the subtraction
// from EXP[i] (15), the i >= 255 compare (41) and its select (15).
int online_shift_lut() { return shifter_lut(49, 64); }
int online_interp_lut() {
  return 2 * rom_lut(256, kExpBits) + (kExpBits + 19 + kExpBits + 41) * kAddLutPerBit + kExpBits;
}
// The running maximum M: the compare s_t > M (32 bits) and the two subtractions M - s_t,
// s_t - M (32 each) whose non-negative one feeds the m multiplier.
constexpr int kOnlineMaxLut = 3 * 32 * kAddLutPerBit;
// The INT4 unit's accumulator and sum widths for T <= 2048 (variants-attention.md 8.8):
// |acc_d| <= 8 * 2^47 * 2048 = 2^61 (62 bits signed), sum <= 32767 * 2048 < 2^26.
constexpr int kInt4AccBits = 62, kInt4SumBits = 26;

AttentionResourceRow dsp_row(const std::string& name, int a, int b, int per_lane, std::optional<int> lut) {
  const int n = per_lane > 0 ? per_lane * model::kLanes : 1;
  return {name, fmt::format("{} x {}", a, b), per_lane, n * dsp48_count(a, b), lut, 0};
}
AttentionResourceRow lut_row(const std::string& name, int per_lane, int lut_each) {
  return {name, "", per_lane, 0, per_lane * model::kLanes * lut_each, 0};
}
// The int8 units' 8 MACs per lane, q.K (8 x 8) and p.V (15 x 8) on the same DSPs.
AttentionResourceRow int8_macs_row() {
  AttentionResourceRow macs = dsp_row("q.K and p.V MACs", 15, 8, 8, 0);
  macs.width = "8 x 8, 15 x 8";
  return macs;
}

// The online units' (int8 and INT4) running maximum, exponent and p select.
void add_online_exponent(std::vector<AttentionResourceRow>& rows) {
  rows.push_back(lut_row("running maximum and difference", 1, kOnlineMaxLut));
  rows.push_back(dsp_row("m multiplier", 23, 18, 0, online_shift_lut()));
  rows.push_back(dsp_row("interpolation", 11, 8, 0, online_interp_lut()));
  rows.push_back(lut_row("p select (EXP[0] on a new maximum)", 1, kExpBits));
}

// The board's two-phase unit (BOARD.md: 8 MACs per lane and the m multiplier, 17 DSP).
void add_two_phase_unit(std::vector<AttentionResourceRow>& rows) {
  // The MACs add into their DSP's accumulator (s_t over a K row; acc_d through the
  // post-adder from the rotating acc registers): no LUTs.
  rows.push_back(int8_macs_row());
  // s_max = max_t s_t (compare 32) and s_max - s_t (subtract 32), per lane.
  rows.push_back(lut_row("score maximum and difference", 1, 2 * 32 * kAddLutPerBit));
  // z = (diff x m) >> S: the 41-bit product over S = 0..63 (123), the legacy >> 8 select
  // (41), min(z, 255): the compare (41) and the select (8).
  rows.push_back(dsp_row("m multiplier", 23, 18, 0, shifter_lut(41, 64) + 41 + 41 * kAddLutPerBit + 8));
  rows.push_back({"EXP table (256 x 15 ROM)", "", 0, 0, rom_lut(256, kExpBits), 0});
  rows.push_back(lut_row("sum of p (32 bits)", 1, 32 * kAddLutPerBit));
  // The scores of a head, 512 x 32 bits per lane: one BRAM36 (1K x 36) each.
  rows.push_back({"score buffer (512 x 32 bits)", "", 1, 0, 0, model::kLanes});
}

// The online-softmax unit with int8 KV (docs/variants-attention.md 3 and 5).
void add_online_int8_unit(std::vector<AttentionResourceRow>& rows) {
  rows.push_back(int8_macs_row());
  add_online_exponent(rows);
  // The rescaled acc (one DSP product) plus p x V (another): 8 adds of 32 bits a clock.
  rows.push_back(dsp_row("rescale of acc (acc x alpha)", 32, 15, 8, model::kLanes * 8 * 32 * kAddLutPerBit));
  // The rescaled sum plus p: one 24-bit add.
  rows.push_back(dsp_row("rescale of sum", 24, 15, 1, model::kLanes * 24 * kAddLutPerBit));
  // r = floor(2^46 / sum): one quotient bit a clock (47 clocks), a 25-bit subtract and
  // restore; then acc x r on the DSPs.
  rows.push_back(dsp_row("normalizer (acc x r)", 32, 31, 1, model::kLanes * divider_lut(1, 24)));
}

// The online-softmax unit reading INT4 KV (docs/variants-attention.md 8.3, 8.4, 8.7):
// the int8 unit's maximum, exponent, p select, sum and divider, and the INT4 read path.
// Built for head dimension d (attention.head_dim): the q operand select and the outlier
// channel's q LUTRAM grow with d; the 16 products and adds a clock do not (a row takes more
// beats instead).
void add_online_int4_unit(std::vector<AttentionResourceRow>& rows, int d) {
  // A K beat: 16 nibbles, k12 = 16 k (wiring), 16 products q8 x k12 summed in the DSP cascade.
  rows.push_back(dsp_row("q.K multipliers (nibbles)", 8, 12, 16, 0));
  // The 16 q bytes of a K beat out of the d: a d/16:1 mux per bit (6:1 at d = 96: two LUT6 stages).
  rows.push_back(lut_row("q operand select", 1, 128 * shifter_lut(1, d / 16)));
  add_online_exponent(rows);
  // An outlier lane's fp16 value -> k12 (num::kv_outlier_fixed), one lane per clock:
  // decode the lane and the bank scale, sh = E_h - E_s + 4, shift the numerator (33 bits,
  // 23 amounts) or the denominator (24 bits, 14), 13 quotient bits over a 24-bit divisor,
  // the saturation compare (33), round half even (remainder compare 25, increment 13),
  // sign and clamp (13 + 12); the outlier channel's q byte from a d x 8 LUTRAM (64 x 1 a
  // LUT: 16 at d = 96).
  const int outlier = 2 * kFp16DecodeLut + 6 * kAddLutPerBit + shifter_lut(33, 23) + shifter_lut(24, 14) +
                      divider_lut(13, 24) + 33 * kAddLutPerBit + (25 + 13) * kAddLutPerBit +
                      (13 + 12) * kAddLutPerBit + (d + 63) / 64 * 8;
  rows.push_back(lut_row("outlier lane -> 12-bit K", 1, outlier));
  rows.push_back(dsp_row("outlier lane product q8 x k12", 8, 12, 1, 0));
  // A V group's weight: P = p_t x M (15 x 11 bits), then aligned by the scale's exponent
  // (26 -> 48 bits, 31 shift amounts) and rounded half up (48-bit add); the scale decoded.
  rows.push_back(dsp_row("V weight p x M", 15, 11, 1, model::kLanes * (kFp16DecodeLut + shifter_lut(48, 31) +
                                                                        48 * kAddLutPerBit)));
  // w x v with v a signed nibble: shift-adds in LUTs (two adders and a conditional
  // negation, 51 bits each), not 2 DSP48E1 for a 4-bit operand; 16 per clock per lane.
  rows.push_back(lut_row("V products w x v (48 x 4)", 16, 3 * 51 * kAddLutPerBit));
  // Sized for its T range of 1..2048 (docs/variants-attention.md 8.8): the d accumulators
  // of 62 bits per lane (flip-flops, rotated 16 at a time: no read mux), 16 adds of 62 bits
  // per clock (the rescaled acc plus w x v); the sum, its rescale and the divisor 26 bits.
  rows.push_back(lut_row("62-bit accumulate", 16, kInt4AccBits * kAddLutPerBit));
  rows.push_back(dsp_row("rescale of acc (acc x alpha)", kInt4AccBits, 15, 16, 0));
  rows.push_back(dsp_row("rescale of sum", kInt4SumBits, 15, 1, model::kLanes * kInt4SumBits * kAddLutPerBit));
  rows.push_back(dsp_row("normalizer (acc x r)", kInt4AccBits, 31, 1, model::kLanes * divider_lut(1, kInt4SumBits)));
}

// The online-softmax unit reading TIP's tiers (docs/tip.md "Stream"): the INT4 unit (its
// K lanes and V groups serve KVQ4+L and KVQ4) and what KVQ8 rows and the regions add.
void add_online_tip_unit(std::vector<AttentionResourceRow>& rows, int d) {
  add_online_int4_unit(rows, d);
  // A KVQ8 K beat: 8 int8 values into 8 of the 16 q.K multipliers (k12 = k8 sign-extended)
  // in place of 16 k: a 2:1 select per operand bit, 8 x 12 bits.
  rows.push_back(lut_row("KVQ8 K operand select", 1, 8 * 12));
  // A KVQ8 V beat: 8 products w x v8 (the row's one weight, 48 bits, times an int8) a clock.
  rows.push_back(dsp_row("KVQ8 V products w x v8", 48, 8, 8, 0));
  // ... and their 8 values into 8 of the 16 62-bit accumulates beside the nibble products:
  // a 2:1 select per bit.
  rows.push_back(lut_row("KVQ8 V accumulate select", 8, kInt4AccBits));
  // The current region's part l of the sum (26 bits): its rescale (l x alpha, beside the
  // sum's) and the add of p.
  rows.push_back(dsp_row("rescale of the region sum l", kInt4SumBits, 15, 1, model::kLanes * kInt4SumBits * kAddLutPerBit));
  // The register file of (l_r 26 bits, m_r 32 bits) per region: up to T / R = 2,048 / 16 =
  // 128 entries of 58 bits a lane, one BRAM36 (two 512 x 36 halves side by side).
  rows.push_back({"region register file (l_r, m_r) x 128", "", 1, 0, 0, model::kLanes});
  // The tier tags (2 bits x 128 regions) in LUTRAM (2 x 64 x 1 a bit, a 2:1 mux) and the
  // row's beat count by tier (K 12 / 7 / 8 / 6, V 12 / 7: a 3-bit select).
  rows.push_back(lut_row("tier tags and row length", 1, 2 * (2 + 1) + 3));
  // The masses after the normalizer's reciprocal, one region a clock on each lane (the
  // lanes may finish heads in the same clocks: each has its own exponent for them, a copy of
  // the shared m multiplier and interpolation).
  rows.push_back(dsp_row("mass exponent (m multiplier)", 23, 18, 1, model::kLanes * online_shift_lut()));
  rows.push_back(dsp_row("mass exponent (interpolation)", 11, 8, 1, model::kLanes * online_interp_lut()));
  // Then M - m_r (32-bit subtract), l_r x e_r on the sum's rescale multiplier (a 26-bit
  // operand select), x rr on the normalizer's (a 62-bit select), the rounding (20-bit add)
  // and the saturation at 65,535 (the 20 bits above 16: 20 LUT with the select).
  rows.push_back(lut_row("region masses (on the sum's and normalizer's multipliers)", 1, 32 + 26 + 62 + 20 + 20));
}

// The shared-stream unit (docs/variants-attention.md 9): every operator of the per-head unit
// once per member (G of them a lane) except those that work on the streamed row alone (the
// outlier lanes' decode to 12-bit K, the KVQ8 K operand select, the tier tags), which the
// members share. The lanes' shared exponent (the board's one m multiplier, EXP read and
// interpolation) becomes one per member per lane: a row's G weights are all needed at its
// first V beat (online: the clock after its last K beat), so none waits for another. Then
// the result select: a G:1 mux of each 64-bit result beat onto the stream.
void add_shared_stream(std::vector<AttentionResourceRow>& rows, int G) {
  for (AttentionResourceRow& row : rows) {
    if (row.name == "outlier lane -> 12-bit K" || row.name == "KVQ8 K operand select" ||
        row.name == "tier tags and row length")
      continue;  // the streamed row's: once a lane
    const int n = row.per_lane > 0 ? G : G * model::kLanes;
    if (row.per_lane == 0) {
      row.per_lane = G;
      row.name += " (one per member, per lane)";
    } else {
      row.per_lane *= G;
    }
    row.dsp *= n;
    row.bram36 *= n;
    if (row.lut) *row.lut *= n;
  }
  rows.push_back(lut_row(fmt::format("result select ({} members onto the stream, 64 bits)", G), 1, shifter_lut(64, G)));
}

}  // namespace

AttentionResources attention_resources(const AttentionUnitConfig& c) {
  AttentionResources r;
  if (c.kind() != model::AttentionVariant::OnlineSoftmax)
    add_two_phase_unit(r.rows);
  else if (c.tip_rows())
    add_online_tip_unit(r.rows, c.head_dim);
  else if (!c.int4())
    add_online_int8_unit(r.rows);
  else
    add_online_int4_unit(r.rows, c.head_dim);
  if (c.shared_stream()) add_shared_stream(r.rows, c.gqa_group);
  r.lut_complete = true;
  for (const auto& row : r.rows) {
    r.dsp += row.dsp;
    r.bram36 += row.bram36;
    if (row.lut) r.lut += *row.lut;
    else r.lut_complete = false;
  }
  return r;
}

}  // namespace bitsim::hw
