#include "sim/layer_table.h"

#include "base/file_io.h"

#include <cmath>

#include <fmt/format.h>

#include "host/cpu_model.h"
#include "host/walker.h"
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
  // The driver's fixed cost and cache maintenance since the last row (a driver call's own).
  r.timing.bytes_read = r.bytes_read;
  r.timing.dma_transfers = r.dma_calls;
  if (driver_) {
    const host::DriverStats& now = driver_->stats();
    r.timing.fixed_call_ps = now.fixed_ps - driver_seen_.fixed_ps;
    r.timing.flushed_bytes = now.flushed_bytes - driver_seen_.flushed_bytes;
    r.timing.invalidated_bytes = now.invalidated_bytes - driver_seen_.invalidated_bytes;
    driver_seen_ = now;
  }
  rows_.push_back(std::move(r));
  return rows_.back();
}

void LayerTable::price_with(const EnergyAccount& account, const host::DmaDriver& driver, bool walker_pl) {
  account_ = account;
  driver_ = &driver;
  driver_seen_ = driver.stats();
  walker_pl_ = walker_pl;
}

void LayerTable::set_token_energy(int position, const energy::Breakdown& energy) { token_energy_[position] = energy; }

namespace {
LayerTable::RowEnergy row_energy(const energy::Breakdown& b) {
  return {b.total(), b.dram(), b.pl(), b.ps() + b.board_other};
}
}  // namespace

std::optional<LayerTable::RowEnergy> LayerTable::energy(const Row& row) const {
  if (!account_) return std::nullopt;
  return row_energy(token_energy(*account_, row.timing, row.chunk_tokens));
}

std::optional<LayerTable::RowEnergy> LayerTable::remainder(const Step& step) const {
  if (!account_) return std::nullopt;
  RowEnergy left;
  for (int p = step.position; p < step.position + step.tokens; ++p) {
    const auto it = token_energy_.find(p);
    if (it == token_energy_.end()) return std::nullopt;
    const RowEnergy e = row_energy(it->second);
    left.total += e.total, left.dram += e.dram, left.pl += e.pl, left.ps += e.ps;
  }
  for (size_t i = step.first_row; i < step.end_row; ++i) {
    const RowEnergy e = *energy(rows_[i]);
    left.total -= e.total, left.dram -= e.dram, left.pl -= e.pl, left.ps -= e.ps;
  }
  return left;
}

// The token loop reports each position of a step once the step has run (a prompt chunk: each
// of its V positions in turn). A row takes the id of the token at its position (a chunk's
// CPU steps and matmul calls carry the chunk's first position, its attention calls their
// own) and the chunk's V.
void LayerTable::token(int position, int token_id, uint64_t begin_ps, uint64_t end_ps) {
  ++chunk_token_calls_;
  if (chunk_token_calls_ == 1) steps_.push_back({token_first_row_, rows_.size(), position, 1});
  else steps_.back().tokens = chunk_token_calls_;
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
  (walker_pl_ && host::walker_runs(step) ? r.timing.walker_ps : r.timing.cpu_ps) = end_ps - begin_ps;
  // The driver works inside its calls only (what it counted before, e.g. init()'s register
  // writes, belongs to no token).
  r.timing.fixed_call_ps = r.timing.flushed_bytes = r.timing.invalidated_bytes = 0;
  if (next_) next_->cpu_step(step, elements, bytes, position, layer, begin_ps, end_ps);
}

void LayerTable::call(const char* kind, const std::string& group, int part, int position, int layer,
                      uint64_t begin_ps, uint64_t end_ps) {
  const bool attention = std::string(kind) == "attention";
  Row& r = add(position, layer, begin_ps, end_ps);
  r.step = attention ? std::string("attention") : "matmul " + short_group(group);
  r.part = part;
  r.unit = attention ? "attention" : "matmul";
  (attention ? r.timing.attention_ps : r.timing.matmul_ps) = end_ps - begin_ps;
  ++(attention ? r.timing.attention_calls : r.timing.matmul_calls);
  if (next_) next_->call(kind, group, part, position, layer, begin_ps, end_ps);
}

namespace {
// The energy columns: mJ with 9 decimals (pJ; a difference below that prints as 0, not -0),
// and the label.
std::string energy_columns(const std::optional<LayerTable::RowEnergy>& e, const char* label) {
  if (!e) return ",,,,";
  const auto mj = [](double x) { return std::abs(x) < 5e-10 ? 0.0 : x; };
  return fmt::format("{:.9f},{:.9f},{:.9f},{:.9f},{}", mj(e->total), mj(e->dram), mj(e->pl), mj(e->ps), label);
}
}  // namespace

std::string LayerTable::csv() const {
  std::string out =
      "token,token_id,chunk_tokens,layer,step,part,unit,begin_us,time_us,dma_calls,bytes_read,cpu_bytes_written,"
      "evidence,energy_mj,dram_mj,pl_mj,ps_mj,energy_evidence\n";
  const char* label = account_ ? evidence_name(energy::total_evidence(account_->config, account_->design.dram_model)) : "";
  size_t step = 0;
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},simulated,{}\n", r.token, r.token_id, r.chunk_tokens,
                       r.layer >= 0 ? std::to_string(r.layer) : std::string(), r.step, r.part, r.unit, us(r.begin_ps),
                       us(r.end_ps - r.begin_ps), r.dma_calls, r.bytes_read, r.cpu_bytes_written,
                       energy_columns(energy(r), label));
    if (step >= steps_.size() || i + 1 != steps_[step].end_row) continue;
    // The step's remainder: its tokens' energy in the run less its rows' (no time, no work).
    const Step& s = steps_[step++];
    if (const auto left = remainder(s))
      out += fmt::format("{},{},{},,remainder,0,none,{},{},0,0,0,simulated,{}\n", s.position,
                         rows_[s.first_row].token_id, s.tokens, us(r.end_ps), us(0), energy_columns(left, label));
  }
  return out;
}

void LayerTable::write_file(const std::string& path) const { io::write_file(path, csv(), "layers CSV file"); }

}  // namespace bitsim::sim
