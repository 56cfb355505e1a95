#pragma once
// LayerTable: a run's simulated time per (token, layer, step) for notebooks (`bitsim run
// --layers-csv FILE`). A host::StepObserver on the token loop (observing costs no simulated
// time): every CPU step and every driver call becomes one row with its simulated begin and
// duration, the unit that was busy (cpu, matmul engine, attention unit), the DMA channel
// transfers it started and the bytes the PL read from DDR during it (the platform's
// counters read at the end of each step: the PL moves data only inside driver calls). The
// rows of a token add up to its TokenTiming (total time, DMA calls, bytes read).
// Columns: docs/json-schemas.md (the run's layers CSV).
#include <cstdint>
#include <string>
#include <vector>

#include "host/platform.h"
#include "host/token_loop.h"

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
  };

  // `next` (may be null) sees every callback too (e.g. the trace writer).
  LayerTable(const host::Platform& platform, host::StepObserver* next);

  void token(int position, int token_id, uint64_t begin_ps, uint64_t end_ps) override;
  void cpu_step(host::CpuStep step, uint64_t elements, uint64_t bytes, int position, int layer, uint64_t begin_ps,
                uint64_t end_ps) override;
  void call(const char* kind, const std::string& group, int part, int position, int layer, uint64_t begin_ps,
            uint64_t end_ps) override;

  const std::vector<Row>& rows() const { return rows_; }
  std::string csv() const;
  // Temp file + rename; a bitsim::Error naming the file if it cannot be written.
  void write_file(const std::string& path) const;

 private:
  Row& add(int position, int layer, uint64_t begin_ps, uint64_t end_ps);
  const host::Platform& platform_;
  host::StepObserver* next_;
  std::vector<Row> rows_;
  size_t token_first_row_ = 0;  // the first row of the step (a token or a prompt chunk) being run
  int chunk_token_calls_ = 0;    // token() calls since that step's rows ended
  uint64_t bytes_seen_ = 0;
  size_t transfers_seen_ = 0;
};

}  // namespace bitsim::sim
