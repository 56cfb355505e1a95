#pragma once
// A subcommand of `bitsim`. Each lives in its own cli/NAME_command.{h,cpp}: the header
// declares add_NAME_command(app), which registers the subcommand and its options on the
// app and returns the command; main runs the one whose subcommand was parsed. run()
// returns the exit code and throws bitsim::Error on bad input (exit 2 in main).
#include <memory>

#include <CLI/CLI.hpp>

namespace bitsim::cli {

class Command {
 public:
  explicit Command(CLI::App* sub) : sub_(sub) {}
  virtual ~Command() = default;
  Command(const Command&) = delete;
  Command& operator=(const Command&) = delete;

  bool parsed() const { return sub_->parsed(); }
  virtual int run() = 0;

 protected:
  CLI::App* sub_;
};

}  // namespace bitsim::cli
