#include "sim/fast_matvec.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/error.h"
#include "base/stop_signal.h"
#include "model/packed_image.h"

namespace bitsim::sim {

FastMatvec::FastMatvec(const model::TernaryModel& m, bool with_lm_head, int threads) {
  std::vector<const model::TernaryMatrix*> ws;
  for (const auto& L : m.layers)
    for (const model::TernaryMatrix* w : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) ws.push_back(w);
  if (with_lm_head) ws.push_back(&m.lm_head);
  for (const model::TernaryMatrix* w : ws) rows_.emplace(w, hw::fast::DecodedRows());
  std::vector<int> bad(ws.size(), -1);
  hw::fast::Workers workers(threads);
  // Eight matrices at a time, SIGINT / SIGTERM looked at between them.
  constexpr size_t kBatch = 8;
  for (size_t first = 0; first < ws.size(); first += kBatch) {
    check_stop();
    workers.run(int(std::min(kBatch, ws.size() - first)), [&](int k) {
      const size_t i = first + size_t(k);
      const model::TernaryMatrix& w = *ws[i];
      const std::vector<uint8_t> packed = model::pack_rows(w, 0, w.rows);
      if (!rows_.at(&w).decode(packed.data(), w.rows, w.cols, &bad[i])) bad[i] = std::max(bad[i], 0);
    });
  }
  for (size_t i = 0; i < ws.size(); ++i)
    if (bad[i] >= 0) throw Error(fmt::format("fast matvec: packed row {} of a {}x{} matrix does not decode", bad[i],
                                             ws[i]->rows, ws[i]->cols));
}

const hw::fast::DecodedRows& FastMatvec::rows(const model::TernaryMatrix& w) const {
  const auto it = rows_.find(&w);
  if (it == rows_.end()) throw Error(fmt::format("fast matvec: a {}x{} matrix that was not decoded", w.rows, w.cols));
  return it->second;
}

golden::MatvecFn FastMatvec::fn() const {
  return [this](const model::TernaryMatrix& w, const int8_t* x, int32_t* acc) { rows(w).matvec_rows(x, 0, w.rows, acc); };
}

golden::MatvecFn FastMatvec::fn(hw::fast::Workers& workers) const {
  return [this, &workers](const model::TernaryMatrix& w, const int8_t* x, int32_t* acc) {
    rows(w).matvec(x, acc, workers);
  };
}

golden::MatmulFn FastMatvec::matmul_fn(hw::fast::Workers& workers) const {
  return [this, &workers](const model::TernaryMatrix& w, const int8_t* x, int count, int32_t* acc) {
    rows(w).matmul(x, count, acc, workers);
  };
}

model::KvScales calibrate_kv_scales_fast(const model::TernaryModel& m, const std::vector<int>& tokens, int threads,
                                          int batch) {
  const FastMatvec fast(m, /*with_lm_head=*/false, threads);
  hw::fast::Workers workers(threads);
  return golden::calibrate_kv_scales_batched(m, tokens, fast.matmul_fn(workers), batch);
}

}  // namespace bitsim::sim
