#pragma once
// A prompt through the simulated board (any fidelity, sim/simulation.h), token by token,
// each token's logits compared bit for bit with the golden reference (BoardReference). A
// mismatch stops the run and reports where the two first diverge (layer, step, element),
// found by comparing the intermediate tensors of that token.
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "golden/board_reference.h"
#include "energy/energy_model.h"
#include "host/prefill.h"
#include "host/token_loop.h"
#include "hw/circuits/attention_resources.h"
#include "hw/fast/fast_board.h"
#include "model/model_loader.h"
#include "sim/board_config.h"
#include "sim/cache_store.h"
#include "sim/params.h"
#include "sim/sampler.h"
#include "sim/simulation.h"

namespace bitsim::sim {

struct RunRequest {
  std::string model = "synthetic:bitnet-large";
  std::string prompt;
  int tokens = 16;                                  // tokens to generate
  std::optional<std::filesystem::path> tokenizer;   // overrides the model folder's
  SamplerConfig sampler;
  int threads = 2;                                  // host threads for loading and the golden check
  bool stop_at_capacity = false;                    // stop at 512 positions instead of refusing
  bool legacy_attention = false;                    // the earlier unit's fixed >> 8 shift
  CacheSettings cache;                              // the start-up cache (off by default here;
                                                    // the bitsim command resolves it)
};

struct BoardRunRequest {
  RunRequest run;                 // prompt, model, tokens, sampler, tokenizer, ...
  ParamSet params;                // the board config (every key)
  Fidelity fidelity = Fidelity::kFast;  // all three give the same cycle counts; timing-only
                                        // skips the arithmetic (needs check off)
  bool check = true;              // compare every token's logits with the golden reference
  std::string vcd_file{};          // cycle fidelity: a VCD of the clocked signals (hw/parts/vcd_probe.h)
  std::string dram_trace_file{};   // cycle fidelity: every request the memory accepts (hw/memory/dram_trace.h)
  std::string dram_commands_file{};  // cycle fidelity, ddr3: every DRAM command (hw/memory/dram_command_trace.h)
  uint64_t vcd_start = 0, vcd_end = 20000;  // its window of PL cycles
  std::string trace_file{};        // when set: write a Chrome trace of the run there (sim/trace.h)
  bool keep_transfers = false;    // keep every DMA transfer's start and completion in the result
  std::string layers_csv_file{};   // when set: one row per (token, layer, step) there (sim/layer_table.h)
  std::string record_mmio_file{};  // when set: write the host program's MMIO program there
                                  // (host/mmio_program.h, docs/mmio-record.md)
  std::string config_file{};      // the board config TOML `params` came from: an input that no
                                  // output may replace (sim::board_config_file)
  // Test hook: called in the PS thread before each token step (after the weights are in
  // DDR), e.g. to corrupt one byte of the image or the KV cache and see the check fail.
  std::function<void(class BoardSession&, int step)> before_step{};
};

struct TokenRecord {
  int index = 0, context = 0, token_id = 0;
  std::string text;
  bool generated = false;
  // "prefill" (a prompt token) or "decode" (a generated one); chunk_tokens: the V of the
  // prefill chunk the token ran in (1 in decode). A chunk's figures are shared out over its
  // tokens: each its 1/V part of every time, count and byte, the remainder on the last.
  std::string phase = "prefill";
  int chunk_tokens = 1;
  double matmul_ms = 0, attention_ms = 0, cpu_ms = 0, total_ms = 0;   // simulated
  double walker_ms = 0;           // host.walker = pl: the walker's operator steps (PL)
  uint64_t dma_calls = 0, bytes_read = 0;  // dma_calls: DMA channel starts (4 per driver call)
  uint64_t driver_calls = 0;      // matmul and attention calls of the driver
  double fixed_call_ms = 0;       // the driver's fixed per-call cost (docs/variants-host.md)
  double read_gb_s = 0;           // bytes read / (matmul + attention time)
  std::optional<bool> logits_equal;  // empty without the golden check or without logits
  bool has_logits = true;         // false: a prefill position whose lm_head was skipped
  host::TokenTiming timing;       // the token's simulated figures, exact (picoseconds, counts)
  uint64_t logits_digest = 0;     // FNV-1a 64 of the logits' bytes (0 in timing-only mode)
  // The same as 16 hex digits (docs/json-schemas.md); empty where no logits were computed.
  std::optional<std::string> logits_digest_hex;
  double wall_ms = 0;             // this host's wall time for the token (incl. the check)
  // The token's energy (sim/energy_account.h, docs/energy.md; simulated: datasheet and vendor
  // estimates), by component, and its total and three parts in mJ.
  energy::Breakdown energy;
  double energy_mj = 0, dram_mj = 0, pl_mj = 0, ps_mj = 0;
};

// The request's figures (docs/prefill.md 7), all simulated: TTFT from the first DMA start to
// the logits of the last prompt position (from which the first generated token comes),
// prefill tok/s = prompt tokens / TTFT, TPOT the median generated-token time, request time
// the whole run's simulated time (every token's). 0 when there is nothing to measure; TPOT
// is empty (JSON null) when no token was decoded: no decode took no time.
struct RequestFigures {
  double ttft_ms = 0, prefill_tok_s = 0, request_ms = 0;
  std::optional<double> tpot_ms;
};

struct BoardRunResult {
  std::string model, tokenizer, shape;
  Fidelity fidelity = Fidelity::kFast;
  bool synthetic_tokenizer = false;
  int prompt_tokens = 0;
  std::vector<TokenRecord> tokens;
  std::string generated_text;
  double load_s = 0, calibration_s = 0, wall_s = 0;
  double first_token_s = 0;       // from run_board's call to the first generated token's step done (0: none)
  bool model_cached = false, scales_cached = false;  // taken from the start-up cache
  size_t timing_entries_cached = 0;  // batch shapes whose timing came from the start-up cache
  bool checked = false;
  bool all_equal = true;
  std::string mismatch;           // where the first mismatch diverged; empty if none
  bool stopped_at_capacity = false;
  int kv_capacity = 0;              // positions the KV cache holds in its kv.format and the CMA
  int kv_capacity_cap = 0;          // its bound besides the CMA: the unit's T range, the model's positions
  double wall_gb_s = 0;           // the configured DDR wall
  std::map<std::string, std::string> config;
  std::vector<host::TransferRecord> transfers;  // with BoardRunRequest::keep_transfers
  hw::FastBoardStats fast;        // fast and timing-only: batches, timing-cache hits, oracle runs
  std::optional<host::WalkerResources> walker;  // host.walker = pl: the resource estimate
  hw::AttentionResources attention;             // the attention unit's resource estimate (model)
  int tokens_per_pass = 1;                      // prefill.tokens_per_pass
  host::PrefillResources prefill;               // its resource estimate and fit verdict (model)
  RequestFigures figures;                       // TTFT, prefill tok/s, TPOT, request time
  energy::EnergyConfig energy_config;           // the energy.* keys the tokens' energy used
  bool approximate = false;  // the times are approximate (sim::approximate_timing)
};

// The driver's fixed per-call cost over a run (docs/variants-host.md): driver calls per token
// and fixed call time per token (means over the run's tokens) and its share of the token
// time (sum of fixed call time / sum of token time). Simulated.
struct FixedCostShare {
  double calls_per_token = 0, fixed_ms_per_token = 0, share = 0;
};
FixedCostShare fixed_cost_share(const BoardRunResult& r);

// The request's figures of a run's tokens (docs/prefill.md 7).
RequestFigures request_figures(const BoardRunResult& r);

struct BoardRunCallbacks {
  std::function<void(const std::string&)> on_status;
  std::function<void(const std::string&)> on_warning;  // e.g. an unusable or corrupt start-up cache
  std::function<void(const TokenRecord&, const std::string& new_text)> on_token;
  // Each token's logits as the board computed them (not in timing-only mode), called just
  // before on_token (the Python module hands them out as arrays).
  std::function<void(const TokenRecord&, const std::vector<float>& logits)> on_logits;
};

BoardRunResult run_board(BoardRunRequest request, const BoardRunCallbacks& callbacks = {});
// Everything run_board refuses before it loads a weight (the request and its outputs, the
// config, the model's config and tokenizer, the prompt against the KV capacity, the memory
// map), checked without running: the bitsim::Error run_board would throw.
void check_board_run(const BoardRunRequest& request);

// The prefill engine's resources for the config's P beside the Zynq-7020 and what the board
// uses (host::prefill_resources, with the walker's when host.walker = pl), for the model `mc`
// with a KV cache of `capacity` positions (the walker's RoPE table follows it): the estimate
// and fit verdict `bitsim run` and `bitsim sweep` report.
host::PrefillResources prefill_resources_of(const SimConfig& cfg, const model::ModelConfig& mc, int capacity);

// Internal: the objects of one simulation, exposed to the test hook.
class BoardSession {
 public:
  virtual ~BoardSession() = default;
  virtual void poke_ddr(uint64_t addr, uint8_t xor_mask) = 0;  // flip bits of one DDR byte
  virtual uint64_t weights_addr() const = 0;                    // first byte of layer 0's qkv rows
  virtual uint64_t lm_head_addr() const = 0;                    // first byte of lane 0's lm_head rows
  virtual uint64_t k_cache_addr(int layer, int head) const = 0;
  virtual uint64_t v_cache_addr(int layer, int head) const = 0;
  virtual std::vector<uint8_t> read_ddr(uint64_t addr, size_t bytes) = 0;  // the simulated DDR's bytes
};

}  // namespace bitsim::sim

namespace bitsim::sim {

// The lower-level entry point: a fixed sequence of tokens through the simulated board in
// either fidelity, without tokenizer, sampling or golden check. Tests, benchmarks and
// calibration use it. `start_position` > 0 starts the KV cache at that position (its
// earlier rows are whatever the DDR holds: meant for timing-only runs at a context T).
struct TokenOutcome {
  host::TokenTiming timing;
  std::vector<float> logits;  // empty in timing-only mode
};
struct SimulateOptions {
  Fidelity fidelity = Fidelity::kFast;
  int threads = 2;
  int start_position = 0;
  bool legacy_attention = false;
  // Cycle fidelity: check at every register write on a quiet board that the board is in its
  // state after reset (host::CyclePlatform::check_idle_board); violations are appended here.
  std::vector<std::string>* idle_violations = nullptr;
};
std::vector<TokenOutcome> simulate_tokens(const SimConfig& config, const model::TernaryModel& model,
                                          const model::KvScales& scales, const std::vector<int>& tokens,
                                          const SimulateOptions& options, hw::FastBoardStats* fast_stats = nullptr,
                                          std::vector<host::TransferRecord>* transfers = nullptr);

}  // namespace bitsim::sim
