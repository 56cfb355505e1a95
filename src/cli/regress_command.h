#pragma once
// `bitsim regress`: the regression suite against its checked-in baselines (study/regress.h,
// docs/regress.md). add_regress_command registers the subcommand; run() executes it when it
// was parsed.
#include <memory>

#include <CLI/CLI.hpp>

namespace bitsim::cli {

class RegressCommand {
 public:
  virtual ~RegressCommand() = default;
  virtual bool parsed() const = 0;
  virtual int run() = 0;  // 0 all figures as in the baselines, 1 a figure moved; throws bitsim::Error on bad input
};

std::unique_ptr<RegressCommand> add_regress_command(CLI::App& app);

}  // namespace bitsim::cli
