// The bitsim command: subcommands make-model, inspect, run. Bad arguments and bad input
// exit with code 2 and a message that names the thing at fault.
#include "cli/commands.h"
#include "model/attention_stream.h"
#include "cli/eval_command.h"
#include "cli/regress_command.h"
#include "cli/campaign_command.h"
#include "cli/cache_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "bitsim/version.h"
#include "cli/options.h"
#include "base/file_io.h"
#include "base/stop_signal.h"
#include "base/error.h"
#include "host/mmio_program.h"
#include "model/model_loader.h"
#include "model/kv_format.h"
#include "model/packed_image.h"
#include "host/memory_map.h"
#include "model/synthetic.h"
#include "golden/board_reference.h"
#include "sim/board_config.h"
#include "study/board_figures.h"
#include "sim/board_run.h"
#include "study/calibrate.h"
#include "sim/simulation.h"
#include "sim/replay.h"
#include "study/sweep.h"
#include "study/bench.h"

namespace bitsim::cli {

namespace {

constexpr double kBoardImageMiB = sim::board_figures::kPackedImageMiB;

struct MakeModelArgs {
  std::string shape = "tiny";
  uint64_t seed = 1;
  std::string out;
  bool force = false;
};

struct InspectArgs {
  std::string model = "synthetic:bitnet-large";
  bool json = false;
};

struct RunArgs {
  sim::BoardRunRequest req{sim::RunRequest{}, sim::board_params()};
  std::string fidelity = "fast";
  bool timing_only = false;
  std::string vcd_window;
  std::string tokenizer;
  std::string config;
  std::vector<std::string> sets;
  bool no_check = false;
  bool json = false;
  bool quiet = false;
  CacheArgs cache;
};

struct ReplayArgs {
  std::string file;
  std::string fidelity = "fast";
  bool json = false;
};

struct ConfigArgs {
  std::string config;
  std::vector<std::string> sets;
  bool dump = false;
};

// The effective board config: the shipped configs/pynq-z2.toml (or --config FILE), then
// every --set in order.
sim::ParamSet load_params(const std::string& config, const std::vector<std::string>& sets) {
  return sim::load_board_params(config, sets);
}

// --fidelity and --timing-only, the one place the fidelity's name becomes sim::Fidelity.
sim::Fidelity parse_fidelity(const std::string& name, bool timing_only) {
  if (name != "cycle" && name != "fast") throw Error(fmt::format("--fidelity {}: expected cycle or fast", name));
  if (timing_only && name != "fast")
    throw Error("--timing-only: needs --fidelity fast (the clocked engines always compute)");
  if (timing_only) return sim::Fidelity::kTimingOnly;
  return name == "cycle" ? sim::Fidelity::kCycle : sim::Fidelity::kFast;
}


// A recorded MMIO program on the board of its C lines (on the shipped config), every read
// compared; exit 3 if any differs.
int cmd_replay(const ReplayArgs& a) {
  const host::MmioProgram program = host::load_program(a.file);
  sim::ParamSet p = load_params("", {});
  for (const auto& [key, value] : program.config) p.set(key + "=" + value, a.file);
  const sim::Fidelity fidelity = parse_fidelity(a.fidelity, false);
  const host::ReplayResult r = sim::replay_program(program, sim::make_sim_config(p).board, fidelity);
  if (a.json) {
    nlohmann::json j{{"schema", "bitsim.replay/1"}, {"file", a.file}, {"fidelity", a.fidelity},
                     {"reads", r.reads}, {"writes", r.writes}, {"mem_writes", r.mem_writes},
                     {"mem_reads", r.mem_reads}, {"equal", r.ok()}, {"mismatches", nlohmann::json::array()}};
    for (const auto& m : r.mismatches)
      j["mismatches"].push_back({{"op", m.op}, {"time_ps", m.time_ps}, {"addr", m.addr},
                                 {"register", m.memory ? "DDR" : host::register_name(m.addr)}, {"memory", m.memory},
                                 {"expected", m.expected}, {"got", m.got}});
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{}: {} register reads, {} writes, {} DDR loads, {} stores on the {} board (simulated)\n", a.file,
               r.reads, r.writes, r.mem_reads, r.mem_writes, a.fidelity);
    for (size_t i = 0; i < r.mismatches.size() && i < 20; ++i) fmt::print("  differs: {}\n", host::describe(r.mismatches[i]));
    if (r.mismatches.size() > 20) fmt::print("  ... {} more\n", r.mismatches.size() - 20);
    fmt::print("{}\n", r.ok() ? "every read equal" : fmt::format("{} reads differ", r.mismatches.size()));
  }
  return r.ok() ? 0 : 3;
}

int cmd_make_model(const MakeModelArgs& a) {
  const auto shape = model::parse_shape(a.shape);
  // An existing folder is a checkpoint someone may need: written over only with --force.
  std::error_code ec;
  const auto st = std::filesystem::status(a.out, ec);
  if (std::filesystem::exists(st)) {
    if (!std::filesystem::is_directory(st)) throw Error(fmt::format("--out {}: exists and is not a folder", a.out));
    if (!a.force && !std::filesystem::is_empty(a.out, ec))
      throw Error(fmt::format("--out {}: the folder exists and is not empty; give --force to write the checkpoint "
                              "files (config.json, model.safetensors, TOKENIZER.md) over what is there", a.out));
  } else if (ec && ec != std::errc::no_such_file_or_directory) {
    throw Error(fmt::format("--out {}: {}", a.out, ec.message()));
  }
  model::write_synthetic_checkpoint(shape, a.seed, a.out);
  fmt::print("wrote synthetic {} checkpoint (seed {}) to {}\n", a.shape, a.seed, a.out);
  fmt::print("  config.json, model.safetensors (F32 latent weights, MODEL.md tensor names), TOKENIZER.md\n");
  fmt::print("  the weights are random: text generated with them is noise\n");
  return 0;
}

// The KV cache per format (model/kv_format.h: the whole storage) and the largest context
// whose cache fits the shipped contiguous memory beside everything else the board keeps there.
void print_kv_capacity(const model::ModelConfig& c) {
  const host::MemoryMapConfig mc;
  const host::MemoryMap map(c, mc);
  uint64_t kv = 0;
  for (const auto& r : map.regions())
    if (r.name == "kv cache") kv = r.bytes;
  const uint64_t used_else = map.used_bytes() - kv, free = mc.cma_bytes - std::min(mc.cma_bytes, used_else);
  const uint64_t lh = uint64_t(c.num_layers) * uint64_t(c.num_heads);
  fmt::print("KV cache (docs/variants-attention.md 8: payload, scales, outlier lanes, padding, banks), in the "
             "{} MiB CMA beside {:.2f} MiB of weights and buffers:\n", mc.cma_bytes >> 20, used_else / 1048576.0);
  fmt::print("  {:<22} {:>14} {:>16} {:>14}\n", "format", "bytes/position", "largest T fits", "T=512 MiB");
  const std::pair<const char*, model::KvStorage> formats[] = {
      {"int8 (the board)", model::kv_storage(model::KvFormat::Int8, 0)},
      {"int4", model::kv_storage(model::KvFormat::Int4, 0)},
      {"int4, 8 outlier lanes", model::kv_storage(model::KvFormat::Int4, 8)},
  };
  for (const auto& [name, st] : formats)
    fmt::print("  {:<22} {:>14} {:>16} {:>14.2f}  [simulated]\n", name, lh * st.per_position(),
               model::largest_context(st, lh, free, c.max_position_embeddings),
               st.cache_bytes(lh, 512) / 1048576.0);
  fmt::print("  (capped at max_position_embeddings {}; the board's unit and the int8 online-softmax unit take "
             "T <= {}, the INT4 unit T <= {}: docs/variants-attention.md 8.8)\n",
             c.max_position_embeddings, model::kKvPositions, model::kAttentionInt4MaxT);
}

int cmd_inspect(const InspectArgs& a) {
  auto src = model::open_model_source(a.model);
  const auto& c = src->config();
  const auto t0 = std::chrono::steady_clock::now();
  const model::TernaryModel m = model::load_ternary_model(*src, 2);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto img = model::packed_image_size(c.hidden_size, c.intermediate_size, c.num_layers, c.vocab_size);
  const double mib = double(img.total_bytes) / (1024.0 * 1024.0);
  const double zf = m.zero_fraction();
  if (a.json) {
    nlohmann::json j{{"schema", "bitsim.inspect/1"},
                     {"model", m.source},
                     {"config", c.to_json()},
                     {"parameters", m.parameter_count()},
                     {"zero_fraction", zf},
                     {"lm_head_zero_fraction", model::zero_fraction(m.lm_head)},
                     {"packed_image_bytes", img.total_bytes},
                     {"packed_image_layer_bytes", img.layer_bytes},
                     {"packed_image_lm_head_bytes", img.lm_head_bytes},
                     {"board_packed_image_mib", kBoardImageMiB},
                     {"load_s", load_s}};
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return 0;
  }
  fmt::print("model       {}\n", m.source);
  fmt::print("shape       {}\n", c.shape_string());
  fmt::print("parameters  {} (latent, embedding tied to lm_head)\n", m.parameter_count());
  fmt::print("zero trits  {:.2f}% of the ternary layers, {:.2f}% of the ternarized lm_head\n",
             100.0 * zf, 100.0 * model::zero_fraction(m.lm_head));
  fmt::print("packed image (CIRCUITS.md 2: 5 trits per byte, rows padded to 8-byte beats)\n");
  const uint64_t all_layers = img.layer_bytes * uint64_t(c.num_layers);
  fmt::print("  per layer {:>12} bytes  {:8.2f} MiB\n", img.layer_bytes, img.layer_bytes / 1048576.0);
  fmt::print("  {:2} layers {:>11} bytes  {:8.2f} MiB\n", c.num_layers, all_layers, all_layers / 1048576.0);
  fmt::print("  lm_head   {:>12} bytes  {:8.2f} MiB\n", img.lm_head_bytes, img.lm_head_bytes / 1048576.0);
  fmt::print("  total     {:>12} bytes  {:8.2f} MiB  [simulated]\n", img.total_bytes, mib);
  fmt::print("  board     {:>12}        {:8.2f} MiB  [board]  (bitnet-large; docs/packed-image.md explains the difference)\n",
             "", kBoardImageMiB);
  print_kv_capacity(c);
  fmt::print("loaded and ternarized in {:.2f} s (this host)\n", load_s);
  return 0;
}

struct CalibArgs {
  std::string config;
  std::vector<std::string> sets;
  bool write = false;
  bool json = false;
  bool no_python = false;
  bool quiet = false;
};

nlohmann::json rows_json(const std::vector<sim::ValidationRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json j{{"scenario", r.scenario}, {"context", r.context}, {"figure", r.figure},
                     {"simulated", r.simulated}, {"driver", r.profile}};
    j["board"] = r.board ? nlohmann::json(*r.board) : nlohmann::json(nullptr);
    j["error_pct"] = r.error_pct ? nlohmann::json(*r.error_pct) : nlohmann::json(nullptr);
    out.push_back(j);
  }
  return out;
}

void print_rows(const std::vector<sim::ValidationRow>& rows) {
  fmt::print("{:<18} {:>4} {:<13} {:>11} {:>9} {:>8}  {}\n", "scenario", "T", "figure", "simulated", "board",
             "error %", "evidence");
  for (const auto& r : rows) {
    fmt::print("{:<18} {:>4} {:<13} {:>11.3f} {:>9} {:>8}  {}\n", r.scenario, r.context, r.figure, r.simulated,
               r.board ? fmt::format("{:.3f}", *r.board) : "-", r.error_pct ? fmt::format("{:+.2f}", *r.error_pct) : "-",
               r.board ? "simulated vs board" : "simulated (prediction)");
  }
}

int cmd_validate(const CalibArgs& a) {
  const sim::ParamSet p = load_params(a.config, a.sets);
  std::function<void(const std::string&)> status;
  if (!a.quiet && !a.json) status = [](const std::string& s) { fmt::print(stderr, "{}\n", s); };
  const auto rows = sim::validate(p, !a.no_python, status);
  if (a.json) {
    fmt::print("{}\n", nlohmann::json{{"schema", "bitsim.validate/1"}, {"rows", rows_json(rows)}}.dump(2));
    return 0;
  }
  fmt::print("bitsim against the board (BOARD.md); fidelity fast, timing-only, bitnet-large shape, "
             "medians over 8 tokens at contexts T-7..T\n\n");
  print_rows(rows);
  int with_board = 0, within = 0;
  for (const auto& r : rows)
    if (r.error_pct) {
      ++with_board;
      within += std::fabs(*r.error_pct) <= 2.0;
    }
  fmt::print("\n{} of {} board figures within 2%\n", within, with_board);
  return 0;
}

int cmd_calibrate(const CalibArgs& a) {
  const sim::ParamSet p = load_params(a.config, a.sets);
  if (a.write) {
    const std::string file = a.config.empty() ? sim::default_config_path() : a.config;
    if (file.empty()) throw Error("calibrate --write: no config file to write (give --config FILE)");
    io::check_output_file(file, "calibrate --write: config file");
  }
  std::function<void(const std::string&)> status;
  if (!a.quiet) status = [](const std::string& s) { fmt::print(stderr, "{}\n", s); };
  const auto res = sim::calibrate(p, status);
  if (a.json) {
    nlohmann::json params = nlohmann::json::array();
    for (const auto& f : res.parameters)
      params.push_back({{"key", f.key}, {"unit", f.unit}, {"meaning", f.meaning}, {"before", f.before}, {"after", f.after}});
    fmt::print("{}\n", nlohmann::json{{"schema", "bitsim.calibrate/1"}, {"parameters", params},
                                      {"residuals", rows_json(res.residuals)}}.dump(2));
  } else {
    fmt::print("fitted parameters (each to its own board figures; CIRCUITS.md 6)\n");
    for (const auto& f : res.parameters)
      fmt::print("  {:<40} {:>12.4f} -> {:>12.4f} {:<6} {}\n", f.key, f.before, f.after, f.unit, f.meaning);
    fmt::print("\nresiduals (the board figures after the fit)\n");
    print_rows(res.residuals);
  }
  if (a.write) {
    const std::string file = a.config.empty() ? sim::default_config_path() : a.config;
    if (file.empty()) throw Error("calibrate --write: no config file to write (give --config FILE)");
    io::write_file(file, sim::config_file_text(res.params), "calibrate --write: config file");
    fmt::print(stderr, "wrote the fitted parameters to {}\n", file);
  }
  return 0;
}

struct SweepArgs {
  std::string config;
  std::vector<std::string> sets;
  std::vector<std::string> grid;
  sim::SweepOptions opt;
  std::string csv, json;
  bool quiet = false;
  CampaignCli campaign;  // --out, --shard, --resume, ... (cli/campaign_command.h)
  MergeCli merge;        // `bitsim sweep merge DIR`
};

int cmd_sweep(SweepArgs& a) {
  // The outputs are checked before the work, so that no result is lost at the end.
  if (!a.csv.empty()) io::check_output_file(a.csv, "--csv");
  if (!a.json.empty()) io::check_output_file(a.json, "--json");
  const sim::ParamSet base = load_params(a.config, a.sets);
  if (a.grid.empty()) throw Error("sweep: the grid is empty (give --grid KEY=V1,V2,...; see `bitsim config --dump`)");
  for (const auto& g : a.grid) a.opt.grid.push_back(sim::parse_axis(base, g));
  if (campaign_requested(a.campaign))
    return run_campaign(base, a.opt, a.campaign, {a.config, a.sets, a.grid, a.csv, a.json}, a.quiet);
  const bool tty = ::isatty(STDERR_FILENO) && !a.quiet;
  std::function<void(int, int)> progress;
  if (tty)
    progress = [](int done, int total) {
      const int w = 30, k = total ? done * w / total : w;
      fmt::print(stderr, "\r[{}{}] {}/{} points", std::string(size_t(k), '#'), std::string(size_t(w - k), ' '), done, total);
      if (done == total) fmt::print(stderr, "\n");
    };
  else if (!a.quiet)  // a log (CI, a file): one line per point done
    progress = [](int done, int total) {
      if (done > 0) fmt::print(stderr, "sweep: {} of {} points done\n", done, total);
    };
  std::function<void(const std::string&)> status;
  if (!a.quiet) status = [](const std::string& s) { fmt::print(stderr, "{}\n", s); };
  const sim::SweepResult r = sim::run_sweep(base, a.opt, progress, status);
  const std::string csv = sim::sweep_csv(r);
  if (!a.csv.empty()) io::write_file(a.csv, csv, "--csv");
  if (!a.json.empty()) io::write_file(a.json, sim::sweep_json(r, a.opt).dump(2) + "\n", "--json");
  if (r.stopped_by) {
    if (tty) fmt::print(stderr, "\n");
    fmt::print(stderr, "bitsim: sweep stopped by {}: {} of {} points done{}, marked partial\n",
               signal_name(r.stopped_by), r.points_done(), r.points.size(),
               a.csv.empty() && a.json.empty() ? " (below)"
                                               : fmt::format(" (written to {}{}{})", a.csv,
                                                             !a.csv.empty() && !a.json.empty() ? " and " : "", a.json));
    fmt::print("{}", csv);
    return Stopped(r.stopped_by, "").exit_code();
  }
  fmt::print("sweep: {} points, bitnet-large shape, timing-only (fast fidelity) at context T={}, {} tokens each; "
             "every figure simulated\n", r.points.size(), a.opt.context, a.opt.tokens);
  if (!r.base_check.empty()) fmt::print("base config checked functionally: {}\n", r.base_check);
  for (const auto& k : r.skipped) fmt::print("skipped (not a valid combination): {}\n", k);
  fmt::print("\n{}", csv);
  fmt::print("\nwall time {:.1f} s ({} job(s))\n", r.wall_s, a.opt.jobs);
  return 0;
}

int cmd_config(const ConfigArgs& a) {
  const sim::ParamSet p = load_params(a.config, a.sets);
  if (a.dump) {
    fmt::print("{}", sim::config_file_text(p));
    return 0;
  }
  for (const auto& k : p.changed()) fmt::print("{} = {}\n", k, p.to_string(k));
  return 0;
}


nlohmann::json run_json(const sim::BoardRunResult& r) {
  nlohmann::json toks = nlohmann::json::array();
  std::vector<double> totals;
  int generated = 0, checked = 0, equal = 0;
  for (const auto& t : r.tokens) {
    nlohmann::json j{{"index", t.index}, {"context", t.context}, {"token_id", t.token_id},
                     {"text", t.text}, {"generated", t.generated}, {"matmul_ms", t.matmul_ms},
                     {"attention_ms", t.attention_ms}, {"cpu_ms", t.cpu_ms}, {"total_ms", t.total_ms},
                     {"walker_ms", t.walker_ms}, {"dma_calls", t.dma_calls}, {"driver_calls", t.driver_calls},
                     {"fixed_call_ms", t.fixed_call_ms}, {"bytes_read", t.bytes_read}, {"read_gb_s", t.read_gb_s},
                     {"wall_ms", t.wall_ms}};
    j["logits_equal"] = t.logits_equal ? nlohmann::json(*t.logits_equal) : nlohmann::json(nullptr);
    toks.push_back(j);
    totals.push_back(t.total_ms);
    generated += t.generated;
    if (t.logits_equal) {
      ++checked;
      equal += *t.logits_equal;
    }
  }
  const double med = sim::median(totals);
  double sim_s = 0;
  for (double t : totals) sim_s += t / 1e3;
  const sim::FixedCostShare fixed = sim::fixed_cost_share(r);
  nlohmann::json summary{{"tokens", r.tokens.size()},
                         {"generated", generated},
                         {"tok_s", med > 0 ? 1e3 / med : 0.0},
                         {"median_total_ms", med},
                         {"simulated_s", sim_s},
                         {"wall_s", r.wall_s},
                         {"first_token_s", r.first_token_s},
                         {"load_s", r.load_s},
                         {"calibration_s", r.calibration_s},
                         {"model_cached", r.model_cached},
                         {"scales_cached", r.scales_cached},
                         {"sim_tok_per_wall_s", r.wall_s > 0 ? double(r.tokens.size()) / r.wall_s : 0.0},
                         {"logits_checked", checked},
                         {"driver_calls_per_token", fixed.calls_per_token},
                         {"fixed_call_ms_per_token", fixed.fixed_ms_per_token},
                         {"fixed_cost_share", fixed.share},
                         {"fixed_cost_share_evidence", "simulated"}};
  summary["logits_equal"] = r.checked ? nlohmann::json(equal == checked && r.mismatch.empty()) : nlohmann::json(nullptr);
  if (!r.mismatch.empty()) summary["mismatch"] = r.mismatch;
  if (r.stopped_at_capacity) summary["stopped_at_capacity"] = true;
  summary["kv_capacity"] = r.kv_capacity;
  if (r.fidelity != sim::Fidelity::kCycle)
    summary["timing_cache"] = {{"batches", r.fast.batches},
                               {"hits", r.fast.cache_hits},
                               {"clocked_runs", r.fast.oracle_runs},
                               {"clocked_cycles", r.fast.oracle_cycles},
                               {"clocked_wall_s", r.fast.oracle_wall_s},
                               {"shapes_from_startup_cache", r.timing_entries_cached}};
  if (r.walker) {
    using W = host::WalkerResources;
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : r.walker->rows)
      rows.push_back({{"name", row.name}, {"elements_per_cycle", row.lanes}, {"dsp", row.dsp}, {"lut", row.lut},
                      {"bram36", row.bram36}});
    summary["walker_resources"] = {{"evidence", "simulated"},
                                   {"operators", rows},
                                   {"dsp", r.walker->dsp},
                                   {"lut", r.walker->lut},
                                   {"bram36", r.walker->bram36},
                                   {"device", {{"dsp", W::kDeviceDsp}, {"lut", W::kDeviceLut}, {"bram36", W::kDeviceBram36}}},
                                   {"board_lut_share", W::kBoardLutShare}};
  }
  {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : r.attention.rows)
      rows.push_back({{"name", row.name}, {"width", row.width}, {"per_lane", row.per_lane}, {"dsp", row.dsp},
                      {"lut", row.lut >= 0 ? nlohmann::json(row.lut) : nlohmann::json(nullptr)}, {"bram36", row.bram36}});
    summary["attention_resources"] = {{"evidence", "simulated"}, {"operators", rows}, {"dsp", r.attention.dsp},
                                      {"lut", r.attention.lut}, {"lut_complete", r.attention.lut_complete},
                                      {"bram36", r.attention.bram36}};
  }
  nlohmann::json cfg(r.config);
  return nlohmann::json{{"schema", "bitsim.run/1"},
                        {"fidelity", sim::fidelity_name(r.fidelity)},
                        {"model", r.model},
                        {"tokenizer", r.tokenizer},
                        {"prompt_tokens", r.prompt_tokens},
                        {"text", r.generated_text},
                        {"config", cfg},
                        {"evidence", "simulated"},
                        {"tokens", toks},
                        {"summary", summary}};
}

// The flags of `bitsim run` into the request: the config, the fidelity, the VCD window.
void prepare_run(RunArgs& a) {
  if (!a.tokenizer.empty()) a.req.run.tokenizer = a.tokenizer;
  a.req.params = load_params(a.config, a.sets);
  a.req.fidelity = parse_fidelity(a.fidelity, a.timing_only);
  a.req.check = !a.no_check && !a.timing_only;
  if (!a.req.vcd_file.empty() && a.req.fidelity != sim::Fidelity::kCycle)
    throw Error("--vcd: the clocked signals exist in --fidelity cycle only");
  if (!a.vcd_window.empty()) {
    const auto colon = a.vcd_window.find(':');
    if (colon == std::string::npos)
      throw Error(fmt::format("--vcd-window '{}': expected START:END in PL cycles with END > START", a.vcd_window));
    const std::string what = fmt::format("--vcd-window '{}'", a.vcd_window);
    const uint64_t b = parse_unsigned(a.vcd_window.substr(0, colon), what + ": START");
    const uint64_t e = parse_unsigned(a.vcd_window.substr(colon + 1), what + ": END");
    if (e <= b) throw Error(fmt::format("{}: END must be after START", what));
    a.req.vcd_start = b;
    a.req.vcd_end = e;
  }
}

// The per-token table and the summary of a run.
void print_run(const sim::BoardRunResult& r) {
  fmt::print("\nmodel {} ({}), tokenizer {}; fidelity {}, every figure below is simulated unless labelled\n",
             r.model, r.shape, r.tokenizer, sim::fidelity_name(r.fidelity));
  fmt::print("{:>5} {:>4} {:>8} {:>9} {:>9} {:>9} {:>9} {:>6} {:>10} {:>6} {:>6}  {:<7} {}\n", "token", "T",
             "id", "matmul ms", "attn ms", "cpu ms", "total ms", "tok/s", "DMA calls", "MB rd", "GB/s", "% wall",
             "logits");
  std::vector<double> totals;
  for (const auto& t : r.tokens) {
    totals.push_back(t.total_ms);
    fmt::print("{:>5} {:>4} {:>8} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>6.2f} {:>10} {:>6.1f} {:>6.3f}  {:<7.1f} {}\n",
               t.index, t.context, t.token_id, t.matmul_ms, t.attention_ms, t.cpu_ms, t.total_ms,
               t.total_ms > 0 ? 1e3 / t.total_ms : 0.0, t.dma_calls, t.bytes_read / 1e6, t.read_gb_s,
               100.0 * t.read_gb_s / r.wall_gb_s,
               t.logits_equal ? (*t.logits_equal ? "equal" : "DIFFER") : "-");
  }
  const double med = sim::median(totals);
  double wall_tok = 0;
  for (const auto& t : r.tokens) wall_tok += t.wall_ms;
  fmt::print("\nsummary\n");
  fmt::print("  tokens                {} ({} prompt incl. BOS)\n", r.tokens.size(), r.prompt_tokens);
  fmt::print("  median token          {:.3f} ms, {:.2f} tok/s  [simulated]\n", med, med > 0 ? 1e3 / med : 0.0);
  namespace B = sim::board_figures;
  fmt::print("  the real board        {} ms at T=64, {} ms at T=512 ({} tok/s)  [board]\n", B::kEndToEndT64.total_ms,
             B::kEndToEndT512.total_ms, B::kEndToEndT512.tok_s);
  if (r.walker) {
    using W = host::WalkerResources;
    double walker_ms = 0;
    for (const auto& t : r.tokens) walker_ms += t.walker_ms;
    fmt::print("  layer walker (PL)     {:.3f} ms per token of operator steps (inside total; cpu ms is the host's "
               "share)  [simulated]\n", r.tokens.empty() ? 0.0 : walker_ms / double(r.tokens.size()));
    fmt::print("  walker resources      {} DSP, {} LUT, {} BRAM36 (device 220 DSP, 53,200 LUT, 140 BRAM36; board "
               "today {:.0f}% LUT, {} DSP in the attention unit)  [simulated]\n",
               r.walker->dsp, r.walker->lut, r.walker->bram36, 100 * W::kBoardLutShare, W::kBoardDsp);
    for (const auto& row : r.walker->rows)
      fmt::print("    {:<20} {:>5} el/cycle {:>4} DSP {:>6} LUT {:>3} BRAM36\n", row.name,
                 row.lanes > 0 ? fmt::format("{:g}", row.lanes) : std::string("-"), row.dsp, row.lut, row.bram36);
    // Beside the board's 34% of the LUTs and the configured attention unit (17 DSP on the board).
    const int dsp = r.walker->dsp + r.attention.dsp;
    // The configured attention unit takes the place of the board's, whose LUTs are inside
    // the 34%.
    const int board_unit_lut = hw::attention_resources(hw::AttentionUnitConfig{}).lut;
    const double lut = W::kBoardLutShare * W::kDeviceLut - board_unit_lut + r.walker->lut + r.attention.lut;
    fmt::print("    with the board      {} DSP ({:.0f}%), {:.0f} LUT ({:.0f}%)  [simulated]\n", dsp,
               100.0 * dsp / W::kDeviceDsp, lut, 100.0 * lut / W::kDeviceLut);
  }
  fmt::print("  attention unit        {} DSP48E1, {} BRAM36{} (model; device 220 DSP, 140 BRAM36)  [simulated]\n",
             r.attention.dsp, r.attention.bram36,
             r.attention.lut_complete ? fmt::format(", {} LUT", r.attention.lut)
                                      : fmt::format(", {} LUT in the modelled rows", r.attention.lut));
  const sim::FixedCostShare fixed = sim::fixed_cost_share(r);
  fmt::print("  driver calls          {:.1f} per token, fixed call cost {:.3f} ms per token = {:.1f}% of token "
             "time  [simulated]\n",
             fixed.calls_per_token, fixed.fixed_ms_per_token, 100.0 * fixed.share);
  fmt::print("  logits vs golden      {}\n",
             !r.checked ? std::string("not checked (--no-check)")
                        : (r.mismatch.empty() ? fmt::format("{} of {} tokens bit-identical", r.tokens.size(), r.tokens.size())
                                              : "MISMATCH: " + r.mismatch));
  fmt::print("  host wall time        load {:.2f} s{}, K/V calibration {:.2f} s{}, {:.1f} ms per token, {:.2f} s in all "
             "(this machine, not a board figure)\n",
             r.load_s, r.model_cached ? " (start-up cache)" : "", r.calibration_s,
             r.scales_cached ? " (start-up cache)" : "", r.tokens.empty() ? 0.0 : wall_tok / r.tokens.size(), r.wall_s);
  if (r.stopped_at_capacity)
    fmt::print("  stopped at the board's KV capacity of {} positions ({})\n", r.kv_capacity,
               r.kv_capacity < r.kv_capacity_cap ? "what its KV format fits in the CMA"
                                                 : "the unit's T range or the model's positions");
  if (r.fidelity != sim::Fidelity::kCycle)
    fmt::print("  fast fidelity         {} DMA batches, {} timed from the cache ({} shapes from the start-up "
               "cache), {} run once on the clocked board ({:.2f} s)\n", r.fast.batches, r.fast.cache_hits,
               r.timing_entries_cached, r.fast.oracle_runs, r.fast.oracle_wall_s);
}

int cmd_run(RunArgs& a) {
  prepare_run(a);
  a.req.run.cache = cache_settings(a.cache);
  sim::BoardRunCallbacks cb;
  cb.on_warning = print_warning;
  if (!a.quiet) cb.on_status = [](const std::string& s) { fmt::print(stderr, "{}\n", s); };
  const bool tty = ::isatty(STDERR_FILENO);
  bool started_text = false;
  cb.on_token = [&](const sim::TokenRecord& t, const std::string& text) {
    if (!a.quiet && tty && !a.json)
      fmt::print(stderr, "\r  token {:3}  T={:3}  {:7.2f} ms simulated  {:7.1f} ms wall  {}   ", t.index, t.context,
                 t.total_ms, t.wall_ms,
                 t.logits_equal ? (*t.logits_equal ? "logits equal" : "LOGITS DIFFER") : "unchecked");
    if (a.json || !t.generated) return;
    if (!started_text) {
      fmt::print("--- generated text ---\n");
      started_text = true;
    }
    fmt::print("{}", text);
    std::fflush(stdout);
  };
  const sim::BoardRunResult r = sim::run_board(std::move(a.req), cb);
  if (!a.quiet && tty && !a.json) fmt::print(stderr, "\n");
  if (a.json) {
    fmt::print("{}\n", run_json(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    if (!r.mismatch.empty()) {
      fmt::print(stderr, "bitsim: logits mismatch: {}\n", r.mismatch);
      return 3;
    }
    return 0;
  }
  if (started_text) fmt::print("\n--- end of text ---\n");
  if (r.synthetic_tokenizer)
    fmt::print("note: {} has random synthetic weights, so its text is noise; ids outside the "
               "byte range print as <id>\n", r.model);
  print_run(r);
  if (!r.mismatch.empty()) {
    fmt::print(stderr, "bitsim: logits mismatch: {}\n", r.mismatch);
    return 3;
  }
  return 0;
}

struct BenchArgs {
  sim::BenchOptions opt;
  std::string config;
  std::vector<std::string> sets;
  std::string json_file;
  bool quiet = false;
};

int cmd_bench(BenchArgs& a) {
  if (!a.json_file.empty()) io::check_output_file(a.json_file, "--json");
  a.opt.params = load_params(a.config, a.sets);
  // The process figures run this same executable with the same board config.
  std::error_code ec;
  a.opt.bitsim_exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) throw Error("bench: cannot find this bitsim executable (/proc/self/exe): " + ec.message());
  a.opt.config_args.clear();
  if (!a.config.empty()) a.opt.config_args = {"--config", std::filesystem::absolute(a.config).string()};
  for (const auto& kv : a.sets) {
    a.opt.config_args.push_back("--set");
    a.opt.config_args.push_back(kv);
  }
  const sim::BenchOptions eff = sim::effective_bench_options(a.opt);
  const auto t0 = std::chrono::steady_clock::now();
  std::function<void(const std::string&)> status;
  if (!a.quiet)
    status = [t0](const std::string& s) {
      fmt::print(stderr, "[{:7.1f} s] {}\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), s);
    };
  const auto figs = sim::run_bench(eff, status);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!a.json_file.empty()) {
    io::write_file(a.json_file, sim::bench_json(figs, eff, wall_s) + "\n", "--json");
  }
  fmt::print("{}", sim::bench_table(figs, eff, wall_s));
  return 0;
}

}  // namespace

namespace {

// A subcommand and what runs it.
struct Command {
  CLI::App* sub;
  std::function<int()> run;
};

// `bitsim make-model`: its options; the command runs when the subcommand was given.
Command add_make_model(CLI::App& app) {
  auto args = std::make_shared<MakeModelArgs>();
  MakeModelArgs& a = *args;
  auto* sub = app.add_subcommand("make-model", "Write a synthetic checkpoint in the real file layout");
  sub->add_option("--shape", a.shape, "Model shape: bitnet-large or tiny")
      ->check(CLI::IsMember({"bitnet-large", "tiny"}))->capture_default_str();
  sub->add_option("--seed", a.seed, "Seed of the weight generator")->transform(unsigned_in(0, std::numeric_limits<uint64_t>::max()))->capture_default_str();
  sub->add_option("--out", a.out, "Output folder (created if missing; an existing one only with --force)")->required();
  sub->add_flag("--force", a.force, "Overwrite the checkpoint files of an existing --out folder");
  return {sub, [args] { return cmd_make_model(*args); }};
}

// `bitsim inspect`: its options; the command runs when the subcommand was given.
Command add_inspect(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  InspectArgs& a = *args;
  auto* sub = app.add_subcommand("inspect", "Print a model's shape, parameters, zero fraction and packed image size");
  sub->add_option("--model", a.model, "synthetic:SHAPE[:SEED] or a checkpoint folder")->capture_default_str();
  sub->add_flag("--json", a.json, "Write one JSON document to stdout");
  return {sub, [args] { return cmd_inspect(*args); }};
}

// `bitsim run`: its options; the command runs when the subcommand was given.
Command add_run(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  RunArgs& a = *args;
  auto* sub = app.add_subcommand("run", "Run a prompt token by token on the simulated board, checking every token's logits against the golden reference");
  sub->add_option("--prompt", a.req.run.prompt, "The prompt text")->required();
  sub->add_option("--model", a.req.run.model, "synthetic:SHAPE[:SEED] or a checkpoint folder")->capture_default_str();
  sub->add_option("--tokens", a.req.run.tokens, "Tokens to generate (the KV capacity bounds the prompt and these)")
      ->transform(integer_in(0, model::kAttentionInt4MaxT - 1))
      ->capture_default_str();
  sub->add_option("--tokenizer", a.tokenizer, "A SentencePiece tokenizer.model overriding the model's");
  sub->add_option("--config", a.config, "Board config TOML (default: configs/pynq-z2.toml)");
  sub->add_option("--set", a.sets, "Override one config key: KEY=VALUE (repeatable; see `bitsim config --dump`)");
  sub->add_option("--fidelity", a.fidelity,
                   "fast (default): whole buffers, the clocked model's cycle counts; cycle: every module clocked, beat by beat")
      ->check(CLI::IsMember({"cycle", "fast"}))->capture_default_str();
  sub->add_flag("--no-check", a.no_check, "Do not compare the logits with the golden reference");
  sub->add_flag("--timing-only", a.timing_only,
                 "Fast fidelity, engines skip the arithmetic (same cycle counts; implies --no-check; the text is meaningless)");
  sub->add_option("--seed", a.req.run.sampler.seed, "Seed of the sampler (with --temperature)")
      ->transform(unsigned_in(0, std::numeric_limits<uint64_t>::max()))->capture_default_str();
  sub->add_option("--temperature", a.req.run.sampler.temperature, "Sampling temperature; 0 is greedy")
      ->transform(real_in(0.0, 100.0))->capture_default_str();
  sub->add_option("--top-k", a.req.run.sampler.top_k, "Sample among the k most likely tokens; 0 is all")
      ->transform(integer_in(0, std::numeric_limits<int>::max()))->capture_default_str();
  sub->add_option("--threads", a.req.run.threads, "Host threads for loading and the golden check")
      ->transform(integer_in(1, 64))->capture_default_str();
  sub->add_flag("--stop-at-capacity", a.req.run.stop_at_capacity, "Stop at the KV capacity (512 positions; with kv.format = int4 up to 2048, what fits the CMA) instead of refusing the run");
  sub->add_flag("--legacy-attention", a.req.run.legacy_attention, "The earlier unit's fixed >> 8 shift instead of the multiplier");
  sub->add_flag("--json", a.json, "Write one bitsim.run/1 JSON document to stdout (docs/json-schemas.md)");
  sub->add_flag("--quiet", a.quiet, "No progress lines on stderr");
  sub->add_option("--vcd", a.req.vcd_file, "Cycle fidelity: write a VCD of the clocked signals (stream valid/ready/last, DMA and engine state) to FILE");
  sub->add_option("--vcd-window", a.vcd_window, "START:END in PL cycles traced into the VCD (default 0:20000)");
  sub->add_option("--layers-csv", a.req.layers_csv_file, "Write one CSV row per (token, layer, step) to FILE: simulated begin and time, the busy unit, DMA calls, bytes read (docs/json-schemas.md)");
  sub->add_option("--trace", a.req.trace_file, "Write a Chrome trace (trace event JSON, opens in Perfetto) of the run to FILE: CPU steps, driver calls, engine lanes and DMA channels");
  sub->add_option("--record-mmio", a.req.record_mmio_file, "Write the host program's register accesses and DDR loads and stores, with their simulated times, to FILE (docs/mmio-record.md; `bitsim replay` runs it)");
  add_cache_options(sub, a.cache);
  return {sub, [args] { return cmd_run(*args); }};
}

// `bitsim replay`: its options; the command runs when the subcommand was given.
Command add_replay(CLI::App& app) {
  auto args = std::make_shared<ReplayArgs>();
  ReplayArgs& a = *args;
  auto* sub = app.add_subcommand("replay", "Run a recorded MMIO program (docs/mmio-record.md) on the simulated board and compare every register read and DDR load with the recording; exit 3 on a difference");
  sub->add_option("file", a.file, "The MMIO program")->required();
  sub->add_option("--fidelity", a.fidelity, "fast or cycle")->check(CLI::IsMember({"cycle", "fast"}))->capture_default_str();
  sub->add_flag("--json", a.json, "Write one bitsim.replay/1 JSON document to stdout (docs/json-schemas.md)");
  return {sub, [args] { return cmd_replay(*args); }};
}

// `bitsim config`: its options; the command runs when the subcommand was given.
Command add_config(CLI::App& app) {
  auto args = std::make_shared<ConfigArgs>();
  ConfigArgs& a = *args;
  auto* sub = app.add_subcommand("config", "Print the board config: --dump for every key with its documentation, else the keys that differ from the defaults");
  sub->add_option("--config", a.config, "Board config TOML (default: configs/pynq-z2.toml)");
  sub->add_option("--set", a.sets, "Override one config key: KEY=VALUE (repeatable)");
  sub->add_flag("--dump", a.dump, "Print the effective config as documented TOML");
  return {sub, [args] { return cmd_config(*args); }};
}

// `bitsim sweep`: its options; the command runs when the subcommand was given.
Command add_sweep(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  SweepArgs& a = *args;
  auto* sub = app.add_subcommand("sweep", "Simulate a grid of board configs (timing-only at a context T) to CSV/JSON, after one functional check of the base config");
  sub->add_option("--grid", a.grid, "KEY=V1,V2,... over any config key (or clock_mhz); repeatable: the grid is the product");
  sub->add_option("--tokens", a.opt.tokens, "Timing-only tokens per point")->transform(integer_in(1, 64))->capture_default_str();
  sub->add_option("--context", a.opt.context, "Context T of the first token (past 512: kv.format = int4)")
      ->transform(integer_in(1, model::kAttentionInt4MaxT))
      ->capture_default_str();
  sub->add_option("--jobs", a.opt.jobs, "Worker processes")->transform(integer_in(1, 64))->capture_default_str();
  sub->add_option("--csv", a.csv, "Write the table as CSV to FILE");
  sub->add_option("--json", a.json, "Write a bitsim.sweep/1 document to FILE");
  sub->add_option("--check-model", a.opt.check_model, "Model of the base config's functional check (empty: skip)")->capture_default_str();
  sub->add_option("--config", a.config, "Board config TOML (default: configs/pynq-z2.toml)");
  sub->add_option("--set", a.sets, "Override one base config key: KEY=VALUE (repeatable)");
  sub->add_flag("--quiet", a.quiet, "No progress on stderr");
  add_campaign_options(sub, a.campaign);
  add_merge_subcommand(sub, a.merge);
  return {sub, [args] { return args->merge.sub->parsed() ? run_merge(args->merge) : cmd_sweep(*args); }};
}

// `bitsim validate`: its options; the command runs when the subcommand was given.
Command add_validate(CLI::App& app) {
  auto args = std::make_shared<CalibArgs>();
  CalibArgs& a = *args;
  auto* sub = app.add_subcommand("validate", "The simulator against the board's measurements: scenario, T, figure, simulated, board, error %");
  sub->add_option("--config", a.config, "Board config TOML (default: configs/pynq-z2.toml)");
  sub->add_option("--set", a.sets, "Override one config key: KEY=VALUE (repeatable)");
  sub->add_flag("--json", a.json, "Write one bitsim.validate/1 JSON document to stdout");
  sub->add_flag("--no-python", a.no_python, "Skip the python-driver prediction rows");
  sub->add_flag("--quiet", a.quiet, "No progress lines on stderr");
  return {sub, [args] { return cmd_validate(*args); }};
}

// `bitsim calibrate`: its options; the command runs when the subcommand was given.
Command add_calibrate(CLI::App& app) {
  auto args = std::make_shared<CalibArgs>();
  CalibArgs& a = *args;
  auto* sub = app.add_subcommand("calibrate", "Fit the calibrated parameters to the board's calibration figures and print them with the residuals");
  sub->add_option("--config", a.config, "Board config TOML to start from (and to write with --write)");
  sub->add_option("--set", a.sets, "Override one config key before fitting: KEY=VALUE (repeatable)");
  sub->add_flag("--write", a.write, "Write the fitted config to the config file (default configs/pynq-z2.toml)");
  sub->add_flag("--json", a.json, "Write one bitsim.calibrate/1 JSON document to stdout");
  sub->add_flag("--quiet", a.quiet, "No progress lines on stderr");
  return {sub, [args] { return cmd_calibrate(*args); }};
}

// `bitsim bench`: its options; the command runs when the subcommand was given.
Command add_bench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  BenchArgs& a = *args;
  auto* sub = app.add_subcommand("bench", "Measure the simulator on this host, each figure the median of --repeat runs with its min and max: time to the first token cold and warm, a 1-token and a whole run as processes, peak memory, simulated tok/s per wall second at small and large T with and without the golden check, cycle fidelity's PL cycles per second, fast/cycle speed-up, sweep points per second");
  sub->add_option("--model", a.opt.model, "synthetic:SHAPE[:SEED] or a checkpoint folder")->capture_default_str();
  sub->add_option("--tokens", a.opt.tokens, "Tokens per timed window (fast: T from 1 and up to 512; checked run)")
      ->transform(integer_in(2, 256))->capture_default_str();
  sub->add_option("--cycle-tokens", a.opt.cycle_tokens, "Tokens in cycle fidelity")->transform(integer_in(1, 256))->capture_default_str();
  sub->add_option("--memory-tokens", a.opt.memory_tokens, "Steps of the `bitsim run --no-check` process that the peak memory follows")
      ->transform(integer_in(3, 512))->capture_default_str();
  sub->add_option("--run-tokens", a.opt.run_tokens, "Generated tokens of the whole warm `bitsim run --no-check` process")
      ->transform(integer_in(1, 510))->capture_default_str();
  sub->add_option("--repeat", a.opt.repeat, "Repetitions of every figure (median, min, max)")
      ->transform(integer_in(1, 20))->capture_default_str();
  sub->add_option("--threads", a.opt.threads, "Host threads")->transform(integer_in(1, 64))->capture_default_str();
  sub->add_option("--sweep-points", a.opt.sweep_points, "Timing-only sweep points run in one process for the points/s figure")
      ->transform(integer_in(1, 10000))->capture_default_str();
  sub->add_option("--config", a.config, "Board config TOML (default: configs/pynq-z2.toml)");
  sub->add_option("--set", a.sets, "Override one config key: KEY=VALUE (repeatable)");
  sub->add_flag("--quick", a.opt.quick, "synthetic:tiny and few tokens (a smoke test, not the figures)");
  sub->add_option("--json", a.json_file, "Also write a bitsim.bench/2 JSON document to FILE");
  sub->add_flag("--quiet", a.quiet, "No progress lines on stderr");
  return {sub, [args] { return cmd_bench(*args); }};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bitsim: a cycle-accurate simulator of a ternary/INT8 FPGA LLM accelerator "
               "(PYNQ-Z2) running bitnet_b1_58-large"};
  app.set_version_flag("--version", std::string("bitsim ") + kVersion);
  app.require_subcommand(1);
  const Command commands[] = {add_make_model(app), add_inspect(app), add_run(app),      add_replay(app), add_config(app),
                              add_sweep(app),      add_validate(app), add_calibrate(app), add_bench(app)};
  const auto evalc = add_eval_command(app);
  const auto regressc = add_regress_command(app);
  CacheCommand cachec(app);

  install_stop_handlers();  // SIGINT / SIGTERM stop the command cleanly (base/stop_signal.h)
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  // Standard output is an output like any other: a failed write (a full disk, /dev/full, a
  // closed pipe) is an error, not a silent exit 0.
  auto stdout_failed = [] { return std::fflush(stdout) != 0 || std::ferror(stdout); };
  auto stdout_error = [] {
    fmt::print(stderr, "bitsim: error: standard output: write failed: {}\n", std::strerror(errno ? errno : EIO));
    return 2;
  };
  try {
    int code = 2;
    bool ran = false;
    for (const Command& c : commands)
      if (*c.sub) {
        code = c.run();
        ran = true;
        break;
      }
    if (!ran && evalc->parsed()) {
      code = evalc->run();
      ran = true;
    }
    if (!ran && regressc->parsed()) {
      code = regressc->run();
      ran = true;
    }
    if (!ran && cachec.parsed()) code = cachec.run();
    if (stdout_failed()) return stdout_error();
    return code;
  } catch (const bitsim::Error& e) {
    fmt::print(stderr, "bitsim: error: {}\n", e.what());
    return 2;
  } catch (const Stopped& s) {
    // SIGINT / SIGTERM: the command wrote what had finished; 128 + the signal (130 / 143).
    fmt::print(stderr, "\nbitsim: {}\n", s.what());
    return s.exit_code();
  } catch (const std::exception& e) {
    if (std::ferror(stdout)) return stdout_error();
    fmt::print(stderr, "bitsim: internal error: {}\n", e.what());
    return 1;
  }
}

}  // namespace bitsim::cli
