#pragma once
// `bitsim eval`: perplexity of a text under the model's, the board's and the variants'
// arithmetics (study/eval.h). add_eval_command registers the subcommand; run() executes it
// when it was parsed.
#include <memory>

#include <CLI/CLI.hpp>

namespace bitsim::cli {

class EvalCommand {
 public:
  virtual ~EvalCommand() = default;
  virtual bool parsed() const = 0;
  virtual int run() = 0;  // throws bitsim::Error on bad input (exit 2 in main)
};

std::unique_ptr<EvalCommand> add_eval_command(CLI::App& app);

}  // namespace bitsim::cli
