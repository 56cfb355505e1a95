#include "cli/membench_command.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli/options.h"
#include "sim/board_config.h"
#include "study/membench.h"

namespace bitsim::cli {

namespace {

class Membench final : public Command {
 public:
  explicit Membench(CLI::App& app)
      : Command(app.add_subcommand("membench", "DDR3 micro-benchmark: UG585's DDR efficiency table (four HP masters, "
                                               "bursts of 16) and which limit binds from 1 to 4 HP ports")) {
    add_board_options(sub_, board_, "Board config TOML (ddr3.*, hp.* and clock.mhz keys are read)",
                      "Override one config key: KEY=VALUE (repeatable)");
    sub_->add_option("--pattern", patterns_, "Run only these patterns (repeatable): seq-read, rand-read, seq-write, "
                                             "rand-write, seq-mixed, rand-mixed");
    sub_->add_option("--page-offset", page_offset_,
                     "Sequential patterns: DRAM pages between consecutive masters' buffer starts (0: all four "
                     "start in one bank; default 2: each in its own bank)")
        ->transform(integer_in(0, study::kMaxPageOffset))
        ->capture_default_str();
    sub_->add_flag("--json", json_, "Write one bitsim.membench/1 JSON document to stdout");
  }

  int run() override {
    const sim::SimConfig c = sim::make_sim_config(board_params(board_));
    std::vector<study::MemPattern> pats;
    for (const auto& n : patterns_) pats.push_back(study::parse_mem_pattern(n));
    if (pats.empty())
      for (const auto& p : study::mem_patterns()) pats.push_back(p.pattern);
    study::MembenchSetup s;
    s.ddr3 = c.board.ddr.ddr3;
    s.hp = c.board.hp;
    s.pl_mhz = c.board.clock.mhz;
    s.page_offset = page_offset_;
    std::vector<study::MembenchResult> rows;
    for (auto p : pats) rows.push_back(study::run_membench(s, p));
    const auto limits = study::limit_sweep(s);
    const double peak = study::peak_gb_s(s.ddr3);
    if (json_) {
      nlohmann::json jr = nlohmann::json::array(), jl = nlohmann::json::array();
      for (const auto& r : rows) {
        const auto& i = study::mem_pattern_info(r.pattern);
        jr.push_back({{"pattern", i.name}, {"label", i.label}, {"masters", r.masters}, {"bytes", r.bytes},
                      {"device_cycles", r.device_cycles}, {"gb_s", r.gb_s},
                      {"efficiency_percent", 100 * r.efficiency}, {"evidence", "simulated"},
                      {"ug585_percent", i.ug585_percent}, {"ug585_evidence", "board"},
                      {"difference_pp", 100 * r.efficiency - i.ug585_percent}});
      }
      for (const auto& l : limits)
        jl.push_back({{"hp_ports", l.ports}, {"hp_gb_s", l.hp_gb_s}, {"controller_gb_s", l.controller_gb_s},
                      {"device_gb_s", l.device_gb_s}, {"measured_gb_s", l.measured_gb_s}, {"binding", l.binding},
                      {"evidence", "simulated"}});
      fmt::print("{}\n", nlohmann::json{{"schema", "bitsim.membench/1"},
                                        {"peak_gb_s", peak},
                                        {"burst_bytes", s.hp.max_burst_beats * study::kHpBeatBytes},
                                        {"outstanding_reads", s.hp.max_outstanding_reads},
                                        {"outstanding_writes", s.hp.max_outstanding_writes},
                                        {"page_offset", s.page_offset},
                                        {"patterns", jr},
                                        {"limits", jl}}
                             .dump(2));
      return 0;
    }
    fmt::print("DDR efficiency, four HP masters, bursts of {} B, closed loop ({} reads / {} writes outstanding per "
               "master: hp.max_outstanding_*), sequential buffers {} pages apart; peak {:.3f} GB/s board (derived "
               "from the ddr3.* keys)\n",
               s.hp.max_burst_beats * study::kHpBeatBytes, s.hp.max_outstanding_reads, s.hp.max_outstanding_writes,
               s.page_offset, peak);
    fmt::print("  {:<18} {:>19} {:>19} {:>13} {:>18}\n", "pattern", "GB/s", "efficiency", "UG585", "difference");
    for (const auto& r : rows) {
      const auto& i = study::mem_pattern_info(r.pattern);
      fmt::print("  {:<18} {:>9.3f} simulated {:>7.1f} % simulated {:>5.0f} % board {:>+6.1f} pp simulated\n", i.label, r.gb_s,
                 100 * r.efficiency, i.ug585_percent, 100 * r.efficiency - i.ug585_percent);
    }
    fmt::print("\nsequential reads (the board's streams) from 1 to 4 HP ports, GB/s (board: derived from the config's "
               "board keys)\n");
    fmt::print("  {:>5} {:>13} {:>16} {:>13} {:>16}  {}\n", "ports", "HP ports", "controller", "device", "measured",
               "binding");
    for (const auto& l : limits)
      fmt::print("  {:>5} {:>7.3f} board {:>7.3f} simulated {:>7.3f} board {:>7.3f} simulated  {}\n", l.ports,
                 l.hp_gb_s, l.controller_gb_s, l.device_gb_s, l.measured_gb_s, l.binding);
    return 0;
  }

 private:
  BoardArgs board_;
  std::vector<std::string> patterns_;
  int page_offset_ = study::MembenchSetup{}.page_offset;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> add_membench_command(CLI::App& app) { return std::make_unique<Membench>(app); }

}  // namespace bitsim::cli
