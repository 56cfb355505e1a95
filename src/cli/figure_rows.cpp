#include "cli/figure_rows.h"

#include <fmt/format.h>

namespace bitsim::cli {

nlohmann::json rows_json(const std::vector<study::ValidationRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows) out.push_back(study::record_json(r, study::validation_row_fields()));
  return out;
}

void print_rows(const std::vector<study::ValidationRow>& rows) {
  fmt::print("{:<18} {:>4} {:<13} {:>11} {:>9} {:>8}  {}\n", "scenario", "T", "figure", "simulated", "board",
             "error %", "evidence");
  for (const auto& r : rows) {
    fmt::print("{:<18} {:>4} {:<13} {:>11.3f} {:>9} {:>8}  {}\n", r.scenario, r.context, r.figure, r.simulated,
               r.board ? fmt::format("{:.3f}", *r.board) : "-", r.error_pct ? fmt::format("{:+.2f}", *r.error_pct) : "-",
               r.board ? "simulated vs board" : "simulated (prediction)");
  }
}

}  // namespace bitsim::cli
