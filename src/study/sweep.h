#pragma once
// Sweeps: a grid over board config keys, each point simulated in timing-only mode on the
// bitnet-large shape at a context T (fast fidelity: the clocked model's cycle counts), after
// one functional run of the base config has checked the logits against the golden
// reference. Points run in parallel worker processes (--jobs): SystemC allows one
// simulation context per process.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/params.h"
#include "study/calibrate.h"
#include "study/provenance.h"

namespace bitsim::study {

struct SweepAxis {
  std::string key;                  // a config key ("clock.mhz"); `clock_mhz` is accepted for it
  std::vector<std::string> values;  // as text, parsed as the key's type
};

struct SweepOptions {
  std::vector<SweepAxis> grid;
  int tokens = 4;                   // timing-only tokens per point, contexts T..T+tokens-1
  int context = 64;                 // T
  int jobs = 1;                     // worker processes
  int prompt_tokens = 0;            // > 0: also a timing-only prompt of N tokens from position 0
                                    // (ttft_ms, prefill_tok_s; docs/prefill.md)
  std::string check_model = "synthetic:tiny";  // the base config's functional check ("" skips it)
  std::string shape = "bitnet-large";  // the model shape the points time (model::shape_names())
};

// The point's figures are its measured window's (study/calibrate.h: medians per token;
// total = matmul + attention + cpu + walker, walker_ms 0 with host.walker = cpu).
struct SweepPoint : Measured {
  std::vector<std::string> values;  // one per axis, in grid order
  double wall_pct = 0;              // read_gb_s against the DDR wall
  std::string timing;               // fails timing (board) | met (board) | unknown
  std::string fit;                  // the prefill engine of P on the Zynq-7020: fits | DOES NOT FIT (BRAM36 162 > 140)
  double tpot_ms = 0;               // time per output token: total_ms, the median token at T
  std::optional<double> ttft_ms, prefill_tok_s;  // with --prompt-tokens N (else empty)
  std::optional<double> prompt_j;                 // the prompt's energy, with --prompt-tokens N
  bool done = false;                // measured (false: the sweep was stopped before this point)
  Provenance prov;                  // who computed the point, where, at what cost
};

struct SweepResult {
  std::vector<std::string> keys;
  std::vector<SweepPoint> points;
  std::string base_check;           // what the functional check of the base config found
  std::vector<std::string> skipped; // grid points whose combination the config validation
                                    // refuses, "k=v k=v: the reason" (left out of the points)
  double wall_s = 0;
  int stopped_by = 0;               // the signal (SIGINT / SIGTERM) that stopped the sweep; 0: complete.
                                    // A stopped sweep holds the points done; csv and json mark it partial
  std::vector<std::string> failed;  // valid points that failed when measured (a KV cache too small for
                                    // the context, ...), "k=v k=v: the reason"; the others still run,
                                    // and csv and json mark the table partial naming each
  int points_done() const;
  bool partial() const { return stopped_by != 0 || !failed.empty(); }
};

// "KEY=V1,V2,..." -> an axis (the key resolved and every value checked). Errors begin with
// `origin`, where the axis came from.
SweepAxis parse_axis(const sim::ParamSet& base, const std::string& spec, const std::string& origin = "grid axis");
// What is known about closing timing at this point's clock and DMA length width (BOARD.md).
std::string timing_closure(const sim::ParamSet& point);

// On SIGINT / SIGTERM (base/stop_signal.h) the workers are killed and reaped and the
// result returned with stopped_by set: the points done so far, marked partial.
SweepResult run_sweep(const sim::ParamSet& base, const SweepOptions& options,
                      const std::function<void(int done, int total)>& progress = {},
                      const std::function<void(const std::string&)>& status = {});

// The grid's points in order (the product of the axes, the last axis fastest). A point's
// config is built when asked (the base config with the point's values set), so a grid of
// 10,000 points holds 10,000 lists of values, not 10,000 configs.
class SweepGrid {
 public:
  SweepGrid(sim::ParamSet base, std::vector<std::string> keys, std::vector<std::vector<std::string>> values)
      : base_(std::move(base)), keys_(std::move(keys)), values_(std::move(values)) {}
  size_t size() const { return values_.size(); }
  sim::ParamSet operator[](size_t i) const;
  const std::vector<std::string>& values(size_t i) const { return values_[i]; }

 private:
  sim::ParamSet base_;
  std::vector<std::string> keys_;
  std::vector<std::vector<std::string>> values_;
};
// The grid with every point's config checked; `res` gets the keys and the points (values only).
// Points whose combination of values is refused are left out and named in res.skipped when
// each of their values runs in another point; a value no point accepts is the point's Error.
SweepGrid sweep_configs(const sim::ParamSet& base, const SweepOptions& options, SweepResult& res);
// Checks the options (grid, tokens, context, jobs): a bitsim::Error naming the one at fault.
void check_sweep_options(const SweepOptions& options);
// Refuses two axes over one key (their error begins with `origin`).
void check_grid_axes(const std::vector<SweepAxis>& grid, const std::string& origin = "sweep grid");
// One functional run of the base config on `model`, logits checked against the golden
// reference; what it found (a bitsim::Error on a mismatch).
std::string check_sweep_base(const sim::ParamSet& base, const std::string& model);
// One point, timing-only, with its provenance (this process's wall time and peak memory).
SweepPoint measure_sweep_point(const sim::ParamSet& point, const SweepOptions& options);
// A point's figures (JSON keys and CSV columns, in CSV order, with their formats; the
// provenance follows them as its own record).
const Fields<SweepPoint>& sweep_point_fields();
// A point's figures and provenance as JSON (values and keys not included), and back
// (a bitsim::Error naming `source` and the field).
nlohmann::json sweep_point_json(const SweepPoint& p);
SweepPoint sweep_point_from_json(const nlohmann::json& j, const std::string& source);

std::string sweep_csv(const SweepResult& r);
nlohmann::json sweep_json(const SweepResult& r, const SweepOptions& o);

}  // namespace bitsim::study
