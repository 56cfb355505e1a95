#pragma once
// The record of one token of `bitsim run` (sim::TokenRecord) as bitsim.run/1 writes it: its
// fields, once (study/record.h; docs/json-schemas.md, "tokens").
#include "sim/board_run.h"
#include "study/record.h"

namespace bitsim::sim {

const Fields<TokenRecord>& run_token_fields();

}  // namespace bitsim::sim
