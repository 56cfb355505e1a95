// bitsim._bitsim: the Python module's C++ half (docs/python.md). Each function calls the
// same library entry point as the bitsim command (sim::run_board, study::run_sweep,
// study::run_eval, sim::validate, the board config's keys) and hands back its records as
// columns, one per field of the record's field list (study/record.h) and in its order. The
// Python half (python/bitsim/__init__.py) checks the arguments, makes the tables (pandas or
// numpy) and raises the exceptions.
//
// Every call releases the GIL while it simulates and holds a process-wide lock (SystemC has
// one kernel per process: one simulation at a time). Called on the main thread with
// Python's own SIGINT handler in place, a call puts bitsim's stop handler there for its
// duration (base/stop_signal.h), as the bitsim command does for all of its life: Ctrl-C
// then stops the call at its next natural step, the call returns what finished with the
// signal, and Python's handler is back.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <signal.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/parse_number.h"
#include "base/stop_signal.h"
#include "bitsim/version.h"
#include "model/attention_stream.h"
#include "sim/board_config.h"
#include "sim/board_run.h"
#include "sim/cache_store.h"
#include "sim/params.h"
#include "sim/simulation.h"
#include "study/calibrate.h"
#include "study/eval.h"
#include "study/provenance.h"
#include "study/record.h"
#include "study/run_record.h"
#include "study/sweep.h"

namespace py = pybind11;

namespace bitsim::python {

namespace {

// ---------------------------------------------------------------------------------------
// Text, JSON and records into Python objects.

// Token pieces of a byte-level tokenizer may be a part of a UTF-8 sequence: decoded with
// replacement characters, as the command's JSON writer does.
py::str text(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

py::object from_json(const nlohmann::json& j) {
  using T = nlohmann::json::value_t;
  switch (j.type()) {
    case T::null: return py::none();
    case T::boolean: return py::bool_(j.get<bool>());
    case T::number_integer: return py::int_(j.get<int64_t>());
    case T::number_unsigned: return py::int_(j.get<uint64_t>());
    case T::number_float: return py::float_(j.get<double>());
    case T::string: return text(j.get_ref<const std::string&>());
    case T::array: {
      py::list l;
      for (const auto& e : j) l.append(from_json(e));
      return l;
    }
    case T::object: {
      py::dict d;
      for (const auto& [k, v] : j.items()) d[text(k)] = from_json(v);
      return d;
    }
    default: return py::none();
  }
}

template <typename T>
py::array_t<T> numbers(const std::vector<T>& v) {
  py::array_t<T> a(py::ssize_t(v.size()));
  auto m = a.template mutable_unchecked<1>();
  for (size_t i = 0; i < v.size(); ++i) m(py::ssize_t(i)) = v[i];
  return a;
}

// One column of `rows`: numbers and flags as numpy arrays (int as int64, an empty optional
// number as NaN), texts, optional flags, integers and texts (None where empty) and lists of
// numbers (one array each) as lists.
template <typename R, typename T>
py::object column(const std::vector<const R*>& rows, T R::* m) {
  if constexpr (std::is_same_v<T, std::string>) {
    py::list l;
    for (const R* r : rows) l.append(text(r->*m));
    return l;
  } else if constexpr (std::is_same_v<T, std::optional<bool>>) {
    py::list l;
    for (const R* r : rows) l.append((r->*m) ? py::object(py::bool_(*(r->*m))) : py::object(py::none()));
    return l;
  } else if constexpr (std::is_same_v<T, std::optional<int>> || std::is_same_v<T, std::optional<std::string>>) {
    py::list l;
    for (const R* r : rows) l.append((r->*m) ? py::object(py::cast(*(r->*m))) : py::object(py::none()));
    return l;
  } else if constexpr (std::is_same_v<T, std::vector<double>>) {
    py::list l;
    for (const R* r : rows) l.append(numbers(r->*m));
    return l;
  } else if constexpr (std::is_same_v<T, std::optional<double>>) {
    std::vector<double> v;
    for (const R* r : rows) v.push_back((r->*m).value_or(std::numeric_limits<double>::quiet_NaN()));
    return numbers(v);
  } else if constexpr (std::is_same_v<T, int>) {
    std::vector<int64_t> v;
    for (const R* r : rows) v.push_back(r->*m);
    return numbers(v);
  } else {
    std::vector<T> v;
    for (const R* r : rows) v.push_back(r->*m);
    return numbers(v);
  }
}

// Every field of `fields` as a column (name -> column) into `out`, in the list's order.
template <typename R>
void add_columns(py::dict& out, const std::vector<const R*>& rows, const study::Fields<R>& fields) {
  for (const auto& f : fields) std::visit([&](auto m) { out[f.name] = column(rows, m); }, f.member);
}

template <typename R>
std::vector<const R*> pointers(const std::vector<R>& rows) {
  std::vector<const R*> p;
  for (const auto& r : rows) p.push_back(&r);
  return p;
}

template <typename R>
py::dict columns(const std::vector<R>& rows, const study::Fields<R>& fields) {
  py::dict out;
  add_columns(out, pointers(rows), fields);
  return out;
}

// A vector of floats as a numpy array that owns it (no copy).
py::array_t<float> owned_array(std::vector<float>&& v) {
  auto* held = new std::vector<float>(std::move(v));
  py::capsule owner(held, [](void* p) { delete static_cast<std::vector<float>*>(p); });
  return py::array_t<float>({py::ssize_t(held->size())}, {py::ssize_t(sizeof(float))}, held->data(), owner);
}

// ---------------------------------------------------------------------------------------
// One call at a time, without the GIL, stoppable by SIGINT.

std::mutex& simulation_lock() {
  static std::mutex m;  // SystemC: one simulation context per process at a time
  return m;
}

// bitsim's SIGINT handler in place of Python's for the life of the scope (when `active`):
// the handler only sets the stop flag that the library's loops look at (check_stop), so a
// Ctrl-C stops the call at its next step. SIGTERM keeps its handler. The flag is cleared
// when the scope ends; signal() says whether it was set.
class StopScope {
 public:
  explicit StopScope(bool active) : active_(active) {
    if (!active_) return;
    clear_stop_signal();
    ::sigaction(SIGINT, nullptr, &old_int_);
    ::sigaction(SIGTERM, nullptr, &old_term_);
    install_stop_handlers();
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }
  ~StopScope() {
    if (!active_) return;
    ::sigaction(SIGINT, &old_int_, nullptr);
    clear_stop_signal();
  }
  StopScope(const StopScope&) = delete;
  StopScope& operator=(const StopScope&) = delete;
  int signal() const { return active_ ? stop_signal() : 0; }

 private:
  bool active_;
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// ---------------------------------------------------------------------------------------
// Arguments.

// The board config: the shipped file (or `config_file`), then each "KEY=VALUE" of `sets`
// (ParamSet::set, as --set does; the Python half turned each value into its text).
sim::ParamSet params_of(const std::string& config_file, const std::vector<std::string>& sets) {
  sim::ParamSet p = sim::load_board_params(config_file);
  for (const auto& s : sets) p.set(s, "config");
  return p;
}

sim::CacheSettings cache_of(bool cache, const std::string& cache_dir) {
  return sim::resolve_cache_settings(cache_dir, !cache, std::nullopt, [](const char* n) { return std::getenv(n); });
}

// A whole number in [min, max] (the bitsim command's option ranges), or an Error naming it.
int64_t in_range(int64_t v, const char* what, int64_t min, int64_t max) {
  return parse_integer(std::to_string(v), what, min, max);
}

py::object warnings_list(const std::vector<std::string>& w) {
  py::list l;
  for (const auto& s : w) l.append(text(s));
  return l;
}

// ---------------------------------------------------------------------------------------
// run

struct RunArgs {
  std::string model, prompt, fidelity, tokenizer, config_file, cache_dir;
  std::string trace, layers_csv, record_mmio, dram_trace, dram_commands;
  std::vector<std::string> sets;
  int64_t tokens = 16, top_k = 0, threads = 2;
  uint64_t seed = 0;
  double temperature = 0;
  bool check = true, timing_only = false, stop_at_capacity = false, legacy_attention = false;
  bool cache = true, logits = false, interruptible = false;
  int64_t test_poke_lm_head_step = -1;  // test hook: flip a bit of the lm_head's first byte before this step
};

sim::BoardRunRequest run_request(const RunArgs& a) {
  sim::BoardRunRequest req{sim::RunRequest{}, params_of(a.config_file, a.sets)};
  req.run.model = a.model;
  req.run.prompt = a.prompt;
  req.run.tokens = int(in_range(a.tokens, "tokens", 0, model::kAttentionInt4MaxT - 1));
  if (!a.tokenizer.empty()) req.run.tokenizer = a.tokenizer;
  req.run.sampler.seed = a.seed;
  req.run.sampler.temperature = parse_real(fmt::format("{}", a.temperature), "temperature", 0.0, 100.0);
  req.run.sampler.top_k = int(in_range(a.top_k, "top_k", 0, std::numeric_limits<int>::max()));
  req.run.threads = int(in_range(a.threads, "threads", 1, 64));
  req.run.stop_at_capacity = a.stop_at_capacity;
  req.run.legacy_attention = a.legacy_attention;
  req.run.cache = cache_of(a.cache, a.cache_dir);
  sim::Fidelity f = sim::Fidelity::kFast;
  try {
    f = sim::fidelity_of(a.fidelity);
  } catch (const Error&) {
    f = sim::Fidelity::kTimingOnly;  // not a name `fidelity` takes
  }
  if (f == sim::Fidelity::kTimingOnly) throw Error(fmt::format("fidelity '{}': expected cycle or fast", a.fidelity));
  if (a.timing_only && f != sim::Fidelity::kFast)
    throw Error("timing_only: needs fidelity fast (the clocked engines always compute)");
  req.fidelity = a.timing_only ? sim::Fidelity::kTimingOnly : f;
  req.check = a.check && !a.timing_only;
  req.trace_file = a.trace;
  req.layers_csv_file = a.layers_csv;
  req.record_mmio_file = a.record_mmio;
  req.dram_trace_file = a.dram_trace;
  req.dram_commands_file = a.dram_commands;
  req.config_file = sim::board_config_file(a.config_file);  // an input no output may replace
  if (a.test_poke_lm_head_step >= 0)
    req.before_step = [step = a.test_poke_lm_head_step](sim::BoardSession& s, int k) {
      if (k == step) s.poke_ddr(s.lm_head_addr(), 0x01);
    };
  return req;
}

// The per-token table: the fields of bitsim.run/1's tokens (the logits digest among them, as
// 16 hex digits), then the token's exact picoseconds that `bitsim regress` compares.
py::dict token_columns(const std::vector<sim::TokenRecord>& tokens) {
  py::dict out = columns(tokens, study::run_token_fields());
  std::vector<uint64_t> mm, at, cpu, walker;
  for (const auto& t : tokens) {
    mm.push_back(t.timing.matmul_ps);
    at.push_back(t.timing.attention_ps);
    cpu.push_back(t.timing.cpu_ps);
    walker.push_back(t.timing.walker_ps);
  }
  out["matmul_ps"] = numbers(mm);
  out["attention_ps"] = numbers(at);
  out["cpu_ps"] = numbers(cpu);
  out["walker_ps"] = numbers(walker);
  return out;
}

py::dict run(const RunArgs& a) {
  sim::BoardRunResult res;
  std::vector<sim::TokenRecord> done;  // the tokens finished, kept if the run is stopped
  std::map<int, std::vector<float>> logits;  // by token index: a prompt position may have none
  std::vector<std::string> warnings;
  std::string generated;
  int stopped = 0;
  std::string stop_message;
  {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(simulation_lock());
    StopScope scope(a.interruptible);
    sim::BoardRunRequest req = run_request(a);
    res.fidelity = req.fidelity;
    res.checked = req.check;
    res.config = req.params.flat();
    res.wall_gb_s = req.params.real("ddr.wall_gb_s");
    sim::BoardRunCallbacks cb;
    cb.on_warning = [&](const std::string& w) { warnings.push_back(w); };
    cb.on_token = [&](const sim::TokenRecord& t, const std::string& new_text) {
      done.push_back(t);
      generated += new_text;
    };
    if (a.logits)
      cb.on_logits = [&](const sim::TokenRecord& t, const std::vector<float>& l) { logits[t.index] = l; };
    try {
      res = sim::run_board(std::move(req), cb);
    } catch (const Stopped& s) {
      stopped = s.signal();
      stop_message = s.what();
      res.tokens = done;
      res.generated_text = generated;
    }
    if (!stopped) stopped = scope.signal();  // a Ctrl-C after the last step
  }
  py::dict out;
  out["model"] = text(res.model);
  out["tokenizer"] = text(res.tokenizer);
  out["shape"] = text(res.shape);
  out["fidelity"] = sim::fidelity_name(res.fidelity);
  out["prompt_tokens"] = res.prompt_tokens;
  out["text"] = text(res.generated_text);
  py::dict config;
  for (const auto& [k, v] : res.config) config[text(k)] = text(v);
  out["config"] = config;
  out["tokens"] = token_columns(res.tokens);
  out["summary"] = from_json(study::run_summary_json(res));
  out["mismatch"] = text(res.mismatch);
  out["checked"] = res.checked;
  if (a.logits) {
    // One entry per token of the table, None where no logits were computed (a prompt
    // position whose lm_head was skipped).
    py::list l;
    for (const sim::TokenRecord& t : res.tokens) {
      const auto it = logits.find(t.index);
      if (it == logits.end()) l.append(py::none());
      else l.append(owned_array(std::move(it->second)));
    }
    out["logits"] = l;
  } else {
    out["logits"] = py::none();
  }
  out["warnings"] = warnings_list(warnings);
  out["stopped"] = stopped;
  out["stop_message"] = text(stop_message);
  return out;
}

RunArgs run_args(const py::dict& d) {
  RunArgs a;
  a.model = d["model"].cast<std::string>();
  a.prompt = d["prompt"].cast<std::string>();
  a.fidelity = d["fidelity"].cast<std::string>();
  a.tokenizer = d["tokenizer"].cast<std::string>();
  a.config_file = d["config_file"].cast<std::string>();
  a.cache_dir = d["cache_dir"].cast<std::string>();
  a.trace = d["trace"].cast<std::string>();
  a.layers_csv = d["layers_csv"].cast<std::string>();
  a.record_mmio = d["record_mmio"].cast<std::string>();
  a.dram_trace = d["dram_trace"].cast<std::string>();
  a.dram_commands = d["dram_commands"].cast<std::string>();
  a.sets = d["sets"].cast<std::vector<std::string>>();
  a.tokens = d["tokens"].cast<int64_t>();
  a.top_k = d["top_k"].cast<int64_t>();
  a.threads = d["threads"].cast<int64_t>();
  a.seed = d["seed"].cast<uint64_t>();
  a.temperature = d["temperature"].cast<double>();
  a.check = d["check"].cast<bool>();
  a.timing_only = d["timing_only"].cast<bool>();
  a.stop_at_capacity = d["stop_at_capacity"].cast<bool>();
  a.legacy_attention = d["legacy_attention"].cast<bool>();
  a.cache = d["cache"].cast<bool>();
  a.logits = d["logits"].cast<bool>();
  a.interruptible = d["interruptible"].cast<bool>();
  if (d.contains("test_poke_lm_head_step")) a.test_poke_lm_head_step = d["test_poke_lm_head_step"].cast<int64_t>();
  return a;
}

// ---------------------------------------------------------------------------------------
// sweep

// A swept key's values in the key's type (a number column for a number key).
py::object key_column(const sim::ParamSet& base, const std::string& key, const std::vector<std::string>& values) {
  const sim::ParamSpec& s = base.spec(key);
  switch (s.type) {
    case sim::ParamType::Real: {
      std::vector<double> v;
      for (const auto& t : values) v.push_back(parse_real(t, key));
      return numbers(v);
    }
    case sim::ParamType::Integer: {
      std::vector<int64_t> v;
      for (const auto& t : values) v.push_back(parse_integer(t, key));
      return numbers(v);
    }
    case sim::ParamType::Boolean: {
      std::vector<bool> v;
      for (const auto& t : values) v.push_back(t == "true" || t == "1");
      py::array_t<bool> a(py::ssize_t(v.size()));
      for (size_t i = 0; i < v.size(); ++i) a.mutable_at(py::ssize_t(i)) = v[i];
      return a;
    }
    case sim::ParamType::Text:
    default: {
      py::list l;
      for (const auto& t : values) l.append(text(t));
      return l;
    }
  }
}

py::dict sweep(const std::vector<std::string>& axes, int64_t tokens, int64_t context, int64_t jobs,
               const std::string& check_model, const std::string& config_file, const std::vector<std::string>& sets,
               bool interruptible, int64_t prompt_tokens) {
  study::SweepResult r;
  study::SweepOptions o;
  sim::ParamSet base = sim::board_params();
  {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(simulation_lock());
    StopScope scope(interruptible);
    base = params_of(config_file, sets);
    for (const auto& a : axes) o.grid.push_back(study::parse_axis(base, a, "grid"));
    study::check_grid_axes(o.grid, "grid");
    o.tokens = int(in_range(tokens, "tokens", 1, 64));
    o.context = int(in_range(context, "context", 1, model::kAttentionInt4MaxT));
    o.jobs = int(in_range(jobs, "jobs", 1, 64));
    o.prompt_tokens = int(in_range(prompt_tokens, "prompt_tokens", 0, model::kAttentionInt4MaxT));
    o.check_model = check_model;
    r = study::run_sweep(base, o);
    if (!r.stopped_by) r.stopped_by = scope.signal();
  }
  std::vector<const study::SweepPoint*> done;
  for (const auto& p : r.points)
    if (p.done) done.push_back(&p);
  py::dict cols;
  for (size_t k = 0; k < r.keys.size(); ++k) {
    std::vector<std::string> values;
    for (const auto* p : done) values.push_back(p->values[k]);
    cols[text(r.keys[k])] = key_column(base, r.keys[k], values);
  }
  add_columns(cols, done, study::sweep_point_fields());
  std::vector<study::Provenance> prov;
  for (const auto* p : done) prov.push_back(p->prov);
  add_columns(cols, pointers(prov), study::provenance_fields());
  nlohmann::json doc = study::sweep_json(r, o);
  doc.erase("points");
  py::dict out;
  out["rows"] = cols;
  out["attrs"] = from_json(doc);
  out["stopped"] = r.stopped_by;
  out["failed"] = warnings_list(r.failed);
  return out;
}

// ---------------------------------------------------------------------------------------
// eval, validate, config keys

py::dict eval(const std::string& model, const std::string& text_file, int64_t tokens, int64_t board, int64_t compare,
              const std::string& tokenizer, int64_t threads, const std::string& config_file,
              const std::vector<std::string>& sets, bool cache, const std::string& cache_dir, bool interruptible,
              int64_t window) {
  study::EvalResult r;
  std::vector<std::string> warnings;
  {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(simulation_lock());
    StopScope scope(interruptible);
    study::EvalRequest req;
    req.model = model;
    req.text = text_file;
    if (!tokenizer.empty()) req.tokenizer = tokenizer;
    req.tokens = in_range(tokens, "tokens", 0, std::numeric_limits<int>::max());
    req.board_positions = int(in_range(board, "board", 0, std::numeric_limits<int>::max()));
    req.compare_positions = int(in_range(compare, "compare", 0, std::numeric_limits<int>::max()));
    req.threads = int(in_range(threads, "threads", 1, 64));
    req.window = int(in_range(window, "window", 0, std::numeric_limits<int>::max()));  // 0: the default
    req.params = params_of(config_file, sets);
    req.cache = cache_of(cache, cache_dir);
    req.cache_warning = [&](const std::string& w) { warnings.push_back(w); };
    r = study::run_eval(req);
  }
  nlohmann::json doc = study::eval_json(r);
  doc.erase("rows");
  doc.erase("logits_vs_float");
  py::dict out;
  out["rows"] = columns(r.rows, study::eval_row_fields());
  out["compare"] = columns(r.compare, study::eval_compare_fields());
  out["attrs"] = from_json(doc);
  out["warnings"] = warnings_list(warnings);
  return out;
}

py::dict validate(const std::string& config_file, const std::vector<std::string>& sets, bool python_profile,
                  bool interruptible) {
  std::vector<study::ValidationRow> rows;
  {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(simulation_lock());
    StopScope scope(interruptible);
    rows = study::validate(params_of(config_file, sets), python_profile);
  }
  return columns(rows, study::validation_row_fields());
}

py::object param_value(const sim::ParamValue& v) {
  return std::visit(
      [](const auto& x) -> py::object {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) return text(x);
        else if constexpr (std::is_same_v<T, bool>) return py::bool_(x);
        else if constexpr (std::is_same_v<T, double>) return py::float_(x);
        else return py::int_(x);
      },
      v);
}

const char* type_name(sim::ParamType t) {
  switch (t) {
    case sim::ParamType::Real: return "real";
    case sim::ParamType::Integer: return "integer";
    case sim::ParamType::Boolean: return "boolean";
    case sim::ParamType::Text: return "text";
  }
  return "?";
}

// Every key: its type, default (the shipped board), value (the config asked for), range or
// choices, unit, evidence label and meaning, as `bitsim config --dump` documents them.
py::dict config_keys(const std::string& config_file, const std::vector<std::string>& sets) {
  const sim::ParamSet defaults = sim::board_params();
  const sim::ParamSet p = params_of(config_file, sets);
  py::list key, type, def, value, min, max, choices, unit, evidence, meaning;
  for (const auto& s : p.specs()) {
    const bool ranged = s.min <= s.max && (s.type == sim::ParamType::Real || s.type == sim::ParamType::Integer);
    key.append(text(s.key));
    type.append(type_name(s.type));
    def.append(param_value(defaults.spec(s.key).value));
    value.append(param_value(s.value));
    min.append(ranged ? py::object(py::float_(s.min)) : py::object(py::none()));
    max.append(ranged ? py::object(py::float_(s.max)) : py::object(py::none()));
    choices.append(s.choices.empty() ? py::object(py::none()) : py::object(py::cast(s.choices)));
    unit.append(text(s.unit));
    evidence.append(text(s.evidence));
    meaning.append(text(s.doc));
  }
  py::dict out;
  out["key"] = key;
  out["type"] = type;
  out["default"] = def;
  out["value"] = value;
  out["min"] = min;
  out["max"] = max;
  out["choices"] = choices;
  out["unit"] = unit;
  out["evidence"] = evidence;
  out["meaning"] = meaning;
  return out;
}

}  // namespace

}  // namespace bitsim::python

// libsystemc's own main() calls sc_main, so the library needs the symbol wherever it is
// loaded; the module never calls it (as the bitsim command, whose main is its own).
extern "C" __attribute__((visibility("default"))) int sc_main(int, char**) { return 1; }

PYBIND11_MODULE(_bitsim, m) {
  using namespace bitsim::python;
  // No SystemC banner on stdout when the first simulation context is made (as cli/main.cpp).
  ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  m.doc() = "bitsim's simulator core (the Python half is the package bitsim; docs/python.md)";
  m.attr("__version__") = bitsim::kVersion;
  m.attr("git_commit") = bitsim::kGitCommit;
  m.attr("max_tokens") = bitsim::model::kAttentionInt4MaxT - 1;
  // Bad input: the message names the key, file or option, as the bitsim command prints it.
  static py::exception<bitsim::Error> input_error(m, "InputError", PyExc_ValueError);
  // A call stopped by Ctrl-C where it has nothing finished to return (run and sweep return
  // what finished instead; the Python half raises this with it).
  static py::exception<bitsim::Stopped> stopped(m, "Stopped", PyExc_KeyboardInterrupt);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const bitsim::Error& e) {
      PyErr_SetString(input_error.ptr(), e.what());
    } catch (const bitsim::Stopped& e) {
      PyErr_SetString(stopped.ptr(), e.what());
    }
  });
  m.def("run", [](const py::dict& d) { return run(run_args(d)); }, py::arg("args"));
  m.def("sweep", &sweep, py::arg("axes"), py::arg("tokens"), py::arg("context"), py::arg("jobs"),
        py::arg("check_model"), py::arg("config_file"), py::arg("sets"), py::arg("interruptible"),
        py::arg("prompt_tokens") = 0);
  m.def("eval", &eval, py::arg("model"), py::arg("text"), py::arg("tokens"), py::arg("board"), py::arg("compare"),
        py::arg("tokenizer"), py::arg("threads"), py::arg("config_file"), py::arg("sets"), py::arg("cache"),
        py::arg("cache_dir"), py::arg("interruptible"), py::arg("window") = 0);
  m.def("validate", &validate, py::arg("config_file"), py::arg("sets"), py::arg("python_profile"),
        py::arg("interruptible"));
  m.def("config_keys", &config_keys, py::arg("config_file"), py::arg("sets"));
}
