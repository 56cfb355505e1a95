#include "cli/inspect_command.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/options.h"
#include "energy/energy_model.h"
#include "host/memory_map.h"
#include "sim/board_config.h"
#include "sim/energy_account.h"
#include "model/attention_stream.h"
#include "model/kv_format.h"
#include "model/kv_tip.h"
#include "model/model_loader.h"
#include "model/packed_image.h"
#include "cli/options.h"
#include "sim/board_config.h"
#include "study/board_figures.h"

namespace bitsim::cli {

namespace {

constexpr double kBoardImageMiB = study::board_figures::kPackedImageMiB;

// The board's memory (docs/memory.md "What fits where"): the layout's account at the
// largest context its KV cache holds (or at one position, when nothing fits), against
// ddr.size_mib and cma.mib.
struct Fit {
  host::MemoryAccount account;
  int context = 0;  // the largest T (0: the model does not fit)
  int cap = 0;      // what bounds T besides the CMA (the unit's range, max_position_embeddings)
};

Fit board_fit(const model::ModelConfig& c, const host::MemoryMapConfig& mc) {
  Fit f;
  f.context = host::kv_context_limit(c, mc);
  f.cap = host::kv_context_cap(c, mc);
  f.account = host::memory_account(c, mc, std::max(1, f.context));
  return f;
}

void print_fit(const Fit& f, const std::string& kv_format) {
  const auto& a = f.account;
  fmt::print("memory on this board (ddr.size_mib = {}, cma.base = {} MiB, cma.mib = {}; the layout is simulated):\n",
             a.ddr_bytes >> 20, a.cma_base >> 20, a.cma_bytes >> 20);
  fmt::print("{}", a.text());
  if (f.context > 0)
    fmt::print("  largest context         {:>10} positions (kv.format = {}; the unit and the model cap it at {})\n",
               f.context, kv_format, f.cap);
  else
    fmt::print("  largest context         none: the model does not fit even with one position; `bitsim run` "
               "refuses it\n");
}

// The KV cache per format (model/kv_format.h: the whole storage) and the largest context
// whose cache fits the board's contiguous memory beside everything else kept there.
void print_kv_capacity(const model::ModelConfig& c, const host::MemoryAccount& a) {
  const uint64_t used_else = a.used() - a.kv_cache, free = a.cma_bytes - std::min(a.cma_bytes, used_else);
  const uint64_t lh = uint64_t(c.num_layers) * uint64_t(c.num_kv_heads);  // K/V heads: a GQA group shares one
  fmt::print("KV cache (docs/variants-attention.md 8: payload, scales, outlier lanes, padding, banks), in the "
             "{} MiB CMA beside {:.2f} MiB of weights and buffers:\n", a.cma_bytes >> 20, used_else / 1048576.0);
  fmt::print("  {:<22} {:>14} {:>16} {:>14}\n", "format", "bytes/position", "largest T fits", "T=512 MiB");
  // Rows of the model's head_dim (a unit built for it: attention.head_dim); int4 and tip need
  // whole V groups (model::kv_head_dim_fits).
  const int d = c.head_dim();
  const bool int4 = model::kv_head_dim_fits(model::KvFormat::Int4, d);
  std::vector<std::pair<const char*, model::KvStorage>> formats = {
      {"int8 (the board)", model::kv_storage(model::KvFormat::Int8, 0, d)}};
  if (int4)
    for (const auto& [name, n] : {std::pair{"int4", 0}, {"int4, 4 outlier lanes", 4}, {"int4, 8 outlier lanes", 8}})
      formats.push_back({name, model::kv_storage(model::KvFormat::Int4, n, d)});
  for (const auto& [name, st] : formats)
    fmt::print("  {:<22} {:>14} {:>16} {:>14.2f}  [simulated]\n", name, lh * st.per_position(),
               model::largest_context(st, lh, free, c.max_position_embeddings),
               st.cache_bytes(lh, 512) / 1048576.0);
  // TIP (docs/tip.md): bytes per position depend on T; shown at the largest T that fits.
  const std::pair<const char*, model::TipSettings> tips[] = {{"tip (defaults)", model::TipSettings{}},
                                                             {"tip-lean", model::kTipLean}};
  for (const auto& [name, s] : tips) {
    if (!int4) break;
    const int t =
        model::tip_largest_context(s, lh, free, std::min(c.max_position_embeddings, model::kAttentionInt4MaxT), d);
    fmt::print("  {:<22} {:>14.0f} {:>16} {:>14.2f}  [simulated]\n", name,
               t > 0 ? double(lh) * model::tip_storage(s, t, d).per_position(t) : 0.0, t,
               double(lh * model::tip_storage(s, 512, d).total()) / 1048576.0);
  }
  fmt::print("  (capped at max_position_embeddings {}; the board's unit and the int8 online-softmax unit take "
             "T <= {}, the INT4 unit T <= {}: docs/variants-attention.md 8.8; tip: bytes per position at its "
             "largest T, the TIP unit T <= {}, docs/tip.md)\n",
             c.max_position_embeddings, model::kKvPositions, model::kAttentionInt4MaxT, model::kAttentionInt4MaxT);
}

// The static power of the design the config builds for the model (docs/energy.md): what the
// board draws idle, per component with its label, from the energy model's idle interval
// (sim::idle_energy over one second: mJ per second = mW).
struct StaticPower {
  std::vector<energy::Component> parts;  // the idle interval's nonzero components, W
  double total_w = 0;
  Evidence evidence = Evidence::kSimulated;
  std::string idd_set;
};

StaticPower static_power(const sim::SimConfig& cfg, const model::ModelConfig& mc) {
  const sim::EnergyAccount account = sim::energy_account(cfg, mc, std::max(1, host::kv_context_limit(mc, cfg.memory)));
  constexpr uint64_t kSecondPs = 1000000000000ull;
  const energy::Breakdown idle = sim::idle_energy(account, kSecondPs);
  StaticPower p;
  for (energy::Component c : energy::components(idle, account.config, account.design.dram_model)) {
    if (c.mj == 0) continue;
    c.mj *= 1e-3;  // mJ over one second -> W
    p.parts.push_back(c);
  }
  p.total_w = idle.total() * 1e-3;
  p.evidence = energy::total_evidence(account.config, account.design.dram_model);
  p.idd_set = account.config.idd_set;
  return p;
}

// What each static component is, for the table.
const char* static_part_text(const std::string& name) {
  if (name == "pl.static") return "PL device static (xc7z020 leakage)";
  if (name.rfind("pl.clock.", 0) == 0) return "PL clock tree (the clock runs idle)";
  if (name == "ps.static") return "PS7 idle (both cores in WFI)";
  if (name == "dram.background") return "DRAM background (banks precharged)";
  if (name == "dram.refresh") return "DRAM refresh";
  if (name == "board.other") return "the rest of the board";
  return "";
}

void print_static_power(const StaticPower& p) {
  fmt::print("static power of the design (docs/energy.md: the board idle, no circuit busy, no byte moved, the "
             "CPU in WFI; DRAM from the {} IDD set):\n", p.idd_set);
  for (const energy::Component& c : p.parts)
    fmt::print("  {:<20} {:<38} {:>8.4f} W  [{}]\n", c.name, static_part_text(c.name), c.mj,
               evidence_name(c.evidence));
  fmt::print("  {:<20} {:<38} {:>8.4f} W  [{}]  (no power of the real board was measured)\n", "total", "", p.total_w,
             evidence_name(p.evidence));
}

nlohmann::json static_power_json(const StaticPower& p) {
  nlohmann::json parts = nlohmann::json::array();
  for (const energy::Component& c : p.parts)
    parts.push_back({{"name", c.name}, {"w", c.mj}, {"evidence", evidence_name(c.evidence)}});
  return {{"total_w", p.total_w}, {"evidence", evidence_name(p.evidence)}, {"idd_set", p.idd_set},
          {"board_figure", nullptr}, {"components", parts}};
}

// What inspect found: the model, its packed image and the load time, the design's static power.
struct Inspection {
  const model::ModelConfig& config;
  const model::TernaryModel& model;
  model::ImageSize image;
  double load_s = 0;
  Fit fit;
  std::string kv_format;
  StaticPower power;
};

nlohmann::json fit_json(const Fit& f) {
  const auto& a = f.account;
  return {{"ddr_bytes", a.ddr_bytes},
          {"cma_base", a.cma_base},
          {"cma_bytes", a.cma_bytes},
          {"weight_row_bytes", a.weight_rows},
          {"lm_head_row_bytes", a.lm_head_rows},
          {"activation_slot_bytes", a.activation_slots},
          {"stream_padding_bytes", a.stream_padding},
          {"kv_cache_bytes", a.kv_cache},
          {"kv_position_bytes", a.kv_position_bytes},
          {"call_buffer_bytes", a.call_buffers},
          {"positions", a.positions},
          {"used_bytes", a.used()},
          {"fits", f.context > 0},
          {"largest_context", f.context},
          {"context_cap", f.cap},
          {"evidence", "simulated"}};
}

nlohmann::json inspect_json(const Inspection& in) {
  return {{"schema", "bitsim.inspect/1"},
          {"model", in.model.source},
          {"config", in.config.to_json()},
          {"parameters", in.model.parameter_count()},
          {"zero_fraction", in.model.zero_fraction()},
          {"lm_head_zero_fraction", model::zero_fraction(in.model.lm_head)},
          {"packed_image_bytes", in.image.total_bytes},
          {"packed_image_layer_bytes", in.image.layer_bytes},
          {"packed_image_lm_head_bytes", in.image.lm_head_bytes},
          {"board_packed_image_mib", kBoardImageMiB},
          {"memory", fit_json(in.fit)},
          {"load_s", in.load_s},
          {"static_power", static_power_json(in.power)}};
}

void print_inspection(const Inspection& in) {
  const auto& c = in.config;
  const auto& img = in.image;
  fmt::print("model       {}\n", in.model.source);
  fmt::print("shape       {}\n", c.shape_string());
  fmt::print("parameters  {} (latent, embedding tied to lm_head)\n", in.model.parameter_count());
  fmt::print("zero trits  {:.2f}% of the ternary layers, {:.2f}% of the ternarized lm_head\n",
             100.0 * in.model.zero_fraction(), 100.0 * model::zero_fraction(in.model.lm_head));
  fmt::print("packed image (CIRCUITS.md 2: 5 trits per byte, rows padded to 8-byte beats)\n");
  const uint64_t all_layers = img.layer_bytes * uint64_t(c.num_layers);
  fmt::print("  per layer {:>12} bytes  {:8.2f} MiB\n", img.layer_bytes, img.layer_bytes / 1048576.0);
  fmt::print("  {:2} layers {:>11} bytes  {:8.2f} MiB\n", c.num_layers, all_layers, all_layers / 1048576.0);
  fmt::print("  lm_head   {:>12} bytes  {:8.2f} MiB\n", img.lm_head_bytes, img.lm_head_bytes / 1048576.0);
  fmt::print("  total     {:>12} bytes  {:8.2f} MiB  [simulated]\n", img.total_bytes,
             double(img.total_bytes) / (1024.0 * 1024.0));
  fmt::print("  board     {:>12}        {:8.2f} MiB  [board]  (bitnet-large; docs/packed-image.md explains the difference)\n",
             "", kBoardImageMiB);
  print_fit(in.fit, in.kv_format);
  print_kv_capacity(c, in.fit.account);
  print_static_power(in.power);
  fmt::print("loaded and ternarized in {:.2f} s (this host)\n", in.load_s);
}

class Inspect final : public Command {
 public:
  explicit Inspect(CLI::App& app)
      : Command(app.add_subcommand("inspect",
                                   "Print a model's shape, parameters, zero fraction and packed image size")) {
    sub_->add_option("--model", model_, "synthetic:SHAPE[:SEED] or a checkpoint folder")->capture_default_str();
    sub_->add_flag("--json", json_, "Write one JSON document to stdout");
    add_board_options(sub_, board_, "Board config TOML whose memory the model is laid out in and whose static power is "
                                    "printed (default: configs/pynq-z2.toml)",
                      "Override a board config key (KEY=VALUE, repeatable)");
  }

  int run() override {
    const sim::SimConfig cfg = sim::make_sim_config(board_params(board_));  // a bad config fails before the load
    auto src = model::open_model_source(model_);
    const auto& c = src->config();
    // The model's head_dim against the one the attention unit is built for (attention.head_dim).
    host::check_model_head_dim(c, cfg.board.attention.head_dim, src->describe());
    const auto t0 = std::chrono::steady_clock::now();
    const model::TernaryModel m = model::load_ternary_model(*src, 2);
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const Inspection in{c,      m, model::packed_image_size(c.hidden_size, c.intermediate_size, c.num_layers, c.vocab_size, c.kv_dim()),
                        load_s, board_fit(c, cfg.memory), cfg.board.attention.kv_format, static_power(cfg, c)};
    if (json_)
      fmt::print("{}\n", inspect_json(in).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    else
      print_inspection(in);
    return 0;
  }

 private:
  std::string model_ = "synthetic:bitnet-large";
  bool json_ = false;
  BoardArgs board_;
};

}  // namespace

std::unique_ptr<Command> add_inspect_command(CLI::App& app) { return std::make_unique<Inspect>(app); }

}  // namespace bitsim::cli
