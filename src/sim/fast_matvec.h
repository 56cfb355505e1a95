#pragma once
// The matmul engine's arithmetic for the host-side passes (the K/V calibration pass, the
// eval board rows) through the fast fidelity's decoded kernels: every ternary matrix of a
// model packed (CIRCUITS.md 2) and decoded once into hw::fast::DecodedRows, which
// fast_kernels_test proves equal to golden::ternary_matvec (integer sums, so the results
// are bit for bit those of the plain loop).
#include <memory>
#include <unordered_map>

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
  const hw::fast::DecodedRows& rows(const model::TernaryMatrix& w) const;
  std::unordered_map<const model::TernaryMatrix*, hw::fast::DecodedRows> rows_;
};

// The K/V calibration pass (golden::calibrate_kv_scales_batched, kCalibrationBatch positions
// at a time) with its matmuls on the decoded kernels over `threads` threads; the scales are
// bit for bit the plain loop's (FastMatvec.CalibrationGivesThePlainLoopsScales).
constexpr int kCalibrationBatch = 48;
model::KvScales calibrate_kv_scales_fast(const model::TernaryModel& m, const std::vector<int>& tokens, int threads,
                                          int batch = kCalibrationBatch);

}  // namespace bitsim::sim
