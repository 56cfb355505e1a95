#include "sim/layer_table.h"

#include "base/file_io.h"

#include <fmt/format.h>

#include "host/cpu_model.h"
#include "sim/trace.h"

namespace bitsim::sim {

using trace::short_group;
using trace::us;

LayerTable::LayerTable(const host::Platform& platform, host::StepObserver* next)
    : platform_(platform), next_(next), bytes_seen_(platform.pl_bytes_read()),
      transfers_seen_(platform.transfers().size()) {}

LayerTable::Row& LayerTable::add(int position, int layer, uint64_t begin_ps, uint64_t end_ps) {
  if (chunk_token_calls_ > 0) {  // the first row of the next step
    token_first_row_ = rows_.size();
    chunk_token_calls_ = 0;
  }
  Row r;
  r.token = position;
  r.layer = layer;
  r.begin_ps = begin_ps;
  r.end_ps = end_ps;
  const uint64_t bytes = platform_.pl_bytes_read();
  const size_t transfers = platform_.transfers().size();
  r.bytes_read = bytes - bytes_seen_;
  r.dma_calls = transfers - transfers_seen_;
  bytes_seen_ = bytes;
  transfers_seen_ = transfers;
  rows_.push_back(std::move(r));
  return rows_.back();
}

// The token loop reports each position of a step once the step has run (a prompt chunk: each
// of its V positions in turn). A row takes the id of the token at its position (a chunk's
// CPU steps and matmul calls carry the chunk's first position, its attention calls their
// own) and the chunk's V.
void LayerTable::token(int position, int token_id, uint64_t begin_ps, uint64_t end_ps) {
  ++chunk_token_calls_;
  for (size_t i = token_first_row_; i < rows_.size(); ++i) {
    if (rows_[i].token == position) rows_[i].token_id = token_id;
    rows_[i].chunk_tokens = chunk_token_calls_;
  }
  if (next_) next_->token(position, token_id, begin_ps, end_ps);
}

void LayerTable::cpu_step(host::CpuStep step, uint64_t elements, uint64_t bytes, int position, int layer,
                          uint64_t begin_ps, uint64_t end_ps) {
  Row& r = add(position, layer, begin_ps, end_ps);
  r.step = host::cpu_step_name(step);
  r.unit = "cpu";
  r.cpu_bytes_written = bytes;
  if (next_) next_->cpu_step(step, elements, bytes, position, layer, begin_ps, end_ps);
}

void LayerTable::call(const char* kind, const std::string& group, int part, int position, int layer,
                      uint64_t begin_ps, uint64_t end_ps) {
  const bool attention = std::string(kind) == "attention";
  Row& r = add(position, layer, begin_ps, end_ps);
  r.step = attention ? std::string("attention") : "matmul " + short_group(group);
  r.part = part;
  r.unit = attention ? "attention" : "matmul";
  if (next_) next_->call(kind, group, part, position, layer, begin_ps, end_ps);
}

std::string LayerTable::csv() const {
  std::string out =
      "token,token_id,chunk_tokens,layer,step,part,unit,begin_us,time_us,dma_calls,bytes_read,cpu_bytes_written,"
      "evidence\n";
  for (const Row& r : rows_)
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},simulated\n", r.token, r.token_id, r.chunk_tokens,
                       r.layer >= 0 ? std::to_string(r.layer) : std::string(), r.step, r.part, r.unit, us(r.begin_ps),
                       us(r.end_ps - r.begin_ps), r.dma_calls, r.bytes_read, r.cpu_bytes_written);
  return out;
}

void LayerTable::write_file(const std::string& path) const { io::write_file(path, csv(), "layers CSV file"); }

}  // namespace bitsim::sim
