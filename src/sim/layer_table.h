#pragma once
// LayerTable: a run's simulated time per (token, layer, step) for notebooks (`bitsim run
// --layers-csv FILE`). A host::StepObserver on the token loop (observing costs no simulated
// time): every CPU step and every driver call becomes one row with its simulated begin and
// duration, the unit that was busy (cpu, matmul engine, attention unit), the DMA channel
// transfers it started and the bytes the PL read from DDR during it (the platform's
// counters read at the end of each step: the PL moves data only inside driver calls). The
// rows of a token add up to its TokenTiming (total time, DMA calls, bytes read).
//
// Energy (docs/energy.md, "Per layer"): with price_with(), each row's figures (its time on
// its unit, the bytes the PL read, a driver call's fixed cost and cache maintenance) are
// priced as a token's are (sim::token_energy); after the rows of each step (a token, or a
// prompt chunk) a row "remainder" holds what the step's tokens cost in the run
// (set_token_energy) less its rows' sum, so that a step's rows add up to its tokens' energy.
// Columns: docs/json-schemas.md (the run's layers CSV).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "host/dma_driver.h"
#include "host/platform.h"
#include "host/token_loop.h"
#include "sim/energy_account.h"

namespace bitsim::sim {

class LayerTable : public host::StepObserver {
 public:
  struct Row {
    int token = 0;           // position in the context (a prompt chunk's CPU steps and matmul calls: its first)
    int token_id = -1;       // the token fed at that position
    int chunk_tokens = 1;    // V of the prompt chunk the row belongs to (docs/prefill.md); 1 for a decode token
    int layer = -1;          // -1: outside the decoder layers (embedding, final norm, lm_head, argmax)
    std::string step;        // "rmsnorm", "matmul qkv", "attention", ...
    int part = 0;            // driver calls: the call's index within its matmul group
    const char* unit = "";   // "cpu" | "matmul" | "attention"
    uint64_t begin_ps = 0, end_ps = 0;
    uint64_t dma_calls = 0;  // DMA channel transfers started in the step
    uint64_t bytes_read = 0; // bytes the PL read from DDR in the step
    uint64_t cpu_bytes_written = 0;  // CPU steps: the bytes the cost model charged
    host::TokenTiming timing;  // the row's figures, as a token's (its energy's input)
  };
  // A step of the token loop: a token, or a prompt chunk of `tokens` positions from `position`.
  struct Step {
    size_t first_row = 0, end_row = 0;
    int position = 0, tokens = 1;
  };
  // A row's (or a remainder's) energy in mJ: its total and its DRAM, PL and PS parts (the PS
  // with the rest of the board, as `bitsim run` prints them).
  struct RowEnergy {
    double total = 0, dram = 0, pl = 0, ps = 0;
  };

  // `next` (may be null) sees every callback too (e.g. the trace writer).
  LayerTable(const host::Platform& platform, host::StepObserver* next);

  void token(int position, int token_id, uint64_t begin_ps, uint64_t end_ps) override;
  void cpu_step(host::CpuStep step, uint64_t elements, uint64_t bytes, int position, int layer, uint64_t begin_ps,
                uint64_t end_ps) override;
  void call(const char* kind, const std::string& group, int part, int position, int layer, uint64_t begin_ps,
            uint64_t end_ps) override;

  // Prices every row with `account` (the run's); `driver` (the token loop's) gives each driver
  // call's fixed cost and cache maintenance; `walker_pl`: host.walker = pl (the walker's steps
  // are PL time, not CPU time).
  void price_with(const EnergyAccount& account, const host::DmaDriver& driver, bool walker_pl);
  // The energy the run gave the token at `position` (its record's): the remainder rows.
  void set_token_energy(int position, const energy::Breakdown& energy);

  const std::vector<Row>& rows() const { return rows_; }
  const std::vector<Step>& steps() const { return steps_; }
  // A row's energy (price_with not called: none).
  std::optional<RowEnergy> energy(const Row& row) const;
  // A finished step's tokens' energy less its rows' (none before every one of its positions
  // has its energy).
  std::optional<RowEnergy> remainder(const Step& step) const;
  std::string csv() const;
  // Temp file + rename; a bitsim::Error naming the file if it cannot be written.
  void write_file(const std::string& path) const;

 private:
  Row& add(int position, int layer, uint64_t begin_ps, uint64_t end_ps);
  const host::Platform& platform_;
  std::optional<EnergyAccount> account_;
  const host::DmaDriver* driver_ = nullptr;
  bool walker_pl_ = false;
  host::DriverStats driver_seen_;
  std::vector<Step> steps_;
  std::map<int, energy::Breakdown> token_energy_;  // position -> the run's energy of the token
  host::StepObserver* next_;
  std::vector<Row> rows_;
  size_t token_first_row_ = 0;  // the first row of the step (a token or a prompt chunk) being run
  int chunk_token_calls_ = 0;    // token() calls since that step's rows ended
  uint64_t bytes_seen_ = 0;
  size_t transfers_seen_ = 0;
};

}  // namespace bitsim::sim
