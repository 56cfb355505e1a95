#include "sim/board_run.h"

#include "sim/energy_account.h"

#include "host/mmio_program.h"

#include <algorithm>
#include <functional>
#include <chrono>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "golden/board_reference.h"
#include "host/memory_map.h"
#include "host/token_loop.h"
#include "hw/parts/clock.h"
#include "base/error.h"
#include "base/file_io.h"
#include "base/utf8.h"
#include "base/stop_signal.h"
#include "model/tokenizer.h"
#include "sim/board_config.h"
#include "sim/sampler.h"
#include "sim/simulation.h"
#include "sim/layer_table.h"
#include "sim/startup.h"
#include "sim/timing_cache.h"
#include "sim/trace.h"

namespace bitsim::sim {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Recorded {
  int layer;
  int position;
  std::string step;
  std::vector<float> f;
  std::vector<int32_t> i;
};

model::Probe recorder(std::vector<Recorded>& out) {
  return [&out](const model::StepProbe& p) {
    Recorded r{p.layer, p.position, p.step, {}, {}};
    if (p.data) r.f.assign(p.data, p.data + p.n);
    if (p.idata) r.i.assign(p.idata, p.idata + p.n);
    out.push_back(std::move(r));
  };
}

// Where the board's tensors first leave the golden reference's. Each side's records are
// taken position by position (a position's tensors come in the same order on both sides;
// across the positions of a prefill chunk the two interleave them differently). Within a
// position the first differing tensor is found; the divergence reported is the one in the
// earliest layer (the embedding before layer 0, the final norm and lm_head after the last),
// then the earliest position: an error there is what the later tensors inherit.
std::string first_divergence(std::vector<Recorded> board, std::vector<Recorded> gold) {
  const auto by_position = [](const Recorded& a, const Recorded& b) { return a.position < b.position; };
  std::stable_sort(board.begin(), board.end(), by_position);
  std::stable_sort(gold.begin(), gold.end(), by_position);
  const auto rank = [](const Recorded& r) {
    return r.layer >= 0 ? r.layer : r.step == "embedding" ? -1 : std::numeric_limits<int>::max();
  };
  const bool chunk = !board.empty() && board.front().position != board.back().position;
  std::string found;
  std::pair<int, int> best{std::numeric_limits<int>::max(), std::numeric_limits<int>::max()};
  int skip_position = -1;  // a position whose first divergence is known
  const size_t n = std::min(board.size(), gold.size());
  for (size_t k = 0; k < n; ++k) {
    const Recorded& b = board[k];
    const Recorded& g = gold[k];
    if (b.position == skip_position) continue;
    const std::pair<int, int> key{rank(b), b.position};
    std::string where = b.layer < 0 ? fmt::format("step {}", b.step) : fmt::format("layer {}, step {}", b.layer, b.step);
    if (chunk) where = fmt::format("position {}, {}", b.position, where);
    std::string what;
    if (b.step != g.step || b.layer != g.layer || b.position != g.position)
      what = fmt::format("{}: the board and the golden reference ran different steps ({} / {})", where, b.step, g.step);
    for (size_t e = 0; what.empty() && e < std::max(b.i.size(), b.f.size()); ++e) {
      if (!b.i.empty() && b.i[e] != g.i[e])
        what = fmt::format("{}, element {}: board {} vs golden {}", where, e, b.i[e], g.i[e]);
      else if (!b.f.empty() && std::memcmp(&b.f[e], &g.f[e], 4) != 0)
        what = fmt::format("{}, element {}: board {:.9g} vs golden {:.9g}", where, e, b.f[e], g.f[e]);
    }
    if (what.empty()) continue;
    skip_position = b.position;
    if (key < best) {
      best = key;
      found = std::move(what);
    }
  }
  return found.empty() ? "the intermediate tensors agree; only the logits differ" : found;
}

class Session : public BoardSession {
 public:
  explicit Session(Simulation& sim) : sim_(sim) {}
  void poke_ddr(uint64_t addr, uint8_t mask) override {
    uint8_t v = 0;
    sim_.platform().mem_read(addr, &v, 1);
    v ^= mask;
    sim_.platform().mem_write(addr, &v, 1);
  }
  uint64_t weights_addr() const override { return sim_.map().qkv(0).calls[0].lane[0].rows_addr; }
  uint64_t lm_head_addr() const override { return sim_.map().lm_head().calls[0].lane[0].rows_addr; }
  uint64_t k_cache_addr(int layer, int head) const override { return sim_.map().k_area(layer, head); }
  uint64_t v_cache_addr(int layer, int head) const override { return sim_.map().v_area(layer, head); }
  std::vector<uint8_t> read_ddr(uint64_t addr, size_t bytes) override {
    std::vector<uint8_t> out(bytes);
    sim_.platform().mem_read(addr, out.data(), bytes);
    return out;
  }

 private:
  Simulation& sim_;
};

// Requests that cannot run are refused before anything is loaded.
void check_request(const BoardRunRequest& req) {
  if (req.run.prompt.empty()) throw Error("prompt: the prompt is empty");
  if (req.fidelity == Fidelity::kTimingOnly && req.check)
    throw Error("timing-only: the engines skip the arithmetic, so the golden check must be off");
  if (!req.vcd_file.empty() && req.fidelity != Fidelity::kCycle)
    throw Error(fmt::format("vcd file {}: the clocked signals exist in the cycle fidelity only", req.vcd_file));
  if (!req.dram_trace_file.empty() && req.fidelity != Fidelity::kCycle)
    throw Error(fmt::format("dram trace file {}: the memory's requests are traced in the cycle fidelity only",
                            req.dram_trace_file));
  if (!req.dram_commands_file.empty()) {
    if (req.fidelity != Fidelity::kCycle)
      throw Error(fmt::format("dram commands file {}: the DRAM's commands are traced in the cycle fidelity only",
                              req.dram_commands_file));
    const hw::BoardConfig board = make_sim_config(req.params).board;
    const hw::DdrConfig& ddr = board.ddr;
    if (!hw::make_memory_timing(ddr, hw::clock_period_ps(board.clock.mhz))->ledger())
      throw Error(fmt::format("dram commands file {}: ddr.model = {} issues no DRAM commands (ddr.model = ddr3 does)",
                              req.dram_commands_file, ddr.model));
  }
  // Outputs are refused now rather than after the run (base/file_io.h): each on its own, no
  // two naming one file, none naming an input.
  std::vector<io::NamedPath> outputs;
  if (!req.vcd_file.empty()) outputs.push_back({"vcd file", req.vcd_file});
  if (!req.dram_trace_file.empty()) outputs.push_back({"dram trace file", req.dram_trace_file});
  if (!req.dram_commands_file.empty()) outputs.push_back({"dram commands file", req.dram_commands_file});
  if (!req.trace_file.empty()) outputs.push_back({"trace file", req.trace_file});
  if (!req.record_mmio_file.empty()) outputs.push_back({"mmio record file", req.record_mmio_file});
  if (!req.layers_csv_file.empty()) outputs.push_back({"layers CSV file", req.layers_csv_file});
  std::vector<io::NamedPath> inputs;
  if (req.run.model.rfind("synthetic:", 0) != 0) inputs.push_back({"model folder", req.run.model});
  if (req.run.tokenizer) inputs.push_back({"tokenizer", *req.run.tokenizer});
  if (!req.config_file.empty()) inputs.push_back({"board config", req.config_file});
  io::check_outputs(outputs, inputs);
}

// The prompt's token ids (BOS first), checked against the KV capacity: `limit` positions
// (host::kv_context_limit: the unit's T range, the model's positions, the CMA).
std::vector<int> prompt_ids(const RunRequest& rr, const model::Tokenizer& tokenizer, int bos, int limit,
                            const std::function<std::string(int wanted)>& why) {
  check_utf8(rr.prompt, "prompt");
  std::vector<int> ids{bos};
  for (int id : tokenizer.encode(rr.prompt)) ids.push_back(id);
  const int n = int(ids.size()), total = n + rr.tokens;
  if (n > limit)
    throw Error(fmt::format("prompt: {} tokens with BOS, over the board's KV cache of {} positions{}", n, limit, why(n)));
  if (total > limit && !rr.stop_at_capacity)
    throw Error(fmt::format("context: the prompt ({} tokens with BOS) + {} tokens to generate = {} positions, over "
                            "the board's KV cache of {}{} (generate fewer tokens or stop at capacity)",
                            n, rr.tokens, total, limit, why(total)));
  return ids;
}

std::unique_ptr<TraceWriter> open_trace(const std::string& file) {
  if (file.empty()) return nullptr;
  return std::make_unique<TraceWriter>();
}

void write_trace(TraceWriter& tracer, const BoardRunResult& res, const SimConfig& cfg, Simulation& sim,
                 const std::string& file) {
  const uint64_t period_ps = hw::clock_period_ps(cfg.board.clock.mhz);
  tracer.add_transfers(sim.platform().transfers(), period_ps);
  for (const TokenRecord& t : res.tokens) tracer.add_energy(t.index, t.energy);
  tracer.set_other("model", res.model);
  tracer.set_other("shape", res.shape);
  tracer.set_other("fidelity", fidelity_name(res.fidelity));
  tracer.set_other("pl_clock_mhz", cfg.board.clock.mhz);
  tracer.set_other("pl_clock_period_ps", period_ps);
  tracer.set_other("prompt_tokens", res.prompt_tokens);
  tracer.set_other("tokens", res.tokens.size());
  tracer.write_file(file);
}

// A token's simulated figures.
void fill_timing(TokenRecord& rec, const host::TokenTiming& t) {
  rec.timing = t;
  rec.matmul_ms = double(t.matmul_ps) / 1e9;
  rec.attention_ms = double(t.attention_ps) / 1e9;
  rec.cpu_ms = double(t.cpu_ps) / 1e9;
  rec.walker_ms = double(t.walker_ps) / 1e9;
  rec.total_ms = double(t.total_ps()) / 1e9;
  rec.dma_calls = t.dma_transfers;
  rec.driver_calls = t.matmul_calls + t.attention_calls;
  rec.fixed_call_ms = double(t.fixed_call_ps) / 1e9;
  rec.bytes_read = t.bytes_read;
  const double circuit_s = double(t.matmul_ps + t.attention_ps) / 1e12;
  rec.read_gb_s = circuit_s > 0 ? double(t.bytes_read) / circuit_s / 1e9 : 0.0;
}

// The golden reference's tokens (one, or a prefill chunk's, each position in turn) on a
// thread of its own, beside the board's step.
class GoldenStep {
 public:
  GoldenStep() = default;
  GoldenStep(const GoldenStep&) = delete;
  GoldenStep& operator=(const GoldenStep&) = delete;
  ~GoldenStep() { join(); }
  // The chunk runs as one (golden::BoardReference::chunk: each weight read once for its
  // positions); `all_logits` as the board's; `steps` records every position's tensors.
  void start(golden::BoardReference& ref, const std::vector<int>& tokens, bool all_logits,
             std::vector<Recorded>& steps) {
    ref_ = &ref;
    ref.shared_rows().open();
    thread_ = std::thread([this, &ref, tokens, all_logits, &steps] {
      try {
        logits_ = ref.chunk(tokens, all_logits, recorder(steps));
      } catch (...) {
        error_ = std::current_exception();
      }
      ref.shared_rows().close();
    });
  }
  // For the board's thread once its step is done: takes rows of the golden step's matvecs
  // on its core until the step is done (golden/shared_rows.h). The logits do not depend on it.
  void help() {
    if (ref_ != nullptr) ref_->shared_rows().help();
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  // The logits of each token, once the step has finished; rethrows what the step threw.
  const std::vector<std::vector<float>>& result() {
    join();
    if (error_) std::rethrow_exception(error_);
    return logits_;
  }

 private:
  std::thread thread_;
  golden::BoardReference* ref_ = nullptr;
  std::vector<std::vector<float>> logits_;
  std::exception_ptr error_;
};

// Position p's part (of V) of a chunk's figures: each figure / V, the remainder on the last
// position, so the parts add up to the chunk exactly; the lead before the first DMA is the
// first position's.
host::TokenTiming share_of(const host::TokenTiming& t, int V, int p) {
  if (V == 1) return t;
  const auto part = [&](uint64_t x) { return x / uint64_t(V) + (p == V - 1 ? x % uint64_t(V) : 0); };
  host::TokenTiming s;
  s.matmul_ps = part(t.matmul_ps);
  s.attention_ps = part(t.attention_ps);
  s.cpu_ps = part(t.cpu_ps);
  s.walker_ps = part(t.walker_ps);
  s.dma_transfers = part(t.dma_transfers);
  s.bytes_read = part(t.bytes_read);
  s.attention_bytes = part(t.attention_bytes);
  s.matmul_calls = part(t.matmul_calls);
  s.attention_calls = part(t.attention_calls);
  s.fixed_call_ps = part(t.fixed_call_ps);
  s.walker_starts = part(t.walker_starts);
  s.flushed_bytes = part(t.flushed_bytes);
  s.invalidated_bytes = part(t.invalidated_bytes);
  hw::Ddr3CommandCounts& k = s.dram.counts;
  const hw::Ddr3CommandCounts& c = t.dram.counts;
  k = {part(c.act), part(c.pre), part(c.prea), part(c.prea_banks), part(c.rd), part(c.wr), part(c.ref)};
  s.dram.open_cycles = part(t.dram.open_cycles);
  s.multiplier_lowered = int(part(uint64_t(t.multiplier_lowered)));
  s.lead_ps = p == 0 ? t.lead_ps : 0;
  return s;
}

// The host program of a run: the prompt, then generated tokens, each checked against the
// golden reference when asked.
class Generation {
 public:
  Generation(const BoardRunRequest& req, const BoardRunCallbacks& cb, const model::Tokenizer& tokenizer,
             const std::vector<int>& ids, golden::BoardReference* ref, BoardSession& session, BoardRunResult& res,
             Clock::time_point start, int capacity, const hw::PrefillConfig& prefill, EnergyAccount energy)
      : req_(req), cb_(cb), tokenizer_(tokenizer), ids_(ids), ref_(ref), session_(session), res_(res), start_(start),
        capacity_(capacity), prefill_(prefill), energy_(std::move(energy)), sampler_(req.run.sampler),
        decoder_(tokenizer, ids) {}

  void operator()(host::TokenLoop& loop) {
    loop.init();
    const int total = res_.prompt_tokens + req_.run.tokens;
    int next = ids_[0];
    for (int step = 0; step < total;) {
      if (step >= capacity_) {
        res_.stopped_at_capacity = true;
        break;
      }
      const bool generated = step >= res_.prompt_tokens;
      // The prompt in chunks of P (the last may be shorter; docs/prefill.md 6), then decode.
      const int V = generated ? 1 : host::prompt_chunk(step, res_.prompt_tokens, prefill_.tokens_per_pass, capacity_);
      std::vector<int> tokens;
      for (int i = 0; i < V; ++i) {
        if (req_.before_step) req_.before_step(session_, step + i);
        tokens.push_back(generated ? next : ids_[size_t(step + i)]);
      }
      const std::vector<std::vector<float>> logits = run_chunk(loop, step, tokens, generated);
      if (!res_.mismatch.empty()) return;
      for (const auto& l : logits) {
        if (l.empty()) sampler_.skip();
        else next = sampler_.next(l);
      }
      step += V;
    }
  }
  std::string flush() { return decoder_.flush(); }

 private:
  // One step (a generated token, or a prompt chunk of V tokens) on the board, beside the
  // golden reference; each position's record. Returns each position's logits (empty where
  // the lm_head was skipped).
  std::vector<std::vector<float>> run_chunk(host::TokenLoop& loop, int step, const std::vector<int>& tokens,
                                            bool generated) {
    const auto w0 = Clock::now();
    const int V = int(tokens.size());
    host::TokenTiming t;
    board_steps_.clear();
    gold_steps_.clear();
    // The golden reference runs the same tokens on its own thread while the board runs them;
    // the logits are compared when both have finished.
    GoldenStep gold;
    if (req_.check) gold.start(*ref_, tokens, prefill_.all_logits || generated, gold_steps_);
    std::vector<std::vector<float>> logits;
    try {
      logits = loop.chunk(tokens, &t, prefill_.all_logits || generated, req_.check ? recorder(board_steps_) : model::Probe{});
    } catch (...) {
      gold.join();
      throw;
    }
    const std::vector<std::vector<float>>* golden = nullptr;
    if (req_.check) {
      gold.help();
      golden = &gold.result();
    }
    const double wall_ms = seconds_since(w0) * 1e3;
    for (int p = 0; p < V; ++p) {
      const std::vector<float>& l = logits[size_t(p)];
      const int token = tokens[size_t(p)];
      TokenRecord rec;
      rec.has_logits = !l.empty();
      if (req_.check && !l.empty()) rec.logits_equal = check(step + p, (*golden)[size_t(p)], l);
      rec.index = step + p;
      rec.context = loop.position() - V + p + 1;
      rec.token_id = token;
      rec.text = tokenizer_.piece(token);
      rec.generated = generated;
      rec.phase = generated ? "decode" : "prefill";
      rec.chunk_tokens = V;
      fill_costs(rec, share_of(t, V, p), V, l);
      std::string new_text;
      if (generated) {
        new_text = decoder_.push(token);
        res_.generated_text += new_text;
      }
      rec.wall_ms = wall_ms / V;
      if (generated && res_.first_token_s == 0) res_.first_token_s = seconds_since(start_);
      res_.tokens.push_back(rec);
      if (cb_.on_logits && !l.empty()) cb_.on_logits(rec, l);
      if (cb_.on_token) cb_.on_token(rec, new_text);
      if (!res_.mismatch.empty()) break;
    }
    return logits;
  }

  // A position's timing (its share of the chunk's), its energy and its logits' digest.
  void fill_costs(TokenRecord& rec, const host::TokenTiming& share, int V, const std::vector<float>& l) {
    fill_timing(rec, share);
    rec.energy = token_energy(energy_, rec.timing, V);
    rec.energy_mj = rec.energy.total();
    rec.dram_mj = rec.energy.dram();
    rec.pl_mj = rec.energy.pl();
    rec.ps_mj = rec.energy.ps() + rec.energy.board_other;
    if (!l.empty()) {
      rec.logits_digest = host::fnv1a64(l.data(), l.size() * sizeof(float));
      rec.logits_digest_hex = fmt::format("{:016x}", rec.logits_digest);
    }
  }

  bool check(int step, const std::vector<float>& g, const std::vector<float>& logits) {
    const bool eq = g.size() == logits.size() && std::memcmp(g.data(), logits.data(), g.size() * 4) == 0;
    if (!eq) {
      res_.all_equal = false;
      res_.mismatch = fmt::format("token {} (context {}): the board's logits differ from the golden reference; "
                                  "first divergence: {}", step, step + 1, first_divergence(board_steps_, gold_steps_));
    }
    return eq;
  }

  const BoardRunRequest& req_;
  const BoardRunCallbacks& cb_;
  const model::Tokenizer& tokenizer_;
  const std::vector<int>& ids_;
  golden::BoardReference* ref_;
  BoardSession& session_;
  BoardRunResult& res_;
  Clock::time_point start_;  // run_board's call (the time to the first token counts from it)
  int capacity_;  // positions the KV cache holds
  hw::PrefillConfig prefill_;  // chunks of prefill.tokens_per_pass; prefill.all_logits: every prompt position's lm_head
  EnergyAccount energy_;       // each token's energy from its figures
  Sampler sampler_;
  model::StreamDecoder decoder_;
  std::vector<Recorded> board_steps_, gold_steps_;
};

// The run's model and K/V scales, loaded (or taken from the start-up cache) once the
// request has passed.
PreparedModel load(const RunRequest& rr, std::unique_ptr<model::TensorSource> source, const model::Tokenizer& tokenizer,
              BoardRunResult& res, CacheStore* store, const std::function<void(const std::string&)>& status) {
  const std::vector<int> calibration = golden::calibration_tokens(tokenizer, source->config().bos_token_id);
  PreparedModel p = prepare_model(*source, calibration, rr.threads, store, status);
  res.load_s = p.times.load_s;
  res.calibration_s = p.times.calibration_s;
  res.model_cached = p.times.model_cached;
  res.scales_cached = p.times.scales_cached;
  return p;
}

// The result's facts that the request alone gives.
BoardRunResult result_of(const BoardRunRequest& req) {
  BoardRunResult res;
  res.fidelity = req.fidelity;
  res.checked = req.check;
  res.config = req.params.flat();
  res.wall_gb_s = req.params.real("ddr.wall_gb_s");
  return res;
}

// What a run holds before it loads the model: its config, model source, tokenizer, KV
// capacity and prompt.
struct RunPlan {
  SimConfig cfg;
  std::unique_ptr<model::TensorSource> source;
  std::unique_ptr<model::Tokenizer> tokenizer;
  int capacity = 0;
  std::vector<int> ids;
};

// Everything that can be refused is refused here, before anything runs; the result gets
// the model's, the tokenizer's and the KV cache's facts.
RunPlan plan_run(const BoardRunRequest& req, BoardRunResult& res) {
  const RunRequest& rr = req.run;
  RunPlan p{make_sim_config(req.params), model::open_model_source(rr.model), nullptr, 0, {}};
  SimConfig& cfg = p.cfg;
  const model::ModelConfig mc = p.source->config();
  // The model's head_dim against the one the attention unit is built for (attention.head_dim).
  host::check_model_head_dim(mc, cfg.board.attention.head_dim, p.source->describe());
  p.tokenizer = model::select_tokenizer(rr.tokenizer, model::model_folder(rr.model), mc.vocab_size);
  res.model = p.source->describe();
  res.shape = mc.shape_string();
  res.attention = hw::attention_resources(cfg.board.attention);
  res.tokenizer = p.tokenizer->describe();
  res.synthetic_tokenizer = p.tokenizer->is_synthetic();
  // The context the KV cache holds in its format (docs/variants-attention.md 8.5, 8.8): the
  // unit's T range (512; the INT4 unit's 2048) and the model's positions, or fewer when they
  // do not fit the CMA (none: the memory map's refusal).
  const int capacity = host::kv_context_limit(mc, cfg.memory);
  if (capacity < 1) {  // the account at one position: what does not fit, by how much
    host::check_model_fits(mc, cfg.memory);
    (void)host::MemoryMap(mc, cfg.memory);
  }
  cfg.memory.kv_positions = capacity;
  p.capacity = capacity;
  res.kv_capacity = capacity;
  res.kv_capacity_cap = host::kv_context_cap(mc, cfg.memory);
  if (cfg.walker.pl()) res.walker = host::walker_resources(cfg.walker, mc, capacity);
  res.tokens_per_pass = cfg.board.prefill.tokens_per_pass;
  res.prefill = prefill_resources_of(cfg, mc, capacity);
  res.energy_config = cfg.energy;
  // A refusal says what bounds the context: what took the CMA's room, or the attention unit's
  // (or the model's) largest context where the memory would hold more (host::MemoryAccount).
  const auto why = [&](int wanted) {
    return fmt::format(" (kv.format = {}: {})", cfg.board.attention.kv_format,
                       host::memory_account(mc, cfg.memory, capacity).room_text(wanted));
  };
  p.ids = prompt_ids(rr, *p.tokenizer, mc.bos_token_id, capacity, why);
  res.prompt_tokens = int(p.ids.size());
  (void)host::MemoryMap(mc, cfg.memory);  // the buffers fit the contiguous memory
  if (rr.legacy_attention && cfg.board.attention.kind() == model::AttentionVariant::OnlineSoftmax)
    throw FieldError("legacy_attention", "the online-softmax unit (attention.variant) has no legacy shift mode");
  if (cfg.memory.int8_lm_head) throw Error("model.int8_lm_head: the matmul engine takes ternary rows only");
  return p;
}

// With the check on, the board and the golden reference run each token at the same time,
// so the host threads are split between them: the golden reference, the slower of the two,
// gets the larger half (with 2 threads, one core each). The split changes no result.
struct ThreadSplit {
  int golden;
  int board;
};
ThreadSplit split_threads(const BoardRunRequest& req) {
  const int golden_threads = req.check ? (req.run.threads + 1) / 2 : 0;
  return {golden_threads, req.check ? std::max(1, req.run.threads - golden_threads) : req.run.threads};
}

// The golden reference that checks each token, when the check is on.
std::unique_ptr<golden::BoardReference> golden_reference(const BoardRunRequest& req, const RunPlan& plan,
                                                         const PreparedModel& l, int threads) {
  if (!req.check) return nullptr;
  const hw::AttentionUnitConfig& a = plan.cfg.board.attention;
  golden::BoardReferenceOptions go{req.run.legacy_attention, threads, a.kind(), a.kv(), a.kv_outlier_channels};
  go.tip = a.tip;
  go.build_threads = req.run.threads;  // built before the first token: every thread
  go.context = plan.capacity;
  go.derived = l.derived.get();
  return std::make_unique<golden::BoardReference>(l.model, l.scales, go);
}

SimulationOptions simulation_options(const BoardRunRequest& req, int threads, host::MmioProgram* recorded) {
  SimulationOptions so(req.fidelity, threads, req.run.legacy_attention);
  so.vcd_file = req.vcd_file;
  so.dram_trace_file = req.dram_trace_file;
  so.dram_commands_file = req.dram_commands_file;
  so.vcd_start = req.vcd_start;
  so.vcd_end = req.vcd_end;
  if (!req.record_mmio_file.empty()) so.record = recorded;
  return so;
}

// The fast board's batch timings from earlier runs of this build and board config: loaded
// when the run starts, saved when it ends or stops.
class TimingCacheUse {
 public:
  TimingCacheUse(Simulation& sim, CacheStore* store, const hw::BoardConfig& board, BoardRunResult& res,
                 const BoardRunCallbacks& cb)
      : sim_(sim), store_(store) {
    if (store && sim.fast_board()) {
      key_ = timing_cache_key(board, executable_identity(store));
      res.timing_entries_cached = load_timing_cache(*sim.fast_board(), *store, key_, cb.on_warning);
    }
  }
  void save() const {
    if (!key_.empty()) save_timing_cache(*sim_.fast_board(), *store_, key_);
  }

 private:
  Simulation& sim_;
  CacheStore* store_;
  std::string key_;
};

// The files a run writes beside its result: the trace, the per-layer table, the MMIO program.
struct RunOutputs {
  explicit RunOutputs(const BoardRunRequest& req) : tracer(open_trace(req.trace_file)), req_(req) {
    for (const auto& key : req.params.changed()) recorded.config.emplace_back(key, req.params.to_string(key));
  }
  // The token loop's observer: the layer table (which feeds the trace) or the trace. The
  // layer table prices its rows with the run's energy account.
  void observe(Simulation& sim, const EnergyAccount& account, bool walker_pl) {
    if (!req_.layers_csv_file.empty()) {
      layers = std::make_unique<LayerTable>(sim.platform(), tracer.get());
      layers->price_with(account, sim.loop().driver(), walker_pl);
    }
    if (layers) sim.loop().set_observer(layers.get());
    else sim.loop().set_observer(tracer.get());
  }
  // SIGINT / SIGTERM: every output is written with what ran before the stop (the finished
  // tokens and the steps of the token cut short) and marked cut short: the per-layer CSV and
  // the MMIO program end with a line "# partial: stopped by SIGINT after N token(s)", the
  // trace's "otherData" holds "partial": true and "stopped_by" (docs/errors.md).
  [[noreturn]] void stopped(const Stopped& stop, const BoardRunResult& res, const SimConfig& cfg, Simulation& sim) {
    const std::string mark = fmt::format("# partial: {} after {} token(s)\n", stop.what(), res.tokens.size());
    std::vector<std::string> written;
    if (layers) {
      for (const TokenRecord& t : res.tokens) layers->set_token_energy(t.index, t.energy);
      io::write_file(req_.layers_csv_file, layers->csv() + mark, "layers CSV file");
      written.push_back(req_.layers_csv_file);
    }
    if (tracer) {
      tracer->set_other("partial", true);
      tracer->set_other("stopped_by", signal_name(stop.signal()));
      write_trace(*tracer, res, cfg, sim, req_.trace_file);
      written.push_back(req_.trace_file);
    }
    if (!req_.record_mmio_file.empty()) {
      std::ostringstream out;
      host::write_program(recorded, out);
      io::write_file(req_.record_mmio_file, out.str() + mark, "mmio record file");
      written.push_back(req_.record_mmio_file);
    }
    // Put in place with what the memory heard, ending "# partial", when the simulation closes
    // (hw/memory/dram_trace.h): after this throw, before the message is shown.
    if (!req_.dram_trace_file.empty()) written.push_back(req_.dram_trace_file);
    if (!req_.dram_commands_file.empty()) written.push_back(req_.dram_commands_file);
    std::string said;
    for (const auto& w : written) said += (said.empty() ? "; written up to the stop, marked partial: " : ", ") + w;
    throw Stopped(stop.signal(), fmt::format("{} after {} token(s){}", stop.what(), res.tokens.size(), said));
  }
  void write(const BoardRunResult& res, const SimConfig& cfg, Simulation& sim,
             const std::function<void(const std::string&)>& status) {
    if (layers) {
      for (const TokenRecord& t : res.tokens) layers->set_token_energy(t.index, t.energy);
      status(fmt::format("writing the per-layer table to {} ...", req_.layers_csv_file));
      layers->write_file(req_.layers_csv_file);
    }
    if (tracer) {
      status(fmt::format("writing the trace to {} ...", req_.trace_file));
      write_trace(*tracer, res, cfg, sim, req_.trace_file);
    }
    if (!req_.record_mmio_file.empty()) {
      status(fmt::format("writing the MMIO program to {} ...", req_.record_mmio_file));
      host::save_program(recorded, req_.record_mmio_file);
    }
  }

  std::unique_ptr<TraceWriter> tracer;
  std::unique_ptr<LayerTable> layers;
  host::MmioProgram recorded;

 private:
  const BoardRunRequest& req_;
};

}  // namespace

RequestFigures request_figures(const BoardRunResult& r) {
  RequestFigures f;
  uint64_t prompt_ps = 0, all_ps = 0;
  std::vector<uint64_t> decode;
  for (const TokenRecord& t : r.tokens) {
    all_ps += t.timing.total_ps();
    if (t.generated) decode.push_back(t.timing.total_ps());
    else prompt_ps += t.timing.total_ps();
  }
  f.request_ms = double(all_ps) / 1e9;
  if (!r.tokens.empty() && prompt_ps > 0 && int(r.tokens.size()) >= r.prompt_tokens) {
    const uint64_t ttft = prompt_ps - std::min(prompt_ps, r.tokens.front().timing.lead_ps);
    f.ttft_ms = double(ttft) / 1e9;
    f.prefill_tok_s = ttft > 0 ? double(r.prompt_tokens) / (double(ttft) / 1e12) : 0.0;
  }
  if (!decode.empty()) {
    std::sort(decode.begin(), decode.end());
    const size_t n = decode.size();
    f.tpot_ms = (n % 2 ? double(decode[n / 2]) : (double(decode[n / 2 - 1]) + double(decode[n / 2])) / 2.0) / 1e9;
  }
  return f;
}

host::PrefillResources prefill_resources_of(const SimConfig& cfg, const model::ModelConfig& mc, int capacity) {
  std::optional<host::WalkerResources> walker;
  if (cfg.walker.pl()) walker = host::walker_resources(cfg.walker, mc, capacity);
  return host::prefill_resources(cfg.board.prefill.tokens_per_pass, cfg.board.attention, walker);
}

void check_board_run(const BoardRunRequest& req) {
  check_request(req);
  BoardRunResult res = result_of(req);
  (void)plan_run(req, res);
}

BoardRunResult run_board(BoardRunRequest req, const BoardRunCallbacks& cb) {
  auto status = [&](const std::string& s) { if (cb.on_status) cb.on_status(s); };
  const RunRequest& rr = req.run;
  check_request(req);
  const auto t_start = Clock::now();
  BoardRunResult res = result_of(req);
  RunPlan plan = plan_run(req, res);
  const SimConfig& cfg = plan.cfg;
  RunOutputs outputs(req);

  const std::unique_ptr<CacheStore> store = CacheStore::open(rr.cache, cb.on_warning);
  const PreparedModel l = load(rr, std::move(plan.source), *plan.tokenizer, res, store.get(), status);
  const ThreadSplit threads = split_threads(req);
  const std::unique_ptr<golden::BoardReference> ref = golden_reference(req, plan, l, threads.golden);
  const auto sim = make_simulation(cfg, l.model, l.scales, simulation_options(req, threads.board, &outputs.recorded));
  const TimingCacheUse timing(*sim, store.get(), cfg.board, res, cb);
  Session session(*sim);
  const EnergyAccount account = energy_account(cfg, l.model.config, plan.capacity);
  Generation generation(req, cb, *plan.tokenizer, plan.ids, ref.get(), session, res, t_start, plan.capacity,
                        cfg.board.prefill, account);
  outputs.observe(*sim, account, cfg.walker.pl());
  status("writing the packed weights image into the simulated DDR ...");
  sim->loop().load_weights(rr.threads, l.derived.get());
  res.approximate = approximate_timing(cfg.board, req.fidelity);
  status(fmt::format("running on the simulated board ({} fidelity{}, PL clock {} MHz) ...", fidelity_name(req.fidelity),
                     res.approximate ? ", approximate DDR3 reuse" : "", cfg.board.clock.mhz));
  try {
    sim->run(std::ref(generation));
  } catch (const Stopped& stop) {
    timing.save();
    outputs.stopped(stop, res, cfg, *sim);
  }
  res.fast = sim->fast_stats();
  timing.save();
  if (req.keep_transfers) res.transfers = sim->platform().transfers();
  outputs.write(res, cfg, *sim, status);
  res.generated_text += generation.flush();
  res.figures = request_figures(res);
  res.wall_s = seconds_since(t_start);
  return res;
}

std::vector<TokenOutcome> simulate_tokens(const SimConfig& cfg, const model::TernaryModel& m,
                                          const model::KvScales& scales, const std::vector<int>& tokens,
                                          const SimulateOptions& o, hw::FastBoardStats* fast_stats,
                                          std::vector<host::TransferRecord>* transfers) {
  SimulationOptions so(o.fidelity, o.threads, o.legacy_attention);
  so.idle_violations = o.idle_violations;
  const auto sim = make_simulation(cfg, m, scales, so);
  std::vector<TokenOutcome> out;
  sim->loop().load_weights(o.threads);
  sim->run([&](host::TokenLoop& loop) {
    loop.init();
    if (o.start_position) loop.set_position(o.start_position);
    for (int t : tokens) {
      TokenOutcome r;
      r.logits = loop.step(t, &r.timing);
      if (o.fidelity == Fidelity::kTimingOnly) r.logits.clear();
      out.push_back(std::move(r));
    }
  });
  if (fast_stats) *fast_stats = sim->fast_stats();
  if (transfers) *transfers = sim->platform().transfers();
  return out;
}

FixedCostShare fixed_cost_share(const BoardRunResult& r) {
  FixedCostShare f;
  double fixed = 0, total = 0, calls = 0;
  for (const auto& t : r.tokens) {
    fixed += t.fixed_call_ms;
    total += t.total_ms;
    calls += double(t.driver_calls);
  }
  if (r.tokens.empty()) return f;
  f.calls_per_token = calls / double(r.tokens.size());
  f.fixed_ms_per_token = fixed / double(r.tokens.size());
  f.share = total > 0 ? fixed / total : 0.0;
  return f;
}

}  // namespace bitsim::sim
