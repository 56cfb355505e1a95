#include "host/memory_map.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "hw/interconnect/axi_dma.h"
#include "model/attention_stream.h"
#include "base/error.h"
#include "model/packed_image.h"

namespace bitsim::host {

namespace {
using model::kHeaderBytes;
constexpr uint64_t pad64(uint64_t b) { return (b + 63) / 64 * 64; }
// A head's header + q (16 + d bytes), each in a slot of a multiple of 64 bytes (128 at d = 96;
// TIP: with its tag beats).
constexpr uint64_t head_buffer_slot(int d) { return pad64(model::attention_header_q_bytes(1, d)); }
static_assert(head_buffer_slot(model::kBoardHeadDim) == 128);
static_assert(MemoryMapConfig{}.kv_positions == model::kKvPositions, "the board's KV areas hold 512 positions");
uint64_t pad8(uint64_t b) { return (b + 7) / 8 * 8; }
double mib(uint64_t b) { return double(b) / 1048576.0; }
// The refusal of an account that does not fit: the sizes, what takes how much, by how much.
[[noreturn]] void refuse(const MemoryAccount& a) {
  throw Error(fmt::format(
      "contiguous memory: the buffers need {:.1f} MiB but cma.mib is {:.1f} MiB: "
      "weights image {:.1f} MiB ({} lm_head {:.1f} MiB), KV cache {:.1f} MiB, call buffers "
      "and descriptors {:.2f} MiB; {:.1f} MiB do not fit (this DDR allows cma.mib <= {}: ddr.size_mib = {} less "
      "cma.base)\n{}",
      mib(a.used()), mib(a.cma_bytes), mib(a.weights_image()), a.int8_lm_head ? "INT8" : "ternary",
      mib(a.lm_head_rows), mib(a.kv_cache),
      mib(a.call_buffers), mib(a.used() - a.cma_bytes), (a.ddr_bytes - std::min(a.ddr_bytes, a.cma_base)) >> 20,
      a.ddr_bytes >> 20, a.text()));
}

}  // namespace

TipAreaLayout tip_area_layout(const model::TipSettings& s, int positions, int d) {
  s.validate("kv.format = tip");
  const model::TipStorage st = model::tip_storage(s, positions, d);
  TipAreaLayout a;
  a.region = s.region;
  a.regions = st.regions;
  a.bank = 0;
  a.table = st.bank;
  const int slots[3] = {st.kvq8, st.lanes, st.kvq4};
  uint64_t at = a.table + st.table;
  for (int t = 0; t < 3; ++t) {
    a.pool[t] = at;
    a.slots[t] = slots[t];
    a.row_bytes[t] = model::tip_row_bytes(model::TipTier(t), s.lanes, d);
    at += uint64_t(slots[t]) * uint64_t(s.region) * a.row_bytes[t];
  }
  a.bytes = at;
  return a;
}

uint64_t MemoryMap::alloc(const std::string& name, uint64_t bytes, uint64_t align) {
  next_ = (next_ + align - 1) / align * align;
  const uint64_t addr = next_;
  next_ += bytes;
  regions_.push_back({name, addr, bytes});
  return addr;
}

MatmulGroup MemoryMap::plan_group(const std::string& name, int rows, int n, uint64_t row_bytes, bool int8_rows) {
  MatmulGroup g;
  g.name = name;
  g.n = n;
  g.rows = rows;
  g.row_trits = n;
  // Header format: [header][x of n][rows of n]; a row longer than the engine takes, per
  // segment of model::segment_trits(n) elements (docs/packed-image.md). Per-call
  // (docs/variants-host.md): per segment of L elements, [x of L][rows of L], no header.
  const int L = config_.per_call_row_trits;
  g.per_call = L > 0 && !int8_rows;
  if (g.per_call) {
    g.row_trits = L;
    g.segments = model::per_call_segments(n, L);
    row_bytes = model::packed_row_bytes(L);
  } else if (n > model::kMaxRowLength) {
    if (int8_rows)
      throw Error(fmt::format("{}: model.int8_lm_head rows of {} elements are longer than the matmul engine's {}",
                              name, n, model::kMaxRowLength));
    g.row_trits = model::segment_trits(n);
    g.segments = model::row_segments(n);
    row_bytes = model::packed_row_bytes(g.row_trits);
  }
  // Prefill (docs/prefill.md 1): the slot before the rows holds P vectors of x.
  const uint64_t P = uint64_t(std::max(1, config_.tokens_per_pass));
  const uint64_t fixed = g.per_call ? pad8(uint64_t(L)) : kHeaderBytes + P * pad8(uint64_t(g.row_trits));
  const uint64_t limit = config_.max_transfer_bytes;
  if (fixed + row_bytes > limit)
    throw Error(fmt::format("{}: one row of {} elements needs a {}-byte transfer, over the DMA "
                            "length limit of {} bytes", name, g.row_trits, fixed + row_bytes, limit));
  const uint64_t max_rows = std::min((limit - fixed) / row_bytes, limit / (4 * P));
  const int lane_rows[kLanes] = {config_.lanes == 1 ? rows : (rows + 1) / 2, config_.lanes == 1 ? 0 : rows / 2};
  const int calls = int((uint64_t(lane_rows[0]) + max_rows - 1) / max_rows);
  g.calls.resize(size_t(calls) * size_t(g.segments));
  for (int seg = 0; seg < g.segments; ++seg) {
    int begin[kLanes] = {0, lane_rows[0]};
    for (int c = 0; c < calls; ++c) {
      MatmulCall& call = g.calls[size_t(seg) * size_t(calls) + size_t(c)];
      call.segment = seg;
      for (int lane = 0; lane < kLanes; ++lane) {
        // Rows of this lane split evenly over the calls (the first calls take one more).
        const int share = lane_rows[lane] / calls + (c < lane_rows[lane] % calls ? 1 : 0);
        LaneStream& s = call.lane[lane];
        s.row_begin = begin[lane];
        if (lane_rows[lane] == 0) continue;  // host.lanes = 1: lane 1 idle
        s.rows = share;
        s.bytes = fixed + uint64_t(share) * row_bytes;
        s.result_bytes = pad8(uint64_t(share) * 4 * P);
        // Page-aligned, as the board's allocator (pynq.allocate) hands out CMA buffers.
        s.addr = alloc(g.segments > 1 ? fmt::format("{} segment {} call {} lane {}", name, seg, c, lane)
                                      : fmt::format("{} call {} lane {}", name, c, lane),
                       s.bytes, 4096);
        s.rows_addr = s.addr + fixed;
        begin[lane] += share;
      }
    }
  }
  return g;
}

MatmulCall MemoryMap::with_vectors(const MatmulGroup& g, const MatmulCall& call, int vectors) const {
  if (vectors < 1 || vectors > std::max(1, config_.tokens_per_pass) || (g.per_call && vectors > 1))
    throw Error(fmt::format("{}: a call of {} activation vectors, the layout holds 1..{} (prefill.tokens_per_pass)",
                            g.name, vectors, std::max(1, config_.tokens_per_pass)));
  if (config_.tokens_per_pass <= 1) return call;
  MatmulCall c = call;
  for (LaneStream& s : c.lane) {
    if (s.rows == 0) continue;
    const uint64_t rows_bytes = s.bytes - (s.rows_addr - s.addr);
    s.addr = s.rows_addr - kHeaderBytes - uint64_t(vectors) * pad8(uint64_t(g.row_trits));
    s.bytes = (s.rows_addr - s.addr) + rows_bytes;
    s.result_bytes = pad8(uint64_t(s.rows) * 4 * uint64_t(vectors));
  }
  return c;
}

void check_model_head_dim(const model::ModelConfig& model, int unit_head_dim, const std::string& source) {
  if (model.head_dim() == unit_head_dim) return;
  throw FieldError("attention.head_dim",
                   fmt::format("{} has head_dim {} (hidden_size {} / num_attention_heads {}), but the attention "
                               "unit is built for head_dim {}; build the unit for the model with --set "
                               "attention.head_dim={}",
                               source.empty() ? "the model" : "model " + source, model.head_dim(), model.hidden_size,
                               model.num_heads, unit_head_dim, model.head_dim()));
}

MemoryMap::MemoryMap(const model::ModelConfig& model, const MemoryMapConfig& config)
    : model_(model), config_(config), next_(config.cma_base) {
  check_model_head_dim(model, config_.head_dim, "");
  if (config_.cma_base % 4096 != 0)
    throw Error(fmt::format("cma.base 0x{:x} must be 4 KiB aligned", config_.cma_base));
  if (config_.cma_base + config_.cma_bytes > config_.ddr_bytes)
    throw Error(fmt::format("cma.base + cma.mib = 0x{:x} is past the end of the DDR (ddr.size_mib = {})",
                            config_.cma_base + config_.cma_bytes, config_.ddr_bytes >> 20));
  const int H = model.hidden_size, F = model.intermediate_size, L = model.num_layers, KV = model.kv_dim();
  const uint64_t row_h = model::image_row_bytes(H), row_f = model::image_row_bytes(F);

  // 1. The weights image, in token-loop order.
  for (int l = 0; l < L; ++l) {
    groups_.push_back(plan_group(fmt::format("layer {} qkv", l), H + 2 * KV, H, row_h));  // q, then k and v
    groups_.push_back(plan_group(fmt::format("layer {} o", l), H, H, row_h));
    groups_.push_back(plan_group(fmt::format("layer {} gate_up", l), 2 * F, H, row_h));
    groups_.push_back(plan_group(fmt::format("layer {} down", l), H, F, row_f));
  }
  groups_.push_back(plan_group("lm_head", model.vocab_size, H,
                               config_.int8_lm_head ? pad8(uint64_t(H)) : row_h, config_.int8_lm_head));
  const uint64_t weights_end = next_;

  // 2. The KV cache: per (layer, K/V head) K then V, 512 rows x d bytes (INT4: the bank and
  // 512 rows of the INT4 format, interleaved). Grouped-query attention: num_kv_heads areas per
  // layer, each read by the query heads of its group.
  // (TIP's area is tip_: kv_ keeps the int8 rows' accounting there, which no TIP path reads.)
  kv_ = model::kv_storage(config_.kv_format == model::KvFormat::Tip ? model::KvFormat::Int8 : config_.kv_format,
                         config_.kv_outlier_channels, config_.head_dim);
  if (config_.kv_format != model::KvFormat::Int8 && !config_.kv_interleaved)
    throw Error(fmt::format("kv.format = {}: the rows are laid out interleaved, for the online-softmax unit",
                            config_.kv_format == model::KvFormat::Tip ? "tip" : "int4"));
  if (tip()) tip_ = tip_area_layout(config_.tip, config_.kv_positions, config_.head_dim);
  kv_base_ = alloc("kv cache", uint64_t(L) * model.num_kv_heads * kv_area_bytes(), 4096);
  const uint64_t kv_end = next_;

  plan_call_buffers();
  account_ = make_account(weights_end, kv_end);
  if (!account_.fits()) refuse(account_);
}

// 3. Per-call buffers.
void MemoryMap::plan_call_buffers() {
  if (config_.lanes != 1 && config_.lanes != 2)
    throw Error(fmt::format("host.lanes = {}: the engines have 1 or 2 lanes", config_.lanes));
  heads_per_lane_ = config_.lanes == 1 ? model_.num_heads : (model_.num_heads + 1) / 2;
  if (config_.attention_shared) {
    // The shared-stream unit: G query heads a pass (refused when there is nothing to share,
    // or more than the unit is built for), a lane's passes whole groups.
    const int G = model_.group();
    if (G < 2)
      throw Error(fmt::format("attention.gqa = shared-stream: the model has num_key_value_heads = num_attention_heads "
                              "= {} (no group of query heads to share a K/V stream); use attention.gqa = per-head",
                              model_.num_heads));
    if (G > config_.attention_group_max)
      throw Error(fmt::format("attention.gqa = shared-stream: the model's group of {} query heads per K/V head "
                              "(num_attention_heads {} / num_key_value_heads {}) exceeds attention.gqa_group = {}, "
                              "the G the unit is built for",
                              G, model_.num_heads, model_.num_kv_heads, config_.attention_group_max));
    heads_per_lane_ = (model_.num_kv_heads + config_.lanes - 1) / config_.lanes * G;
  }
  head_result_bytes_ = model::attention_result_bytes(config_.head_dim);
  head_buffer_bytes_ = head_buffer_slot(config_.head_dim);
  descriptors_per_head_ = config_.kv_interleaved ? 2 : 3;
  if (tip()) {
    // TIP (docs/tip.md "Stream"): header, q and the tag beats; the result and the mass beats;
    // header+q+tags, the bank, then one descriptor per region.
    const int regions = std::max(1, tip_.regions);
    head_buffer_bytes_ = pad64(model::attention_header_q_bytes(1, config_.head_dim) +
                               uint64_t(model::tip_tag_beats(regions)) * model::kBeatBytes);
    head_result_bytes_ += uint64_t(model::tip_mass_beats(regions)) * model::kBeatBytes;
    descriptors_per_head_ = 2 + regions;
  }
  heads_base_ = alloc("attention headers+q", uint64_t(kLanes) * heads_per_lane_ * head_buffer_bytes_, 4096);
  uint64_t mm_result = 0;
  for (const auto& g : groups_)
    for (const auto& c : g.calls)
      for (const auto& s : c.lane) mm_result = std::max(mm_result, s.result_bytes);
  descriptor_capacity_ = heads_per_lane_ * std::max(3, descriptors_per_head_) + 8;
  for (int lane = 0; lane < kLanes; ++lane) {
    matmul_result_[lane] = alloc(fmt::format("matmul results lane {}", lane), mm_result, 4096);
    attention_result_[lane] = alloc(fmt::format("attention results lane {}", lane),
                                    uint64_t(heads_per_lane_) * head_result_bytes_, 4096);
    descriptors_[lane] = alloc(fmt::format("sg descriptors lane {}", lane),
                               uint64_t(descriptor_capacity_) * hw::dma_reg::kDescBytes, 4096);
  }
}

MemoryAccount MemoryMap::make_account(uint64_t weights_end, uint64_t kv_end) const {
  MemoryAccount a;
  a.ddr_bytes = config_.ddr_bytes;
  a.cma_base = config_.cma_base;
  a.cma_bytes = config_.cma_bytes;
  a.int8_lm_head = config_.int8_lm_head;
  for (const auto& g : groups_)
    for (const auto& c : g.calls)
      for (const auto& s : c.lane) {
        const uint64_t rows = s.bytes - (s.rows_addr - s.addr);
        a.weight_rows += rows;
        a.activation_slots += s.rows_addr - s.addr;
        if (&g == &groups_.back()) a.lm_head_rows += rows;
      }
  a.stream_padding = (weights_end - config_.cma_base) - a.weight_rows - a.activation_slots;
  a.kv_cache = kv_end - weights_end;
  const uint64_t areas = uint64_t(model_.num_layers) * uint64_t(model_.num_kv_heads);
  a.kv_position_bytes = tip() ? 0 : areas * kv_.per_position();  // TIP: depends on T (docs/tip.md)
  a.call_buffers = next_ - kv_end;
  a.positions = config_.kv_positions;
  a.tokens_per_pass = config_.tokens_per_pass;
  return a;
}

std::string MemoryAccount::text() const {
  std::string t = fmt::format(
      "  packed weight rows      {:10.2f} MiB  (lm_head {:.2f} MiB)\n"
      "  activation slots        {:10.2f} MiB  (each stream's header and {} x vector{}: prefill.tokens_per_pass = {})\n"
      "  stream page alignment   {:10.2f} MiB\n"
      "  KV cache, {:5} pos.    {:10.2f} MiB  ({} bytes per position)\n"
      "  call buffers            {:10.2f} MiB  (results of {} vector{}, attention headers+q, SG descriptors)\n"
      "  total                   {:10.2f} MiB  of cma.mib = {} ({}), ddr.size_mib = {}\n",
      mib(weight_rows), mib(lm_head_rows), mib(activation_slots), tokens_per_pass, tokens_per_pass == 1 ? "" : "s",
      tokens_per_pass, mib(stream_padding), positions, mib(kv_cache),
      kv_position_bytes, mib(call_buffers), tokens_per_pass, tokens_per_pass == 1 ? "" : "s", mib(used()),
      cma_bytes >> 20, fits() ? "fits" : "does not fit",
      ddr_bytes >> 20);
  if (!fits())
    t += fmt::format("  over by                 {:10.2f} MiB; this DDR allows cma.mib <= {} (ddr.size_mib less "
                     "the {} MiB below cma.base)\n",
                     mib(used() - cma_bytes), (ddr_bytes - std::min(ddr_bytes, cma_base)) >> 20,
                     std::min(ddr_bytes, cma_base) >> 20);
  return t;
}


std::string MemoryAccount::room_text(int wanted) const {
  const uint64_t others = used() - kv_cache;
  const uint64_t left = cma_bytes > others ? cma_bytes - others : 0;
  std::string t;
  if (kv_position_bytes > 0 && wanted > positions) {
    const uint64_t need = kv_cache + uint64_t(wanted - positions) * kv_position_bytes;
    const int cap = std::min(unit_max_t, model_max_t);
    if (need <= left && cap > 0 && wanted > cap) {  // room in the memory: the unit or the model stops it
      return fmt::format(
          "{} positions would take {:.2f} MiB of KV ({} bytes per position), which the {:.2f} MiB that cma.mib = {} "
          "leaves would hold; the limit of {} positions is {}",
          wanted, mib(need), kv_position_bytes, mib(left), cma_bytes >> 20, cap,
          unit_max_t <= model_max_t
              ? fmt::format("the attention unit's largest context with kv.format = {} (its score buffer and "
                            "accumulators; attention.variant = online-softmax with kv.format = int4 or tip reaches {})",
                            kv_int8 ? "int8" : "int4/tip", model::attention_max_t(true))
              : fmt::format("the model's max_position_embeddings ({})", model_max_t));
    }
    t = fmt::format("{} bytes of KV per position, {} positions take {:.2f} MiB and {} would take {:.2f} MiB, "
                    "{:.2f} MiB more than ",
                    kv_position_bytes, positions, mib(kv_cache), wanted, mib(need), mib(need - std::min(need, left)));
  } else {
    t = fmt::format("{} positions take {:.2f} MiB of ", positions, mib(kv_cache));
  }
  t += fmt::format("the {:.2f} MiB that cma.mib = {} leaves beside what else takes it: the packed weight rows "
                   "{:.2f} MiB (lm_head {:.2f} MiB), the activation slots {:.2f} MiB (each stream's header and {} "
                   "x vector{}: prefill.tokens_per_pass = {}), the stream page alignment {:.2f} MiB and the call "
                   "buffers {:.2f} MiB (results of {} vector{}, attention headers+q, SG descriptors)",
                   mib(left), cma_bytes >> 20, mib(weight_rows), mib(lm_head_rows), mib(activation_slots),
                   tokens_per_pass, tokens_per_pass == 1 ? "" : "s", tokens_per_pass, mib(stream_padding),
                   mib(call_buffers), tokens_per_pass, tokens_per_pass == 1 ? "" : "s");
  return t;
}

uint64_t MemoryMap::kv_area_bytes() const {
  if (tip()) return tip_.bytes;
  return kv_.bank + uint64_t(config_.kv_positions) * kv_.per_position();
}

uint64_t MemoryMap::kv_row_stride() const {
  if (config_.kv_format == model::KvFormat::Int4) return kv_.per_position();
  return config_.kv_interleaved ? 2 * uint64_t(config_.head_dim) : uint64_t(config_.head_dim);
}

uint64_t MemoryMap::k_area(int layer, int head) const {
  return kv_base_ + (uint64_t(layer) * model_.num_kv_heads + head) * kv_area_bytes();
}

uint64_t MemoryMap::v_area(int layer, int head) const {
  if (config_.kv_format == model::KvFormat::Int4) return k_area(layer, head) + kv_.bank + kv_.k.total();
  if (config_.kv_interleaved) return k_area(layer, head) + uint64_t(config_.head_dim);
  return k_area(layer, head) + uint64_t(config_.kv_positions) * uint64_t(config_.head_dim);
}

uint64_t MemoryMap::head_buffer(int lane, int slot) const {
  return heads_base_ + (uint64_t(lane) * heads_per_lane_ + slot) * head_buffer_bytes_;
}

int kv_context_cap(const model::ModelConfig& model, const MemoryMapConfig& config) {
  return std::min(model::attention_max_t(config.kv_format != model::KvFormat::Int8),
                  std::max(1, model.max_position_embeddings));
}

namespace {
// The config with room for any layout (a DDR and a CMA far larger than any board's), so that
// a layout is counted, never refused.
MemoryMapConfig with_room(MemoryMapConfig config) {
  config.ddr_bytes = uint64_t(1) << 62;
  config.cma_bytes = config.ddr_bytes - config.cma_base;
  return config;
}
}  // namespace

MemoryAccount memory_account(const model::ModelConfig& model, MemoryMapConfig config, int positions) {
  config.kv_positions = positions;
  MemoryAccount a = MemoryMap(model, with_room(config)).account();
  a.ddr_bytes = config.ddr_bytes;
  a.cma_bytes = config.cma_bytes;
  a.unit_max_t = model::attention_max_t(config.kv_format != model::KvFormat::Int8);
  a.model_max_t = std::max(1, model.max_position_embeddings);
  a.kv_int8 = config.kv_format == model::KvFormat::Int8;
  return a;
}

void check_model_fits(const model::ModelConfig& model, const MemoryMapConfig& config) {
  const MemoryAccount a = memory_account(model, config, 1);
  if (!a.fits()) refuse(a);
}

int kv_context_limit(const model::ModelConfig& model, MemoryMapConfig config) {
  // The layout with room for everything, then the KV cache's share of the real CMA.
  MemoryMapConfig room = with_room(config);
  const int cap = kv_context_cap(model, config);
  room.kv_positions = cap;
  const MemoryMap full(model, room);
  uint64_t kv = 0;
  for (const auto& r : full.regions())
    if (r.name == "kv cache") kv = r.bytes;
  const uint64_t others = full.used_bytes() - kv;
  if (others >= config.cma_bytes) return 0;
  const uint64_t lh = uint64_t(model.num_layers) * uint64_t(model.num_kv_heads);  // KV areas
  int limit = config.kv_format == model::KvFormat::Tip
                  ? model::tip_largest_context(config.tip, lh, config.cma_bytes - others, cap, config.head_dim)
                  : model::largest_context(full.kv_storage(), lh, config.cma_bytes - others, cap);
  // Page alignment of the buffers behind the cache can cost a little: the largest that fits.
  for (; limit > 0; --limit) {
    config.kv_positions = limit;
    try {
      (void)MemoryMap(model, config);
      return limit;
    } catch (const Error&) {
    }
  }
  return 0;
}

}  // namespace bitsim::host
