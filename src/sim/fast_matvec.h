#pragma once
// The matmul engine's arithmetic for the host-side passes (the K/V calibration pass, the
// eval board rows) through the fast fidelity's decoded kernels: every ternary matrix of a
// model packed (CIRCUITS.md 2) and decoded once into hw::fast::DecodedRows, which
// fast_kernels_test proves equal to golden::ternary_matvec (integer sums, so the results
// are bit for bit those of the plain loop). A matrix whose rows are longer than the engine's
// 4096 is decoded in its segments (model::row_segments, docs/packed-image.md) and its sums
// are the segments' sums added in segment order, as the host adds the board's.
#include <memory>
#include <unordered_map>
#include <vector>

#include "golden/board_reference.h"
#include "hw/fast/fast_kernels.h"
#include "model/model_loader.h"

namespace bitsim::sim {

class FastMatvec {
 public:
  // Decodes every matrix of m (the lm_head too if `with_lm_head`), matrices in parallel over
  // `threads` threads.
  FastMatvec(const model::TernaryModel& m, bool with_lm_head, int threads);
  // acc = w x for a matrix of the model, on the calling thread.
  golden::MatvecFn fn() const;
  // The same with rows split over `workers` (owned by the caller, one user at a time).
  golden::MatvecFn fn(hw::fast::Workers& workers) const;
  // Several vectors with one matrix (hw::fast::DecodedRows::matmul), rows split over `workers`.
  golden::MatmulFn matmul_fn(hw::fast::Workers& workers) const;

 private:
  // The decoded segments of w: one of w.cols trits, or model::row_segments(w.cols) of
  // model::segment_trits(w.cols) (the last one's trits past w.cols zero).
  const std::vector<hw::fast::DecodedRows>& segments(const model::TernaryMatrix& w) const;
  // acc[i * w.rows + r] = sum_j t_rj * x[i * w.cols + j] for i < count: `run` called per
  // segment with that segment's x (count vectors of its length) and partial sums.
  template <typename Run>
  void by_segments(const model::TernaryMatrix& w, const int8_t* x, int count, int32_t* acc, Run&& run) const;
  std::unordered_map<const model::TernaryMatrix*, std::vector<hw::fast::DecodedRows>> rows_;
};

// The K/V calibration pass (golden::calibrate_kv_scales_batched, kCalibrationBatch positions
// at a time) with its matmuls on the decoded kernels over `threads` threads; the scales are
// bit for bit the plain loop's (FastMatvec.CalibrationGivesThePlainLoopsScales).
constexpr int kCalibrationBatch = 48;
model::KvScales calibrate_kv_scales_fast(const model::TernaryModel& m, const std::vector<int>& tokens, int threads,
                                          int batch = kCalibrationBatch);

}  // namespace bitsim::sim
