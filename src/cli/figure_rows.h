#pragma once
// The rows `bitsim validate` and `bitsim calibrate` print: each board figure with its
// simulated value, the board's and the error.
#include <vector>

#include <nlohmann/json.hpp>

#include "study/calibrate.h"

namespace bitsim::cli {

nlohmann::json rows_json(const std::vector<sim::ValidationRow>& rows);
void print_rows(const std::vector<sim::ValidationRow>& rows);

}  // namespace bitsim::cli
