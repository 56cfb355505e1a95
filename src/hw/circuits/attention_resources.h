#pragma once
// The attention unit's resources (model: stated per-operator costs, no RTL;
// docs/variants-attention.md 5 and 8.7): DSP48E1, LUT and BRAM36 of every variant's
// datapath operators. Control, stream framing and counters are not counted, so the board's
// unit here is a part of the board's 34% of the LUTs (a whole-design figure).
#include <optional>
#include <string>
#include <vector>

#include "hw/circuits/attention_unit.h"

namespace bitsim::hw {

// DSP48E1 for an a x b bit product: one if it fits the DSP's 25 x 18 signed multiplier,
// else ceil(a/24) x ceil(b/17) (unsigned widths; a the wider operand).
int dsp48_count(int a_bits, int b_bits);

struct AttentionResourceRow {
  std::string name;   // the operator or block
  std::string width;  // its product's operand widths in bits ("" for no product)
  int per_lane = 0;   // instances in each lane (0: one for the whole unit, shared by the lanes)
  int dsp = 0;        // the unit's DSP48E1 for this row, all lanes
  std::optional<int> lut;  // the unit's LUTs for this row, all lanes; empty: not modelled
  int bram36 = 0;
};

struct AttentionResources {
  std::vector<AttentionResourceRow> rows;
  int dsp = 0;
  int lut = 0;      // the sum of the rows whose LUTs are modelled
  int bram36 = 0;
  bool lut_complete = false;  // every row's LUTs modelled (false: lut sums only the modelled rows)
};

// The unit the config builds (attention.variant, kv.format; the INT4 unit takes the number
// of outlier lanes, 0..8, from its header, so kv.outlier_channels changes nothing here; the
// TIP unit takes L and R from its header, so kv.tip.* change nothing here either: it is
// sized for R = 16 at T = 2,048, 128 regions). attention.gqa = shared-stream: the unit built for
// G = attention.gqa_group members a lane (docs/variants-attention.md 9). attention.head_dim
// = d: the INT4 and TIP units' q operand select (a d/16:1 mux) and outlier q LUTRAM (d x 8)
// grow with d; the MACs, multipliers, adders and BRAMs do not (8 MACs, 16 INT4 products a
// clock: a row of d takes d / 8 beats), and the registers that hold q and the d
// accumulators are flip-flops, not counted (docs/variants-attention.md 10).
AttentionResources attention_resources(const AttentionUnitConfig& config);

}  // namespace bitsim::hw
