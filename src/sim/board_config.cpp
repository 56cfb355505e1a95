#include "sim/board_config.h"

#include <filesystem>
#include <type_traits>

#include <fmt/format.h>

#include "sim/key_rules.h"

namespace bitsim::sim {

namespace {

// The memory map's keys (host::MemoryMapConfig, whose header holds no descriptors):
// where the contiguous region starts, its size, and the INT8 lm_head switch.
template <typename Self, typename Visitor>
void visit_memory(Self& m, Visitor&& v) {
  using bitsim::Evidence;
  using bitsim::FieldInfo;
  v(m.cma_base, FieldInfo{"cma.base", 0, double(hw::kMaxDdrBytes), "bytes", Evidence::kSimulated,
                          "physical address of the contiguous-memory region; the DDR below it is Linux's"});
  v(m.cma_bytes, FieldInfo{"cma.mib", 1, double(hw::kMaxDdrBytes >> 20), "MiB", Evidence::kSimulated,
                           "contiguous memory for every DMA buffer, at most ddr.size_mib less the DDR below "
                           "cma.base; BOARD.md says 128 MiB, but its own "
                           "figures (141.3 MiB of weights + 36 MiB of KV cache) need more: 192 MiB fits "
                           "them and refuses an INT8 lm_head, as the board did (docs/memory.md)",
                           double(1ull << 20)});
  v(m.int8_lm_head, FieldInfo{"model.int8_lm_head", 0, 0, "", Evidence::kSimulated,
                              "lay out an INT8 lm_head (refused by the CMA budget, as on the board)"});
  v(m.lanes, FieldInfo{"host.lanes", 1, 2, "lanes", Evidence::kBoard,
                       "engine lanes the host uses: 2 (the board: rows and heads split over both lanes and DMAs) or "
                       "1 (all on lane 0 and mm0/at0; docs/variants-host.md)"});
}

// Appends a key for every keyed field a config struct's visit() reports (once per key).
struct AddSpecs {
  std::vector<ParamSpec>& out;
  template <typename T>
  void operator()(const T& field, const bitsim::FieldInfo& f) const {
    if (!f.keyed) return;
    for (const auto& s : out)
      if (s.key == f.key) return;  // driver.profile: declared by the first profile
    ParamSpec s{f.key, ParamType::Real, 0.0, f.min, f.max, f.choices, f.unit, bitsim::evidence_name(f.evidence), f.doc};
    if constexpr (std::is_same_v<T, bool>) {
      s.type = ParamType::Boolean, s.value = field, s.min = 0, s.max = -1;
    } else if constexpr (std::is_same_v<T, std::string>) {
      s.type = ParamType::Text, s.value = field, s.min = 0, s.max = -1;
    } else if constexpr (std::is_floating_point_v<T>) {
      s.value = bitsim::key_value(field, f);
    } else {
      s.type = ParamType::Integer, s.value = int64_t(bitsim::key_value(field, f));
    }
    out.push_back(std::move(s));
  }
};

// Sets every keyed field of a config struct from its key.
struct FromParams {
  const ParamSet& p;
  template <typename T>
  void operator()(T& field, const bitsim::FieldInfo& f) const {
    if (!f.keyed) return;
    if constexpr (std::is_same_v<T, bool>) field = p.boolean(f.key);
    else if constexpr (std::is_same_v<T, std::string>) field = p.text(f.key);
    else if constexpr (std::is_floating_point_v<T>) field = T(p.real(f.key) * f.scale);
    else field = T(double(p.integer(f.key)) * f.scale);
  }
};

ParamSpec fixed_real(std::string key, double v, std::string unit, std::string doc) {
  return {std::move(key), ParamType::Real, v, 1, 1000, {}, std::move(unit), "board", std::move(doc)};
}
}  // namespace

ParamSet board_params() {
  std::vector<ParamSpec> s;
  const AddSpecs add{s};
  const hw::BoardConfig board;
  const host::MemoryMapConfig memory;
  const host::DriverConfig c_driver, python_driver = host::DriverConfig::python();
  const host::CpuModelConfig cpu;
  hw::BoardConfig::visit(board, add);
  visit_memory(memory, add);
  // What is known about closing timing (BOARD.md), for the sweeps (study/sweep.h).
  s.push_back(fixed_real("timing.pass_mhz", 125.0, "MHz",
                         "highest PL clock known to close timing on the board (BOARD.md: 125 MHz passed)"));
  s.push_back(fixed_real("timing.fail_mhz", 142.86, "MHz",
                         "PL clock known to fail timing (BOARD.md: 142.86 MHz failed twice, in the AXI DMA's length "
                         "counter)"));
  s.push_back({"timing.fail_length_bits", ParamType::Integer, int64_t{23}, 8, 26, {}, "bits", "board",
               "the DMA length-counter width of that failure (a wider counter is no easier to close)"});
  host::DriverConfig::visit(c_driver, add);
  host::DriverConfig::visit(python_driver, add);
  host::CpuModelConfig::visit(cpu, add);
  const host::WalkerConfig walker;
  host::WalkerConfig::visit(walker, add);
  const energy::EnergyConfig energy;
  energy::EnergyConfig::visit(energy, add);
  return ParamSet(std::move(s));
}

std::string config_file_text(const ParamSet& p) {
  return "# bitsim board config (effective): key = value, each with its meaning, range, unit\n"
         "# and evidence label (board: measured or documented; calibrated: fitted by `bitsim\n"
         "# calibrate` to a board figure; simulated: a modelling choice).\n\n" +
         p.dump_toml();
}

std::string default_config_path() {
  const std::filesystem::path p = std::filesystem::path(BITSIM_SOURCE_DIR) / "configs" / "pynq-z2.toml";
  return std::filesystem::exists(p) ? p.string() : std::string();
}

std::string board_config_file(const std::string& config) { return config.empty() ? default_config_path() : config; }

ParamSet load_board_params(const std::string& config) {
  ParamSet p = board_params();
  const std::string file = board_config_file(config);
  if (!file.empty()) p.load_toml(file);
  return p;
}

void validate(const SimConfig& c) {
  c.board.validate("board");
  c.driver.validate("driver");
  c.cpu.validate("cpu");
  c.walker.validate("layer walker");
  c.energy.validate("energy");
  // The per-call stream has no header to carry the V vectors of a prefill group.
  if (c.board.matmul.per_call() && c.board.prefill.tokens_per_pass > 1)
    throw FieldError("prefill.tokens_per_pass",
                     fmt::format("{} needs matmul.format = header (the per-call stream has no header to carry the "
                                 "chunk's vectors; docs/prefill.md)",
                                 c.board.prefill.tokens_per_pass));
  // Generated scenarios with both found the two fidelities' transfers to differ (1116
  // against 960 DMA transfers at 250 MHz): refused until that is found and fixed.
  if (c.board.attention.kind() == model::AttentionVariant::OnlineSoftmax && c.board.matmul.per_call())
    throw Error("attention.variant = online-softmax with matmul.format = per-call: this combination is not yet proven "
                "to give identical cycle counts in both fidelities; choose one of the two");
  // The INT4 KV codec is read by the online-softmax unit only (docs/variants-attention.md 8.1).
  const auto& at = c.board.attention;
  if (at.int4() && at.kind() != model::AttentionVariant::OnlineSoftmax)
    throw Error("kv.format = int4 needs attention.variant = online-softmax (the INT4 KV rows are read by the "
                "online-softmax unit only; docs/variants-attention.md 8.1)");
  // TIP's tiers (docs/tip.md) are read by the online-softmax unit built for them; the host's
  // region tables are the CPU's (the PL walker keeps none).
  if (at.tip_rows() && at.kind() != model::AttentionVariant::OnlineSoftmax)
    throw FieldError("kv.format", "tip needs attention.variant = online-softmax (TIP's tiers are read by the "
                                  "online-softmax unit built for them; docs/tip.md)");
  if (at.tip_rows() && c.walker.pl())
    throw FieldError("host.walker", "pl with kv.format = tip: the PL walker keeps no TIP region tables (the CPU "
                                    "places the regions and re-encodes their rows; docs/tip.md)");
  if (!at.int4() && at.kv_outlier_channels != 0)
    throw Error(fmt::format("kv.outlier_channels = {}: outlier lanes exist with kv.format = int4 only",
                            at.kv_outlier_channels));
}

SimConfig make_sim_config(const ParamSet& p) {
  check_key_rules(p);
  SimConfig c;
  const FromParams from{p};
  hw::BoardConfig::visit(c.board, from);
  visit_memory(c.memory, from);
  c.memory.ddr_bytes = c.board.ddr.size_bytes;
  c.memory.max_transfer_bytes = (uint64_t(1) << c.board.dma.length_bits) - 1;
  // The online-softmax unit reads K and V interleaved (docs/variants-attention.md).
  c.memory.kv_interleaved = c.board.attention.kind() == model::AttentionVariant::OnlineSoftmax;
  c.memory.kv_format = c.board.attention.kv();
  c.memory.kv_outlier_channels = c.board.attention.kv_outlier_channels;
  c.memory.tip = c.board.attention.tip;
  c.memory.attention_shared = c.board.attention.shared_stream();  // one pass per K/V head (G query heads)
  c.memory.attention_group_max = c.board.attention.gqa_group;
  c.memory.head_dim = c.board.attention.head_dim;  // the KV rows, header + q and result of the unit's d
  c.memory.per_call_row_trits = c.board.matmul.per_call() ? c.board.matmul.per_call_row_trits : 0;
  c.memory.tokens_per_pass = c.board.prefill.tokens_per_pass;
  if (p.text("driver.profile") == "python") c.driver = host::DriverConfig::python();
  host::DriverConfig::visit(c.driver, from);
  host::CpuModelConfig::visit(c.cpu, from);
  host::WalkerConfig::visit(c.walker, from);
  energy::EnergyConfig::visit(c.energy, from);
  validate(c);
  return c;
}

}  // namespace bitsim::sim
