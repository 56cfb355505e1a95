#include "cli/cache_command.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli/options.h"

namespace bitsim::cli {

namespace {

nlohmann::json cache_json(const sim::CacheStore::Info& info) {
  nlohmann::json j = {{"schema", "bitsim.cache/1"},
                      {"dir", info.dir.string()},
                      {"total_bytes", info.total_bytes},
                      {"max_bytes", info.max_bytes},
                      {"entries", nlohmann::json::array()}};
  for (const auto& e : info.entries)
    j["entries"].push_back({{"kind", e.kind}, {"key", e.key}, {"bytes", e.bytes}, {"hits", e.hits}});
  return j;
}

class Cache final : public Command {
 public:
  explicit Cache(CLI::App& app)
      : Command(app.add_subcommand("cache", "The start-up cache (ternary model image, K/V scales, the fast board's "
                                            "batch timings): info or clear")) {
    sub_->require_subcommand(1);
    info_ = sub_->add_subcommand("info", "The cache folder, its entries (kind, size, hit count, last use) and the bound");
    clear_ = sub_->add_subcommand("clear", "Delete every entry of the cache");
    for (CLI::App* s : {info_, clear_}) {
      s->add_option("--cache-dir", args_.dir, "Cache folder (default: as for `bitsim run`)");
      s->add_option("--cache-max-gb", args_.max_gb, "cache.max_gb to report (default: $BITSIM_CACHE_MAX_GB, else 4)")
          ->transform(real_in(0, sim::kCacheMaxGbLimit));
    }
    info_->add_flag("--json", json_, "Write one bitsim.cache/1 JSON document to stdout");
  }

  int run() override {
    const sim::CacheSettings s = cache_settings(args_);
    if (s.dir.empty()) throw Error(fmt::format("start-up cache: no folder ({})", s.why_no_dir));
    const auto store = sim::CacheStore::open_existing(s);
    if (!store) {
      // Nothing stored yet: said, and nothing created.
      if (*clear_) fmt::print("deleted 0 entries: no start-up cache at {}\n", s.dir.string());
      else if (json_)
        fmt::print("{}\n", cache_json(sim::CacheStore::Info{s.dir, 0, uint64_t(std::llround(s.max_gb * 1e9)), {}}).dump(2));
      else
        fmt::print("{}", sim::format_cache_info(sim::CacheStore::Info{s.dir, 0, uint64_t(std::llround(s.max_gb * 1e9)), {}}));
      return 0;
    }
    if (*clear_) {
      const size_t n = store->clear();
      fmt::print("deleted {} entries from {}\n", n, store->dir().string());
      return 0;
    }
    const sim::CacheStore::Info info = store->info();
    if (json_)
      fmt::print("{}\n", cache_json(info).dump(2));
    else
      fmt::print("{}", sim::format_cache_info(info));
    return 0;
  }

 private:
  CLI::App* info_;
  CLI::App* clear_;
  CacheArgs args_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> add_cache_command(CLI::App& app) { return std::make_unique<Cache>(app); }

}  // namespace bitsim::cli
