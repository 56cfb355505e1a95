#pragma once
// The rows `bitsim validate` and `bitsim calibrate` print: each board figure with its
// simulated value, the board's and the error.
#include <vector>

#include <nlohmann/json.hpp>

#include "study/calibrate.h"

namespace bitsim::cli {

nlohmann::json rows_json(const std::vector<study::ValidationRow>& rows);
void print_rows(const std::vector<study::ValidationRow>& rows);

}  // namespace bitsim::cli
