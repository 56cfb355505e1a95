#pragma once
// Options and helpers shared by the bitsim commands: the number validators (CLI11
// validators that read the text with the one strict parser, base/parse_number.h: decimal,
// the whole text, the range; no octal, no wrap, no saturation, no nan; CLI11 is handed the
// canonical decimal, so that its own conversion never sees a text it could read
// differently), the board config options (--config, --set), the start-up cache options
// (--cache-dir, --no-cache, --cache-max-gb), --fidelity, the progress printers, and the
// options named in the messages of errors about the request fields they fill.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "base/error.h"
#include "base/file_io.h"
#include "base/parse_number.h"
#include "sim/cache_store.h"
#include "sim/params.h"
#include "sim/simulation.h"

namespace bitsim::cli {

// A file name given on the command line: an empty one ("--trace ''") is refused, never taken
// as "no file" (no description: the help stays as it is).
inline CLI::Validator file_name() {
  return CLI::Validator([](std::string& s) -> std::string { return s.empty() ? "an empty file name" : ""; }, "");
}

// A validator that reads the text with `parse` (which throws bitsim::Error) and hands
// CLI11 the text `parse` returns.
template <typename Parse>
CLI::Validator number_validator(Parse parse, std::string description) {
  return CLI::Validator(
      [parse](std::string& s) -> std::string {
        try {
          s = parse(s);
          return {};
        } catch (const Error& e) {
          return e.what();
        }
      },
      std::move(description));
}

inline CLI::Validator integer_in(int64_t min, int64_t max) {
  return number_validator([min, max](const std::string& s) { return std::to_string(parse_integer(s, "", min, max)); },
                          fmt::format("INT in {}..{}", min, max));
}

inline CLI::Validator unsigned_in(uint64_t min, uint64_t max) {
  return number_validator([min, max](const std::string& s) { return std::to_string(parse_unsigned(s, "", min, max)); },
                          fmt::format("UINT in {}..{}", min, max));
}

// The text itself when it is a number in range (CLI11 reads the decimal it was checked as).
inline CLI::Validator real_in(double min, double max) {
  return number_validator(
      [min, max](const std::string& s) {
        (void)parse_real(s, "", min, max);
        return s;
      },
      fmt::format("NUMBER in {}..{}", min, max));
}

// --config FILE and --set KEY=VALUE (repeatable).
struct BoardArgs {
  std::string config;
  std::vector<std::string> sets;
};
// Adds --config and --set to a subcommand with their help texts.
void add_board_options(CLI::App* sub, BoardArgs& a, const std::string& config_help, const std::string& set_help);
// The effective board config: the shipped configs/pynq-z2.toml (or --config FILE), then
// every --set in order (its errors begin with `--set KEY`).
sim::ParamSet board_params(const BoardArgs& a);
// The config file the command reads (--config, else the shipped one), as an input that no
// output of the command may replace (io::check_outputs).
io::NamedPath config_input(const BoardArgs& a);

// --fidelity and --timing-only, the one place the option becomes sim::Fidelity.
sim::Fidelity parse_fidelity(const std::string& name, bool timing_only);

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

// The message of an error about a request field, naming the option that fills the field
// (`--legacy-attention: ...` for legacy_attention); e.what() for a field no option fills.
std::string option_message(const FieldError& e);
// Progress lines on stderr, or none when `quiet`.
std::function<void(const std::string&)> status_printer(bool quiet);

}  // namespace bitsim::cli
