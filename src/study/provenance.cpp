#include "study/provenance.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "bitsim/version.h"
#include "host/mmio_program.h"
#include "base/error.h"

namespace bitsim::study {

std::string hash_hex(const std::string& text) {
  return fmt::format("{:016x}", host::fnv1a64(text.data(), text.size()));
}

std::string canonical_config(const sim::ParamSet& p) {
  std::string out;
  for (const auto& [key, value] : p.flat()) out += key + "=" + value + "\n";  // std::map: sorted by key
  return out;
}

std::string config_hash(const sim::ParamSet& p) { return hash_hex(canonical_config(p)); }

std::string model_hash(const model::ModelConfig& c) {
  // The layer's kind only when it is not bitnet-large's (so that those models' hashes stay).
  std::string layer;
  if (c.hidden_act != model::HiddenAct::Silu || c.model_type != model::ModelType::Llama)
    layer = fmt::format("hidden_act={}\nmodel_type={}\n", model::hidden_act_name(c.hidden_act),
                        model::model_type_name(c.model_type));
  return hash_hex(layer + fmt::format("hidden_size={}\nintermediate_size={}\nnum_layers={}\nnum_heads={}\nnum_kv_heads={}\n"
                              "vocab_size={}\nmax_position_embeddings={}\nrms_norm_eps={:.9g}\nrope_theta={:.9g}\n"
                              "tie_word_embeddings={}\nbos={}\neos={}\npad={}\n",
                              c.hidden_size, c.intermediate_size, c.num_layers, c.num_heads, c.num_kv_heads,
                              c.vocab_size, c.max_position_embeddings, c.rms_norm_eps, c.rope_theta,
                              c.tie_word_embeddings, c.bos_token_id, c.eos_token_id, c.pad_token_id));
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == 0) return "unknown";
  return buf;
}

namespace {

// VmHWM of this process in KiB, or -1 where /proc is not readable.
long vm_hwm_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

}  // namespace

PointMeter::PointMeter() : t0_(std::chrono::steady_clock::now()) {
  // "5" resets the peak resident set size to the current one (proc(5), clear_refs).
  if (FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    reset_ = std::fputs("5", f) >= 0;
    reset_ = (std::fclose(f) == 0) && reset_;
  }
}

Provenance PointMeter::finish(const sim::ParamSet& point, const std::string& fidelity, const model::ModelConfig& model) const {
  Provenance p;
  p.version = kVersion;
  p.commit = kGitCommit;
  p.config_hash = config_hash(point);
  p.model_hash = model_hash(model);
  p.fidelity = fidelity;
  p.host = host_name();
  p.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  long kib = reset_ ? vm_hwm_kib() : -1;
  if (kib < 0) {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    kib = ru.ru_maxrss;
  }
  p.peak_rss_mib = double(kib) / 1024.0;
  return p;
}

const Fields<Provenance>& provenance_fields() {
  using P = Provenance;
  static const Fields<P> fields{{"bitsim_version", &P::version},     {"git_commit", &P::commit},
                                {"config_hash", &P::config_hash},    {"model_hash", &P::model_hash},
                                {"fidelity", &P::fidelity},          {"host", &P::host},
                                {"point_wall_s", &P::wall_s, "{:.3f}"}, {"peak_rss_mib", &P::peak_rss_mib, "{:.1f}"}};
  return fields;
}

const std::vector<std::string>& provenance_columns() {
  static const std::vector<std::string> cols = [] {
    std::vector<std::string> c;
    for (const auto& f : provenance_fields()) c.push_back(f.name);
    return c;
  }();
  return cols;
}

std::string provenance_csv(const Provenance& p) { return record_csv_row(p, provenance_fields()); }

nlohmann::json provenance_json(const Provenance& p) { return record_json(p, provenance_fields()); }

Provenance provenance_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw Error(fmt::format("{}: \"provenance\" is not an object", source));
  Provenance p;
  record_from_json(j, provenance_fields(), source, "provenance field", p);
  return p;
}

}  // namespace bitsim::study
