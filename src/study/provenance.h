#pragma once
// Provenance of a sweep point: which bitsim (version, git commit) computed it on which
// config (hash of every key's value) and which model (hash of its shape), in which
// fidelity, on which host, with what wall time and peak resident memory. Every sweep row
// carries it (CSV columns after the figures, a "provenance" object in JSON; the one list
// of fields and their formats is provenance_fields(), docs/json-schemas.md describes them).
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model_config.h"
#include "sim/params.h"
#include "study/record.h"

namespace bitsim::study {

struct Provenance {
  std::string version;       // bitsim version (src/version.h.in)
  std::string commit;        // git commit the build was configured at
  std::string config_hash;   // config_hash() of the point's full config
  std::string model_hash;    // model_hash() of the simulated model's shape
  std::string fidelity;      // "timing-only" for sweep points
  std::string host;          // gethostname()
  double wall_s = 0;         // this host's wall time for the point
  double peak_rss_mib = 0;   // the point's peak resident memory (see PointMeter)
};

// 16 hex digits of FNV-1a 64 (host::fnv1a64) of a text.
std::string hash_hex(const std::string& text);
// The canonical text of a config: "key=value\n" for every key, sorted by key, values as
// ParamSet::to_string prints them (so "125" and "125.0" are the same config).
std::string canonical_config(const sim::ParamSet& p);
std::string config_hash(const sim::ParamSet& p);
// Hash of a model's shape (every ModelConfig field); sweeps simulate the bitnet-large shape.
std::string model_hash(const model::ModelConfig& c);
std::string host_name();

// Wall time and peak resident memory of one point in this process. The peak is the
// kernel's VmHWM after resetting it at start() (/proc/self/clear_refs, Linux >= 4.0);
// where the reset is refused it is getrusage()'s ru_maxrss, the process's peak so far
// (an upper bound of the point's).
class PointMeter {
 public:
  PointMeter();
  // The provenance of the point measured since construction.
  Provenance finish(const sim::ParamSet& point, const std::string& fidelity, const model::ModelConfig& model) const;

 private:
  std::chrono::steady_clock::time_point t0_;
  bool reset_ = false;
};

// The record's fields: JSON keys and CSV columns, in CSV order, with their formats.
const Fields<Provenance>& provenance_fields();
// The CSV columns, in order, and one row's values (no leading or trailing comma).
const std::vector<std::string>& provenance_columns();
std::string provenance_csv(const Provenance& p);
nlohmann::json provenance_json(const Provenance& p);
// Throws bitsim::Error naming `source` and the missing or mistyped field.
Provenance provenance_from_json(const nlohmann::json& j, const std::string& source);


}  // namespace bitsim::study
