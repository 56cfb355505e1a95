#include "host/token_loop.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "model/attention_stream.h"
#include "base/content_hash.h"
#include "base/error.h"
#include "base/huge_memory.h"
#include "base/stop_signal.h"
#include "model/packed_image.h"

namespace bitsim::host {

namespace {

void emit(const model::Probe& probe, int layer, const char* step, const float* d, int n, int position) {
  if (probe) probe(model::StepProbe{layer, step, d, nullptr, n, position});
}
void emit_int(const model::Probe& probe, int layer, const char* step, const int32_t* d, int n, int position) {
  if (probe) probe(model::StepProbe{layer, step, nullptr, d, n, position});
}

// The matrices of a group, stacked: qkv = [q; k; v], gate_up = [gate; up].
struct Stack {
  std::vector<const model::TernaryMatrix*> parts;
  const int8_t* row(int r) const {
    for (const auto* m : parts) {
      if (r < m->rows) return m->row(r);
      r -= m->rows;
    }
    return nullptr;
  }
};

Stack stack_of(const model::TernaryModel& m, size_t group_index) {
  if (group_index == m.layers.size() * 4) return {{&m.lm_head}};
  const auto& L = m.layers[group_index / 4];
  switch (group_index % 4) {
    case 0: return {{&L.q, &L.k, &L.v}};
    case 1: return {{&L.o}};
    case 2: return {{&L.gate, &L.up}};
    default: return {{&L.down}};
  }
}

// One lane stream's rows of a matmul group, to be packed at `offset` of the staging buffer.
struct PackJob {
  const MatmulGroup* g;
  const MatmulCall* call;
  const LaneStream* s;
  Stack st;
  size_t offset = 0, bytes = 0;
};

std::vector<PackJob> pack_jobs(const MemoryMap& map, const model::TernaryModel& m) {
  const auto& groups = map.groups();
  std::vector<PackJob> jobs;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const MatmulGroup& g = groups[gi];
    const Stack st = stack_of(m, gi);
    // A shape-only model (no trits: timing-only runs) leaves the rows as DDR zeros,
    // which decode as valid trits; the timing does not depend on them.
    if (st.parts.front()->trits.empty()) continue;
    const size_t row_bytes = model::packed_row_bytes(g.row_trits);
    for (const MatmulCall& call : g.calls)
      for (const LaneStream& s : call.lane)
        if (s.rows > 0) jobs.push_back({&g, &call, &s, st, 0, size_t(s.rows) * row_bytes});  // rows 0: host.lanes = 1
  }
  return jobs;
}

void pack(const PackJob& j, uint8_t* out) {
  const size_t row_bytes = model::packed_row_bytes(j.g->row_trits);
  for (int r = 0; r < j.s->rows; ++r, out += row_bytes) {
    if (j.g->row_trits != j.g->n)  // a segment of the row (per-call, or a row past the engine's 4096)
      model::pack_row_segment(j.st.row(j.s->row_begin + r), j.g->n, j.call->segment, j.g->row_trits, out);
    else model::pack_row(j.st.row(j.s->row_begin + r), j.g->n, out);
  }
}

// Packs jobs [first, last) into `scratch` on up to `n_threads` threads (this one among
// them); rethrows the first failure once all have stopped.
void pack_in_parallel(const std::vector<PackJob>& jobs, size_t first, size_t last, uint8_t* scratch, int n_threads) {
  std::atomic<size_t> next{first};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto worker = [&] {
    for (size_t k; (k = next.fetch_add(1)) < last;) {
      try {
        pack(jobs[k], scratch + jobs[k].offset);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next = last;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < n_threads && i < int(last - first); ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

// The packed rows of every job, one after another, kept between runs under a name that
// holds everything the packing depends on besides the model: each job's matrix group, row
// length, per-call segment, rows and where they go.
void load_kept(Platform& ps, const MemoryMap& map, std::vector<PackJob>& jobs, int threads,
               model::DerivedStore& derived) {
  model::ContentHash layout;
  size_t total = 0;
  for (PackJob& j : jobs) {
    layout.add(uint64_t(j.g - map.groups().data())).add(j.g->n).add(j.g->row_trits).add(j.g->per_call);
    layout.add(j.call->segment).add(j.s->row_begin).add(j.s->rows).add(j.s->rows_addr).add(uint64_t(j.bytes));
    j.offset = total;
    total += j.bytes;
  }
  const std::string name = "ddr-weights-v1-" + layout.hex();  // CIRCUITS.md 2 rows (model/packed_image.h)
  std::optional<model::DerivedStore::Blob> blob = derived.get(name);
  const uint8_t* bytes = nullptr;
  if (blob && blob->bytes == total) {
    bytes = blob->data;
  } else {
    auto packed = std::make_shared<model::HugeMemory>(total, "packed weights image");
    for (size_t first = 0; first < jobs.size(); first += 64) {  // SIGINT / SIGTERM between pieces
      check_stop();
      pack_in_parallel(jobs, first, std::min(jobs.size(), first + 64), packed->data(), std::max(1, threads));
    }
    derived.put(name, {model::ImagePart{packed->data(), total}}, packed);
    bytes = packed->data();
  }
  std::vector<model::PackedRowsSpan> spans;
  for (const PackJob& j : jobs) {
    ps.mem_write(j.s->rows_addr, bytes + j.offset, j.bytes);
    spans.push_back({j.s->rows_addr, j.s->rows, j.g->row_trits});
  }
  ps.weights_written(spans, &derived, "fast-rows-v1-" + layout.hex());  // hw/fast/fast_kernels.h's form
}

// host.walker = pl: the walker programs the same DMAs through the same registers, at its own
// cost: call_cycles per call, reg_access_cycles per access, no cache maintenance.
DriverConfig walker_driver(const WalkerConfig& w, uint64_t period_ps, const DriverConfig& host) {
  DriverConfig d = host;
  const double period_ns = double(period_ps) / 1000.0;
  d.reg_access_ns = double(w.reg_access_cycles) * period_ns;
  d.call_overhead_ns = double(w.call_cycles) * period_ns;
  d.flush_fixed_ns = d.flush_ns_per_byte = 0;
  d.invalidate_fixed_ns = d.invalidate_ns_per_byte = 0;
  d.poll_gap_ns = 0;
  return d;
}

}  // namespace

TokenLoop::TokenLoop(Platform& platform, const MemoryMap& map, const model::TernaryModel& model,
                     const model::KvScales& scales, const CpuModelConfig& cpu, const DriverConfig& driver,
                     TokenLoopOptions options)
    : ps_(platform),
      map_(map),
      model_(model),
      scales_(scales),
      cpu_(cpu),
      host_driver_(driver),
      walker_(options.walker, options.pl_period_ps),
      driver_(platform, map, options.walker.pl() ? walker_driver(options.walker, options.pl_period_ps, driver) : driver),
      options_(options),
      d_(map.config().head_dim),
      rope_(d_, model.config.rope_theta, std::max(1, map.config().kv_positions)) {
  check_model_head_dim(model.config, d_, model.source);
  if (online() != map.config().kv_interleaved)
    throw Error("attention.variant: the online-softmax unit needs the interleaved KV layout, the two-phase unit "
                "the board's");
  if (options_.attention_shared != map.config().attention_shared)
    throw Error("attention.gqa: the token loop's and the memory map's passes differ (per head against shared stream)");
  if (online() && options_.legacy_attention)
    throw FieldError("legacy_attention", "attention.variant = online-softmax has no legacy shift mode");
  if (map.config().kv_format != options_.kv_format || map.config().kv_outlier_channels != options_.kv_outlier_channels)
    throw Error("kv.format: the memory map's KV layout is not the token loop's format");
  if (options_.kv_format == model::KvFormat::Int4) {
    if (!online()) throw Error("kv.format = int4 needs attention.variant = online-softmax");
    const size_t lh = size_t(model.config.num_layers) * size_t(model.config.num_kv_heads);  // a bank per K/V head
    if (scales.k_channel.size() != lh * d_)
      throw Error(fmt::format("KV scales: kv.format = int4 needs {} per-channel K maxima, got {}", lh * d_,
                              scales.k_channel.size()));
    banks_.reserve(lh);
    for (size_t i = 0; i < lh; ++i)
      banks_.push_back(model::kv_int4_bank(&scales.k_channel[i * size_t(d_)], options_.kv_outlier_channels, d_));
  }
  if (tip()) {
    if (!online()) throw Error("kv.format = tip needs attention.variant = online-softmax");
    if (options_.walker.pl())
      throw FieldError("host.walker", "pl with kv.format = tip: the walker keeps no TIP region tables (docs/tip.md)");
    const model::TipSettings& mt = map.config().tip;
    const model::TipSettings& ot = options_.tip;
    if (mt.region != ot.region || mt.sink != ot.sink || mt.recent != ot.recent || mt.kvq8_regions != ot.kvq8_regions ||
        mt.lane_regions != ot.lane_regions || mt.lanes != ot.lanes)
      throw Error("kv.tip: the memory map's TIP settings are not the token loop's");
    const size_t lh = size_t(model.config.num_layers) * size_t(model.config.num_kv_heads);  // a bank per K/V head
    if (scales.k_channel.size() != lh * d_ || scales.v.size() != lh)
      throw Error(fmt::format("KV scales: kv.format = tip needs {} per-channel K maxima and {} V scales, got {} and {}",
                              lh * d_, lh, scales.k_channel.size(), scales.v.size()));
    tip_banks_.reserve(lh);
    for (size_t i = 0; i < lh; ++i)
      tip_banks_.push_back(model::tip_bank(&scales.k_channel[i * size_t(d_)], scales.v[i], ot.lanes, d_));
    tip_cache_ = std::make_unique<TipCache>(map, model.config.num_layers, model.config.num_kv_heads);
  }
}

void TokenLoop::load_weights(int threads, model::DerivedStore* derived) {
  write_kv_banks();
  // Every lane stream's rows are packed by `threads` host threads into a staging buffer, a
  // chunk of streams at a time, then written into DDR in order by this thread (the
  // platform's memory and its listeners see one writer). The bytes do not depend on threads.
  std::vector<PackJob> jobs = pack_jobs(map_, model_);
  if (derived && !jobs.empty()) return load_kept(ps_, map_, jobs, threads, *derived);
  constexpr size_t kChunkBytes = size_t(16) << 20;
  for (size_t first = 0; first < jobs.size();) {
    size_t last = first, bytes = 0;
    while (last < jobs.size() && (last == first || bytes + jobs[last].bytes <= kChunkBytes)) {
      jobs[last].offset = bytes;
      bytes += jobs[last++].bytes;
    }
    scratch_.resize(bytes);
    pack_in_parallel(jobs, first, last, scratch_.data(), std::max(1, threads));
    for (size_t k = first; k < last; ++k) ps_.mem_write(jobs[k].s->rows_addr, scratch_.data() + jobs[k].offset, jobs[k].bytes);
    first = last;
  }
}

void TokenLoop::init() { driver_.init(); }

const TipCache& TokenLoop::tip_cache() const {
  if (!tip_cache_) throw Error("TIP region tables: kv.format is not tip");
  return *tip_cache_;
}

// INT4: each (layer, K/V head)'s bank into the head of its KV area, once (before the run, at
// no simulated time: the scales are the calibration's, fixed for the run, like the weights).
void TokenLoop::write_kv_banks() {
  const int heads = model_.config.num_kv_heads;
  if (tip()) {  // TIP: the bank at the area's start (docs/tip.md "Stream")
    scratch_.assign(model::tip_bank_bytes(options_.tip.lanes, d_), 0);
    for (size_t i = 0; i < tip_banks_.size(); ++i) {
      model::write_tip_bank(tip_banks_[i], scratch_.data());
      ps_.mem_write(map_.k_area(int(i) / heads, int(i) % heads) + map_.tip_layout().bank, scratch_.data(), scratch_.size());
    }
    return;
  }
  if (banks_.empty()) return;
  scratch_.assign(map_.kv_bank_bytes(), 0);
  for (size_t i = 0; i < banks_.size(); ++i) {
    model::write_kv_bank(banks_[i], scratch_.data());
    ps_.mem_write(map_.k_area(int(i) / heads, int(i) % heads), scratch_.data(), scratch_.size());
  }
}

void TokenLoop::set_position(int pos) {
  if (pos < 0 || pos >= map_.config().kv_positions)
    throw Error(fmt::format("position {} is outside the KV cache (0..{})", pos, map_.config().kv_positions - 1));
  pos_ = pos;
  if (tip_cache_) tip_cache_->replay(pos);
}

void TokenLoop::cpu(CpuStep step, uint64_t elements, uint64_t bytes, uint64_t vectors) {
  const bool pl = options_.walker.pl() && walker_runs(step);
  const uint64_t ps = pl ? walker_.chunk_step_ps(step, vectors, elements, bytes)
                         : cpu_.chunk_step_ps(step, vectors, elements, bytes);
  const uint64_t begin = ps_.now_ps();
  ps_.spend(ps);
  (pl ? t_->walker_ps : t_->cpu_ps) += ps;
  if (observer_) observer_->cpu_step(step, vectors * elements, vectors * bytes, pos_, layer_, begin, ps_.now_ps());
}

void TokenLoop::note_call_start() {
  if (called_) return;
  called_ = true;
  t_->lead_ps = ps_.now_ps() - begin_ps_;
}

void TokenLoop::matmul(const MatmulGroup& g, const std::vector<const int8_t*>& xq, const std::vector<int32_t*>& acc) {
  // CPU: header + x (a segmented row: the call's x segment, zero past n) into each lane's
  // stream slot; a prefill group carries the V vectors back to back (docs/prefill.md 1).
  const int V = int(xq.size());
  const size_t xbytes = model::packed_x_bytes(g.row_trits);
  const size_t head = g.per_call ? 0 : model::kHeaderBytes;
  int part = 0;
  for (const MatmulCall& board_call : g.calls) {
    const MatmulCall call = map_.with_vectors(g, board_call, V);
    const int first = call.segment * g.row_trits;
    int used = 0;
    for (const LaneStream& s : call.lane) {
      if (s.rows == 0) continue;  // host.lanes = 1
      ++used;
      scratch_.assign(head + size_t(V) * xbytes, 0);
      if (!g.per_call)
        model::write_group_header({uint32_t(s.rows), uint32_t(g.row_trits), true, uint32_t(V)}, scratch_.data());
      for (int p = 0; p < V; ++p)
        std::memcpy(scratch_.data() + head + size_t(p) * xbytes, xq[size_t(p)] + first,
                    size_t(std::min(g.row_trits, g.n - first)));
      ps_.mem_write(s.addr, scratch_.data(), scratch_.size());
    }
    cpu(CpuStep::WriteHeaders, 0, uint64_t(used) * (head + size_t(V) * xbytes));
    note_call_start();
    const uint64_t t0 = ps_.now_ps();
    const DriverStats before = driver_.stats();
    driver_.matmul(call, g.n);
    t_->matmul_ps += ps_.now_ps() - t0;
    count_driver(before);
    if (observer_) observer_->call("matmul", g.name, part, pos_, layer_, t0, ps_.now_ps());
    ++part;
    ++t_->matmul_calls;
    t_->dma_transfers += 2 * uint64_t(used);
    uint64_t added = 0;
    for (int lane = 0; lane < kLanes; ++lane) {
      const LaneStream& s = call.lane[lane];
      if (s.rows == 0) continue;
      if (V > 1) {
        // Row r's V sums are words r*V .. r*V+V-1 (docs/prefill.md 1); a later segment's are
        // added by the CPU (exact in int32).
        partial_.resize(size_t(s.rows) * size_t(V));
        ps_.mem_read(map_.matmul_result(lane), partial_.data(), partial_.size() * 4);
        for (int p = 0; p < V; ++p)
          for (int r = 0; r < s.rows; ++r) {
            const int32_t sum = partial_[size_t(r) * size_t(V) + size_t(p)];
            int32_t& to = acc[size_t(p)][s.row_begin + r];
            to = call.segment == 0 ? sum : to + sum;
          }
        if (call.segment > 0) added += uint64_t(s.rows);
        continue;
      }
      int32_t* out = acc[0] + s.row_begin;
      if (call.segment == 0) {
        ps_.mem_read(map_.matmul_result(lane), out, size_t(s.rows) * 4);
        continue;
      }
      // A later segment (per-call, or a row longer than the engine's): the CPU adds its
      // partial sums (exact in int32).
      partial_.resize(size_t(s.rows));
      ps_.mem_read(map_.matmul_result(lane), partial_.data(), size_t(s.rows) * 4);
      for (int r = 0; r < s.rows; ++r) out[r] += partial_[size_t(r)];
      added += uint64_t(s.rows);
    }
    if (added) cpu(CpuStep::PartialSum, added, 0, uint64_t(V));
  }
}

// One position's vectors, sized for the model: h the residual stream, a the normed
// activations and xq their int8 form, acc a matmul group's sums, qq one head's int8 q, res
// one lane's attention results; k and v hold the K/V heads (KV = num_kv_heads x head_dim values).
struct TokenLoop::StepBuffers {
  StepBuffers(int H, int KV, int F, int D, uint64_t result_bytes)
      : a(size_t(std::max(H, F))), q(H), k(KV), v(KV), o(H), g(F), u(F), d(H),
        xq(size_t(std::max(H, F))),
        acc(size_t(std::max(H + 2 * KV, 2 * F))),
        qq(size_t(D)),
        res(size_t(result_bytes / 4)) {}
  std::vector<float> h, a, q, k, v, o, g, u, d;
  std::vector<int8_t> xq;
  std::vector<int32_t> acc;
  std::vector<int8_t> qq;
  std::vector<int32_t> res;
  std::vector<uint8_t> tip_rows;  // TIP: each head's new KVQ8 row (K then V), written at its call
};

void TokenLoop::host_cache_maintenance(uint64_t bytes, bool clean) {
  const double fixed_ns = clean ? host_driver_.flush_fixed_ns : host_driver_.invalidate_fixed_ns;
  const double per_byte = clean ? host_driver_.flush_ns_per_byte : host_driver_.invalidate_ns_per_byte;
  const uint64_t fixed = uint64_t(std::llround(fixed_ns * 1000.0));
  const uint64_t ps = fixed + uint64_t(std::llround(double(bytes) * per_byte * 1000.0));
  ps_.spend(ps);
  t_->cpu_ps += ps;
  t_->fixed_call_ps += fixed;
  (clean ? t_->flushed_bytes : t_->invalidated_bytes) += bytes;
}

// A driver call's share of the token's figures: its fixed cost and its cache maintenance.
void TokenLoop::count_driver(const DriverStats& before) {
  const DriverStats& now = driver_.stats();
  t_->fixed_call_ps += now.fixed_ps - before.fixed_ps;
  t_->flushed_bytes += now.flushed_bytes - before.flushed_bytes;
  t_->invalidated_bytes += now.invalidated_bytes - before.invalidated_bytes;
}

void TokenLoop::start_walker() {
  const auto ps_of = [](double ns) { return uint64_t(std::llround(ns * 1000.0)); };
  const uint64_t fixed = ps_of(host_driver_.call_overhead_ns + 2 * host_driver_.reg_access_ns);
  ps_.spend(fixed);
  t_->cpu_ps += fixed;
  t_->fixed_call_ps += fixed;
  ++t_->walker_starts;
}

std::vector<float> TokenLoop::step(int token, TokenTiming* timing, const model::Probe& probe) {
  return std::move(chunk({token}, timing, true, probe).front());
}

std::vector<std::vector<float>> TokenLoop::chunk(const std::vector<int>& tokens, TokenTiming* timing, bool all_logits,
                                                 const model::Probe& probe) {
  const int V = int(tokens.size());
  if (V < 1 || V > std::max(1, map_.config().tokens_per_pass))
    throw Error(fmt::format("a prompt chunk of {} tokens: prefill.tokens_per_pass is {}", V,
                            map_.config().tokens_per_pass));
  if (pos_ + V > map_.config().kv_positions)
    throw Error(fmt::format("context full: the board's KV cache holds {} positions", map_.config().kv_positions));
  for (int t : tokens) check_step(t);
  TokenTiming local;
  t_ = timing ? timing : &local;
  *t_ = {};
  const uint64_t read0 = ps_.pl_bytes_read();
  const hw::DramActivity dram0 = ps_.dram_activity();
  const uint64_t begin = ps_.now_ps();
  begin_ps_ = begin;
  called_ = false;
  token_ = tokens.back();
  layer_ = -1;
  const int H = model_.config.hidden_size;

  Chunk c(size_t(V), StepBuffers(H, model_.config.kv_dim(), model_.config.intermediate_size, d_,
                                 uint64_t(map_.heads_per_lane()) * map_.head_result_bytes()));
  for (int p = 0; p < V; ++p) {
    const float* e = model_.embedding(tokens[size_t(p)]);
    c[size_t(p)].h.assign(e, e + H);
  }
  cpu(CpuStep::Embed, uint64_t(H), 0, uint64_t(V));
  for (int p = 0; p < V; ++p) emit(probe, -1, "embedding", c[size_t(p)].h.data(), H, pos_ + p);
  const bool walker = options_.walker.pl();
  if (walker) {
    // The CPU hands the embedding rows to the walker through DDR (a cache clean) and starts it.
    host_cache_maintenance(uint64_t(H) * 4 * uint64_t(V), true);
    start_walker();
  }
  for (int l = 0; l < model_.config.num_layers; ++l) {
    if (walker && options_.walker.per_layer() && l > 0) start_walker();
    decoder_layer(l, c, probe);
  }
  layer_ = -1;
  if (walker && options_.walker.per_layer()) start_walker();
  std::vector<int> which;
  for (int p = all_logits ? 0 : V - 1; p < V; ++p) which.push_back(p);
  std::vector<std::vector<float>> logits = final_norm_lm_head(c, which, probe);
  std::vector<std::vector<float>> out(static_cast<size_t>(V));
  for (size_t i = 0; i < which.size(); ++i) out[size_t(which[i])] = std::move(logits[i]);

  t_->bytes_read = ps_.pl_bytes_read() - read0;
  t_->dram = ps_.dram_activity() - dram0;
  if (observer_)
    for (int p = 0; p < V; ++p) observer_->token(pos_ + p, tokens[size_t(p)], begin, ps_.now_ps());
  pos_ += V;
  t_ = nullptr;
  return out;
}

void TokenLoop::check_step(int token) const {
  const int vocab = model_.config.vocab_size;
  if (pos_ >= map_.config().kv_positions)
    throw Error(fmt::format("context full: the board's KV cache holds {} positions", map_.config().kv_positions));
  if (token < 0 || token >= vocab)
    throw Error(fmt::format("token id {} is outside the vocabulary (0..{})", token, vocab - 1));
}

// One decoder layer over the chunk: CIRCUITS.md 5, steps 1 to 9, each matmul group one call
// with the chunk's vectors; attention one call per position after the chunk's K/V.
void TokenLoop::decoder_layer(int l, Chunk& c, const model::Probe& probe) {
  layer_ = l;
  const model::LayerWeights& L = model_.layers[l];
  const int H = model_.config.hidden_size;
  // 1. input RMSNorm, quantize x. 2. q, k, v rows in one group per lane.
  std::vector<float> s = norm_and_quantize(&StepBuffers::h, L.input_norm.data(), H, c);
  const int KV = model_.config.kv_dim();  // k and v rows: num_kv_heads x 96
  grouped_projection(l, map_.qkv(l), {{"q_acc", L.q.scale, &StepBuffers::q, H}, {"k_acc", L.k.scale, &StepBuffers::k, KV},
                                      {"v_acc", L.v.scale, &StepBuffers::v, KV}}, s, c, probe);
  // 3. RoPE, quantize q per head, K and V with the fixed scales, append; headers.
  rope_q_and_k(l, c, probe);
  uint64_t kv_written = append_chunk_kv(l, c);
  // 4. attention call per position (T = its position + 1). 5. finish attention.
  for (size_t p = 0; p < c.size(); ++p) {
    LaneHeads work;
    if (tip()) kv_written += tip_place_and_write(l, pos_ + int(p), c[p]);
    const uint64_t written = kv_written + write_q_headers(l, pos_ + int(p), c[p], work);
    kv_written = 0;
    attention_call(l, pos_ + int(p), work, written);
    finish_attention(l, pos_ + int(p), work, c[p], probe);
  }
  // inner_attn_ln RMSNorm, quantize.
  s = norm_and_quantize(&StepBuffers::o, L.inner_attn_norm.data(), H, c);
  // 6. o_proj, dequantize, residual; post-attention RMSNorm, quantize.
  projection_residual(l, map_.o(l), L.o.scale, "o_acc", s, c, probe);
  s = norm_and_quantize(&StepBuffers::h, L.post_attn_norm.data(), H, c);
  // 7. gate and up. 8. act(gate) * up (hidden_act), the FFN sub-norm, quantize.
  const int F = model_.config.intermediate_size;
  grouped_projection(l, map_.gate_up(l), {{"gate_acc", L.gate.scale, &StepBuffers::g, F}, {"up_acc", L.up.scale, &StepBuffers::u, F}},
                     s, c, probe);
  s = gate_ffn_norm(L, c);
  // 9. down_proj, dequantize, residual.
  projection_residual(l, map_.down(l), L.down.scale, "down_acc", s, c, probe);
  for (size_t p = 0; p < c.size(); ++p) emit(probe, l, "residual", c[p].h.data(), H, pos_ + int(p));
}

std::vector<float> TokenLoop::norm_and_quantize(Vec x, const float* weight, int n, Chunk& c) {
  for (StepBuffers& b : c) num::rmsnorm((b.*x).data(), weight, n, model_.config.rms_norm_eps, b.a.data());
  cpu(CpuStep::RmsNorm, n, 0, c.size());
  std::vector<float> s(c.size());
  for (size_t p = 0; p < c.size(); ++p) s[p] = num::quantize_activations(c[p].a.data(), n, c[p].xq.data());
  cpu(CpuStep::Quantize, n, 0, c.size());
  return s;
}

// A matmul group on the board, then each of its matrices' accumulators (the part's `rows`;
// to the probe as the part's acc_name) dequantized on the CPU with the part's w_scale into
// the part's output: qkv (q, k, v), o_proj, gate_up (gate, up), down_proj.
void TokenLoop::grouped_projection(int l, const MatmulGroup& g, std::initializer_list<ProjectionPart> parts,
                                   const std::vector<float>& s, Chunk& c, const model::Probe& probe) {
  std::vector<const int8_t*> xq;
  std::vector<int32_t*> acc;
  for (StepBuffers& b : c) {
    xq.push_back(b.xq.data());
    acc.push_back(b.acc.data());
  }
  matmul(g, xq, acc);
  for (size_t i = 0; i < c.size(); ++i) {
    const int32_t* a = c[i].acc.data();
    for (const ProjectionPart& p : parts) {
      emit_int(probe, l, p.acc_name, a, p.rows, pos_ + int(i));
      a += p.rows;
    }
  }
  uint64_t rows = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const int32_t* a = c[i].acc.data();
    for (const ProjectionPart& p : parts) {
      num::dequantize(a, p.rows, p.w_scale, s[i], (c[i].*p.out).data());
      a += p.rows;
    }
  }
  for (const ProjectionPart& p : parts) rows += uint64_t(p.rows);
  cpu(CpuStep::Dequantize, rows, 0, c.size());
}

// RoPE on every query head of q and every K/V head of k.
void TokenLoop::rope_q_and_k(int l, Chunk& c, const model::Probe& probe) {
  const int H = model_.config.hidden_size, KV = model_.config.kv_dim();
  for (size_t p = 0; p < c.size(); ++p) {
    for (int hd = 0; hd < model_.config.num_heads; ++hd) num::rope_apply(c[p].q.data() + hd * d_, pos_ + int(p), rope_);
    for (int g = 0; g < model_.config.num_kv_heads; ++g) num::rope_apply(c[p].k.data() + g * d_, pos_ + int(p), rope_);
  }
  cpu(CpuStep::Rope, uint64_t(H) + uint64_t(KV), 0, c.size());
  for (size_t p = 0; p < c.size(); ++p) {
    emit(probe, l, "q_rope", c[p].q.data(), H, pos_ + int(p));
    emit(probe, l, "k_rope", c[p].k.data(), KV, pos_ + int(p));
    emit(probe, l, "v", c[p].v.data(), KV, pos_ + int(p));
  }
}

uint64_t TokenLoop::append_chunk_kv(int l, Chunk& c) {
  const auto& mc = model_.config;
  uint64_t kv = 0;
  for (size_t p = 0; p < c.size(); ++p)
    for (int g = 0; g < mc.num_kv_heads; ++g) kv += append_kv(l, g, pos_ + int(p), c[p]);
  // The heads' quantization (q's included; INT4: one more pass over q, K's channel scales
  // folded in) and their stores over the chunk: per position its K/V heads' rows and its
  // query heads' headers + q.
  const uint64_t per_position = kv / c.size() + uint64_t(mc.num_heads) * model::attention_header_q_bytes(1, d_);
  const uint64_t values = (int4() || tip() ? 2 : 1) * uint64_t(mc.hidden_size) + 2 * uint64_t(mc.kv_dim());
  cpu(CpuStep::QuantizeHeads, values, per_position, c.size());
  return kv;
}

// One K/V head's K and V of position pos quantized with the fixed scales (INT4: the bank's
// channel scales and V's group scales) and appended to the cache at pos.
uint64_t TokenLoop::append_kv(int l, int hd, int pos, StepBuffers& b) {
  const int heads = model_.config.num_kv_heads;
  if (tip()) {
    // The new row at KVQ8, written into its region's slot at its position's call (after the
    // placement that precedes it: tip_place_and_write).
    const size_t row = 2 * size_t(d_);
    b.tip_rows.resize(size_t(heads) * row);
    model::encode_kvq8(b.k.data() + hd * d_, b.v.data() + hd * d_, tip_banks_[size_t(l) * heads + hd],
                       b.tip_rows.data() + size_t(hd) * row);
    (void)pos;
    return row;
  }
  if (int4()) {
    const model::KvInt4Bank& bank = banks_[size_t(l) * heads + hd];
    const model::KvStorage& st = map_.kv_storage();
    uint8_t rows[4 * model::kMaxHeadDim];  // K and V rows of the INT4 format (< 2 d + 48 bytes)
    model::encode_k_int4(b.k.data() + hd * d_, bank.sk.data(), bank.outliers.data(), options_.kv_outlier_channels, d_,
                         rows);
    model::encode_v_int4(b.v.data() + hd * d_, d_, rows + st.k.total());
    ps_.mem_write(map_.k_row(l, hd, pos), rows, st.per_position());
    return st.per_position();
  }
  const float sk = scales_.k_scale(l, hd, heads), sv = scales_.v_scale(l, hd, heads);
  if (online()) {
    // One 2 d-byte store (192 at d = 96): K_t then V_t.
    int8_t kv[2 * model::kMaxHeadDim];
    num::quantize_fixed(b.k.data() + hd * d_, d_, sk, kv);
    num::quantize_fixed(b.v.data() + hd * d_, d_, sv, kv + d_);
    ps_.mem_write(map_.k_row(l, hd, pos), kv, 2 * size_t(d_));
  } else {
    int8_t row[model::kMaxHeadDim];
    num::quantize_fixed(b.k.data() + hd * d_, d_, sk, row);
    ps_.mem_write(map_.k_row(l, hd, pos), row, d_);
    num::quantize_fixed(b.v.data() + hd * d_, d_, sv, row);
    ps_.mem_write(map_.v_row(l, hd, pos), row, d_);
  }
  return 2 * d_;
}

// TIP (docs/tip.md "Regions and the rule", "Re-encoding"): per head, the region leaving the
// recent window before pos's row is placed; each demoted region's R rows are read from their
// old slot, re-encoded one tier down from the stored integers (model::tip_demote) and written
// into their new slot (all reads before any write: a swap hands one region's slot to the
// other); then pos's KVQ8 row goes into its region's slot. The re-encoding is charged as the
// K/V quantization it is (quantize_heads: per value, and the bytes stored).
uint64_t TokenLoop::tip_place_and_write(int l, int pos, StepBuffers& b) {
  const int heads = model_.config.num_kv_heads, R = options_.tip.region;  // per K/V head
  const size_t row8 = 2 * size_t(d_);
  uint64_t written = 0, values = 0;
  std::vector<uint8_t> rows;
  for (int hd = 0; hd < heads; ++hd) {
    const model::TipBank& bank = tip_banks_[size_t(l) * heads + hd];
    const std::vector<TipCache::Move> moves = tip_cache_->place(l, hd, pos);
    std::vector<std::vector<uint8_t>> moved(moves.size());
    for (size_t i = 0; i < moves.size(); ++i) {
      const TipCache::Move& m = moves[i];
      const uint64_t from = model::tip_row_bytes(m.from, options_.tip.lanes, d_),
                     to = model::tip_row_bytes(m.to, options_.tip.lanes, d_);
      rows.resize(size_t(R) * from);
      ps_.mem_read(m.from_addr, rows.data(), rows.size());
      moved[i].resize(size_t(R) * to);
      for (int t = 0; t < R; ++t) {
        const std::vector<uint8_t> r = model::tip_demote(rows.data() + size_t(t) * from, m.from, m.to, bank);
        std::copy(r.begin(), r.end(), moved[i].begin() + std::ptrdiff_t(size_t(t) * to));
      }
      values += uint64_t(R) * row8;
    }
    for (size_t i = 0; i < moves.size(); ++i) {
      ps_.mem_write(moves[i].to_addr, moved[i].data(), moved[i].size());
      written += moved[i].size();
    }
    ps_.mem_write(tip_cache_->row(l, hd, pos), b.tip_rows.data() + size_t(hd) * row8, row8);
  }
  if (values) cpu(CpuStep::QuantizeHeads, values, written);
  return written;
}

uint64_t TokenLoop::write_q_headers(int l, int pos, StepBuffers& b, LaneHeads& work) {
  uint64_t written = 0;
  const int G = members();  // the shared-stream unit: one pass per K/V head
  for (int hd = 0; hd < model_.config.num_heads; hd += G) written += write_q_header(l, hd, pos, b, work);
  return written;
}

// INT4 and TIP (docs/variants-attention.md 8.3): q with K's channel scales sk_d folded in,
// quantized per head; the header's m and S for K's fixed point sk_d / 16.
void TokenLoop::q_per_channel(const float* q, const uint16_t* sk, int8_t* qq, model::AttentionHeadHeader* hdr) {
  float qf[model::kMaxHeadDim];
  for (int d = 0; d < d_; ++d) qf[d] = q[d] * model::float_from_fp16(sk[d]);
  const float sq = num::quantize_symmetric(qf, d_, qq);
  const num::AttnMultiplier mul = num::attention_multiplier(sq, model::kKvInt4ScoreScale, d_);
  t_->multiplier_lowered += mul.lowered > 0;
  hdr->m = mul.m;
  hdr->shift = uint32_t(mul.shift);
}

// One pass: the query heads hd .. hd + G - 1 (G = 1 per head; the shared-stream unit's G of
// one K/V head's group), each q quantized per head (INT4: K's channel scales folded in, s_k =
// 1/16 in m) with its m and S: the attention header (T = pos + 1, member 0's m and S), q_0,
// then each further member's beat of (m, S) and its q, in the slot of the pass's first head
// (a pass spans its members' slots); the pass's descriptors' work (INT4: the second descriptor
// covers the bank and the T rows).
uint64_t TokenLoop::write_q_header(int l, int hd, int pos, StepBuffers& b, LaneHeads& work) {
  const int heads = model_.config.num_heads, T = pos + 1, G = members();
  const int lane = hd / map_.heads_per_lane(), slot = hd % map_.heads_per_lane();
  // Grouped-query attention: query head hd reads K/V head g's bank, scales and rows.
  const int kv_heads = model_.config.num_kv_heads, g = model_.config.kv_head(hd);
  model::AttentionHeadHeader hdr;
  hdr.T = uint32_t(T);
  hdr.last = slot + G == map_.heads_per_lane() || hd + G == heads;
  hdr.group = uint32_t(G);
  HeadWork w;
  w.header_q_addr = map_.head_buffer(lane, slot);
  const size_t qs = model::attention_header_q_bytes(G, d_);
  uint8_t buf[model::attention_header_q_bytes(model::kAttentionMaxGroup, model::kMaxHeadDim) +
              size_t(model::tip_tag_beats(model::kTipMaxRegions)) * model::kBeatBytes] = {};
  // Member i's q at its place in the buffer, its m and S into mh.
  for (int i = 0; i < G; ++i) {
    const float* q = b.q.data() + (hd + i) * d_;
    model::AttentionHeadHeader mh;
    if (tip()) {
      q_per_channel(q, tip_banks_[size_t(l) * kv_heads + g].k.sk.data(), b.qq.data(), &mh);
    } else if (int4()) {
      q_per_channel(q, banks_[size_t(l) * kv_heads + g].sk.data(), b.qq.data(), &mh);
    } else {
      const float sk = scales_.k_scale(l, g, kv_heads);
      const float sq = num::quantize_symmetric(q, d_, b.qq.data());
      const num::AttnMultiplier mul = num::attention_multiplier(sq, sk, d_);
      t_->multiplier_lowered += mul.lowered > 0;
      mh.m = mul.m;
      mh.shift = uint32_t(mul.shift);
    }
    if (i == 0) {
      hdr.m = mh.m;
      hdr.shift = mh.shift;
      std::memcpy(buf + model::kHeaderBytes, b.qq.data(), d_);
    } else {
      uint8_t* at = buf + model::attention_header_q_bytes(i, d_);  // member i's beat, then its q
      const uint64_t beat = model::encode_attention_member(mh.m, mh.shift);
      std::memcpy(at, &beat, model::kBeatBytes);
      std::memcpy(at + model::kBeatBytes, b.qq.data(), d_);
    }
  }
  std::vector<model::TipTier> tiers;
  if (tip()) {
    // The tags behind the queries; the bank, then each region's rows at its tier (docs/tip.md
    // "Stream").
    hdr.online = hdr.tip = true;
    hdr.outliers = uint32_t(options_.tip.lanes);
    hdr.region_log2 = uint32_t(__builtin_ctz(unsigned(options_.tip.region)));  // a power of two (validated)
    tiers = tip_cache_->tiers(l, g, T);
    const int regions = int(tiers.size());
    w.header_bytes = uint32_t(qs + uint64_t(model::tip_tag_beats(regions)) * model::kBeatBytes);
    w.result_bytes =
        uint32_t(model::attention_result_bytes(d_) + uint64_t(model::tip_mass_beats(regions)) * model::kBeatBytes);
    w.interleaved = true;
    w.segments.push_back(
        {map_.k_area(l, g) + map_.tip_layout().bank, uint32_t(model::tip_bank_bytes(options_.tip.lanes, d_))});
    for (const TipCache::Segment& sg : tip_cache_->segments(l, g, T)) w.segments.push_back({sg.addr, sg.bytes});
    model::write_tip_tags(tiers, buf + qs);
  } else if (int4()) {
    hdr.online = hdr.int4 = true;
    hdr.outliers = uint32_t(options_.kv_outlier_channels);
    const model::KvStorage& st = map_.kv_storage();
    w.k_addr = map_.k_area(l, g);
    w.interleaved = true;
    w.stream_bytes = uint32_t(st.bank + uint64_t(T) * st.per_position());
  } else {
    hdr.legacy = options_.legacy_attention;
    hdr.online = online();
    w = {map_.head_buffer(lane, slot), map_.k_area(l, g), map_.v_area(l, g), uint32_t(T * d_), online()};
  }
  if (!tip()) {  // the header and the pass's queries, a head's result
    w.header_bytes = uint32_t(qs);
    w.result_bytes = uint32_t(model::attention_result_bytes(d_));
  }
  if (G > 1) {  // the pass's G results
    w.result_bytes = uint32_t(G) * w.head_result_bytes();
    w.members = G;
  }
  model::write_attention_header(hdr, buf);
  const uint32_t bytes = w.header_q_bytes();
  ps_.mem_write(map_.head_buffer(lane, slot), buf, bytes);
  work[lane].push_back(std::move(w));
  return bytes;
}

// The attention call of position pos: SG chains, per lane its heads x 3 descriptors.
void TokenLoop::attention_call(int l, int pos, const LaneHeads& work, uint64_t written) {
  note_call_start();
  const uint64_t t0 = ps_.now_ps();
  const uint64_t b0 = ps_.pl_bytes_read();
  const DriverStats before = driver_.stats();
  driver_.attention(work, written);
  t_->attention_ps += ps_.now_ps() - t0;
  count_driver(before);
  if (observer_) observer_->call("attention", fmt::format("layer {} attention", l), 0, pos, l, t0, ps_.now_ps());
  t_->attention_bytes += ps_.pl_bytes_read() - b0;
  ++t_->attention_calls;
  for (int lane = 0; lane < kLanes; ++lane) t_->dma_transfers += work[lane].empty() ? 0 : 2;
}

// CPU: each head's attention output from the unit's results, into o (after each call: the
// next position's call overwrites the result buffer).
void TokenLoop::finish_attention(int l, int pos, const LaneHeads& work, StepBuffers& b, const model::Probe& probe) {
  const int kv_heads = model_.config.num_kv_heads;  // query head hd's K/V head: kv_head(hd)
  uint64_t masses = 0;
  for (int lane = 0; lane < kLanes; ++lane) {
    if (work[lane].empty()) continue;
    // One T: every head's result the same size (a shared-stream pass holds G of them, its
    // members' in order: query heads hd .. hd + G - 1).
    const size_t head_bytes = work[lane].front().head_result_bytes() / size_t(work[lane].front().members);
    const size_t lane_heads = work[lane].size() * size_t(work[lane].front().members);
    ps_.mem_read(map_.attention_result(lane), b.res.data(), lane_heads * head_bytes);
    for (size_t i = 0; i < lane_heads; ++i) {
      const int hd = lane * map_.heads_per_lane() + int(i);
      const int32_t* r = b.res.data() + i * head_bytes / 4;
      if (tip()) {
        // The region masses behind the d / 2 + 1 result beats (UQ0.16, four a beat) into the counters.
        const int regions = (pos + options_.tip.region) / options_.tip.region;
        const auto* beats = reinterpret_cast<const uint8_t*>(r) + model::attention_result_bytes(d_);
        std::vector<uint32_t> a(static_cast<size_t>(regions));
        for (int g = 0; g < regions; ++g) {
          const uint8_t* f = beats + size_t(g / 4) * model::kBeatBytes + size_t(g % 4) * 2;
          a[size_t(g)] = uint32_t(f[0]) | uint32_t(f[1]) << 8;
        }
        tip_cache_->add_masses(l, model_.config.kv_head(hd), a);  // the group's K/V head's counters
        masses += uint64_t(regions);
      }
      if (int4() || tip())  // normalized on the PL, V's scales in the rows: s_v = 1
        num::attention_finish_online(r, 1.0f, d_, b.o.data() + hd * d_);
      else if (online())  // normalized on the PL (Q15.16)
        num::attention_finish_online(r, scales_.v_scale(l, model_.config.kv_head(hd), kv_heads), d_,
                                     b.o.data() + hd * d_);
      else
        num::attention_finish(r, uint32_t(r[model::attention_sum_word(d_)]),
                              scales_.v_scale(l, model_.config.kv_head(hd), kv_heads), d_, b.o.data() + hd * d_);
    }
  }
  // TIP: one more element per region mass added to its counters.
  cpu(CpuStep::AttnFinish, uint64_t(model_.config.hidden_size) + masses);
  emit(probe, l, "attn_out", b.o.data(), model_.config.hidden_size, pos);
}

// A [hidden, *] projection (o_proj, down_proj) on the board, dequantized with its w_scale
// and added to the residual stream h; its accumulators go to the probe as `acc_name`.
void TokenLoop::projection_residual(int l, const MatmulGroup& g, float w_scale, const char* acc_name,
                                    const std::vector<float>& s, Chunk& c, const model::Probe& probe) {
  const int H = model_.config.hidden_size;
  grouped_projection(l, g, {{acc_name, w_scale, &StepBuffers::d, H}}, s, c, probe);
  for (StepBuffers& b : c) num::add_inplace(b.h.data(), b.d.data(), H);
  cpu(CpuStep::Residual, H, 0, c.size());
}

// act(gate) * up into g (SiLU, or ReLU^2 for hidden_act relu2), then the FFN sub-norm
// (ffn_layernorm / ffn_sub_norm) RMSNorm and quantize; returns the scales.
std::vector<float> TokenLoop::gate_ffn_norm(const model::LayerWeights& L, Chunk& c) {
  const int F = model_.config.intermediate_size;
  const bool relu2 = model_.config.hidden_act == model::HiddenAct::Relu2;
  for (StepBuffers& b : c) num::ffn_gate(relu2, b.g.data(), b.u.data(), F, b.g.data());
  cpu(relu2 ? CpuStep::Relu2Gate : CpuStep::SiluGate, F, 0, c.size());
  return norm_and_quantize(&StepBuffers::g, L.ffn_norm.data(), F, c);
}

// Final RMSNorm, quantize, lm_head (split by lane and by the length limit; one group of
// the positions' vectors), dequantize, argmax; returns the logits of the positions `which`.
std::vector<std::vector<float>> TokenLoop::final_norm_lm_head(Chunk& c, const std::vector<int>& which,
                                                              const model::Probe& probe) {
  const int vocab = model_.config.vocab_size;
  Chunk sel;
  if (which.size() == c.size()) sel = std::move(c);
  else
    for (int p : which) sel.push_back(std::move(c[size_t(p)]));
  const size_t V = sel.size();
  const std::vector<float> s =
      norm_and_quantize(&StepBuffers::h, model_.final_norm.data(), model_.config.hidden_size, sel);
  std::vector<std::vector<int32_t>> lm(V, std::vector<int32_t>(size_t(vocab)));
  std::vector<const int8_t*> xq;
  std::vector<int32_t*> acc;
  for (size_t p = 0; p < V; ++p) {
    xq.push_back(sel[p].xq.data());
    acc.push_back(lm[p].data());
  }
  matmul(map_.lm_head(), xq, acc);
  for (size_t p = 0; p < V; ++p) emit_int(probe, -1, "lm_head_acc", lm[p].data(), vocab, pos_ + which[p]);
  std::vector<std::vector<float>> logits(V, std::vector<float>(size_t(vocab)));
  for (size_t p = 0; p < V; ++p) num::dequantize(lm[p].data(), vocab, model_.lm_head.scale, s[p], logits[p].data());
  cpu(CpuStep::Dequantize, uint64_t(vocab), 0, V);
  // With the walker, the CPU reads the logits from DDR (a cache invalidate) for its argmax.
  if (options_.walker.pl()) host_cache_maintenance(uint64_t(vocab) * 4 * V, false);
  cpu(CpuStep::Argmax, uint64_t(vocab), 0, V);
  for (size_t p = 0; p < V; ++p) emit(probe, -1, "logits", logits[p].data(), vocab, pos_ + which[p]);
  return logits;
}

}  // namespace bitsim::host
