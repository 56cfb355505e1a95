#pragma once
// MemoryMap: where every buffer the DMAs touch lives in the simulated DDR, allocated from
// the contiguous-memory (CMA) region as the board's runtime does (CIRCUITS.md 5).
//
// Matmul calls: for every matrix group (qkv, o, gate+up, down, and the lm_head, possibly
// split into several calls) and each lane, one contiguous stream region:
//     [16-byte group header][x, n bytes padded to a beat][the lane's packed rows]
// The rows are written once at load time; the CPU writes the header and x before each
// call, so one simple-mode MM2S transfer carries the whole group (the board's image holds
// these slots too: docs/packed-image.md). Results: one buffer per lane, 4 bytes per row
// padded to a beat.
// Attention calls: per (layer, K/V head) a K area and a V area of 512 rows x 96 bytes (the
// online-softmax unit: one area of 512 rows x 192 bytes, K_t and V_t interleaved; with
// grouped-query attention the query heads of a group read their K/V head's area); per lane
// and query head a 112-byte header+q buffer (16 + 96); per lane a result buffer of 8 heads x
// 49 beats; per lane a ring of SG descriptors (64-byte aligned).
// Every buffer starts on a 4 KiB page, as CMA buffers from the board's allocator do.
// A layout that does not fit the CMA size is refused with the sizes that do not fit.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "model/board_shape.h"
#include "model/kv_format.h"
#include "model/kv_tip.h"
#include "model/model_config.h"

namespace bitsim::host {

using model::kLanes;

struct MemoryMapConfig {
  uint64_t ddr_bytes = 512ull << 20;  // DDR size (ddr.size_mib; BOARD.md: 512 MB)
  uint64_t cma_base = 0x08000000;     // where the contiguous region starts (model)
  uint64_t cma_bytes = 192ull << 20;  // its size; see configs/pynq-z2.toml and docs/memory.md
  uint64_t max_transfer_bytes = (1u << 23) - 1;  // DMA length register limit
  int kv_positions = 512;             // the KV area per (layer, head), in positions (the board's 512)
  bool int8_lm_head = false;          // an INT8 lm_head (n bytes per row): refused on the board
  bool kv_interleaved = false;        // the online-softmax unit's layout: per (layer, head) one
                                      // area of 512 rows x 192 bytes, row t = K_t then V_t
                                      // (docs/variants-attention.md); set from attention.variant
  int lanes = 2;                      // lanes the host uses per engine: 2 (the board) or 1 (all
                                      // rows and heads on lane 0; mm1/at1 idle)
  int per_call_row_trits = 0;         // 0: the header format; L > 0: the per-call format with
                                      // fixed rows of L (matmul.format, docs/variants-host.md)
  // kv.format = int4 (with kv_interleaved; docs/variants-attention.md 8.4): per (layer, head)
  // the bank, then 512 rows of K_t (k.total() bytes) and V_t (56 bytes).
  model::KvFormat kv_format = model::KvFormat::Int8;
  int kv_outlier_channels = 0;
  // kv.format = tip (with kv_interleaved; docs/tip.md "Storage accounting"): per (layer,
  // head) the bank, the CPU's region table and the three pools of region slots (TipAreaLayout).
  model::TipSettings tip{};
  // prefill.tokens_per_pass = P (docs/prefill.md): each stream slot holds the header and P
  // vectors of x before its rows, each result buffer R x P words; 1 is the board's layout.
  int tokens_per_pass = 1;
  // attention.gqa = shared-stream (docs/variants-attention.md 9): one pass per K/V head for the
  // model's G query heads of its group, a unit built for up to attention_group_max of them. A
  // lane takes whole groups: ceil(num_kv_heads / lanes) K/V heads, the slots of their G query
  // heads each (a pass's header and G queries span its members' slots).
  bool attention_shared = false;
  int attention_group_max = 4;
  // attention.head_dim: the head dimension d the attention unit is built for (rows of d int8
  // in the KV areas, a head's header + q of 16 + d bytes, a result of d + 2 words). The
  // model's head_dim must equal it (check_model_head_dim).
  int head_dim = model::kBoardHeadDim;
};

// The refusal where the board and the model meet: a model whose head_dim is not the one the
// attention unit is built for throws bitsim::FieldError naming attention.head_dim, the model
// (`source`; empty: "the model") and its head_dim, and the --set that builds the unit for it.
void check_model_head_dim(const model::ModelConfig& model, int unit_head_dim, const std::string& source);

// One matmul call of one lane: a group of `rows` rows of length n.
struct LaneStream {
  uint64_t addr = 0;       // header; x at addr + 16; rows at rows_addr (per-call: x at addr)
  uint64_t rows_addr = 0;
  uint64_t bytes = 0;      // header + x + rows: the MM2S length
  int row_begin = 0;       // first row of the matrix group handled by this lane call
  int rows = 0;
  uint64_t result_bytes = 0;  // 4 bytes per row, padded to a beat
};

// A matmul call: both lanes at once on the same x.
struct MatmulCall {
  LaneStream lane[kLanes];
  int segment = 0;  // which row_trits-element segment of x and of the rows (per-call, or a row
                    // longer than the engine's: model::row_segments)
};

// A matrix group of the token loop: q|k|v, o, gate|up, down, lm_head.
struct MatmulGroup {
  std::string name;   // "layer 3 qkv", "lm_head"
  int n = 0;          // row length
  int rows = 0;       // rows of the whole group
  int row_trits = 0;  // trits of a packed row: n (header format), L (per-call), or
                      // model::segment_trits(n) for a row longer than the engine takes
  int segments = 1;   // per-call: ceil(n/L); header format: model::row_segments(n); their calls
                      // in segment order, the CPU adding each later segment's partial sums
  bool per_call = false;
  std::vector<MatmulCall> calls;  // one per segment unless the length limit splits it
};

// kv.format = tip: one (layer, head)'s KV area (docs/tip.md "Storage accounting"): the bank
// (streamed to the unit), the region table (the CPU's: tier tag, importance, queries and slot
// per region; the PL never reads it), then the pools of region slots, KVQ8, KVQ4+L and KVQ4,
// each slot R rows at its tier's row size. bytes = model::tip_storage(tip, positions).total().
struct TipAreaLayout {
  int region = 0, regions = 0;
  uint64_t bank = 0, table = 0;  // offsets in the area
  uint64_t pool[3] = {};         // offset of each tier's pool (model::TipTier order)
  int slots[3] = {};             // region slots per pool
  uint64_t row_bytes[3] = {};    // a row's bytes at each tier
  uint64_t bytes = 0;            // the whole area
  // Where region slot `slot` of tier t starts, relative to the area.
  uint64_t slot(model::TipTier t, int slot) const {
    return pool[int(t)] + uint64_t(slot) * uint64_t(region) * row_bytes[int(t)];
  }
};
TipAreaLayout tip_area_layout(const model::TipSettings& s, int positions, int d);

struct Region {
  std::string name;
  uint64_t addr = 0, bytes = 0;
};

// What a layout takes of the contiguous memory and of the DDR (docs/memory.md "What fits
// where"): the one account `bitsim inspect` prints and a refusal names.
struct MemoryAccount {
  uint64_t ddr_bytes = 0, cma_base = 0, cma_bytes = 0;  // the board: ddr.size_mib, cma.base, cma.mib
  uint64_t weight_rows = 0;      // the packed ternary rows of every matrix group
  uint64_t lm_head_rows = 0;     // of which the lm_head's
  bool int8_lm_head = false;     // model.int8_lm_head: its rows are INT8
  uint64_t activation_slots = 0; // per lane stream: the header and its P vectors of x (prefill)
  uint64_t stream_padding = 0;   // the streams' page alignment
  uint64_t kv_cache = 0;         // the KV areas at `positions`
  uint64_t kv_position_bytes = 0;  // KV bytes one position adds over every layer and K/V head
  uint64_t call_buffers = 0;     // results (R x P words), attention headers+q, SG descriptors
  int positions = 0;             // the KV areas' positions
  int tokens_per_pass = 1;       // prefill.tokens_per_pass = P: x vectors per stream slot, R x P result words
  // The largest context whatever the memory: the attention unit's with this KV format
  // (model::attention_max_t), and the model's max_position_embeddings.
  int unit_max_t = 0, model_max_t = 0;
  bool kv_int8 = true;           // kv.format = int8 (the unit's 512-position limit)
  uint64_t weights_image() const { return weight_rows + activation_slots + stream_padding; }
  uint64_t used() const { return weights_image() + kv_cache + call_buffers; }
  // The DDR Linux keeps: below the region (cma.base) and above it.
  uint64_t linux_bytes() const { return ddr_bytes - std::min(ddr_bytes, cma_bytes); }
  bool fits() const { return used() <= cma_bytes; }
  // Lines of "what: MiB" with the totals against cma.mib and ddr.size_mib; when it does not
  // fit, by how much, and the most cma.mib this DDR allows (ddr.size_mib less cma.base).
  std::string text() const;
  // Why the KV cache holds `positions` and not `wanted` (> positions): what else takes the
  // CMA, each with its size (the packed weight rows, the activation slots of P vectors, the
  // page alignment, the call buffers), the KV bytes per position and how much more `wanted`
  // would need. One clause, for a refusal to put after "kv.format = F: ". When the memory
  // would hold `wanted`, it says that the limit is the attention unit's or the model's.
  std::string room_text(int wanted) const;
};

class MemoryMap {
 public:
  MemoryMap(const model::ModelConfig& model, const MemoryMapConfig& config);

  const MatmulGroup& qkv(int layer) const { return groups_[size_t(layer) * 4 + 0]; }
  const MatmulGroup& o(int layer) const { return groups_[size_t(layer) * 4 + 1]; }
  const MatmulGroup& gate_up(int layer) const { return groups_[size_t(layer) * 4 + 2]; }
  const MatmulGroup& down(int layer) const { return groups_[size_t(layer) * 4 + 3]; }
  const MatmulGroup& lm_head() const { return groups_.back(); }
  const std::vector<MatmulGroup>& groups() const { return groups_; }
  // The call carrying V (1..tokens_per_pass) activation vectors (docs/prefill.md 1): each
  // lane's stream starts V vectors of x and the header before its rows (the rows stay where
  // they are), its MM2S length and its results (R x V words, padded to a beat) grow with V.
  // V = 1 with tokens_per_pass = 1 is `call` itself.
  MatmulCall with_vectors(const MatmulGroup& g, const MatmulCall& call, int vectors) const;

  // The (layer, K/V head)'s KV area: 512 x 96 bytes of K (interleaved: the area's start; INT4:
  // its bank, the rows behind it). `head` is a K/V head (ModelConfig::kv_head of a query head).
  uint64_t k_area(int layer, int head) const;
  uint64_t v_area(int layer, int head) const;   // V row 0 (interleaved: k_area + 96; INT4: + bank + K row)
  // Where row t of K and of V lives (rows kv_row_stride() apart).
  uint64_t k_row(int layer, int head, int t) const {
    return k_area(layer, head) + kv_bank_bytes() + uint64_t(t) * kv_row_stride();
  }
  uint64_t v_row(int layer, int head, int t) const { return v_area(layer, head) + uint64_t(t) * kv_row_stride(); }
  uint64_t kv_row_stride() const;
  // The bytes of a (layer, head)'s KV storage: per position (K + V rows) and its bank (0 but INT4).
  uint64_t kv_bank_bytes() const { return kv_.bank; }
  uint64_t kv_position_bytes() const { return kv_.per_position(); }
  const model::KvStorage& kv_storage() const { return kv_; }
  uint64_t head_buffer(int lane, int slot) const;  // header + q (TIP: + tags) of the lane's slot-th head
  // The largest head buffer (112 bytes; TIP: + its tag beats at the most regions) and result
  // (392 bytes; TIP: + its mass beats) of one head, and the MM2S descriptors of one head in
  // the SG ring (3; online 2; TIP 2 + the regions).
  uint64_t head_buffer_bytes() const { return head_buffer_bytes_; }
  uint64_t head_result_bytes() const { return head_result_bytes_; }
  int descriptors_per_head() const { return descriptors_per_head_; }
  const TipAreaLayout& tip_layout() const { return tip_; }
  bool tip() const { return config_.kv_format == model::KvFormat::Tip; }
  uint64_t matmul_result(int lane) const { return matmul_result_[lane]; }
  uint64_t attention_result(int lane) const { return attention_result_[lane]; }
  uint64_t descriptors(int lane) const { return descriptors_[lane]; }  // 64-byte aligned ring
  int descriptor_capacity() const { return descriptor_capacity_; }
  int heads_per_lane() const { return heads_per_lane_; }

  const std::vector<Region>& regions() const { return regions_; }
  uint64_t used_bytes() const { return next_ - config_.cma_base; }
  const MemoryAccount& account() const { return account_; }
  const MemoryMapConfig& config() const { return config_; }

 private:
  uint64_t alloc(const std::string& name, uint64_t bytes, uint64_t align = 64);
  uint64_t kv_area_bytes() const;  // one (layer, head)'s KV area
  MatmulGroup plan_group(const std::string& name, int rows, int n, uint64_t row_bytes, bool int8_rows = false);
  void plan_call_buffers();  // the attention headers, results and SG descriptors of each lane
  // The account of everything planned (weights end at weights_end, the KV cache at kv_end).
  MemoryAccount make_account(uint64_t weights_end, uint64_t kv_end) const;

  model::ModelConfig model_;
  MemoryMapConfig config_;
  uint64_t next_ = 0;
  std::vector<Region> regions_;
  std::vector<MatmulGroup> groups_;
  uint64_t kv_base_ = 0;
  model::KvStorage kv_;
  uint64_t heads_base_ = 0;
  uint64_t matmul_result_[kLanes] = {}, attention_result_[kLanes] = {}, descriptors_[kLanes] = {};
  int descriptor_capacity_ = 0, heads_per_lane_ = 0;
  uint64_t head_buffer_bytes_ = 0, head_result_bytes_ = 0;
  int descriptors_per_head_ = 3;
  TipAreaLayout tip_;
  MemoryAccount account_;
};

// The context the KV cache can hold: the largest T within the attention unit's T range (512;
// 2048 for the INT4 unit, docs/variants-attention.md 8.8) and the model's
// max_position_embeddings whose KV areas (in the config's kv.format, model::KvStorage) fit
// the CMA beside everything else; 0 when even one position does not fit. A MemoryMap with
// kv_positions = this fits.
int kv_context_limit(const model::ModelConfig& model, MemoryMapConfig config);
// What bounds that context besides the CMA: the unit's T range (model::attention_max_t of
// the config's kv.format) and the model's max_position_embeddings.
int kv_context_cap(const model::ModelConfig& model, const MemoryMapConfig& config);

// The account of a model's layout on a board at `positions` KV positions, whether it fits or
// not (MemoryMap refuses a layout that does not fit; this one only counts).
MemoryAccount memory_account(const model::ModelConfig& model, MemoryMapConfig config, int positions);
// Refuses a model whose layout does not fit the contiguous memory even with one KV position:
// an Error with the account at one position, naming what does not fit and by how much.
void check_model_fits(const model::ModelConfig& model, const MemoryMapConfig& config);

}  // namespace bitsim::host
