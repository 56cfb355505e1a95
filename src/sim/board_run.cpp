#include "sim/board_run.h"

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "golden/board_reference.h"
#include "host/cycle_platform.h"
#include "host/fast_platform.h"
#include "hw/clock.h"
#include "hw/fast_board.h"
#include "hw/vcd_probe.h"
#include "host/token_loop.h"
#include "hw/sim_context.h"
#include "model/error.h"
#include "sim/board_config.h"
#include "sim/sampler.h"
#include "sim/trace.h"

namespace bitsim::sim {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Recorded {
  int layer;
  std::string step;
  std::vector<float> f;
  std::vector<int32_t> i;
};

golden::Probe recorder(std::vector<Recorded>& out) {
  return [&out](const golden::StepProbe& p) {
    Recorded r{p.layer, p.step, {}, {}};
    if (p.data) r.f.assign(p.data, p.data + p.n);
    if (p.idata) r.i.assign(p.idata, p.idata + p.n);
    out.push_back(std::move(r));
  };
}

std::string first_divergence(const std::vector<Recorded>& board, const std::vector<Recorded>& gold) {
  const size_t n = std::min(board.size(), gold.size());
  for (size_t k = 0; k < n; ++k) {
    const Recorded& b = board[k];
    const Recorded& g = gold[k];
    const std::string where = b.layer < 0 ? fmt::format("step {}", b.step) : fmt::format("layer {}, step {}", b.layer, b.step);
    if (b.step != g.step || b.layer != g.layer)
      return fmt::format("{}: the board and the golden reference ran different steps ({} / {})", where, b.step, g.step);
    for (size_t e = 0; e < std::max(b.i.size(), b.f.size()); ++e) {
      if (!b.i.empty() && b.i[e] != g.i[e])
        return fmt::format("{}, element {}: board {} vs golden {}", where, e, b.i[e], g.i[e]);
      if (!b.f.empty() && std::memcmp(&b.f[e], &g.f[e], 4) != 0)
        return fmt::format("{}, element {}: board {:.9g} vs golden {:.9g}", where, e, b.f[e], g.f[e]);
    }
  }
  return "the intermediate tensors agree; only the logits differ";
}

class Session : public BoardSession {
 public:
  explicit Session(const host::MemoryMap& m) : map_(m) {}
  void bind(host::Platform* p) { platform_ = p; }
  void poke_ddr(uint64_t addr, uint8_t mask) override {
    uint8_t v = 0;
    platform_->mem_read(addr, &v, 1);
    v ^= mask;
    platform_->mem_write(addr, &v, 1);
  }
  uint64_t weights_addr() const override { return map_.qkv(0).calls[0].lane[0].rows_addr; }
  uint64_t lm_head_addr() const override { return map_.lm_head().calls[0].lane[0].rows_addr; }
  uint64_t k_cache_addr(int layer, int head) const override { return map_.k_area(layer, head); }
  uint64_t v_cache_addr(int layer, int head) const override { return map_.v_area(layer, head); }

 private:
  const host::MemoryMap& map_;
  host::Platform* platform_ = nullptr;
};
}  // namespace

BoardRunResult run_board(BoardRunRequest req, const BoardRunCallbacks& cb) {
  auto status = [&](const std::string& s) { if (cb.on_status) cb.on_status(s); };
  const RunRequest& rr = req.run;
  if (rr.prompt.empty()) throw Error("--prompt: the prompt is empty");
  if (req.fidelity != "cycle" && req.fidelity != "fast")
    throw Error(fmt::format("--fidelity {}: expected cycle or fast", req.fidelity));
  if (!req.vcd_file.empty() && req.fidelity != "cycle")
    throw Error("--vcd: the clocked signals exist in --fidelity cycle only");
  if (req.timing_only && req.fidelity != "fast")
    throw Error("--timing-only: needs --fidelity fast (the clocked engines always compute)");
  if (req.timing_only && req.check)
    throw Error("--timing-only: the engines skip the arithmetic, so the golden check must be off (--no-check)");
  const auto t_start = Clock::now();
  BoardRunResult res;
  res.fidelity = req.fidelity;
  res.checked = req.check;
  res.config = req.params.flat();
  res.wall_gb_s = req.params.real("ddr.wall_gb_s");

  // Everything that can be refused is refused before anything runs.
  const SimConfig cfg = make_sim_config(req.params);
  auto source = model::open_model_source(rr.model);
  const model::ModelConfig mc = source->config();
  auto tokenizer = model::select_tokenizer(rr.tokenizer, model::model_folder(rr.model), mc.vocab_size);
  res.model = source->describe();
  res.shape = mc.shape_string();
  res.tokenizer = tokenizer->describe();
  res.synthetic_tokenizer = tokenizer->is_synthetic();
  std::vector<int> ids{mc.bos_token_id};
  for (int id : tokenizer->encode(rr.prompt)) ids.push_back(id);
  res.prompt_tokens = int(ids.size());
  const int total = res.prompt_tokens + rr.tokens;
  if (res.prompt_tokens > golden::kMaxContext)
    throw Error(fmt::format("--prompt: {} tokens with BOS, over the board's KV cache of {} positions",
                            res.prompt_tokens, golden::kMaxContext));
  if (total > golden::kMaxContext && !rr.stop_at_capacity)
    throw Error(fmt::format("context: prompt ({} tokens with BOS) + --tokens {} = {} positions, over the "
                            "board's KV cache of {} (use fewer tokens or --stop-at-capacity)",
                            res.prompt_tokens, rr.tokens, total, golden::kMaxContext));
  const host::MemoryMap map(mc, cfg.memory);
  if (cfg.memory.int8_lm_head)
    throw Error("model.int8_lm_head: the matmul engine takes ternary rows only");
  std::unique_ptr<TraceWriter> tracer;
  if (!req.trace_file.empty()) {
    // Refused now rather than after the run; an existing file is left as it is until then.
    const bool existed = std::filesystem::exists(req.trace_file);
    if (!std::ofstream(req.trace_file, std::ios::binary | std::ios::app))
      throw Error(fmt::format("--trace {}: cannot open the file for writing", req.trace_file));
    if (!existed) std::filesystem::remove(req.trace_file);
    tracer = std::make_unique<TraceWriter>();
  }
  const uint64_t period_ps = hw::clock_period_ps(cfg.board.clock.mhz);

  status(fmt::format("loading {} ...", res.model));
  auto t0 = Clock::now();
  const model::TernaryModel m = model::load_ternary_model(*source, rr.threads);
  source.reset();
  res.load_s = seconds_since(t0);
  status(fmt::format("calibrating K/V scales ({} tokens of the calibration text) ...", golden::kCalibrationTokens));
  t0 = Clock::now();
  const golden::KvScales scales =
      golden::calibrate_kv_scales(m, golden::calibration_tokens(*tokenizer, mc.bos_token_id), rr.threads);
  res.calibration_s = seconds_since(t0);

  std::unique_ptr<golden::BoardReference> ref;
  if (req.check)
    ref = std::make_unique<golden::BoardReference>(m, scales, golden::BoardReferenceOptions{rr.legacy_attention, rr.threads});
  Sampler sampler(rr.sampler);
  model::StreamDecoder decoder(*tokenizer, ids);
  Session session(map);
  host::TokenLoop* loop_ptr = nullptr;

  auto program = [&]() {
    host::TokenLoop& loop = *loop_ptr;
    loop.init();
    std::vector<Recorded> hp, gp;
    int next = ids[0];
    for (int step = 0; step < total; ++step) {
      if (step >= golden::kMaxContext) {
        res.stopped_at_capacity = true;
        break;
      }
      if (req.before_step) req.before_step(session, step);
      const auto w0 = Clock::now();
      const bool generated = step >= res.prompt_tokens;
      const int token = generated ? next : ids[size_t(step)];
      host::TokenTiming t;
      hp.clear();
      gp.clear();
      const std::vector<float> logits = loop.step(token, &t, req.check ? recorder(hp) : golden::Probe{});
      TokenRecord rec;
      if (req.check) {
        const std::vector<float> g = ref->step(token, recorder(gp));
        const bool eq = g.size() == logits.size() && std::memcmp(g.data(), logits.data(), g.size() * 4) == 0;
        rec.logits_equal = eq;
        if (!eq) {
          res.all_equal = false;
          res.mismatch = fmt::format("token {} (context {}): the board's logits differ from the golden "
                                     "reference; first divergence: {}", step, step + 1, first_divergence(hp, gp));
        }
      }
      rec.index = step;
      rec.context = loop.position();
      rec.token_id = token;
      rec.text = tokenizer->piece(token);
      rec.generated = generated;
      rec.matmul_ms = double(t.matmul_ps) / 1e9;
      rec.attention_ms = double(t.attention_ps) / 1e9;
      rec.cpu_ms = double(t.cpu_ps) / 1e9;
      rec.total_ms = double(t.total_ps()) / 1e9;
      rec.dma_calls = t.dma_transfers;
      rec.bytes_read = t.bytes_read;
      const double circuit_s = double(t.matmul_ps + t.attention_ps) / 1e12;
      rec.read_gb_s = circuit_s > 0 ? double(t.bytes_read) / circuit_s / 1e9 : 0.0;
      std::string new_text;
      if (generated) {
        new_text = decoder.push(token);
        res.generated_text += new_text;
      }
      rec.wall_ms = seconds_since(w0) * 1e3;
      res.tokens.push_back(rec);
      if (cb.on_token) cb.on_token(rec, new_text);
      if (!res.mismatch.empty()) return;
      next = sampler.next(logits);
    }
  };

  if (req.fidelity == "fast") {
    hw::FastBoard board(cfg.board, hw::FastBoardOptions{req.timing_only, rr.threads});
    host::FastPlatform platform(board);
    session.bind(&platform);
    host::TokenLoop loop(platform, map, m, scales, cfg.cpu, cfg.driver, host::TokenLoopOptions{rr.legacy_attention});
    loop_ptr = &loop;
    loop.set_observer(tracer.get());
    status("writing the packed weights image into the simulated DDR ...");
    loop.load_weights();
    status(fmt::format("running on the simulated board (fast fidelity, PL clock {} MHz) ...", cfg.board.clock.mhz));
    program();
    res.fast = board.stats();
    if (tracer) tracer->add_transfers(platform.transfers(), period_ps);
  } else {
    hw::FreshSimContext context;
    hw::Board board("board", cfg.board);
    host::Ps ps("ps", [&](host::Ps&) { program(); });
    ps.bus.bind(board.ps_bus);
    std::unique_ptr<hw::VcdProbe> vcd;
    if (!req.vcd_file.empty())
      vcd = std::make_unique<hw::VcdProbe>("vcd", board, hw::VcdConfig{req.vcd_file, req.vcd_start, req.vcd_end});
    host::CyclePlatform platform(ps, board);
    session.bind(&platform);
    host::TokenLoop loop(platform, map, m, scales, cfg.cpu, cfg.driver, host::TokenLoopOptions{rr.legacy_attention});
    loop_ptr = &loop;
    loop.set_observer(tracer.get());
    status("writing the packed weights image into the simulated DDR ...");
    loop.load_weights();
    status(fmt::format("running on the simulated board (cycle fidelity, PL clock {} MHz) ...", cfg.board.clock.mhz));
    sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
    sc_core::sc_start();
    if (ps.failure()) std::rethrow_exception(ps.failure());
    if (!ps.finished()) throw Error("simulation ended before the host program finished");
    if (vcd) vcd->close();
    if (tracer) tracer->add_transfers(platform.transfers(), period_ps);
  }
  if (tracer) {
    status(fmt::format("writing the trace to {} ...", req.trace_file));
    tracer->set_other("model", res.model);
    tracer->set_other("shape", res.shape);
    tracer->set_other("fidelity", res.fidelity);
    tracer->set_other("pl_clock_mhz", cfg.board.clock.mhz);
    tracer->set_other("pl_clock_period_ps", period_ps);
    tracer->set_other("prompt_tokens", res.prompt_tokens);
    tracer->set_other("tokens", res.tokens.size());
    tracer->write_file(req.trace_file);
  }
  res.generated_text += decoder.flush();
  res.wall_s = seconds_since(t_start);
  return res;
}

std::vector<TokenOutcome> simulate_tokens(const SimConfig& cfg, const model::TernaryModel& m,
                                          const golden::KvScales& scales, const std::vector<int>& tokens,
                                          const SimulateOptions& o, hw::FastBoardStats* fast_stats,
                                          std::vector<host::TransferRecord>* transfers) {
  if (o.fidelity != "fast" && o.fidelity != "cycle")
    throw Error(fmt::format("fidelity {}: expected cycle or fast", o.fidelity));
  if (o.timing_only && o.fidelity != "fast") throw Error("timing-only needs the fast fidelity");
  const host::MemoryMap map(m.config, cfg.memory);
  std::vector<TokenOutcome> out;
  auto program = [&](host::TokenLoop& loop) {
    loop.init();
    if (o.start_position) loop.set_position(o.start_position);
    for (int t : tokens) {
      TokenOutcome r;
      r.logits = loop.step(t, &r.timing);
      if (o.timing_only) r.logits.clear();
      out.push_back(std::move(r));
    }
  };
  const host::TokenLoopOptions lo{o.legacy_attention};
  if (o.fidelity == "fast") {
    hw::FastBoard board(cfg.board, hw::FastBoardOptions{o.timing_only, o.threads});
    host::FastPlatform platform(board);
    host::TokenLoop loop(platform, map, m, scales, cfg.cpu, cfg.driver, lo);
    loop.load_weights();
    program(loop);
    if (fast_stats) *fast_stats = board.stats();
    if (transfers) *transfers = platform.transfers();
  } else {
    hw::FreshSimContext context;
    sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
    hw::Board board("board", cfg.board);
    host::TokenLoop* lp = nullptr;
    host::Ps ps("ps", [&](host::Ps&) { program(*lp); });
    ps.bus.bind(board.ps_bus);
    host::CyclePlatform platform(ps, board);
    if (o.idle_violations) platform.check_idle_board(o.idle_violations);
    host::TokenLoop loop(platform, map, m, scales, cfg.cpu, cfg.driver, lo);
    lp = &loop;
    loop.load_weights();
    sc_core::sc_start();
    if (ps.failure()) std::rethrow_exception(ps.failure());
    if (transfers) *transfers = platform.transfers();
  }
  return out;
}

}  // namespace bitsim::sim
