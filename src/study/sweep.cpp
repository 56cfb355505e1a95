#include "study/sweep.h"

#include "model/attention_stream.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <functional>

#include <fmt/format.h>

#include "model/board_shape.h"
#include "model/synthetic.h"
#include "base/error.h"
#include "base/stop_signal.h"
#include "sim/board_config.h"
#include "sim/board_run.h"
#include "study/calibrate.h"

namespace bitsim::study {

namespace {

std::string encode(const SweepPoint& p) { return sweep_point_json(p).dump(); }

SweepPoint decode(const std::string& line) {
  try {
    return sweep_point_from_json(nlohmann::json::parse(line), "a worker process's result");
  } catch (const nlohmann::json::exception&) {
    throw Error("sweep: a worker process returned a malformed result: " + line);
  }
}

}  // namespace

SweepAxis parse_axis(const sim::ParamSet& base, const std::string& spec, const std::string& origin) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 >= spec.size())
    throw Error(fmt::format("{} '{}': expected KEY=V1,V2,... (any config key, or clock_mhz)", origin, spec));
  SweepAxis a;
  a.key = spec.substr(0, eq);
  if (a.key == "clock_mhz") a.key = "clock.mhz";
  size_t pos = eq + 1;
  while (pos <= spec.size()) {
    const size_t comma = spec.find(',', pos);
    const std::string v = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (v.empty()) throw Error(fmt::format("{} '{}': an empty value", origin, spec));
    sim::ParamSet probe = base;
    probe.set(a.key + "=" + v, origin);  // out of range or wrong type: an Error naming the key and range
    a.values.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return a;
}

std::string timing_closure(const sim::ParamSet& p) {
  // BOARD.md: 142.86 MHz failed timing twice, inside the AXI DMA's 23-bit transfer-length
  // counter; 125 MHz passed. A wider counter is at least as hard to close, a narrower one
  // unknown; nothing is known between the two clocks.
  const double mhz = p.real("clock.mhz");
  const int64_t bits = p.integer("dma.length_bits");
  if (mhz >= p.real("timing.fail_mhz") - 1e-9 && bits >= p.integer("timing.fail_length_bits")) return "fails timing (board)";
  if (mhz <= p.real("timing.pass_mhz") + 1e-9 && bits <= p.integer("timing.fail_length_bits")) return "met (board)";
  return "unknown";
}

SweepPoint measure_sweep_point(const sim::ParamSet& p, const SweepOptions& o) {
  const PointMeter meter;
  // The shape the points time (--shape; bitnet-large unless given), timing-only.
  const model::ModelConfig mc = model::config_for(model::parse_shape(o.shape));
  SweepPoint r;
  static_cast<Measured&>(r) = measure_window(p, o.context, o.tokens, &mc);
  r.wall_pct = 100.0 * r.read_gb_s / p.real("ddr.wall_gb_s");
  r.timing = timing_closure(p);
  const sim::SimConfig cfg = sim::make_sim_config(p);
  // The estimate at the shape's KV capacity, as `bitsim run` gives it.
  r.fit = sim::prefill_resources_of(cfg, mc, host::kv_context_limit(mc, cfg.memory)).verdict();
  // An approximate point (ddr3.fast_reuse) says so in its fidelity column (and its energy
  // label, measure_window's).
  const bool approximate = sim::approximate_timing(cfg.board, sim::Fidelity::kTimingOnly);
  r.tpot_ms = r.total_ms;
  if (o.prompt_tokens > 0) {
    const PrefillMeasured pre = measure_prefill(p, o.prompt_tokens, &mc);
    r.ttft_ms = pre.ttft_ms;
    r.prefill_tok_s = pre.prefill_tok_s;
    r.prompt_j = pre.prompt_j;
  }
  r.prov = meter.finish(p, fmt::format("{}{}", sim::fidelity_name(sim::Fidelity::kTimingOnly),
                                       approximate ? ", approximate" : ""), mc);
  return r;
}

const Fields<SweepPoint>& sweep_point_fields() {
  using P = SweepPoint;
  static const Fields<P> fields{{"tok_s", &P::tok_s, "{:.4f}"},         {"total_ms", &P::total_ms, "{:.4f}"},
                                {"matmul_ms", &P::matmul_ms, "{:.4f}"}, {"attention_ms", &P::attention_ms, "{:.4f}"},
                                {"cpu_ms", &P::cpu_ms, "{:.4f}"},       {"walker_ms", &P::walker_ms, "{:.4f}"},
                                {"read_gb_s", &P::read_gb_s, "{:.4f}"}, {"wall_pct", &P::wall_pct, "{:.2f}"},
                                {"dma_calls", &P::dma_calls},           {"timing", &P::timing},
                                {"fit", &P::fit},
                                {"tpot_ms", &P::tpot_ms, "{:.4f}"},     {"ttft_ms", &P::ttft_ms, "{:.4f}"},
                                {"prefill_tok_s", &P::prefill_tok_s, "{:.4f}"},
                                {"energy_mj_per_token", &P::energy_mj, "{:.4f}"},
                                {"avg_power_w", &P::avg_power_w, "{:.4f}"},
                                {"tokens_per_j", &P::tokens_per_j, "{:.4f}"},
                                {"prompt_j", &P::prompt_j, "{:.6f}"},
                                {"energy_evidence", &P::energy_evidence}};
  return fields;
}

nlohmann::json sweep_point_json(const SweepPoint& p) {
  nlohmann::json j = record_json(p, sweep_point_fields());
  j["provenance"] = provenance_json(p.prov);
  return j;
}

SweepPoint sweep_point_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw Error(fmt::format("{}: a point's result is not a JSON object", source));
  SweepPoint p;
  record_from_json(j, sweep_point_fields(), source, "field", p);
  if (!j.contains("provenance")) throw Error(fmt::format("{}: field \"provenance\" missing", source));
  p.prov = provenance_from_json(j["provenance"], source);
  return p;
}

sim::ParamSet SweepGrid::operator[](size_t i) const {
  sim::ParamSet p = base_;
  for (size_t k = 0; k < keys_.size(); ++k) p.set(keys_[k] + "=" + values_[i][k], "grid point");
  return p;
}

// "k=v k=v": a point by its values, as the skipped and failed lists name it.
static std::string point_name(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  std::string name;
  for (size_t k = 0; k < keys.size() && k < values.size(); ++k)
    name += fmt::format("{}{}={}", k ? " " : "", keys[k], values[k]);
  return name;
}

SweepGrid sweep_configs(const sim::ParamSet& base, const SweepOptions& o, SweepResult& res) {
  res.keys.clear();
  for (const auto& a : o.grid) res.keys.push_back(a.key);
  std::vector<std::vector<std::string>> values{{}};
  for (const auto& a : o.grid) {
    std::vector<std::vector<std::string>> next;
    for (const auto& v : values)
      for (const auto& x : a.values) {
        auto w = v;
        w.push_back(x);
        next.push_back(std::move(w));
      }
    values = std::move(next);
  }
  // A point whose combination of values the config validation refuses (e.g. kv.format = int4
  // with attention.variant = two-phase) is left out of the grid and named in res.skipped, as
  // long as each of its values runs in some other point; a value that no point accepts (a
  // DMA FIFO too small for the base's burst) refuses the sweep with its point's error.
  const SweepGrid all(base, res.keys, values);
  std::vector<std::string> errors(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    try {
      (void)sim::make_sim_config(all[i]);  // every module accepts the point
    } catch (const Error& e) {
      errors[i] = e.what();
      if (errors[i].empty()) errors[i] = "refused";
    }
  }
  for (size_t k = 0; k < res.keys.size(); ++k)
    for (size_t i = 0; i < all.size(); ++i) {
      if (errors[i].empty()) continue;
      bool runs_elsewhere = false;
      for (size_t j = 0; j < all.size() && !runs_elsewhere; ++j)
        runs_elsewhere = errors[j].empty() && values[j][k] == values[i][k];
      if (!runs_elsewhere)
        throw Error(fmt::format("sweep: the grid point {} is refused and {}={} runs in no other point: {}",
                                point_name(res.keys, values[i]), res.keys[k], values[i][k], errors[i]));
    }
  std::vector<std::vector<std::string>> kept;
  res.skipped.clear();
  for (size_t i = 0; i < all.size(); ++i) {
    if (errors[i].empty()) {
      kept.push_back(values[i]);
      continue;
    }
    res.skipped.push_back(fmt::format("{}: {}", point_name(res.keys, values[i]), errors[i]));
  }
  SweepGrid grid(base, res.keys, std::move(kept));
  for (size_t i = 0; i < grid.size(); ++i) {
    res.points.emplace_back();
    res.points.back().values = grid.values(i);
  }
  return grid;
}

std::string check_sweep_base(const sim::ParamSet& base, const std::string& model) {
  sim::BoardRunRequest req{sim::RunRequest{}, base};
  req.run.model = model;
  req.run.prompt = "Sweep check";
  req.run.tokens = 2;
  const sim::BoardRunResult r = sim::run_board(std::move(req));
  if (!r.mismatch.empty()) throw Error("sweep: the base config's functional check failed: " + r.mismatch);
  return fmt::format("{} tokens of {} bit-identical to the golden reference", r.tokens.size(), model);
}

namespace {

void set_point(SweepResult& res, int i, SweepPoint p) {
  p.values = std::move(res.points[size_t(i)].values);
  p.done = true;
  res.points[size_t(i)] = std::move(p);
}

// A worker process: every jobs-th point from `first`, one line per point into `fd`.
[[noreturn]] void worker(const SweepGrid& configs, const SweepOptions& o, int first, int jobs, int fd) {
  int code = 0;
  for (int i = first; i < int(configs.size()); i += jobs) {
    std::string line;
    try {
      line = fmt::format("{} {}\n", i, encode(measure_sweep_point(configs[size_t(i)], o)));
    } catch (const Stopped& s) {
      ::_exit(s.exit_code());  // the parent was signalled too and reaps what is done
    } catch (const std::exception& e) {
      line = fmt::format("{} ERROR {}\n", i, e.what());
      code = 1;
    }
    if (::write(fd, line.data(), line.size()) < 0) code = 1;
  }
  ::close(fd);
  ::_exit(code);
}

// The lines of the workers' pipes as they come, until every pipe is closed.
class WorkerLines {
 public:
  explicit WorkerLines(std::vector<int> fds) : fds_(std::move(fds)), buf_(fds_.size()), open_(int(fds_.size())) {}
  // Calls `on_line` with each complete line; returns true when every worker closed its pipe,
  // false as soon as a stop signal arrived (select() returns EINTR at once).
  bool drain(const std::function<void(const std::string&)>& on_line) {
    while (open_ > 0) {
      if (stop_signal()) return false;
      fd_set set;
      FD_ZERO(&set);
      int maxfd = -1;
      for (int fd : fds_)
        if (fd >= 0) {
          FD_SET(fd, &set);
          maxfd = std::max(maxfd, fd);
        }
      if (::select(maxfd + 1, &set, nullptr, nullptr, nullptr) < 0) continue;
      for (size_t j = 0; j < fds_.size(); ++j)
        if (fds_[j] >= 0 && FD_ISSET(fds_[j], &set)) read_one(j, on_line);
    }
    return true;
  }
  ~WorkerLines() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }

 private:
  void read_one(size_t j, const std::function<void(const std::string&)>& on_line) {
    char tmp[4096];
    const ssize_t k = ::read(fds_[j], tmp, sizeof tmp);
    if (k <= 0) {
      ::close(fds_[j]);
      fds_[j] = -1;
      --open_;
      return;
    }
    buf_[j].append(tmp, size_t(k));
    size_t nl;
    while ((nl = buf_[j].find('\n')) != std::string::npos) {
      const std::string line = buf_[j].substr(0, nl);
      buf_[j].erase(0, nl + 1);
      on_line(line);
    }
  }
  std::vector<int> fds_;
  std::vector<std::string> buf_;
  int open_;
};

// The points in worker processes (SystemC allows one simulation context per process).
void measure_parallel(const SweepGrid& configs, const SweepOptions& o, SweepResult& res,
                      const std::function<void(int, int)>& progress) {
  const int n = int(configs.size()), jobs = std::min(o.jobs, n);
  const pid_t parent = ::getpid();
  std::vector<pid_t> pids;
  std::vector<int> fds;
  for (int j = 0; j < jobs; ++j) {
    int fd[2];
    if (::pipe(fd) != 0) throw Error("sweep: pipe() failed");
    const pid_t pid = ::fork();
    if (pid < 0) throw Error("sweep: fork() failed");
    if (pid == 0) {
      // A worker never outlives the sweep: killed with its parent, however the parent ends.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::close(fd[0]);
      worker(configs, o, j, jobs, fd[1]);
    }
    ::close(fd[1]);
    pids.push_back(pid);
    fds.push_back(fd[0]);
  }
  std::string failure;
  int done = 0;
  const bool complete = WorkerLines(std::move(fds)).drain([&](const std::string& line) {
    const auto sp = line.find(' ');
    const int i = std::stoi(line.substr(0, sp));
    const std::string rest = line.substr(sp + 1);
    if (rest.rfind("ERROR ", 0) == 0)
      res.failed.push_back(fmt::format("{}: {}", point_name(res.keys, res.points[size_t(i)].values), rest.substr(6)));
    else
      set_point(res, i, decode(rest));
    ++done;
    if (progress) progress(done, n);
  });
  if (!complete) {
    // Stopped: the points in flight are dropped, every worker killed and reaped.
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    for (pid_t pid : pids)
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    check_stop();
  }
  for (pid_t pid : pids) {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(st)) failure = fmt::format("a worker process died of signal {}", WTERMSIG(st));
  }
  check_stop();  // a signal after the last line: the points are all in, but the run was stopped
  if (!failure.empty()) throw Error("sweep: " + failure);
  if (done != n) throw Error(fmt::format("sweep: {} of {} points came back from the worker processes", done, n));
}

}  // namespace

void check_sweep_options(const SweepOptions& o) {
  if (o.grid.empty()) throw Error("sweep: the grid is empty (give at least one axis KEY=V1,V2,...)");
  if (o.tokens < 1 || o.tokens > 64) throw Error(fmt::format("sweep: tokens {} must be in 1..64", o.tokens));
  // Past 512 only the INT4 unit goes (docs/variants-attention.md 8.8); each point's own KV
  // capacity is checked when it runs.
  if (o.context < 1 || o.context + o.tokens - 1 > model::kAttentionInt4MaxT)
    throw Error(fmt::format("sweep: context {} with {} tokens runs past {} positions, the longest KV cache (INT4)",
                            o.context, o.tokens, model::kAttentionInt4MaxT));
  if (o.jobs < 1 || o.jobs > 64) throw Error(fmt::format("sweep: jobs {} must be in 1..64", o.jobs));
  check_grid_axes(o.grid);
}

void check_grid_axes(const std::vector<SweepAxis>& grid, const std::string& origin) {
  // Two axes over one key (clock_mhz is another name for clock.mhz) would set it twice per
  // point, the later value silently winning.
  for (size_t i = 0; i < grid.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (grid[i].key == grid[j].key)
        throw Error(fmt::format("{}: the key '{}' has two axes (axis {} and axis {}; clock_mhz is another name for "
                                "clock.mhz): give each key one axis with all its values",
                                origin, grid[i].key, j + 1, i + 1));
}

SweepResult run_sweep(const sim::ParamSet& base, const SweepOptions& o, const std::function<void(int, int)>& progress,
                      const std::function<void(const std::string&)>& status) {
  check_sweep_options(o);
  const auto t0 = std::chrono::steady_clock::now();
  SweepResult res;
  const SweepGrid configs = sweep_configs(base, o, res);
  try {
    if (!o.check_model.empty()) {
      if (status) status(fmt::format("checking the base config functionally on {} ...", o.check_model));
      res.base_check = check_sweep_base(base, o.check_model);
    }
    const int n = int(configs.size());
    if (progress) progress(0, n);
    if (o.jobs == 1 || n == 1) {
      for (int i = 0; i < n; ++i) {
        // A point that fails keeps the others (the table is marked partial and names it).
        try {
          set_point(res, i, measure_sweep_point(configs[size_t(i)], o));
        } catch (const Error& e) {
          res.failed.push_back(fmt::format("{}: {}", point_name(res.keys, res.points[size_t(i)].values), e.what()));
        }
        if (progress) progress(i + 1, n);
      }
      check_stop();
    } else {
      measure_parallel(configs, o, res, progress);
    }
  } catch (const Stopped& s) {
    res.stopped_by = s.signal();
  }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

int SweepResult::points_done() const {
  return int(std::count_if(points.begin(), points.end(), [](const SweepPoint& p) { return p.done; }));
}

std::string sweep_csv(const SweepResult& r) {
  std::string out;
  for (const auto& k : r.keys) out += k + ",";
  out += record_csv_header(sweep_point_fields()) + "," + record_csv_header(provenance_fields()) + "\n";
  for (const auto& p : r.points) {
    if (!p.done) continue;
    for (const auto& v : p.values) out += v + ",";
    out += record_csv_row(p, sweep_point_fields()) + "," + provenance_csv(p.prov) + "\n";
  }
  if (r.stopped_by)
    out += fmt::format("# partial: {} of {} points, stopped by {}\n", r.points_done(), r.points.size(),
                       signal_name(r.stopped_by));
  for (const std::string& f : r.failed)
    out += fmt::format("# partial: {} of {} points, the point {}\n", r.points_done(), r.points.size(), f);
  return out;
}

nlohmann::json sweep_json(const SweepResult& r, const SweepOptions& o) {
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& p : r.points) {
    if (!p.done) continue;
    nlohmann::json j;
    for (size_t i = 0; i < r.keys.size(); ++i) j[r.keys[i]] = p.values[i];
    record_to_json(p, sweep_point_fields(), j);
    j["provenance"] = provenance_json(p.prov);
    pts.push_back(j);
  }
  return nlohmann::json{{"schema", "bitsim.sweep/1"}, {"keys", r.keys},      {"context", o.context},
                        {"tokens", o.tokens},         {"prompt_tokens", o.prompt_tokens},
                        {"shape", o.shape},
                        {"fidelity", "fast"},         {"mode", "timing-only"},
                        {"evidence", "simulated"},    {"base_check", r.base_check}, {"wall_s", r.wall_s},
                        {"partial", r.partial()},     {"points_total", r.points.size()},
                        {"skipped", r.skipped},       {"failed", r.failed}, {"points", pts}};
}

}  // namespace bitsim::study
