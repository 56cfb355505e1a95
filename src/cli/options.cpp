#include "cli/options.h"

#include <cstdio>
#include <cstdlib>
#include <map>

#include "sim/board_config.h"
#include "sim/key_rules.h"

namespace bitsim::cli {

void add_board_options(CLI::App* sub, BoardArgs& a, const std::string& config_help, const std::string& set_help) {
  sub->add_option("--config", a.config, config_help);
  sub->add_option("--set", a.sets, set_help);
}

sim::ParamSet board_params(const BoardArgs& a) {
  sim::ParamSet p = sim::load_board_params(a.config);
  for (const auto& s : a.sets) p.set(s, "--set");
  sim::check_key_rules(p);  // the file and the --set together
  return p;
}

io::NamedPath config_input(const BoardArgs& a) { return {"--config", sim::board_config_file(a.config)}; }

sim::Fidelity parse_fidelity(const std::string& name, bool timing_only) {
  sim::Fidelity f = sim::Fidelity::kFast;
  try {
    f = sim::fidelity_of(name);
  } catch (const Error&) {
    f = sim::Fidelity::kTimingOnly;  // not a name --fidelity takes
  }
  if (f == sim::Fidelity::kTimingOnly) throw Error(fmt::format("--fidelity {}: expected cycle or fast", name));
  if (timing_only && f != sim::Fidelity::kFast)
    throw Error("--timing-only: needs --fidelity fast (the clocked engines always compute)");
  return timing_only ? sim::Fidelity::kTimingOnly : f;
}

void add_cache_options(CLI::App* sub, CacheArgs& a) {
  sub->add_option("--cache-dir", a.dir,
                  "Start-up cache folder (default: $BITSIM_CACHE_DIR, else $XDG_CACHE_HOME/bitsim, else "
                  "~/.cache/bitsim; docs/cache.md)");
  sub->add_flag("--no-cache", a.no_cache, "Neither read nor write the start-up cache");
  sub->add_option("--cache-max-gb", a.max_gb,
                  "cache.max_gb: the start-up cache's size bound in GB, least recently used entries go first "
                  "(default: $BITSIM_CACHE_MAX_GB, else 4)")
      ->transform(real_in(0, sim::kCacheMaxGbLimit));
}

sim::CacheSettings cache_settings(const CacheArgs& a) {
  return sim::resolve_cache_settings(a.dir, a.no_cache, a.max_gb, [](const char* n) { return std::getenv(n); });
}

std::string option_message(const FieldError& e) {
  static const std::map<std::string, std::string> kOptionOfField{{"legacy_attention", "--legacy-attention"},
                                                                 {"cache.max_gb", "--cache-max-gb"}};
  const auto it = kOptionOfField.find(e.field());
  return it == kOptionOfField.end() ? std::string(e.what()) : it->second + ": " + e.detail();
}

void print_warning(const std::string& message) { fmt::print(stderr, "bitsim: warning: {}\n", message); }

std::function<void(const std::string&)> status_printer(bool quiet) {
  if (quiet) return {};
  return [](const std::string& s) { fmt::print(stderr, "{}\n", s); };
}

}  // namespace bitsim::cli
