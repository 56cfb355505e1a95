#pragma once
// Calibration and validation against the real board (CIRCUITS.md 6, BOARD.md).
//
// Scenarios, measured with the fast fidelity in timing-only mode on the bitnet-large shape
// (the cycle counts do not depend on the weights, so no model is loaded and no functional
// token is needed to reach a context T: the KV cache is taken as holding T rows):
//   end_to_end at T: the medians over 8 tokens around T (contexts T-7..T, as the board's
//     table was taken) of matmul_ms, attention_ms, cpu_ms, total_ms and tok_s;
//   attention_alone at T=512: the attention unit's circuit time for one token's 384 heads
//     (each call from its first DMA start to its last completion, summed over the 24
//     calls) and the read bandwidth during it.
// Calibration fits four physical parameters, each to its own board figures:
//   ddr.read_latency_ns          <- attention alone at T=512 (20.22 ms)
//   driver.c.call_overhead_ns    <- the matmul and attention columns at T=64 and T=512
//   driver.c.{flush,invalidate}_ns_per_byte (one value) <- the same two columns
//   cpu scale (every cpu.* coefficient times one factor) <- the CPU column (26.6, 26.7 ms)
// Everything else is a prediction.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "host/platform.h"
#include "sim/board_run.h"
#include "sim/energy_account.h"
#include "sim/params.h"
#include "study/record.h"

namespace bitsim::study {

struct ValidationRow {
  std::string scenario;            // end_to_end | attention_alone
  int context = 0;
  std::string figure;              // matmul_ms, attention_ms, cpu_ms, total_ms, tok_s, read_gb_s
  double simulated = 0;
  std::optional<double> board;     // BOARD.md, where it has the figure
  std::optional<double> error_pct; // (simulated - board) / board * 100
  std::string profile = "c";       // driver profile of the row
};

// A row's fields (JSON keys of bitsim.validate/1's rows; the driver profile is "driver").
const Fields<ValidationRow>& validation_row_fields();

struct Measured {
  double matmul_ms = 0, attention_ms = 0, cpu_ms = 0, total_ms = 0, tok_s = 0;
  double walker_ms = 0;     // host.walker = pl: the walker's operator steps (inside total_ms)
  double read_gb_s = 0;     // bytes read / (matmul + attention time), median
  uint64_t dma_calls = 0;   // DMA channel starts per token (the same for every token)
  // Energy (docs/energy.md; simulated): mJ per token, the mean over the window (so that its
  // parts add up), the average power over the window's time, tokens per joule.
  double energy_mj = 0, avg_power_w = 0, tokens_per_j = 0;
  std::string energy_evidence;  // what the energy figures rest on (sim::energy_evidence)
};
// The median of a set of figures (the mean of the middle two for an even count).
double median(std::vector<double> v);
// `count` timing-only tokens of the bitnet-large shape (or of `shape` when given, e.g. a
// grouped-query sibling) at contexts first_context, first_context+1, ... (BOS tokens, K/V
// scales 0.05: timing does not depend on them); every DMA transfer's start and completion
// appended to `transfers` when given.
std::vector<sim::TokenOutcome> timing_tokens(const sim::ParamSet& params, int first_context, int count,
                                        std::vector<host::TransferRecord>* transfers = nullptr,
                                        const model::ModelConfig* shape = nullptr);
// Median figures over `tokens` timing-only tokens at contexts first_context, first_context+1, ...
// of the bitnet-large shape (or of `shape` when given).
Measured measure_window(const sim::ParamSet& params, int first_context, int tokens,
                        const model::ModelConfig* shape = nullptr);
// Prefill (docs/prefill.md 7): a timing-only prompt of `prompt_tokens` tokens of the
// bitnet-large shape (or of `shape` when given) from position 0, in chunks of
// prefill.tokens_per_pass: the time to the last prompt position's logits from the first DMA
// start, and prompt tokens per second.
struct PrefillMeasured {
  double ttft_ms = 0, prefill_tok_s = 0;
  double prompt_j = 0;  // the prompt's energy, its chunks summed (docs/energy.md; simulated)
};
PrefillMeasured measure_prefill(const sim::ParamSet& params, int prompt_tokens,
                                const model::ModelConfig* shape = nullptr);
// The energy account of the bitnet-large shape (or of `shape` when given) on the config's
// board, at the KV capacity `bitsim run` would give it (sim/energy_account.h).
sim::EnergyAccount shape_energy_account(const sim::ParamSet& params, const model::ModelConfig* shape = nullptr);
// Median figures over 8 timing-only tokens at contexts T-7..T.
Measured measure_end_to_end(const sim::ParamSet& params, int T);
// The attention unit alone at context T: circuit ms for one token and read GB/s.
std::pair<double, double> measure_attention_alone(const sim::ParamSet& params, int T);

// BOARD.md: from Python each DMA transfer took about 150 us longer than theory. The python
// driver profile's prediction of that figure (us per DMA channel start at T = 64): a token's
// time with the python driver less its time with a driver that costs nothing.
double python_transfer_overhead_us(const sim::ParamSet& params);
std::vector<ValidationRow> validate(const sim::ParamSet& params, bool with_python_profile,
                                    const std::function<void(const std::string&)>& status = {});

struct CalibrationResult {
  struct Fitted {
    std::string key, unit, meaning;
    double before = 0, after = 0;
  };
  std::vector<Fitted> parameters;
  std::vector<ValidationRow> residuals;  // the calibration rows after the fit
  sim::ParamSet params;                        // the fitted config
};
CalibrationResult calibrate(const sim::ParamSet& params, const std::function<void(const std::string&)>& status = {});
// The calibration's tolerance: a board figure the fitted model reproduces within this many
// percent holds (validate counts them; calibrate --write writes only a fit whose every
// residual holds).
inline constexpr double kCalibrationTolerancePct = 2.0;
// The first residual of `r` beyond kCalibrationTolerancePct, described ("end_to_end T=64
// total_ms: +3.10% against the board"), or nothing when the fit holds.
std::optional<std::string> residual_beyond_tolerance(const CalibrationResult& r);
// A fitted parameter's fields (bitsim.calibrate/1's "parameters").
const Fields<CalibrationResult::Fitted>& fitted_parameter_fields();

}  // namespace bitsim::study
