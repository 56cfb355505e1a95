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

// The attention unit's head dimension: q, K and V rows are 96 int8 (CIRCUITS.md 3).
constexpr int kHeadDim = 96;

// KV positions per (layer, head): the KV cache areas hold 512 rows (CIRCUITS.md 5), and the
// attention unit takes T in 1..512 (CIRCUITS.md 3).
constexpr int kKvPositions = 512;

// The attention unit's result per head: acc_0..acc_95 (int32), sum (uint32), one zero word
// (CIRCUITS.md 3): 98 words, 49 beats.
constexpr int kAttentionSumWord = kHeadDim;  // index of sum among the result words
constexpr int kAttentionResultWords = kHeadDim + 2;
constexpr int kAttentionResultBeats = kAttentionResultWords / 2;
static_assert(kAttentionResultWords == 98 && kAttentionResultBeats == 49);

}  // namespace bitsim::model
