#pragma once
// The board's shape: the fixed numbers of the circuits (CIRCUITS.md 1-3, 5) that the golden
// reference, the host runtime and both fidelities share. One home for each; everything else
// derives from these.
//
// Not here: the stream formats (model/packed_image.h for the matmul engine,
// model/attention_stream.h for the attention unit) and the AXI DMA's register and SG
// descriptor layout (hw/interconnect/axi_dma.h, namespace dma_reg: a descriptor is dma_reg::kDescBytes
// = 64 bytes, 0x40-aligned).

namespace bitsim::model {

// A beat of the 64-bit AXI and AXI-Stream buses: 8 bytes, little-endian (CIRCUITS.md). Both
// engines' stream headers are two beats.
constexpr int kBeatBytes = 8;
constexpr int kHeaderBytes = 2 * kBeatBytes;

// Lanes per engine: mm0 / mm1 feed the matmul engine's two lanes, at0 / at1 the attention
// unit's (CIRCUITS.md 1). Fixed: the board, the DMAs, the host's split of rows and heads
// are built for two.
constexpr int kLanes = 2;

// The attention unit's head dimension d: q, K and V rows are d int8, d / 8 beats
// (CIRCUITS.md 3). The unit is built for one d, the config key attention.head_dim
// (hw::AttentionUnitConfig); the board's unit is built for 96, the key's default. Every
// quantity below that depends on it is a function of the d the unit is built for.
constexpr int kBoardHeadDim = 96;
// The range of attention.head_dim: whole beats (8 int8 a beat, the lane's 8 MACs) up to 256,
// the largest d whose channel index fits the INT4 and TIP banks' one-byte outlier channel
// list. The INT4 and TIP formats also need whole V groups (model::kKvVGroup = 32,
// model::check_head_dim).
constexpr int kHeadDimStep = kBeatBytes;
constexpr int kMaxHeadDim = 256;
constexpr bool head_dim_in_range(int d) { return d >= kHeadDimStep && d <= kMaxHeadDim && d % kHeadDimStep == 0; }

// KV positions per (layer, head): the KV cache areas hold 512 rows (CIRCUITS.md 5), and the
// attention unit takes T in 1..512 (CIRCUITS.md 3).
constexpr int kKvPositions = 512;

// The attention unit's result per head: acc_0..acc_{d-1} (int32), sum (uint32), one zero
// word (CIRCUITS.md 3): d + 2 words, d / 2 + 1 beats (98 words, 49 beats at d = 96).
constexpr int attention_sum_word(int d) { return d; }  // index of sum among the result words
constexpr int attention_result_words(int d) { return d + 2; }
constexpr int attention_result_beats(int d) { return attention_result_words(d) / 2; }
static_assert(attention_result_words(kBoardHeadDim) == 98 && attention_result_beats(kBoardHeadDim) == 49);

}  // namespace bitsim::model
