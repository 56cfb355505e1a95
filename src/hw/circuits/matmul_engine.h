#pragma once
// MatmulEngine: the ternary matrix x INT8 vector engine of CIRCUITS.md section 2, clocked as in
// docs/hw-timing.md (last section): the shared engine lanes (engine_lane.h: streams, result
// queue, busy, error latch, discard, clear, status registers) with the matmul datapath. Each
// lane takes a stream of groups (header, x, R packed ternary rows) and returns, per group, R
// int32 dot products acc_r = sum_j t_rj * x_j, two per beat, zero-padded per group, TLAST on
// the last beat of the transfer. The arithmetic equals golden::ternary_matvec bit for bit.
//
// The datapath, per lane, per beat taken at edge c:
//   - a row whose last beat is taken at c has its result ready at c + pipeline_depth: the
//     result beat holding it is queued for that edge. A beat holds two results; it is queued
//     when its second result is ready, or with the group's last result when R is odd (high
//     word 0);
//   - TLAST must be on exactly the last beat of the group flagged last (else Truncated, or
//     TrailingData when it is missing there);
//   - errors (ERROR_CODE = model::StreamError: 1 bad magic, 2 bad version, 3 reserved bits,
//     4 n outside 1..4096, 5 R = 0, 6 data byte >= 243, 7 truncated, 9 trailing data; padding
//     digits and bytes are not checked and never count): a completed row's result waiting
//     for its pair is queued alone; the lane does the rest (engine_lane.h). Details:
//     docs/hw-timing.md.
#include <array>
#include <string>
#include <cstdint>
#include <vector>

#include <systemc>

#include "hw/parts/clock.h"
#include "hw/circuits/engine_lane.h"
#include "hw/circuits/engine_registry.h"
#include "hw/fast/fast_engine.h"
#include "model/packed_image.h"

namespace bitsim::hw {

// The shipped default is the board's matmul engine as bitsim runs it (the board sets
// reg_base); visit() gives each field's key, range, unit, evidence label and meaning
// (base/config_field.h).
struct MatmulEngineConfig {
  int pipeline_depth = 4;      // cycles from a row's last input beat to the push of its result
                               // into the output FIFO (model, no board figure). Default 4, a
                               // plausible decode -> MAC -> adder tree -> output register
                               // pipeline
  int input_fifo_beats = 2;    // depth of each lane's input stream FIFO (beats); 2 sustains one
                               // beat per clock (reg_fifo.h)
  int output_fifo_beats = 16;  // depth of each lane's output stream FIFO (beats); when it is
                               // full the lane takes no input
  std::string format = "header";  // stream format: header (the board's) or per-call (the earlier
                                   // format: no header, fixed rows; docs/variants-host.md)
  int per_call_row_trits = 1536;   // per-call: the fixed row length L (model; the hidden size)
  int max_vectors = 1;             // the activation vectors V a group may carry (1: the board; set
                                   // by the board from prefill.tokens_per_pass, docs/prefill.md)
  uint64_t reg_base = 0x43C0'0000;  // byte address of the status register block (lane l at
                                    // reg_base + l * 0x100); transactions on `ctrl` carry
                                    // absolute addresses (set 0 behind a router that passes
                                    // offsets)

  template <typename Self, typename Visitor>
  static void visit(Self& c, Visitor&& v) {
    v(c.pipeline_depth, FieldInfo{"matmul.pipeline_depth", 0, 1024, "cycles", Evidence::kSimulated,
                                  "matmul engine: row's last beat -> its result (CIRCUITS.md 2)"});
    v(c.format, FieldInfo{"matmul.format", 0, 0, "", Evidence::kSimulated,
                          "matmul stream format: header (the board's: group header, rows of variable length) or "
                          "per-call (the earlier format: one DMA call per x, no header, fixed rows of "
                          "matmul.per_call_row_trits; docs/variants-host.md)",
                          1, true, {"header", "per-call"}});
    v(c.per_call_row_trits, FieldInfo{"matmul.per_call_row_trits", 1, 4096, "trits", Evidence::kSimulated,
                                      "per-call format: the engine's fixed row length L; longer rows are cut into "
                                      "ceil(n/L) segments, one call each, partial sums added by the CPU"});
    v(c.max_vectors, FieldInfo{"matmul.max_vectors", 1, model::kMaxVectors, "vectors", Evidence::kSimulated,
                               "activation vectors a group may carry (set from prefill.tokens_per_pass)", 1, false});
    visit_engine_ports(c, "matmul", "matmul engine", v);
  }
  bool per_call() const { return format == "per-call"; }
  // Throws bitsim::Error naming `who` and the key of the first field out of range.
  void validate(const std::string& who) const { check_engine_fields(*this, "matmul", engine_reg::kLaneStride, who); }
};

// The matmul arithmetic of one lane (CIRCUITS.md 2).
class MatmulDatapath final : public LaneDatapath {
 public:
  // per_call_row_trits = 0: the header format; L > 0: the per-call format with fixed rows of L.
  // max_vectors: the V a group may carry (prefill.tokens_per_pass; 1: the board).
  explicit MatmulDatapath(int per_call_row_trits = 0, int max_vectors = 1);
  uint32_t truncated_code() const override { return uint32_t(model::StreamError::Truncated); }
  uint32_t trailing_data_code() const override { return uint32_t(model::StreamError::TrailingData); }
  int error_row() const override;
  uint32_t queue_entries(int result_delay) const override;
  // A row's last beat queues its V results (ceil(V/2) beats, one more for a pending half)
  // and the error zero beat: 2 on the board.
  uint32_t room_for_next_beat(uint32_t) const override { return uint32_t((max_vectors_ + 1) / 2 + 1); }
  bool holds_result() const override { return half_valid_; }
  void take(EngineLane& lane, const StreamBeat& beat, uint64_t c) override;
  void abort(EngineLane& lane, uint64_t c) override;
  // The rows' multiply-adds are skipped (results zero); every trit byte is still checked.
  void skip_arithmetic() override { arithmetic_ = false; }

 private:
  enum class Phase : uint8_t { Header0, Header1, X, Rows };
  static constexpr int kMaxDataBytes = (model::kMaxRowLength + 4) / 5;  // 820
  void header1(EngineLane& lane, const StreamBeat& b, uint64_t c);
  void x_beat(const StreamBeat& b);
  void spread_x();
  void row_beat(EngineLane& lane, uint64_t data, bool tlast, uint64_t c);
  void finish_row(EngineLane& lane, bool tlast, uint64_t c);
  void start_group(uint32_t n, uint32_t rows, bool last, uint32_t vectors = 1);  // after a header, or per-call
  void queue_result(EngineLane& lane, int32_t r, bool alone, bool last_out, uint64_t ready);
  void expect_transfer();                                   // Header0, or per-call: x of L

  int per_call_ = 0;            // L of the per-call format; 0: header format
  int max_vectors_ = 1;         // prefill: the most vectors a group may carry
  bool arithmetic_ = true;      // false: skip_arithmetic

  Phase phase_ = Phase::Header0;
  uint64_t header0_ = 0;        // beat 0 of the current header
  uint32_t n_ = 0, rows_ = 0;   // current group
  uint32_t vectors_ = 1, vec_ = 0;  // its V, and the vector x is collecting
  bool last_group_ = false;
  int x_beats_ = 0, row_beats_ = 0, data_bytes_ = 0;
  int beat_ = 0;                // beat index within x or within the current row
  uint32_t row_ = 0;            // row index within the group
  std::vector<int32_t> acc_;    // one accumulator per vector
  bool half_valid_ = false;     // first result of a result beat waiting for its pair
  int32_t half_ = 0;
  // x, zero beyond n (up to the last data byte's 5 elements): vector p at p * kXStride.
  static constexpr size_t kXStride = model::kMaxRowLength + 16;
  std::vector<int8_t> x_;
  // x by byte position of a row: x[5k .. 5k+4] and 3 zeros at [8k .. 8k+7], built once per
  // group when x is complete, zero past the last data byte (a row's padding bytes meet
  // zeros); vector p at p * kByByteStride; allocated once.
  static constexpr size_t kByByteStride = size_t(kMaxDataBytes + 8) * 8;
  std::vector<int16_t> x_by_byte_;
  // Packed byte -> its 5 trits (-1, 0, 1) and 3 zeros, from model/packed_image's decode
  // table; bytes >= 243 are rejected before their (zero) entries could count.
  alignas(16) int16_t trits_[256][8];
};

// The matmul engine in fast fidelity (hw/fast/fast_engine.h): the group stream (or the per-call
// format) walked with model::next_group, each group's rows times x by the fast kernels.
// Key: "g{rows},{n},{last};" per group ("g{rows},{n},{last},{V};" for a prefill group of V > 1
// vectors), or "p{rows},{L};" for a per-call transfer.
class MatmulFastEngine final : public FastEngine {
 public:
  explicit MatmulFastEngine(const MatmulEngineConfig& config) : config_(config) {}
  bool compute(FastEngineContext& ctx, const std::vector<FastBuffer>& stream, std::string& key,
               std::vector<uint8_t>& results) const override;

 private:
  bool per_call(FastEngineContext& ctx, const FastBuffer& in, std::string& key, std::vector<uint8_t>& results) const;
  bool groups(FastEngineContext& ctx, const FastBuffer& in, std::string& key, std::vector<uint8_t>& results) const;
  MatmulEngineConfig config_;
};

// The matmul engine: the engine lanes with a MatmulDatapath per lane.
class MatmulEngine : public EngineLanes {
 public:
  // Throws std::invalid_argument for a pipeline_depth outside 0..1024 (and as EngineLanes).
  MatmulEngine(sc_core::sc_module_name name, Clock& clock, const MatmulEngineConfig& config);
  const MatmulEngineConfig& config() const { return config_; }

 private:
  MatmulEngineConfig config_;
};

// The matmul engine's registration (hw/circuits/engine_registry.h): registers at 0x43C0_0000,
// lanes fed by mm0 (0x4040_0000) and mm1 (0x4041_0000), built with or without the SG engine
// by board.matmul_dma_sg.
EngineKind matmul_engine_kind();

}  // namespace bitsim::hw
