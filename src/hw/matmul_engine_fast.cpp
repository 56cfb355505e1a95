// MatmulFastEngine (hw/matmul_engine.h): the matmul engine's fast face. Compiled apart from
// the clocked datapath so that the fuzz build keeps compare tracing on it (src/CMakeLists.txt).
#include "hw/matmul_engine.h"

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

// The header format: groups of (header, x, rows) up to the group flagged last.
bool MatmulFastEngine::groups(FastEngineContext& ctx, const FastBuffer& in, std::string& key,
                              std::vector<uint8_t>& results) const {
  uint64_t pos = in.addr;
  const uint64_t end = pos + in.bytes;
  std::vector<int8_t> x;
  for (bool last = false; !last;) {
    uint8_t hdr[16] = {};
    if (end - pos >= 16) ctx.memory.read(pos, hdr, 16);
    model::GroupLayout g;
    if (model::next_group(hdr, end - pos, &g) != model::StreamError::None) return false;
    const model::GroupHeader& h = g.header;
    key += fmt::format("g{},{},{};", h.rows, h.n, int(h.last));
    const size_t at = results.size();
    results.resize(at + pad8(uint64_t(h.rows) * 4), 0);
    if (!ctx.timing_only) {
      const fast::DecodedRows* w = ctx.decoded(pos + g.rows_offset, int(h.rows), int(h.n));
      if (!w) return false;  // an invalid trit byte
      x.resize(h.n);
      ctx.memory.read(pos + g.x_offset, x.data(), h.n);
      w->matvec(x.data(), reinterpret_cast<int32_t*>(results.data() + at), ctx.workers);
    }
    last = h.last;
    pos += g.bytes;
  }
  return pos == end;
}

}  // namespace bitsim::hw
