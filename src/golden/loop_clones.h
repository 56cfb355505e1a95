#pragma once
// BITSIM_GOLDEN_CLONES: the golden reference's integer loops stay plain C++, and the compiler
// emits them three times, for AVX-512 (x86-64-v4), AVX2 and the baseline, the best of which
// the CPU supports is chosen at run time. The loops' integer sums do not depend on the order
// of their additions (no overflow in any order: each loop says why), so every clone gives the
// same result; the wider one keeps the golden check beside every token and every prefill
// chunk cheap (docs/prefill.md 9, "Prompts in batches: the golden loops for AVX-512").
// Clang 14 emits the clones of a member function but not its dispatcher (a clang build, the
// fuzz preset, failed to link), and does not take the arch= form: there the loops are
// compiled once, for the default target.
#if defined(__clang__)
#define BITSIM_GOLDEN_CLONES
#else
#define BITSIM_GOLDEN_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif
