#pragma once
// TraceWriter: a run on the simulated board as a Chrome trace (trace event JSON, opens in
// Perfetto and chrome://tracing). The host program's simulated time comes from the token
// loop (a host::StepObserver: observing costs no simulated time); the PL's from the DMA
// transfer log after the run (Platform::transfers(), in PL clock edges).
//
// Layout (every "X" event carries args.token, the token's position in the context, which is
// its index in a run from position 0; args.layer where a decoder layer applies):
//   pid 1 "PS (Cortex-A9)"
//     tid 1 "host program"   "token N" (cat token, args.token_id)
//                              > "layer L" (cat layer)
//                                > CPU steps (cat cpu: "rmsnorm", "quantize", ...) and
//                                  driver calls (cat driver: "matmul qkv", "attention", ...)
//                            The embedding, the final norm, lm_head and argmax sit directly
//                            in the token span (no layer). The cpu and driver spans of a
//                            token tile its total simulated time exactly.
//   pid 2 "PL"
//     tid 1..4   "matmul lane 0", "matmul lane 1", "attention lane 0", "attention lane 1":
//                the engine lane's busy period per call (cat engine), from its DMA's MM2S
//                start edge to its S2MM completion edge.
//     tid 11..18 "DMA mm0 MM2S", "DMA mm0 S2MM", "DMA mm1 MM2S", ..., "DMA at1 S2MM": each
//                channel transfer, start edge to completion edge (cat dma).
//   Engine and DMA spans are named after the driver call they belong to ("matmul gate_up").
//   pid 3 "board power (simulated)": two counter tracks ("C" events, docs/energy.md), one
//                sample at the start of each step (a token, or a prompt chunk): "power W"
//                (args.total) and "power by part W" (args.dram, pl, ps, other), the step's
//                tokens' energy (add_energy) over the step's simulated time, held until the
//                next step starts. The parts add up to the total.
// ts and dur are in microseconds with picosecond precision (6 decimals); edges convert to
// time as edge x clock period (edge 0 at time 0).
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "energy/energy_model.h"
#include "host/platform.h"
#include "host/token_loop.h"

namespace bitsim::sim {

namespace trace {
constexpr int kPsPid = 1, kPlPid = 2, kPowerPid = 3;
constexpr int kHostTid = 1;
// Engine lane tracks: matmul lane l = 1 + l, attention lane l = 3 + l.
constexpr int engine_tid(bool attention, int lane) { return 1 + (attention ? 2 : 0) + lane; }
// DMA channel tracks: dma 0 mm0 .. 3 at1, channel 0 MM2S / 1 S2MM.
constexpr int dma_tid(int dma, int channel) { return 11 + 2 * dma + channel; }
// Picoseconds as microseconds, exactly (6 decimals): the trace's ts and dur, the layer
// table's begin and time (sim/layer_table.h).
std::string us(uint64_t ps);
// A driver call's group without its layer: "layer 3 gate_up" -> "gate_up"; "lm_head" -> "lm_head".
std::string short_group(const std::string& group);
}  // namespace trace

class TraceWriter : public host::StepObserver {
 public:
  enum class Cat : uint8_t { Token, Layer, Cpu, Driver, Engine, Dma };
  struct Span {
    uint64_t begin_ps = 0, end_ps = 0;
    int pid = 0, tid = 0;
    int token = 0, layer = -1;      // layer -1: none applies
    int token_id = -1;              // token spans
    Cat cat = Cat::Cpu;
    uint32_t name = 0, group = 0;   // indexes into the string table (group: driver, engine, dma)
    int part = 0;                   // driver, engine, dma: the call's index within its group
    uint64_t elements = 0, bytes = 0;        // cpu
    uint64_t start_edge = 0, end_edge = 0;   // engine, dma
  };

  // host::StepObserver
  void token(int position, int token_id, uint64_t begin_ps, uint64_t end_ps) override;
  void cpu_step(host::CpuStep step, uint64_t elements, uint64_t bytes, int position, int layer,
                uint64_t begin_ps, uint64_t end_ps) override;
  void call(const char* kind, const std::string& group, int part, int position, int layer,
            uint64_t begin_ps, uint64_t end_ps) override;

  // After the run: the engines' busy periods and the DMA channels' transfers, from the
  // platform's transfer log (edges of a clock of `period_ps`). Each transfer is attributed
  // to the driver call it happened in (its token and layer).
  void add_transfers(const std::vector<host::TransferRecord>& transfers, uint64_t period_ps);
  // The energy of the token at `position` (the run's record's): the power counters.
  void add_energy(int position, const energy::Breakdown& energy) { energy_[position] = energy; }
  // Extra run information under "otherData".
  void set_other(const std::string& key, nlohmann::json value) { other_[key] = std::move(value); }

  const std::vector<Span>& spans() const { return spans_; }
  const std::string& str(uint32_t id) const { return strings_[id]; }
  // The whole trace as one JSON document ({"traceEvents": [...], "displayTimeUnit": "ns",
  // "otherData": {...}}), one event per line.
  void write(std::ostream& out) const;
  // Writes the file; a bitsim::Error if it cannot be written.
  void write_file(const std::filesystem::path& path) const;

 private:
  struct Call {
    uint64_t begin_ps, end_ps;
    int token, layer, part;
    bool attention;
    uint32_t name, group;
  };
  uint32_t intern(const std::string& s);
  void close_layer();

  std::vector<Span> spans_;
  std::vector<Call> calls_;
  std::vector<std::string> strings_;
  std::map<std::string, uint32_t> string_ids_;
  nlohmann::json other_ = nlohmann::json::object();
  std::map<int, energy::Breakdown> energy_;  // position -> the token's energy
  // The layer span being extended (token, layer, begin, end).
  bool layer_open_ = false;
  Span layer_;
};

}  // namespace bitsim::sim
