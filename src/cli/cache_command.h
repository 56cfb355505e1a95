#pragma once
// The start-up cache's options (--cache-dir, --no-cache, --cache-max-gb, shared by run,
// bench and eval) and the `bitsim cache info|clear` command (docs/cache.md).
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "sim/cache_store.h"

namespace bitsim::cli {

struct CacheArgs {
  std::string dir;
  bool no_cache = false;
  std::optional<double> max_gb;
};
// Adds --cache-dir, --no-cache and --cache-max-gb to a subcommand.
void add_cache_options(CLI::App* sub, CacheArgs& a);
// The settings these options and the environment give (sim::resolve_cache_settings).
sim::CacheSettings cache_settings(const CacheArgs& a);
// A warning line on stderr (printed even with --quiet).
void print_warning(const std::string& message);

class CacheCommand {
 public:
  explicit CacheCommand(CLI::App& app);
  bool parsed() const;
  int run();

 private:
  CLI::App* cmd_;
  CLI::App* info_;
  CLI::App* clear_;
  CacheArgs args_;
  bool json_ = false;
};

}  // namespace bitsim::cli
