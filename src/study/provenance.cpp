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

namespace bitsim::sim {

std::string hash_hex(const std::string& text) {
  return fmt::format("{:016x}", host::fnv1a64(text.data(), text.size()));
}

std::string canonical_config(const ParamSet& p) {
  std::string out;
  for (const auto& [key, value] : p.flat()) out += key + "=" + value + "\n";  // std::map: sorted by key
  return out;
}

std::string config_hash(const ParamSet& p) { return hash_hex(canonical_config(p)); }

std::string model_hash(const model::ModelConfig& c) {
  return hash_hex(fmt::format("hidden_size={}\nintermediate_size={}\nnum_layers={}\nnum_heads={}\nnum_kv_heads={}\n"
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

Provenance PointMeter::finish(const ParamSet& point, const std::string& fidelity, const model::ModelConfig& model) const {
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

const std::vector<std::string>& provenance_columns() {
  static const std::vector<std::string> cols{"bitsim_version", "git_commit", "config_hash", "model_hash",
                                             "fidelity",       "host",       "point_wall_s", "peak_rss_mib"};
  return cols;
}

std::string provenance_csv(const Provenance& p) {
  return fmt::format("{},{},{},{},{},{},{:.3f},{:.1f}", p.version, p.commit, p.config_hash, p.model_hash, p.fidelity,
                     p.host, p.wall_s, p.peak_rss_mib);
}

nlohmann::json provenance_json(const Provenance& p) {
  return {{"bitsim_version", p.version}, {"git_commit", p.commit}, {"config_hash", p.config_hash},
          {"model_hash", p.model_hash},   {"fidelity", p.fidelity},  {"host", p.host},
          {"point_wall_s", p.wall_s},     {"peak_rss_mib", p.peak_rss_mib}};
}

Provenance provenance_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw Error(fmt::format("{}: \"provenance\" is not an object", source));
  auto text = [&](const char* k) {
    if (!j.contains(k) || !j[k].is_string()) throw Error(fmt::format("{}: provenance field \"{}\" missing or not a string", source, k));
    return j[k].get<std::string>();
  };
  auto number = [&](const char* k) {
    if (!j.contains(k) || !j[k].is_number()) throw Error(fmt::format("{}: provenance field \"{}\" missing or not a number", source, k));
    return j[k].get<double>();
  };
  Provenance p;
  p.version = text("bitsim_version");
  p.commit = text("git_commit");
  p.config_hash = text("config_hash");
  p.model_hash = text("model_hash");
  p.fidelity = text("fidelity");
  p.host = text("host");
  p.wall_s = number("point_wall_s");
  p.peak_rss_mib = number("peak_rss_mib");
  return p;
}

}  // namespace bitsim::sim
