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
  for (const model::TernaryMatrix* w : ws) rows_[w].resize(size_t(model::row_segments(w->cols)));
  std::vector<int> bad(ws.size(), -1);
  hw::fast::Workers workers(threads);
  // Eight matrices at a time, SIGINT / SIGTERM looked at between them.
  constexpr size_t kBatch = 8;
  for (size_t first = 0; first < ws.size(); first += kBatch) {
    check_stop();
    workers.run(int(std::min(kBatch, ws.size() - first)), [&](int k) {
      const size_t i = first + size_t(k);
      const model::TernaryMatrix& w = *ws[i];
      std::vector<hw::fast::DecodedRows>& segs = rows_.at(&w);
      if (segs.size() == 1) {
        const std::vector<uint8_t> packed = model::pack_rows(w, 0, w.rows);
        if (!segs[0].decode(packed.data(), w.rows, w.cols, &bad[i])) bad[i] = std::max(bad[i], 0);
        return;
      }
      const int L = model::segment_trits(w.cols);
      const size_t row_bytes = model::packed_row_bytes(L);
      std::vector<uint8_t> packed(size_t(w.rows) * row_bytes);
      for (size_t s = 0; s < segs.size(); ++s) {
        for (int r = 0; r < w.rows; ++r)
          model::pack_row_segment(w.row(r), w.cols, int(s), L, packed.data() + size_t(r) * row_bytes);
        if (!segs[s].decode(packed.data(), w.rows, L, &bad[i])) bad[i] = std::max(bad[i], 0);
      }
    });
  }
  for (size_t i = 0; i < ws.size(); ++i)
    if (bad[i] >= 0) throw Error(fmt::format("fast matvec: packed row {} of a {}x{} matrix does not decode", bad[i],
                                             ws[i]->rows, ws[i]->cols));
}

const std::vector<hw::fast::DecodedRows>& FastMatvec::segments(const model::TernaryMatrix& w) const {
  const auto it = rows_.find(&w);
  if (it == rows_.end()) throw Error(fmt::format("fast matvec: a {}x{} matrix that was not decoded", w.rows, w.cols));
  return it->second;
}

template <typename Run>
void FastMatvec::by_segments(const model::TernaryMatrix& w, const int8_t* x, int count, int32_t* acc,
                             Run&& run) const {
  const std::vector<hw::fast::DecodedRows>& segs = segments(w);
  if (segs.size() == 1) return run(segs[0], x, acc);
  const int n = w.cols, L = model::segment_trits(n);
  const size_t out = size_t(count) * size_t(w.rows);
  std::vector<int8_t> xs(size_t(count) * size_t(L));
  std::vector<int32_t> partial(out);
  for (size_t s = 0; s < segs.size(); ++s) {
    const int first = int(s) * L, len = std::min(L, n - first);
    std::fill(xs.begin(), xs.end(), int8_t(0));  // x past n: zero, as the host's stream slot
    for (int i = 0; i < count; ++i)
      std::copy_n(x + size_t(i) * size_t(n) + size_t(first), size_t(len), xs.begin() + ptrdiff_t(i) * L);
    run(segs[s], xs.data(), s == 0 ? acc : partial.data());
    if (s > 0)
      for (size_t k = 0; k < out; ++k) acc[k] += partial[k];  // the host's partial-sum addition, exact
  }
}

golden::MatvecFn FastMatvec::fn() const {
  return [this](const model::TernaryMatrix& w, const int8_t* x, int32_t* acc) {
    by_segments(w, x, 1, acc, [&](const hw::fast::DecodedRows& d, const int8_t* xs, int32_t* a) {
      d.matvec_rows(xs, 0, w.rows, a);
    });
  };
}

golden::MatvecFn FastMatvec::fn(hw::fast::Workers& workers) const {
  return [this, &workers](const model::TernaryMatrix& w, const int8_t* x, int32_t* acc) {
    by_segments(w, x, 1, acc, [&](const hw::fast::DecodedRows& d, const int8_t* xs, int32_t* a) {
      d.matvec(xs, a, workers);
    });
  };
}

golden::MatmulFn FastMatvec::matmul_fn(hw::fast::Workers& workers) const {
  return [this, &workers](const model::TernaryMatrix& w, const int8_t* x, int count, int32_t* acc) {
    by_segments(w, x, count, acc, [&](const hw::fast::DecodedRows& d, const int8_t* xs, int32_t* a) {
      d.matmul(xs, count, a, workers);
    });
  };
}

model::KvScales calibrate_kv_scales_fast(const model::TernaryModel& m, const std::vector<int>& tokens, int threads,
                                          int batch) {
  const FastMatvec fast(m, /*with_lm_head=*/false, threads);
  hw::fast::Workers workers(threads);
  return golden::calibrate_kv_scales_batched(m, tokens, fast.matmul_fn(workers), batch);
}

}  // namespace bitsim::sim
