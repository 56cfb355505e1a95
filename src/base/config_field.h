#pragma once
// The facts of a config field, declared once next to the field. Every module config struct
// has a static `visit(config, visitor)` that calls `visitor(field, FieldInfo{...})` for each
// of its fields in order; from it come
//   - the key table (sim/board_config.cpp): key, type, shipped default, range, unit,
//     evidence label and meaning, which `bitsim config --dump` and configs/pynq-z2.toml print;
//   - the typed config built from the keys (sim::make_sim_config);
//   - the modules' own validation (`check_fields`), with the same ranges, naming the key.
// A field without a config key (a base address, the DDR size: set per instance by the
// board) has keyed = false; it is still validated, under the same dotted name.
// A new config key: a field with its FieldInfo in the struct's visit(); nothing else.
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim {

// Where a value comes from:
//   board           - measured on the real board or fixed by its datasheets / IP documentation
//   calibrated      - fitted by `bitsim calibrate` to a board measurement (CIRCUITS.md 6)
//   simulated       - a modelling choice of bitsim with no board measurement behind it
//   datasheet       - a published part's datasheet figure (or a simulator's memspec copied from
//                     one), not of a part known to be on the board: the energy model's DDR3 IDD
//                     sets (docs/energy.md)
//   vendor-estimate - a vendor's power estimate (Vivado report_power, XPE / UG440, an
//                     application note's worked figure), not a measurement: the energy model's
//                     PS7 and PL coefficients (docs/energy.md)
// No power of the real board has been measured: no energy figure or coefficient is board or
// calibrated (../shared/spec/ENERGY.md).
enum class Evidence { kBoard, kCalibrated, kSimulated, kDatasheet, kVendorEstimate };

inline const char* evidence_name(Evidence e) {
  switch (e) {
    case Evidence::kBoard: return "board";
    case Evidence::kCalibrated: return "calibrated";
    case Evidence::kSimulated: return "simulated";
    case Evidence::kDatasheet: return "datasheet";
    case Evidence::kVendorEstimate: return "vendor-estimate";
  }
  return "?";
}

struct FieldInfo {
  FieldInfo(std::string key_, double min_, double max_, std::string unit_, Evidence evidence_, std::string doc_,
            double scale_ = 1, bool keyed_ = true, std::vector<std::string> choices_ = {})
      : key(std::move(key_)), min(min_), max(max_), unit(std::move(unit_)), evidence(evidence_),
        doc(std::move(doc_)), scale(scale_), keyed(keyed_), choices(std::move(choices_)) {}
  std::string key;                   // config key ("ddr.read_latency_ns")
  double min = 0, max = 0;           // inclusive range, in the key's unit (numbers only)
  std::string unit;                  // the key's unit ("ns", "beats"; empty for flags and text)
  Evidence evidence = Evidence::kSimulated;
  std::string doc;                   // meaning and source, one line
  double scale = 1;                  // field value = key value x scale (ddr.wall_gb_s: 1e9)
  bool keyed = true;                 // false: no config key (set per instance by the board)
  std::vector<std::string> choices;  // allowed values of a text field (empty: any)
};

// The value of a numeric field in its key's unit.
template <typename T>
double key_value(const T& field, const FieldInfo& f) {
  return double(field) / f.scale;
}

// Throws bitsim::Error naming `who` and the key when `field` is outside its range or choices.
template <typename T>
void check_field(const T& field, const FieldInfo& f, const std::string& who) {
  if constexpr (std::is_same_v<T, std::string>) {
    bool ok = f.choices.empty();
    for (const auto& c : f.choices) ok = ok || c == field;
    if (!ok) throw Error(fmt::format("{}: {} = '{}' is not one of: {}", who, f.key, field, fmt::join(f.choices, ", ")));
  } else if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    const double v = key_value(field, f);
    if (!(v >= f.min && v <= f.max))
      throw Error(fmt::format("{}: {} = {} is out of range [{}, {}]{}", who, f.key, v, f.min, f.max,
                              f.unit.empty() ? "" : " " + f.unit));
  }
}

// Checks every field of a config struct against its declared range.
template <typename Config>
void check_fields(const Config& c, const std::string& who) {
  Config::visit(c, [&](const auto& field, const FieldInfo& f) { check_field(field, f, who); });
}

// The fields every engine has (the matmul engine and the attention unit): its lanes' stream
// FIFOs and its status register block. `table` is the engine's key table ("matmul"),
// `what` its name in the documentation ("matmul engine").
template <typename Self, typename Visitor>
void visit_engine_ports(Self& c, const std::string& table, const std::string& what, Visitor&& v) {
  v(c.input_fifo_beats, FieldInfo{table + ".input_fifo_beats", 1, 4096, "beats", Evidence::kSimulated,
                                  what + " input FIFO per lane", 1, false});
  v(c.output_fifo_beats, FieldInfo{table + ".output_fifo_beats", 1, 4096, "beats", Evidence::kSimulated,
                                   what + " result FIFO per lane"});
  v(c.reg_base, FieldInfo{table + ".reg_base", 0, 4294967295.0, "bytes", Evidence::kSimulated,
                          "address of the status register block, lane-stride aligned", 1, false});
}

// check_fields, and the register block aligned to `stride` (one block per lane).
template <typename Config>
void check_engine_fields(const Config& c, const std::string& table, uint64_t stride, const std::string& who) {
  check_fields(c, who);
  if (c.reg_base % stride != 0)
    throw Error(fmt::format("{}: {}.reg_base = {:#x} is not {:#x} aligned", who, table, c.reg_base, stride));
}

}  // namespace bitsim
