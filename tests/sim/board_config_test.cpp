// The board config's facts live in one place: the key table, the shipped defaults and the
// modules' validation all come from the config structs' visit() (base/config_field.h).
#include "sim/board_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>
#include <type_traits>

#include "host/cpu_model.h"
#include "support/error_of.h"
#include "hw/board.h"
#include "hw/parts/sim_context.h"
#include "base/error.h"
#include "sim/sampler.h"

namespace bitsim::sim {
namespace {

// key -> value text of every keyed field of a config struct.
template <typename Config>
std::map<std::string, std::string> values_of(const Config& c) {
  std::map<std::string, std::string> out;
  Config::visit(c, [&](const auto& field, const bitsim::FieldInfo& f) {
    if (f.keyed) out[f.key] = fmt::format("{}", field);
  });
  return out;
}

// Sets the field whose key is `key` to `v` (in the key's unit); false when no field has it.
template <typename Config>
bool set_field(Config& c, const std::string& key, double v) {
  bool found = false;
  Config::visit(c, [&](auto& field, const bitsim::FieldInfo& f) {
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      if (f.key == key) {
        field = T(v * f.scale);
        found = true;
      }
    }
  });
  return found;
}

std::string board_error(const hw::BoardConfig& c) {
  hw::FreshSimContext ctx;
  try {
    hw::Board board("board", c);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The numeric keys of the PL modules (hw::BoardConfig), from the key table.
std::vector<ParamSpec> board_keys() {
  std::vector<ParamSpec> out;
  hw::BoardConfig probe;
  const ParamSet all = board_params();
  for (const auto& s : all.specs())
    if ((s.type == ParamType::Real || s.type == ParamType::Integer) && set_field(probe, s.key, 0)) out.push_back(s);
  return out;
}

// A value just outside a key's range: one below its minimum or above its maximum.
double outside(const ParamSpec& s, bool below) {
  const double step = s.type == ParamType::Integer ? 1.0 : std::max(1e-3, 1e-6 * (s.max - s.min));
  return below ? s.min - step : s.max + step;
}

// The error of setting `sets` on the board's keys and building the config ("" when it accepts them).
std::string config_error(const std::vector<std::string>& sets) {
  ParamSet p = board_params();
  try {
    for (const auto& s : sets) p.set(s);  // a value outside its key's range is refused here
    (void)make_sim_config(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(BoardConfig, DefaultStructsAreTheShippedBoard) {
  // The key table's defaults are the structs' fields...
  const SimConfig defaults = make_sim_config(board_params());
  EXPECT_EQ(values_of(defaults.board), values_of(hw::BoardConfig{}));
  EXPECT_EQ(values_of(defaults.driver), values_of(host::DriverConfig{}));
  EXPECT_EQ(values_of(defaults.cpu), values_of(host::CpuModelConfig{}));
  // ... and the config `bitsim run` loads (configs/pynq-z2.toml) is the same board.
  ParamSet shipped = board_params();
  shipped.load_toml(default_config_path());
  EXPECT_TRUE(shipped.changed().empty()) << shipped.changed().front();
  const SimConfig run = make_sim_config(shipped);
  EXPECT_EQ(values_of(run.board), values_of(hw::BoardConfig{}));
  EXPECT_EQ(run.board.ddr.read_latency_ns, 367.86);
  EXPECT_EQ(run.driver.call_overhead_ns, 64443.0);
  EXPECT_EQ(run.cpu.step_overhead_ns, 5457.6254);
}

TEST(BoardConfig, PythonProfileSelectsItsKeys) {
  ParamSet p = board_params();
  p.set("driver.profile=python");
  p.set("driver.python.reg_access_ns=12000");
  const SimConfig c = make_sim_config(p);
  EXPECT_EQ(c.driver.profile, "python");
  EXPECT_EQ(c.driver.reg_access_ns, 12000.0);
  EXPECT_EQ(c.driver.call_overhead_ns, host::DriverConfig::python().call_overhead_ns);
  EXPECT_EQ(p.spec("driver.python.reg_access_ns").evidence, "board");
}

TEST(BoardConfig, EveryKeyRangeIsTheModulesRange) {
  const auto keys = board_keys();
  ASSERT_GE(keys.size(), 20u);
  for (const auto& s : keys) {
    for (const bool below : {true, false}) {
      const double bad = outside(s, below);
      // The key table refuses it, naming the key ...
      ParamSet p = board_params();
      try {
        p.set_value(s.key, s.type == ParamType::Integer ? ParamValue(int64_t(bad)) : ParamValue(bad), "test");
        ADD_FAILURE() << s.key << " = " << bad << " accepted by the key table";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(s.key), std::string::npos) << e.what();
      }
      // ... and so does the module given it directly.
      hw::BoardConfig c;
      ASSERT_TRUE(set_field(c, s.key, bad));
      const std::string e = board_error(c);
      EXPECT_NE(e.find(s.key), std::string::npos) << s.key << " = " << bad << ": '" << e << "'";
    }
  }
}

// The keys a DDR3 key's range end needs beside it to keep the relations of docs/ddr3.md
// (the device at least the memory map, tRC >= tRAS + tRP, tRFC < tREFI, tRFC + the row cycle
// <= tREFI). Four ends no companion can make valid are refused by a relation, naming the key:
// ddr3.rows = 1 (64 banks x 65,536 columns x 16 bytes is 64 MiB), ddr3.trc = 1 and
// ddr3.tras = 256 (tRAS + tRP >= 2, tRC <= 256), ddr3.trefi = 1 (tRFC >= 1, a row cycle >= 8).
bool ddr3_end_unreachable(const std::string& key, double v) {
  return (key == "ddr3.rows" && v == 1) || (key == "ddr3.trc" && v == 1) || (key == "ddr3.tras" && v == 256) ||
         (key == "ddr3.trefi" && v == 1);
}
std::vector<std::string> ddr3_companions(const std::string& key, double v) {
  if (key == "ddr3.banks" && v < 8) return {"ddr3.rows=262144"};
  if (key == "ddr3.rows" && v < 32768) return {"ddr3.banks=64", "ddr3.columns=65536", "ddr3.bus_bytes=16"};
  if (key == "ddr3.columns" && v < 1024) return {"ddr3.banks=64", "ddr3.rows=1048576"};
  if (key == "ddr3.bus_bytes" && v < 2) return {"ddr3.rows=65536"};
  if (key == "ddr3.trc" && v < 26) return {"ddr3.tras=1", "ddr3.trp=1"};
  if ((key == "ddr3.tras" || key == "ddr3.trp") && v > 19) return {"ddr3.trc=256", "ddr3.tras=1", "ddr3.trp=1"};
  if (key == "ddr3.trfc" && v > 4063) return {"ddr3.trefi=8192"};
  if (key == "ddr3.trefi" && v < 4064) return {"ddr3.trfc=1", "ddr3.tras=18"};
  // The DDR's ends: a 1 MiB DDR holds a 1 MiB region from address 0; 1 GiB needs a device
  // that large (two x16 devices on a 32-bit bus, as the Zybo Z7-20's).
  if (key == "ddr.size_mib" && v < 512) return {"cma.base=0", "cma.mib=1"};
  if (key == "ddr.size_mib" && v > 512) return {"ddr3.bus_bytes=4"};
  return {};
}

TEST(BoardConfig, EveryKeyRangeEndIsAcceptedByTheModules) {
  for (const auto& s : board_keys()) {
    for (const double v : {s.min, s.max}) {
      ParamSet p = board_params();
      // The DMA's data FIFOs hold at least one burst: their ends are taken with a burst that fits.
      if ((s.key == "dma.mm2s_fifo_beats" || s.key == "dma.s2mm_fifo_beats") && v < 16) p.set("dma.max_burst_beats=1");
      if (s.key == "dma.max_burst_beats" && v > 64) {
        p.set("dma.mm2s_fifo_beats=4096");
        p.set("dma.s2mm_fifo_beats=4096");
      }
      // Outlier lanes exist in the INT4 KV format, read by the online-softmax unit only.
      if (s.key == "kv.outlier_channels" && v > 0) {
        p.set("kv.format=int4");
        p.set("attention.variant=online-softmax");
      }
      // TIP's sink and recent window are whole regions (docs/tip.md).
      if (s.key == "kv.tip.region" && v > 64) {
        p.set("kv.tip.sink=256");
        p.set("kv.tip.recent=256");
      }
      if (s.key == "kv.tip.recent" && v < 64) p.set("kv.tip.region=16");
      for (const std::string& c : ddr3_companions(s.key, v)) p.set(c);
      p.set_value(s.key, s.type == ParamType::Integer ? ParamValue(int64_t(v)) : ParamValue(v), "test");
      if (ddr3_end_unreachable(s.key, v)) {
        EXPECT_NE(test::error_of([&] { (void)make_sim_config(p); }).find(s.key), std::string::npos) << s.key << " = " << v;
        continue;
      }
      EXPECT_EQ(board_error(make_sim_config(p).board), "") << s.key << " = " << v;
    }
  }
}

TEST(BoardConfig, HostConfigsValidateWithTheKeyTableRanges) {
  const ParamSet all = board_params();
  for (const auto& s : all.specs()) {
    host::DriverConfig d = s.key.rfind("driver.python.", 0) == 0 ? host::DriverConfig::python() : host::DriverConfig{};
    host::CpuModelConfig cpu;
    if (s.type != ParamType::Real || !(set_field(d, s.key, s.max) || set_field(cpu, s.key, s.max))) continue;
    EXPECT_NO_THROW(d.validate("driver")) << s.key;
    EXPECT_NO_THROW({ host::CpuModel m(cpu); }) << s.key;
    set_field(d, s.key, outside(s, true));
    set_field(cpu, s.key, outside(s, true));
    try {
      d.validate("driver");
      host::CpuModel model(cpu);
      ADD_FAILURE() << s.key << " below its range accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(s.key), std::string::npos) << e.what();
    }
  }
}

TEST(BoardConfig, CalibratedMeansFittedByCalibrate) {
  // `bitsim calibrate` fits the DDR read latency, the C driver's cost per call and per byte
  // of cache maintenance, and one factor on every cpu.* coefficient (study/calibrate.h).
  const ParamSet all = board_params();
  for (const auto& s : all.specs()) {
    // ddr3.ctrl_latency_ns is what calibrate fits under ddr.model = ddr3 (docs/ddr3.md).
    const bool fitted = s.key == "ddr.read_latency_ns" || s.key == "ddr3.ctrl_latency_ns" || s.key == "driver.c.call_overhead_ns" ||
                        s.key == "driver.c.flush_ns_per_byte" || s.key == "driver.c.invalidate_ns_per_byte" ||
                        s.key.rfind("cpu.", 0) == 0;
    EXPECT_EQ(s.evidence == "calibrated", fitted) << s.key << " is labelled " << s.evidence;
  }
}

// ddr.size_mib is a key: the DDR the simulated board has, the memory map's DDR, and the
// bound of the contiguous region (cma.mib at most the DDR less what lies below cma.base).
TEST(BoardConfig, DdrSizeIsAKeyThatBoundsTheContiguousRegion) {
  ParamSet p = board_params();
  EXPECT_EQ(p.integer("ddr.size_mib"), 512);
  EXPECT_EQ(p.spec("ddr.size_mib").evidence, "board");
  EXPECT_EQ(p.spec("ddr.size_mib").unit, "MiB");
  const SimConfig shipped = make_sim_config(p);
  EXPECT_EQ(shipped.board.ddr.size_bytes, 512ull << 20);
  EXPECT_EQ(shipped.memory.ddr_bytes, 512ull << 20);
  p.set("cma.mib=385");  // 128 MiB below cma.base + 385 > 512
  const std::string w = test::error_of([&] { (void)make_sim_config(p); });
  for (const char* key : {"cma.mib = 385", "ddr.size_mib = 512", "cma.base", "384.0 MiB"})
    EXPECT_NE(w.find(key), std::string::npos) << w;
  p.set("cma.mib=384");
  EXPECT_NO_THROW((void)make_sim_config(p));
  // The Zybo Z7-20's 1 GiB (configs/zybo-z7-20.toml).
  ParamSet z = board_params();
  z.load_toml(std::string(BITSIM_SOURCE_DIR) + "/configs/zybo-z7-20.toml");
  const SimConfig zybo = make_sim_config(z);
  EXPECT_EQ(zybo.board.ddr.size_bytes, 1ull << 30);
  EXPECT_EQ(zybo.memory.ddr_bytes, 1ull << 30);
  EXPECT_EQ(zybo.memory.cma_bytes, 640ull << 20);
  EXPECT_EQ(zybo.board.ddr.ddr3.device_bytes(), 1ull << 30);
}

TEST(BoardConfig, CrossFieldRuleNamesBothKeys) {
  ParamSet p = board_params();
  p.set("dma.mm2s_fifo_beats=8");  // in range, but smaller than a 16-beat burst
  try {
    (void)make_sim_config(p);
    ADD_FAILURE() << "a FIFO smaller than a burst accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dma.mm2s_fifo_beats"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dma.max_burst_beats"), std::string::npos) << e.what();
  }
}

TEST(BoardConfig, Int4KvNeedsTheOnlineUnitAndNamesBothKeys) {
  const std::string two_phase = config_error({"kv.format=int4"});
  EXPECT_NE(two_phase.find("kv.format"), std::string::npos) << two_phase;
  EXPECT_NE(two_phase.find("attention.variant"), std::string::npos) << two_phase;
  const std::string lanes = config_error({"kv.outlier_channels=3"});
  EXPECT_NE(lanes.find("kv.outlier_channels"), std::string::npos) << lanes;
  EXPECT_NE(lanes.find("kv.format"), std::string::npos) << lanes;
  EXPECT_EQ(config_error({"kv.format=int4", "attention.variant=online-softmax", "kv.outlier_channels=8"}), "");
  const SimConfig board = make_sim_config(board_params());  // the default: the board's int8 rows
  EXPECT_EQ(board.board.attention.kv(), model::KvFormat::Int8);
  EXPECT_EQ(board.board.attention.kv_outlier_channels, 0);
}

TEST(BoardConfig, PrefillKeysAreTheBoardByDefaultAndBadInputNamesTheKey) {
  // docs/prefill.md: P = 1 and no extra logits are the board; P outside 1..64 and P > 1 with
  // the per-call stream (no header to carry the vectors) are errors naming the key.
  const SimConfig board = make_sim_config(board_params());
  EXPECT_EQ(board.board.prefill.tokens_per_pass, 1);
  EXPECT_FALSE(board.board.prefill.all_logits);
  for (const char* bad : {"prefill.tokens_per_pass=0", "prefill.tokens_per_pass=65"}) {
    const std::string e = config_error({bad});
    EXPECT_NE(e.find("prefill.tokens_per_pass"), std::string::npos) << bad << ": " << e;
  }
  const std::string per_call = config_error({"prefill.tokens_per_pass=8", "matmul.format=per-call"});
  EXPECT_NE(per_call.find("prefill.tokens_per_pass"), std::string::npos) << per_call;
  EXPECT_NE(per_call.find("matmul.format"), std::string::npos) << per_call;
  EXPECT_EQ(config_error({"prefill.tokens_per_pass=1", "matmul.format=per-call"}), "");
  ParamSet p = board_params();
  p.set("prefill.tokens_per_pass=16");
  p.set("prefill.all_logits=true");
  const SimConfig c = make_sim_config(p);
  EXPECT_EQ(c.board.prefill.tokens_per_pass, 16);
  EXPECT_TRUE(c.board.prefill.all_logits);
  const std::string dump = config_file_text(board_params());
  EXPECT_NE(dump.find("tokens_per_pass = 1"), std::string::npos);
  EXPECT_NE(dump.find("all_logits = false"), std::string::npos);
}

TEST(BoardConfig, Ddr3KeysAreInTheTableWithTheirEvidence) {
  // docs/ddr3.md's tables: datasheet and UG585 facts board, the model's choices simulated,
  // the controller latency calibrated.
  const ParamSet p = board_params();
  std::map<std::string, std::string> evidence;
  for (const auto& s : p.specs())
    if (s.key.rfind("ddr3.", 0) == 0) evidence[s.key] = s.evidence;
  EXPECT_EQ(evidence.size(), 36u);  // every field of Ddr3Config, clock_mhz and fast_reuse among them
  // The DDRC's register settings (address map, open page, the LPR/WR store fields) are the
  // PS7 configuration's ps7_init values (docs/ddr3.md, "Sources of the controller's settings").
  for (const char* k : {"ddr3.clock_mhz", "ddr3.cl", "ddr3.trfc", "ddr3.trefi", "ddr3.banks", "ddr3.ports",
                        "ddr3.address_map", "ddr3.page_policy", "ddr3.lpr_max_starve_x32", "ddr3.w_xact_run_length",
                        "ddr3.w_min_non_critical_x32"})
    EXPECT_EQ(evidence[k], "board") << k;
  for (const char* k : {"ddr3.queue_depth", "ddr3.cam_entries", "ddr3.scheduler", "ddr3.rw_policy", "ddr3.timer_ncks",
                        "ddr3.fast_reuse"})
    EXPECT_EQ(evidence[k], "simulated") << k;
  EXPECT_EQ(evidence["ddr3.ctrl_latency_ns"], "calibrated");  // bitsim calibrate fits it under ddr3
  EXPECT_EQ(p.real("ddr3.clock_mhz"), 525.0);
  ParamSet q = board_params();
  q.set("ddr3.cl=9");
  q.set("ddr3.clock_mhz=666.5");
  const SimConfig c = make_sim_config(q);
  EXPECT_EQ(c.board.ddr.ddr3.cl, 9u);
  EXPECT_EQ(c.board.ddr.ddr3.clock_mhz, 666.5);
  EXPECT_EQ(c.board.ddr.model, "wall");  // the ddr3 keys are read, the wall still times the DDR
  // Out of range, not a choice, not a power of two: each error names the key.
  EXPECT_NE(config_error({"ddr3.cl=0"}).find("ddr3.cl"), std::string::npos);
  EXPECT_NE(config_error({"ddr3.clock_mhz=5000"}).find("ddr3.clock_mhz"), std::string::npos);
  EXPECT_NE(config_error({"ddr3.page_policy=sometimes"}).find("ddr3.page_policy"), std::string::npos);
  EXPECT_NE(config_error({"ddr3.fast_reuse=roughly"}).find("ddr3.fast_reuse"), std::string::npos);
  const std::string banks = config_error({"ddr3.banks=6"});
  EXPECT_NE(banks.find("ddr3.banks"), std::string::npos) << banks;
  EXPECT_NE(banks.find("power of two"), std::string::npos) << banks;
}

TEST(BoardConfig, DumpShowsRangeUnitAndEvidence) {
  const std::string text = config_file_text(board_params());
  EXPECT_NE(text.find("[0..1024 cycles; simulated]\ndrain = 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[0..10000 ns; calibrated]\nread_latency_ns = 367.86\n"), std::string::npos);
  EXPECT_NE(text.find("[c | python; board]\nprofile = \"c\"\n"), std::string::npos);
}

TEST(BoardConfig, SamplerRangesNameTheField) {
  for (const auto& [t, k] : {std::pair{-0.5f, 0}, std::pair{100.5f, 0}, std::pair{1.0f, -1}}) {
    SamplerConfig c;
    c.temperature = t;
    c.top_k = k;
    try {
      Sampler s(c);
      ADD_FAILURE() << t << " " << k << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(k < 0 ? "sampler.top_k" : "sampler.temperature"), std::string::npos)
          << e.what();
    }
  }
  SamplerConfig ends;
  ends.temperature = 100;
  EXPECT_NO_THROW(Sampler{ends});
}

}  // namespace
}  // namespace bitsim::sim
