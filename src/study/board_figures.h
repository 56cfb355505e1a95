#pragma once
// The real board's measured figures (BOARD.md), the one place bitsim keeps them: calibrate
// and validate fit and compare against them, run and bench print them beside the simulated
// ones, inspect compares the packed image with them. Every figure here is `board`.
namespace bitsim::study::board_figures {

// End to end, one token at a time (C DMA driver, NEON CPU ops): BOARD.md, "End to end".
struct EndToEnd {
  int T;
  double matmul_ms, attention_ms, cpu_ms, total_ms, tok_s;
};
inline constexpr EndToEnd kEndToEnd[] = {{64, 87.3, 5.3, 26.6, 119.2, 8.39}, {512, 87.4, 22.0, 26.7, 136.0, 7.35}};
inline constexpr const EndToEnd& kEndToEndT64 = kEndToEnd[0];
inline constexpr const EndToEnd& kEndToEndT512 = kEndToEnd[1];

// The attention unit alone at T=512, 24 layers x 16 heads: BOARD.md, "Attention unit alone".
constexpr double kAttentionAloneMs = 20.22;
constexpr double kAttentionAloneGbS = 1.872;

// From Python, each DMA transfer took about 150 us longer than theory (BOARD.md, "The
// host-software path"): an approximate figure, checked by the python driver's prediction.
constexpr double kPythonTransferOverheadUs = 150.0;

// The packed ternary weights of bitnet-large on the board (BOARD.md, "The model on the board").
constexpr double kPackedImageMiB = 141.3;

}  // namespace bitsim::study::board_figures
