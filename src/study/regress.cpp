#include "study/regress.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "host/mmio_program.h"
#include "model/model_loader.h"
#include "base/json_parse.h"
#include "base/error.h"
#include "base/file_io.h"
#include "sim/board_config.h"
#include "sim/board_run.h"
#include "study/calibrate.h"
#include "study/sweep.h"

namespace bitsim::study {

namespace {

std::string real_text(double v) { return fmt::format("{:.17g}", v); }

// FNV-1a 64 over the transfers' (dma, channel, start, completion), in the order they began.
uint64_t transfers_digest(const std::vector<host::TransferRecord>& transfers) {
  std::vector<uint64_t> words;
  words.reserve(transfers.size() * 4);
  for (const auto& t : transfers) {
    words.push_back(uint64_t(t.dma));
    words.push_back(uint64_t(t.channel));
    words.push_back(t.start);
    words.push_back(t.completion);
  }
  return host::fnv1a64(words.data(), words.size() * sizeof(uint64_t));
}

std::string hex(uint64_t v) { return fmt::format("{:016x}", v); }

void add_timing(std::vector<RegressFigure>& out, const std::string& prefix, const host::TokenTiming& t) {
  out.push_back({prefix + " matmul_ps", t.matmul_ps});
  out.push_back({prefix + " attention_ps", t.attention_ps});
  out.push_back({prefix + " cpu_ps", t.cpu_ps});
  out.push_back({prefix + " dma_transfers", t.dma_transfers});
  out.push_back({prefix + " bytes_read", t.bytes_read});
  out.push_back({prefix + " attention_bytes", t.attention_bytes});
  out.push_back({prefix + " matmul_calls", t.matmul_calls});
  out.push_back({prefix + " attention_calls", t.attention_calls});
  out.push_back({prefix + " multiplier_lowered", t.multiplier_lowered});
}

void add_transfers(std::vector<RegressFigure>& out, const std::vector<host::TransferRecord>& transfers) {
  out.push_back({"transfers", uint64_t(transfers.size())});
  out.push_back({"transfers digest", hex(transfers_digest(transfers))});
}

sim::ParamSet scenario_params(const RegressScenario& s, const sim::ParamSet& base) {
  sim::ParamSet p = base;
  for (const auto& a : s.sets) p.set(a, fmt::format("scenario {}: set", s.name));
  return p;
}

sim::BoardRunRequest run_request(const RegressScenario& s, const sim::ParamSet& params) {
  sim::BoardRunRequest req{sim::RunRequest{}, params};
  req.run.model = s.model;
  req.run.prompt = s.prompt;
  req.run.tokens = s.tokens;
  req.fidelity = sim::fidelity_of(s.fidelity);
  req.check = true;
  req.keep_transfers = true;
  return req;
}

SweepOptions sweep_options(const RegressScenario& s, const sim::ParamSet& params) {
  SweepOptions o;
  for (const auto& g : s.grid) o.grid.push_back(parse_axis(params, g, fmt::format("scenario {}: grid", s.name)));
  o.tokens = s.tokens;
  o.context = s.context;
  o.jobs = 1;
  o.check_model = "";
  return o;
}

std::vector<RegressFigure> run_scenario_run(const RegressScenario& s, const sim::ParamSet& params) {
  const sim::BoardRunResult r = sim::run_board(run_request(s, params));
  std::vector<RegressFigure> out;
  out.push_back({"prompt_tokens", r.prompt_tokens});
  std::string ids;
  for (const sim::TokenRecord& t : r.tokens) {
    const std::string prefix = fmt::format("token {}", t.index);
    out.push_back({prefix + " id", t.token_id});
    add_timing(out, prefix, t.timing);
    out.push_back({prefix + " logits", hex(t.logits_digest)});
    out.push_back({prefix + " logits_equal", t.logits_equal.value_or(false) ? "equal" : "differ"});
    if (t.generated) ids += (ids.empty() ? "" : " ") + std::to_string(t.token_id);
  }
  out.push_back({"generated ids", ids});
  add_transfers(out, r.transfers);
  if (!r.mismatch.empty()) out.push_back({"mismatch", r.mismatch});
  return out;
}

std::vector<RegressFigure> run_scenario_timing(const RegressScenario& s, const sim::ParamSet& params) {
  std::vector<host::TransferRecord> transfers;
  // The shape of the scenario's `model` when it names one (a grouped-query sibling), else
  // bitnet-large's.
  std::optional<model::ModelConfig> shape;
  if (s.field_origin.count("model")) shape = model::open_model_source(s.model)->config();
  const std::vector<sim::TokenOutcome> toks =
      timing_tokens(params, s.context, s.tokens, &transfers, shape ? &*shape : nullptr);
  std::vector<RegressFigure> out;
  for (size_t i = 0; i < toks.size(); ++i) add_timing(out, fmt::format("T={}", s.context + int(i)), toks[i].timing);
  add_transfers(out, transfers);
  return out;
}

// The energy of bitnet-large timing-only tokens, or of the shape of the scenario's `model`
// when it names one (docs/energy.md): per token its total and its three parts, and the CPU's
// DDR traffic the DRAM term prices.
std::vector<RegressFigure> run_scenario_energy(const RegressScenario& s, const sim::ParamSet& params) {
  std::optional<model::ModelConfig> shape;
  if (s.field_origin.count("model")) shape = model::open_model_source(s.model)->config();
  const std::vector<sim::TokenOutcome> toks =
      timing_tokens(params, s.context, s.tokens, nullptr, shape ? &*shape : nullptr);
  const sim::EnergyAccount account = shape_energy_account(params, shape ? &*shape : nullptr);
  std::vector<RegressFigure> out;
  for (size_t i = 0; i < toks.size(); ++i) {
    const std::string prefix = fmt::format("T={}", s.context + int(i));
    const energy::Breakdown b = sim::token_energy(account, toks[i].timing);
    out.push_back({prefix + " total_ps", toks[i].timing.total_ps()});
    out.push_back({prefix + " flushed_bytes", toks[i].timing.flushed_bytes});
    out.push_back({prefix + " invalidated_bytes", toks[i].timing.invalidated_bytes});
    out.push_back({prefix + " energy_mj", real_text(b.total())});
    out.push_back({prefix + " dram_mj", real_text(b.dram())});
    out.push_back({prefix + " pl_mj", real_text(b.pl())});
    out.push_back({prefix + " ps_mj", real_text(b.ps() + b.board_other)});
    if (account.design.dram_model != energy::DramModel::kCommands) continue;
    const hw::DramActivity& d = toks[i].timing.dram;  // ddr3: the commands the DRAM term prices
    for (const auto& [name, v] : {std::pair<const char*, uint64_t>{"act", d.counts.act}, {"pre", d.counts.pre},
                                  {"prea_banks", d.counts.prea_banks}, {"rd", d.counts.rd}, {"wr", d.counts.wr},
                                  {"ref", d.counts.ref}, {"open_cycles", d.open_cycles}})
      out.push_back({prefix + " dram_" + name, v});
  }
  return out;
}

std::vector<RegressFigure> run_scenario_sweep(const RegressScenario& s, const sim::ParamSet& params) {
  const SweepResult r = run_sweep(params, sweep_options(s, params));
  std::vector<RegressFigure> out;
  for (const SweepPoint& p : r.points) {
    std::string where;
    for (size_t k = 0; k < r.keys.size(); ++k) where += (k ? "," : "") + r.keys[k] + "=" + p.values[k];
    const std::string prefix = "point " + where;
    out.push_back({prefix + " total_ms", real_text(p.total_ms)});
    out.push_back({prefix + " matmul_ms", real_text(p.matmul_ms)});
    out.push_back({prefix + " attention_ms", real_text(p.attention_ms)});
    out.push_back({prefix + " cpu_ms", real_text(p.cpu_ms)});
    out.push_back({prefix + " tok_s", real_text(p.tok_s)});
    out.push_back({prefix + " read_gb_s", real_text(p.read_gb_s)});
    out.push_back({prefix + " dma_calls", p.dma_calls});
    out.push_back({prefix + " timing", p.timing});
  }
  return out;
}

std::vector<RegressFigure> run_scenario_validate(const sim::ParamSet& params) {
  std::vector<RegressFigure> out;
  for (const ValidationRow& r : validate(params, true))
    out.push_back({fmt::format("{} T={} {} ({})", r.scenario, r.context, r.figure, r.profile), real_text(r.simulated)});
  return out;
}

// --- the suite file -------------------------------------------------------------------------

// A fidelity a run scenario can name: cycle or fast (timing-only computes no logits).
bool is_run_fidelity(const std::string& name) {
  try {
    return sim::fidelity_of(name) != sim::Fidelity::kTimingOnly;
  } catch (const Error&) {
    return false;
  }
}

std::string where(const std::filesystem::path& file, const toml::node& n) {
  return fmt::format("{}:{}", file.string(), n.source().begin.line);
}

std::string text_field(const std::filesystem::path& file, const toml::node& n, const std::string& field) {
  if (auto v = n.value_exact<std::string>()) return *v;
  throw Error(fmt::format("{}: field '{}' must be a string", where(file, n), field));
}

int int_field(const std::filesystem::path& file, const toml::node& n, const std::string& field, int lo, int hi) {
  const auto v = n.value_exact<int64_t>();
  if (!v || *v < lo || *v > hi)
    throw Error(fmt::format("{}: field '{}' must be an integer in {}..{}", where(file, n), field, lo, hi));
  return int(*v);
}

std::vector<std::string> list_field(const std::filesystem::path& file, const toml::node& n, const std::string& field) {
  const auto* arr = n.as_array();
  if (!arr) throw Error(fmt::format("{}: field '{}' must be an array of strings", where(file, n), field));
  std::vector<std::string> out;
  for (const auto& e : *arr) out.push_back(text_field(file, e, field));
  return out;
}

void check_name(const std::filesystem::path& file, const toml::node& n, const std::string& name) {
  if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
                          std::string::npos || name[0] == '.')
    throw Error(fmt::format("{}: scenario name '{}' must be letters, digits, '.', '_' or '-' (it names the baseline "
                            "file)", where(file, n), name));
}

// A key given twice in a scenario's `set` or `grid` list (one would silently win): an error
// naming both entries. clock_mhz is another name for clock.mhz.
void check_keys_once(const std::filesystem::path& file, const toml::node& list, const std::string& field,
                     const std::vector<std::string>& entries) {
  std::map<std::string, size_t> first;
  for (size_t i = 0; i < entries.size(); ++i) {
    std::string key = entries[i].substr(0, entries[i].find('='));
    if (key == "clock_mhz") key = "clock.mhz";
    if (const auto [it, fresh] = first.emplace(key, i); !fresh)
      throw Error(fmt::format("{}: field '{}' sets the key '{}' twice: entry {} ('{}') and entry {} ('{}')",
                              where(file, list), field, key, it->second + 1, entries[it->second], i + 1, entries[i]));
  }
}

RegressScenario parse_scenario(const std::filesystem::path& file, const toml::table& t, const toml::node& node) {
  RegressScenario s;
  s.origin = where(file, node);
  for (const auto& [k, v] : t) {
    const std::string key(k.str());
    s.field_origin[key] = where(file, v);
    if (key == "name") s.name = text_field(file, v, key);
    else if (key == "kind") s.kind = text_field(file, v, key);
    else if (key == "model") s.model = text_field(file, v, key);
    else if (key == "fidelity") s.fidelity = text_field(file, v, key);
    else if (key == "prompt") s.prompt = text_field(file, v, key);
    else if (key == "tokens") s.tokens = int_field(file, v, key, 1, 512);
    else if (key == "context") s.context = int_field(file, v, key, 1, 512);
    else if (key == "grid") check_keys_once(file, v, key, s.grid = list_field(file, v, key));
    else if (key == "set") check_keys_once(file, v, key, s.sets = list_field(file, v, key));
    else
      throw Error(fmt::format("{}: unknown scenario field '{}' (name, kind, model, fidelity, prompt, tokens, context, "
                              "grid, set)", where(file, v), key));
  }
  check_name(file, node, s.name);
  static const std::set<std::string> kinds{"run", "timing", "sweep", "validate", "energy"};
  if (!kinds.count(s.kind))
    throw Error(fmt::format("{}: scenario '{}': kind '{}' is not one of run, timing, sweep, validate, energy", where(file, node),
                            s.name, s.kind));
  if (!is_run_fidelity(s.fidelity))
    throw Error(fmt::format("{}: scenario '{}': fidelity '{}' is not fast or cycle", where(file, node), s.name,
                            s.fidelity));
  if (s.kind == "sweep" && s.grid.empty())
    throw Error(fmt::format("{}: scenario '{}': a sweep needs a grid", where(file, node), s.name));
  if (s.kind != "sweep" && !s.grid.empty())
    throw Error(fmt::format("{}: scenario '{}': only a sweep has a grid", where(file, node), s.name));
  if (s.kind != "run" && s.context + s.tokens - 1 > 512)
    throw Error(fmt::format("{}: scenario '{}': context {} + {} tokens runs past the 512 positions of the KV cache",
                            where(file, node), s.name, s.context, s.tokens));
  return s;
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') o += ' ';
        else o += c;
    }
  }
  return o;
}

std::string value_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// A number from a figure's value (integers, or reals written as text), if it is one.
std::optional<double> as_number(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) return std::nullopt;
  const std::string s = v.get<std::string>();
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(s.c_str(), &end);
  if (errno || end != s.c_str() + s.size()) return std::nullopt;
  return d;
}

std::string delta_text(const nlohmann::json& before, const nlohmann::json& after) {
  if (before.is_number_integer() && after.is_number_integer()) {
    const long double b = before.get<long double>(), a = after.get<long double>();
    const long long d = (long long)(a - b);
    return b != 0 ? fmt::format("{:+d} ({:+.4g}%)", d, double((a - b) / b * 100)) : fmt::format("{:+d}", d);
  }
  const auto b = as_number(before), a = as_number(after);
  if (!b || !a) return "";
  return *b != 0 ? fmt::format("{:+.6g} ({:+.4g}%)", *a - *b, (*a - *b) / *b * 100) : fmt::format("{:+.6g}", *a - *b);
}

}  // namespace

std::string default_regress_suite_path() {
  const std::filesystem::path p = std::filesystem::path(BITSIM_SOURCE_DIR) / "configs" / "regress.toml";
  std::error_code ec;
  return std::filesystem::exists(p, ec) ? p.string() : std::string();
}

RegressSuite load_regress_suite(const std::filesystem::path& file) { return load_regress_suite(file, sim::board_params()); }

void check_regress_scenario(const RegressScenario& s, const sim::ParamSet& base) {
  // The field a check is about, for the error's FILE:LINE (the scenario's own line otherwise).
  std::string field;
  auto at = [&](const std::string& f) {
    const auto it = s.field_origin.find(f);
    return it != s.field_origin.end() ? it->second : s.origin;
  };
  try {
    field = "set";
    const sim::ParamSet params = scenario_params(s, base);
    field = "";
    (void)sim::make_sim_config(params);
    if (s.kind == "run") {
      field = "model";
      sim::check_board_run(run_request(s, params));
    } else if (s.kind == "timing" && s.field_origin.count("model")) {
      field = "model";
      (void)model::open_model_source(s.model)->config();
    } else if (s.kind == "sweep") {
      field = "grid";
      const SweepOptions o = sweep_options(s, params);
      check_sweep_options(o);
      SweepResult grid;
      if (sweep_configs(params, o, grid).size() == 0)
        throw Error(fmt::format("no point of the grid is a valid config (first refused: {})",
                                grid.skipped.empty() ? std::string("?") : grid.skipped.front()));
    }
  } catch (const Error& e) {
    const std::string what = e.what();
    // A prompt's refusals name the prompt or the context; a tokenizer's, a model's.
    if (field == "model" && (what.rfind("prompt", 0) == 0 || what.rfind("context", 0) == 0)) field = "prompt";
    const std::string origin = at(field);
    throw Error(fmt::format("{}{}scenario '{}'{}: {}", origin, origin.empty() ? "" : ": ", s.name,
                            field.empty() ? "" : fmt::format(" ({})", field), what));
  }
}

RegressSuite load_regress_suite(const std::filesystem::path& file, const sim::ParamSet& base) {
  const std::string text = io::read_file(file, "suite file", io::kMaxSmallFileBytes);
  toml::table root;
  try {
    root = toml::parse(text, file.string());
  } catch (const toml::parse_error& e) {
    throw Error(fmt::format("{}:{}:{}: TOML syntax error: {}", file.string(), e.source().begin.line,
                            e.source().begin.column, e.description()));
  }
  RegressSuite suite;
  suite.file = file;
  suite.baseline_dir = file.parent_path() / "regress";
  std::set<std::string> names;
  for (const auto& [k, v] : root) {
    const std::string key(k.str());
    if (key == "baselines") {
      suite.baseline_dir = file.parent_path() / text_field(file, v, key);
    } else if (key == "scenario") {
      const auto* arr = v.as_array();
      if (!arr) throw Error(fmt::format("{}: 'scenario' must be an array of tables ([[scenario]])", where(file, v)));
      for (const auto& e : *arr) {
        const auto* t = e.as_table();
        if (!t) throw Error(fmt::format("{}: a scenario must be a table ([[scenario]])", where(file, e)));
        RegressScenario s = parse_scenario(file, *t, e);
        if (!names.insert(s.name).second)
          throw Error(fmt::format("{}: scenario name '{}' is used twice", where(file, e), s.name));
        suite.scenarios.push_back(std::move(s));
      }
    } else {
      throw Error(fmt::format("{}: unknown suite field '{}' (baselines, scenario)", where(file, v), key));
    }
  }
  if (suite.scenarios.empty()) throw Error(fmt::format("suite file '{}': no [[scenario]]", file.string()));
  for (const auto& s : suite.scenarios) check_regress_scenario(s, base);
  return suite;
}

std::vector<RegressFigure> run_regress_scenario(const RegressScenario& s, const sim::ParamSet& base) {
  const sim::ParamSet params = scenario_params(s, base);
  if (s.kind == "run") return run_scenario_run(s, params);
  if (s.kind == "timing") return run_scenario_timing(s, params);
  if (s.kind == "energy") return run_scenario_energy(s, params);
  if (s.kind == "sweep") return run_scenario_sweep(s, params);
  if (s.kind == "validate") return run_scenario_validate(params);
  throw Error(fmt::format("scenario {}: unknown kind '{}'", s.name, s.kind));
}

std::vector<RegressMove> compare_regress_figures(const std::vector<RegressFigure>& baseline,
                                                 const std::vector<RegressFigure>& now) {
  std::map<std::string, const nlohmann::json*> current;
  for (const auto& f : now) current.emplace(f.name, &f.value);
  std::set<std::string> seen;
  std::vector<RegressMove> moved;
  for (const auto& f : baseline) {
    seen.insert(f.name);
    const auto it = current.find(f.name);
    if (it == current.end()) {
      moved.push_back({f.name, value_text(f.value), "(none)", ""});
    } else if (*it->second != f.value) {
      moved.push_back({f.name, value_text(f.value), value_text(*it->second), delta_text(f.value, *it->second)});
    }
  }
  for (const auto& f : now)
    if (!seen.count(f.name)) moved.push_back({f.name, "(none)", value_text(f.value), ""});
  return moved;
}

std::vector<RegressFigure> read_regress_baseline(const std::filesystem::path& file) {
  const std::string text = io::read_file(file, "baseline", io::kMaxRecordFileBytes);
  nlohmann::json j;
  try {
    j = io::parse_json_unique_keys(text, "baseline '" + file.string() + "'");
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("baseline '{}': malformed JSON ({})", file.string(), e.what()));
  }
  // Compared as JSON values: a "schema" that is not a string is a wrong document, not a type error.
  if (!j.is_object() || !j.contains("schema") || j["schema"] != "bitsim.regress-baseline/1" || !j.contains("figures") ||
      !j["figures"].is_array())
    throw Error(fmt::format("baseline '{}': not a bitsim.regress-baseline/1 document", file.string()));
  std::vector<RegressFigure> out;
  for (const auto& f : j["figures"]) {
    if (!f.is_array() || f.size() != 2 || !f[0].is_string() || !(f[1].is_string() || f[1].is_number_integer()))
      throw Error(fmt::format("baseline '{}': figure {} is not [name, integer or string]", file.string(), out.size()));
    out.push_back({f[0].get<std::string>(), f[1]});
  }
  return out;
}

// One figure per line, so that a diff of a baseline reads figure by figure.
std::string regress_baseline_text(const std::string& scenario, const std::vector<RegressFigure>& figures) {
  std::string text = fmt::format("{{\n \"schema\": \"bitsim.regress-baseline/1\",\n \"scenario\": {},\n \"figures\": [\n",
                                 nlohmann::json(scenario).dump());
  for (size_t i = 0; i < figures.size(); ++i)
    text += fmt::format("  [{}, {}]{}\n", nlohmann::json(figures[i].name).dump(), figures[i].value.dump(),
                        i + 1 < figures.size() ? "," : "");
  return text + " ]\n}\n";
}

void write_regress_baseline(const std::filesystem::path& file, const std::string& scenario,
                            const std::vector<RegressFigure>& figures) {
  io::write_file(file, regress_baseline_text(scenario, figures), "baseline");
}

const char* regress_status_name(RegressOutcome::Status s) {
  switch (s) {
    case RegressOutcome::Status::kPassed: return "passed";
    case RegressOutcome::Status::kMoved: return "moved";
    case RegressOutcome::Status::kNoBaseline: return "no baseline";
    case RegressOutcome::Status::kError: return "error";
    case RegressOutcome::Status::kUpdated: return "updated";
  }
  return "?";
}

std::string regress_junit_xml(const std::vector<RegressOutcome>& outcomes, double wall_s) {
  int failures = 0, errors = 0;
  for (const auto& o : outcomes) {
    if (o.status == RegressOutcome::Status::kMoved || o.status == RegressOutcome::Status::kNoBaseline) ++failures;
    if (o.status == RegressOutcome::Status::kError) ++errors;
  }
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << fmt::format("<testsuites name=\"bitsim regress\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{:.3f}\">\n",
                   outcomes.size(), failures, errors, wall_s);
  x << fmt::format("  <testsuite name=\"bitsim regress\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{:.3f}\">\n",
                   outcomes.size(), failures, errors, wall_s);
  for (const auto& o : outcomes) {
    x << fmt::format("    <testcase classname=\"regress.{}\" name=\"{}\" time=\"{:.3f}\"", xml_escape(o.kind),
                     xml_escape(o.scenario), o.wall_s);
    if (o.status == RegressOutcome::Status::kPassed || o.status == RegressOutcome::Status::kUpdated) {
      x << "/>\n";
      continue;
    }
    x << ">\n";
    if (o.status == RegressOutcome::Status::kError) {
      x << fmt::format("      <error message=\"{}\"/>\n", xml_escape(o.error));
    } else if (o.status == RegressOutcome::Status::kNoBaseline) {
      x << fmt::format("      <failure message=\"{}\"/>\n", xml_escape("no baseline: " + o.error));
    } else {
      const RegressMove& m = o.moved.front();
      const std::string msg = fmt::format("{} of {} figures moved; first: {}: {} -> {} {}", o.moved.size(), o.figures,
                                          m.figure, m.before, m.after, m.delta);
      x << fmt::format("      <failure message=\"{}\">", xml_escape(msg));
      for (const auto& mv : o.moved)
        x << xml_escape(fmt::format("{}: {} -> {} {}\n", mv.figure, mv.before, mv.after, mv.delta));
      x << "</failure>\n";
    }
    x << "    </testcase>\n";
  }
  x << "  </testsuite>\n</testsuites>\n";
  return x.str();
}

}  // namespace bitsim::study
