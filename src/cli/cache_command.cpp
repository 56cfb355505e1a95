#include "cli/cache_command.h"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace bitsim::cli {

void add_cache_options(CLI::App* sub, CacheArgs& a) {
  sub->add_option("--cache-dir", a.dir,
                  "Start-up cache folder (default: $BITSIM_CACHE_DIR, else $XDG_CACHE_HOME/bitsim, else "
                  "~/.cache/bitsim; docs/cache.md)");
  sub->add_flag("--no-cache", a.no_cache, "Neither read nor write the start-up cache");
  sub->add_option("--cache-max-gb", a.max_gb,
                  "cache.max_gb: the start-up cache's size bound in GB, least recently used entries go first "
                  "(default: $BITSIM_CACHE_MAX_GB, else 4)");
}

sim::CacheSettings cache_settings(const CacheArgs& a) {
  return sim::resolve_cache_settings(a.dir, a.no_cache, a.max_gb, [](const char* n) { return std::getenv(n); });
}

void print_warning(const std::string& message) { fmt::print(stderr, "bitsim: warning: {}\n", message); }

CacheCommand::CacheCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("cache", "The start-up cache (ternary model image, K/V scales, the fast board's batch timings): info or clear");
  cmd_->require_subcommand(1);
  info_ = cmd_->add_subcommand("info", "The cache folder, its entries (kind, size, hit count, last use) and the bound");
  clear_ = cmd_->add_subcommand("clear", "Delete every entry of the cache");
  for (CLI::App* s : {info_, clear_}) {
    s->add_option("--cache-dir", args_.dir, "Cache folder (default: as for `bitsim run`)");
    s->add_option("--cache-max-gb", args_.max_gb, "cache.max_gb to report (default: $BITSIM_CACHE_MAX_GB, else 4)");
  }
  info_->add_flag("--json", json_, "Write one bitsim.cache/1 JSON document to stdout");
}

bool CacheCommand::parsed() const { return bool(*cmd_); }

int CacheCommand::run() {
  const sim::CacheSettings s = cache_settings(args_);
  if (s.dir.empty()) throw Error(fmt::format("start-up cache: no folder ({})", s.why_no_dir));
  const auto store = sim::CacheStore::open(s, print_warning);
  if (!store) return 2;
  if (*clear_) {
    const size_t n = store->clear();
    fmt::print("deleted {} entries from {}\n", n, store->dir().string());
    return 0;
  }
  const sim::CacheStore::Info info = store->info();
  if (json_) {
    nlohmann::json j = {{"schema", "bitsim.cache/1"},
                        {"dir", info.dir.string()},
                        {"total_bytes", info.total_bytes},
                        {"max_bytes", info.max_bytes},
                        {"entries", nlohmann::json::array()}};
    for (const auto& e : info.entries)
      j["entries"].push_back({{"kind", e.kind}, {"key", e.key}, {"bytes", e.bytes}, {"hits", e.hits}});
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("{}", sim::format_cache_info(info));
  return 0;
}

}  // namespace bitsim::cli
