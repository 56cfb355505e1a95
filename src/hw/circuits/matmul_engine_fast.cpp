// MatmulFastEngine (hw/circuits/matmul_engine.h): the matmul engine's fast face. Compiled apart from
// the clocked datapath so that the fuzz build keeps compare tracing on it (src/CMakeLists.txt).
#include "hw/circuits/matmul_engine.h"

#include <fmt/format.h>

namespace bitsim::hw {

namespace {
uint64_t pad8(uint64_t b) { return (b + 7) / 8 * 8; }
}  // namespace

bool MatmulFastEngine::compute(FastEngineContext& ctx, const std::vector<FastBuffer>& stream, std::string& key,
                               std::vector<uint8_t>& results) const {
  if (stream.size() != 1) return false;  // the matmul DMAs run in simple mode: one buffer
  return config_.per_call() ? per_call(ctx, stream[0], key, results) : groups(ctx, stream[0], key, results);
}

// The per-call format: x of L, then whole fixed rows of L (docs/variants-host.md).
bool MatmulFastEngine::per_call(FastEngineContext& ctx, const FastBuffer& in, std::string& key,
                                std::vector<uint8_t>& results) const {
  const int L = config_.per_call_row_trits;
  const int rows = model::per_call_rows(in.bytes, L);
  if (rows < 1) return false;
  key += fmt::format("p{},{};", rows, L);
  results.resize(pad8(uint64_t(rows) * 4), 0);
  if (ctx.timing_only) return true;
  const fast::DecodedRows* w = ctx.decoded(in.addr + model::packed_x_bytes(L), rows, L);
  if (!w) return false;  // an invalid trit byte
  std::vector<int8_t> x(static_cast<size_t>(L));
  ctx.memory.read(in.addr, x.data(), size_t(L));
  w->matvec(x.data(), reinterpret_cast<int32_t*>(results.data()), ctx.workers);
  return true;
}

// The header format: groups of (header, V vectors of x, rows) up to the group flagged last;
// per row its V sums (docs/prefill.md; V = 1: the board's group).
bool MatmulFastEngine::groups(FastEngineContext& ctx, const FastBuffer& in, std::string& key,
                              std::vector<uint8_t>& results) const {
  uint64_t pos = in.addr;
  const uint64_t end = pos + in.bytes;
  std::vector<int8_t> x;
  std::vector<int32_t> by_vector;
  for (bool last = false; !last;) {
    uint8_t hdr[16] = {};
    if (end - pos >= 16) ctx.memory.read(pos, hdr, 16);
    model::GroupLayout g;
    if (model::next_group(hdr, end - pos, &g, config_.max_vectors) != model::StreamError::None) return false;
    const model::GroupHeader& h = g.header;
    const uint32_t V = h.vectors;
    key += V == 1 ? fmt::format("g{},{},{};", h.rows, h.n, int(h.last))
                  : fmt::format("g{},{},{},{};", h.rows, h.n, int(h.last), V);
    const size_t at = results.size();
    results.resize(at + pad8(uint64_t(h.rows) * V * 4), 0);
    if (!ctx.timing_only) {
      const fast::DecodedRows* w = ctx.decoded(pos + g.rows_offset, int(h.rows), int(h.n));
      if (!w) return false;  // an invalid trit byte
      auto* out = reinterpret_cast<int32_t*>(results.data() + at);
      if (V == 1) {
        x.resize(h.n);
        ctx.memory.read(pos + g.x_offset, x.data(), h.n);
        w->matvec(x.data(), out, ctx.workers);
      } else {
        // The V vectors, each at its beat-padded place, packed to n apart for the kernel; the
        // kernel's sums come vector-major and leave row-major.
        const size_t xb = model::packed_x_bytes(int(h.n));
        x.resize(size_t(V) * h.n);
        for (uint32_t p = 0; p < V; ++p) ctx.memory.read(pos + g.x_offset + p * xb, x.data() + size_t(p) * h.n, h.n);
        by_vector.resize(size_t(V) * h.rows);
        w->matmul(x.data(), int(V), by_vector.data(), ctx.workers);
        for (uint32_t r = 0; r < h.rows; ++r)
          for (uint32_t p = 0; p < V; ++p) out[size_t(r) * V + p] = by_vector[size_t(p) * h.rows + r];
      }
    }
    last = h.last;
    pos += g.bytes;
  }
  return pos == end;
}

}  // namespace bitsim::hw
