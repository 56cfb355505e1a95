#include "hw/circuits/matmul_engine.h"

#include <fmt/format.h>

#include "hw/board.h"
#include "model/packed_image.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <string>

namespace bitsim::hw {

namespace {
static_assert(std::endian::native == std::endian::little, "beats are unpacked with memcpy");
// ERROR_CODE carries model::StreamError's numeric value; the register map fixes them.
using model::StreamError;
static_assert(int(StreamError::None) == 0 && int(StreamError::BadMagic) == 1 &&
              int(StreamError::BadVersion) == 2 && int(StreamError::ReservedBits) == 3 &&
              int(StreamError::BadLength) == 4 && int(StreamError::ZeroRows) == 5 &&
              int(StreamError::InvalidTrit) == 6 && int(StreamError::Truncated) == 7 &&
              int(StreamError::TrailingData) == 9,
              "ERROR_CODE values are documented in matmul_engine.h and docs/hw-timing.md");

void fail(EngineLane& lane, StreamError e, int row, bool tlast, uint64_t c) {
  lane.fail(uint32_t(e), row, tlast, c);
}

EngineLaneConfig checked_lane_config(const MatmulEngineConfig& config, const std::string& name) {
  config.validate(name);
  return EngineLaneConfig{config.pipeline_depth, config.input_fifo_beats, config.output_fifo_beats,
                          config.reg_base};
}
}  // namespace

// ---- MatmulEngine --------------------------------------------------------------------------

MatmulEngine::MatmulEngine(sc_core::sc_module_name name, Clock& clock, const MatmulEngineConfig& config)
    : EngineLanes(name, clock, checked_lane_config(config, std::string(name)),
                  [L = config.per_call() ? config.per_call_row_trits : 0, V = config.max_vectors] {
                    return std::make_unique<MatmulDatapath>(L, V);
                  }),
      config_(config) {}

// ---- MatmulDatapath ------------------------------------------------------------------------

MatmulDatapath::MatmulDatapath(int per_call_row_trits, int max_vectors)
    : per_call_(per_call_row_trits), max_vectors_(max_vectors), trits_{} {
  if (per_call_ < 0 || per_call_ > model::kMaxRowLength)
    throw std::invalid_argument("matmul datapath: per-call row length " + std::to_string(per_call_) +
                                " outside 1..4096");
  if (max_vectors_ < 1 || max_vectors_ > model::kMaxVectors)
    throw std::invalid_argument("matmul datapath: prefill.tokens_per_pass " + std::to_string(max_vectors_) +
                                " outside 1.." + std::to_string(model::kMaxVectors));
  x_.assign(kXStride * size_t(max_vectors_), 0);
  x_by_byte_.assign(kByByteStride * size_t(max_vectors_), 0);
  acc_.assign(size_t(max_vectors_), 0);
  expect_transfer();
  const model::TritDecodeTable& table = model::trit_decode_table();
  for (int b = 0; b < 256; ++b)
    if (table.valid[b])
      for (int i = 0; i < 5; ++i) trits_[b][i] = table.trits[b][i];
}

uint32_t MatmulDatapath::queue_entries(int result_delay) const {
  // At most two items are queued per edge (a flushed half beat and the error zero beat),
  // each waits at most result_delay edges plus the edges the result stream is full, during
  // which no input is taken: 2 * (delay + 2) + 8 entries never fill. With V vectors a row's
  // last beat queues up to ceil(V/2) + 1 beats: (ceil(V/2) + 1) * (delay + 2) + 8 (the same
  // for V = 1).
  return uint32_t((max_vectors_ + 1) / 2 + 1) * uint32_t(result_delay + 2) + 8u;
}

void MatmulDatapath::take(EngineLane& lane, const StreamBeat& b, uint64_t c) {
  switch (phase_) {
    case Phase::Rows: return row_beat(lane, b.data, b.last, c);  // the common case
    case Phase::Header0: {
      header0_ = b.data;
      const uint16_t magic = uint16_t(b.data & 0xFFFF);
      const uint8_t version = uint8_t((b.data >> 16) & 0xFF);
      if (magic != model::kMatmulMagic) return fail(lane, StreamError::BadMagic, -1, b.last, c);
      if (version != model::kMatmulVersion) return fail(lane, StreamError::BadVersion, -1, b.last, c);
      phase_ = Phase::Header1;
      return;
    }
    case Phase::Header1: return header1(lane, b, c);
    case Phase::X: return x_beat(b);
  }
}

void MatmulDatapath::header1(EngineLane& lane, const StreamBeat& b, uint64_t c) {
  uint8_t bytes[model::kHeaderBytes];
  std::memcpy(bytes, &header0_, 8);
  std::memcpy(bytes + 8, &b.data, 8);
  model::GroupHeader h;
  const StreamError e = model::parse_group_header(bytes, &h, max_vectors_);
  if (e != StreamError::None) return fail(lane, e, -1, b.last, c);
  start_group(h.n, h.rows, h.last, h.vectors);
}

void MatmulDatapath::start_group(uint32_t n, uint32_t rows, bool last, uint32_t vectors) {
  n_ = n;
  rows_ = rows;
  last_group_ = last;
  vectors_ = vectors;
  vec_ = 0;
  x_beats_ = int((n + 7) / 8);
  data_bytes_ = int((n + 4) / 5);
  row_beats_ = int(model::packed_row_bytes(int(n)) / 8);
  beat_ = 0;
  row_ = 0;
  std::fill(acc_.begin(), acc_.end(), 0);
  phase_ = Phase::X;
}

void MatmulDatapath::expect_transfer() {
  // Per-call: no header; x of L, then fixed rows of L until TLAST (rows_ = 0: unbounded).
  if (per_call_ > 0) start_group(uint32_t(per_call_), 0, true);
  else phase_ = Phase::Header0;
}

void MatmulDatapath::x_beat(const StreamBeat& b) {
  int8_t* x = x_.data() + kXStride * vec_;
  if (!collect_beat(x, &beat_, x_beats_, b.data)) return;
  // x_j = 0 for j >= n: the stream's x padding and the row's padding digits never count.
  std::fill(x + n_, x + kXStride, int8_t(0));
  if (++vec_ < vectors_) return;  // the next vector's beats follow
  spread_x();
  phase_ = Phase::Rows;
}

void MatmulDatapath::spread_x() {
  // Byte positions up to 7 past the last data byte are read (the last beat's padding bytes).
  for (uint32_t p = 0; p < vectors_; ++p) {
    const int8_t* x = x_.data() + kXStride * p;
    int16_t* out = x_by_byte_.data() + kByByteStride * p;
    for (int k = 0; k < data_bytes_ + 8; ++k, out += 8)
      for (int i = 0; i < 8; ++i) out[i] = k < data_bytes_ && i < 5 ? x[size_t(5 * k + i)] : int16_t(0);
  }
}

void MatmulDatapath::row_beat(EngineLane& lane, uint64_t data, bool tlast, uint64_t c) {
  const int first = beat_ * 8;                         // byte index within the row
  const int count = std::min(8, data_bytes_ - first);  // data bytes in this beat (>= 1)
  // Any data byte >= 243 (0xF3) is an invalid trit byte: all 8 bytes checked at once (a byte
  // is >= 0xF3 when its top bit is set and its low 7 bits plus 0x0D carry into bit 7).
  constexpr uint64_t kLow7 = 0x7F7F7F7F7F7F7F7Full, kTop = 0x8080808080808080ull, k0D = 0x0D0D0D0D0D0D0D0Dull;
  const uint64_t data_mask = count == 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * count)) - 1;
  if ((((data & kLow7) + k0D) & data & kTop & data_mask) != 0)
    return fail(lane, StreamError::InvalidTrit, int(row_), tlast, c);
  // The 5 MACs of each byte: its trits against x at its position, 8 lanes wide (the compiler
  // vectorises this); padding bytes meet zeros. Exact in int16: a lane adds 8 products of a
  // trit and an int8, within +-1024. The same decoded trits meet each of the V vectors.
  for (uint32_t p = 0; arithmetic_ && p < vectors_; ++p) {
    const int16_t* x = x_by_byte_.data() + kByByteStride * p + size_t(first) * 8;
    int16_t macs[8] = {};
    for (int k = 0; k < 8; ++k, x += 8) {
      const int16_t* t = trits_[uint8_t(data >> (8 * k))];
      for (int i = 0; i < 8; ++i) macs[i] = int16_t(macs[i] + t[i] * x[i]);
    }
    int32_t sum = 0;
    for (int16_t v : macs) sum += v;
    acc_[p] += sum;
  }
  if (++beat_ == row_beats_) finish_row(lane, tlast, c);
}

// One result into the result beats: paired with a waiting half, alone at the group's end
// (an odd count: the high word is padding), else held for its pair.
void MatmulDatapath::queue_result(EngineLane& lane, int32_t r, bool alone, bool last_out, uint64_t ready) {
  if (half_valid_) {
    lane.queue(uint64_t(uint32_t(half_)) | (uint64_t(uint32_t(r)) << 32), last_out, ready);
    half_valid_ = false;
  } else if (alone) {
    lane.queue(uint64_t(uint32_t(r)), last_out, ready);
  } else {
    half_ = r;
    half_valid_ = true;
  }
}

void MatmulDatapath::finish_row(EngineLane& lane, bool tlast, uint64_t c) {
  beat_ = 0;
  lane.row_done();
  // Per-call: the group (the transfer) ends with the row that carries TLAST.
  const bool group_end = per_call_ > 0 ? tlast : row_ + 1 == rows_;
  const bool transfer_end = group_end && last_group_;
  const uint64_t ready = c + uint64_t(lane.result_delay());
  // The row's V results in vector order (docs/prefill.md); the last one closes the group.
  for (uint32_t p = 0; p < vectors_; ++p) {
    const bool row_last = p + 1 == vectors_;
    queue_result(lane, acc_[p], group_end && row_last, transfer_end && tlast && row_last, ready);
    acc_[p] = 0;
  }
  ++row_;
  if (!group_end) return;
  lane.unit_done();
  expect_transfer();
  if (transfer_end) lane.end_transfer(tlast, c);
}

int MatmulDatapath::error_row() const {
  // Inside the rows: the row in progress, or the next one after a row's last beat; -1 in a
  // header or x (x just complete included).
  return phase_ == Phase::Rows && (row_ > 0 || beat_ > 0) ? int(row_) : -1;
}

void MatmulDatapath::abort(EngineLane& lane, uint64_t c) {
  if (half_valid_) {  // a completed row's result still waiting for its pair leaves alone
    lane.queue(uint64_t(uint32_t(half_)), false, c + uint64_t(lane.result_delay()));
    half_valid_ = false;
  }
  expect_transfer();
}

EngineKind matmul_engine_kind() {
  EngineKind k;
  k.name = "matmul";
  k.regs = 0x43C0'0000;  // the PYNQ base design's defaults for custom IP and AXI DMA
  k.dma_names = {"mm0", "mm1"};
  k.dma_bases = {0x4040'0000, 0x4041'0000};
  k.stream = "the packed matmul image's groups (model/packed_image.h)";
  k.unit = "group";
  k.dma_sg = [](const BoardConfig& c) { return c.matmul_dma_sg; };
  set_faces<MatmulEngine, MatmulFastEngine>(k, [](const BoardConfig& c) { return c.matmul_config(); });
  k.error_name = [](uint32_t code) { return std::string(model::stream_error_name(model::StreamError(code))); };
  k.output_keys = [](const BoardConfig& c) {
    return std::vector<std::string>{fmt::format("matmul.output_fifo_beats = {}", c.matmul.output_fifo_beats)};
  };
  return k;
}

}  // namespace bitsim::hw
