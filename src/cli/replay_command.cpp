#include "cli/replay_command.h"

#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/options.h"
#include "host/mmio_program.h"
#include "sim/board_config.h"
#include "sim/key_rules.h"
#include "sim/replay.h"

namespace bitsim::cli {

namespace {

nlohmann::json replay_json(const std::string& file, const std::string& fidelity, const host::ReplayResult& r) {
  nlohmann::json j{{"schema", "bitsim.replay/1"}, {"file", file}, {"fidelity", fidelity},
                   {"reads", r.reads}, {"writes", r.writes}, {"mem_writes", r.mem_writes},
                   {"mem_reads", r.mem_reads}, {"equal", r.ok()}, {"mismatches", nlohmann::json::array()}};
  for (const auto& m : r.mismatches)
    j["mismatches"].push_back({{"op", m.op}, {"time_ps", m.time_ps}, {"addr", m.addr},
                               {"register", m.memory ? "DDR" : host::register_name(m.addr)}, {"memory", m.memory},
                               {"expected", m.expected}, {"got", m.got}});
  return j;
}

void print_replay(const std::string& file, const std::string& fidelity, const host::ReplayResult& r) {
  fmt::print("{}: {} register reads, {} writes, {} DDR loads, {} stores on the {} board (simulated)\n", file,
             r.reads, r.writes, r.mem_reads, r.mem_writes, fidelity);
  for (size_t i = 0; i < r.mismatches.size() && i < 20; ++i) fmt::print("  differs: {}\n", host::describe(r.mismatches[i]));
  if (r.mismatches.size() > 20) fmt::print("  ... {} more\n", r.mismatches.size() - 20);
  fmt::print("{}\n", r.ok() ? "every read equal" : fmt::format("{} reads differ", r.mismatches.size()));
}

// A recorded MMIO program on the board of its C lines (on the shipped config), every read
// compared; exit 3 if any differs.
class Replay final : public Command {
 public:
  explicit Replay(CLI::App& app)
      : Command(app.add_subcommand("replay", "Run a recorded MMIO program (docs/mmio-record.md) on the simulated board "
                                             "and compare every register read and DDR load with the recording; exit 3 "
                                             "on a difference")) {
    sub_->add_option("file", file_, "The MMIO program")->required();
    sub_->add_option("--fidelity", fidelity_, "fast or cycle")
        ->check(CLI::IsMember({"cycle", "fast"}))
        ->capture_default_str();
    sub_->add_flag("--json", json_, "Write one bitsim.replay/1 JSON document to stdout (docs/json-schemas.md)");
  }

  int run() override {
    const host::MmioProgram program = host::load_program(file_);
    sim::ParamSet p = board_params({});
    for (size_t i = 0; i < program.config.size(); ++i)
      p.set(program.config[i].first + "=" + program.config[i].second, program.config_where(i));
    sim::check_key_rules(p);  // the keys of the recording together
    const sim::Fidelity fidelity = parse_fidelity(fidelity_, false);
    const host::ReplayResult r = sim::replay_program(program, sim::make_sim_config(p).board, fidelity);
    if (json_)
      fmt::print("{}\n", replay_json(file_, fidelity_, r).dump(2));
    else
      print_replay(file_, fidelity_, r);
    return r.ok() ? 0 : 3;
  }

 private:
  std::string file_;
  std::string fidelity_ = "fast";
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> add_replay_command(CLI::App& app) { return std::make_unique<Replay>(app); }

}  // namespace bitsim::cli
