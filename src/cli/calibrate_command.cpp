#include "cli/calibrate_command.h"

#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "base/file_io.h"
#include "cli/figure_rows.h"
#include "cli/options.h"
#include "sim/board_config.h"
#include "study/calibrate.h"

namespace bitsim::cli {

namespace {

void print_calibration(const study::CalibrationResult& res, bool json) {
  if (json) {
    nlohmann::json params = nlohmann::json::array();
    for (const auto& f : res.parameters) params.push_back(study::record_json(f, study::fitted_parameter_fields()));
    fmt::print("{}\n", nlohmann::json{{"schema", "bitsim.calibrate/1"}, {"parameters", params},
                                      {"residuals", rows_json(res.residuals)}}.dump(2));
    return;
  }
  fmt::print("fitted parameters (each to its own board figures; CIRCUITS.md 6)\n");
  for (const auto& f : res.parameters)
    fmt::print("  {:<40} {:>12.4f} -> {:>12.4f} {:<6} {}\n", f.key, f.before, f.after, f.unit, f.meaning);
  fmt::print("\nresiduals (the board figures after the fit)\n");
  print_rows(res.residuals);
}

class Calibrate final : public Command {
 public:
  explicit Calibrate(CLI::App& app)
      : Command(app.add_subcommand("calibrate", "Fit the calibrated parameters to the board's calibration figures and "
                                                "print them with the residuals")) {
    add_board_options(sub_, board_, "Board config TOML to start from (and to write with --write)",
                      "Override one config key before fitting: KEY=VALUE (repeatable)");
    sub_->add_flag("--write", write_, "Write the fitted config to the config file (default configs/pynq-z2.toml)");
    sub_->add_flag("--json", json_, "Write one bitsim.calibrate/1 JSON document to stdout");
    sub_->add_flag("--quiet", quiet_, "No progress lines on stderr");
  }

  int run() override {
    const sim::ParamSet p = board_params(board_);
    if (write_) io::check_output_file(config_file(), "calibrate --write: config file");
    const auto res = study::calibrate(p, status_printer(quiet_));
    print_calibration(res, json_);
    if (write_) write(res);
    return 0;
  }

 private:
  // The user's file with the fitted keys' values replaced, nothing else changed (the run's
  // --set values stay out of it); a fit beyond the calibration's tolerance is not written.
  void write(const study::CalibrationResult& res) const {
    const std::string file = config_file();
    if (const auto off = study::residual_beyond_tolerance(res))
      throw Error(fmt::format("calibrate --write: {} not written: the fit does not hold ({}, beyond the calibration's "
                              "{}% tolerance)",
                              file, *off, study::kCalibrationTolerancePct));
    std::vector<std::string> keys;
    for (const auto& f : res.parameters) keys.push_back(f.key);
    const std::string text = io::read_file(file, "calibrate --write: config file", io::kMaxSmallFileBytes);
    io::write_file(file, res.params.with_values_in(text, keys, file), "calibrate --write: config file");
    fmt::print(stderr, "wrote the {} fitted parameters to {}\n", keys.size(), file);
  }

  // The config file --write writes: --config, else the shipped one.
  std::string config_file() const {
    const std::string file = sim::board_config_file(board_.config);
    if (file.empty()) throw Error("calibrate --write: no config file to write (give --config FILE)");
    return file;
  }

  BoardArgs board_;
  bool write_ = false, json_ = false, quiet_ = false;
};

}  // namespace

std::unique_ptr<Command> add_calibrate_command(CLI::App& app) { return std::make_unique<Calibrate>(app); }

}  // namespace bitsim::cli
