#include "cli/config_command.h"

#include <fmt/format.h>

#include "cli/options.h"
#include "sim/board_config.h"

namespace bitsim::cli {

namespace {

class Config final : public Command {
 public:
  explicit Config(CLI::App& app)
      : Command(app.add_subcommand("config", "Print the board config: --dump for every key with its documentation, "
                                             "else the keys that differ from the defaults")) {
    add_board_options(sub_, board_, "Board config TOML (default: configs/pynq-z2.toml)",
                      "Override one config key: KEY=VALUE (repeatable)");
    sub_->add_flag("--dump", dump_, "Print the effective config as documented TOML");
  }

  int run() override {
    const sim::ParamSet p = board_params(board_);
    sim::make_sim_config(p);  // checked as a run checks it: the rules between keys too, naming both
    if (dump_) {
      fmt::print("{}", sim::config_file_text(p));
      return 0;
    }
    for (const auto& k : p.changed()) fmt::print("{} = {}\n", k, p.to_string(k));
    return 0;
  }

 private:
  BoardArgs board_;
  bool dump_ = false;
};

}  // namespace

std::unique_ptr<Command> add_config_command(CLI::App& app) { return std::make_unique<Config>(app); }

}  // namespace bitsim::cli
