#pragma once
// The registry of the board's circuits (engines). An engine is its own files (its clocked
// face, an EngineLanes; its fast face, a FastEngine; its stream format in model/) plus one
// EngineKind: the entry that builds both faces and names its register window, the two DMAs
// of its lanes, its stream format and the keys that shape its output. Everything that is
// per engine on the board is sized and decoded from the registry: the DMAs (two per
// engine, DMA d = 2 e + lane feeds lane `lane` of engine e), the PS bus decode (Board,
// FastBoard), the register names of MMIO programs, the watchdog's hint, the fast board's
// per-channel state and the timing oracle's records.
//
// The registry is a value: BoardConfig::engines holds the one a board is built from
// (EngineRegistry::board(), the shipped board's two engines, unless a caller adds one; the
// toy engine of tests/hw/registry_test.cpp is added that way). docs/architecture.md,
// "Where things go", walks through a new engine file by file.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <systemc>

namespace bitsim::hw {

struct BoardConfig;
class Clock;
class EngineLanes;
class FastEngine;

struct EngineKind {
  std::string name;                       // "matmul": the module's name and its messages' word
  uint64_t regs = 0;                      // register window (two lanes of engine_reg::kLaneStride)
  std::array<std::string, 2> dma_names;   // the DMA of lane 0 and of lane 1 ("mm0", "mm1")
  std::array<uint64_t, 2> dma_bases{};    // their AXI-Lite register windows
  std::string stream;                     // the stream format its MM2S reads, one line
  std::string unit;                       // what its error-unit register counts ("group", "head")
  // Whether its DMAs are built with the SG engine.
  std::function<bool(const BoardConfig&)> dma_sg;
  // The clocked face, with its register window at `regs`.
  std::function<std::unique_ptr<EngineLanes>(sc_core::sc_module_name, Clock&, const BoardConfig&, uint64_t regs)>
      clocked;
  // The fast face.
  std::function<std::unique_ptr<FastEngine>(const BoardConfig&)> fast;
  // The name of the error code its lanes latch (ERROR_CODE), for the driver's messages.
  std::function<std::string(uint32_t code)> error_name;
  // "key = value" of the keys that shape its output side, for the progress watchdog's hint.
  std::function<std::vector<std::string>(const BoardConfig&)> output_keys;
};

// Sets both faces of `k` from the engine's classes: the clocked face `Clocked(name, clock,
// cfg)` and the fast face `Fast(cfg)` for the module config `cfg = of(board)`, the clocked
// one with its register window at `regs`. (Instantiated in the engine's own .cpp, where
// BoardConfig is complete.)
template <class Clocked, class Fast, class Of>
void set_faces(EngineKind& k, Of of) {
  k.clocked = [of](sc_core::sc_module_name name, Clock& clock, const BoardConfig& board, uint64_t regs) {
    auto cfg = of(board);
    cfg.reg_base = regs;
    return std::unique_ptr<EngineLanes>(std::make_unique<Clocked>(name, clock, cfg));
  };
  k.fast = [of](const BoardConfig& board) { return std::unique_ptr<FastEngine>(std::make_unique<Fast>(of(board))); };
}

class EngineRegistry {
 public:
  // The shipped board's circuits: matmul (mm0, mm1) and attention (at0, at1), in that order.
  static const EngineRegistry& board();
  // The shared handle BoardConfig{} holds.
  static std::shared_ptr<const EngineRegistry> board_handle();

  // Adds an engine and returns its index. Throws bitsim::Error naming the engine when its
  // name is taken or its register windows overlap another's, or a face is missing.
  int add(EngineKind kind);

  int count() const { return int(kinds_.size()); }
  const EngineKind& operator[](int e) const { return kinds_.at(size_t(e)); }
  // The engine of that name, or -1.
  int find(const std::string& name) const;

  int dma_count() const { return 2 * count(); }
  static int engine_of_dma(int d) { return d / 2; }
  static int lane_of_dma(int d) { return d % 2; }
  static int dma_of(int engine, int lane) { return 2 * engine + lane; }
  const std::string& dma_name(int d) const { return kinds_.at(size_t(d / 2)).dma_names[size_t(d % 2)]; }
  uint64_t dma_base(int d) const { return kinds_.at(size_t(d / 2)).dma_bases[size_t(d % 2)]; }
  // The DMA whose register window holds `addr`, or -1; the engine whose window does, or -1.
  int dma_at(uint64_t addr) const;
  int engine_at(uint64_t addr) const;
  // Whether DMA d is built with the SG engine under `config`.
  bool dma_sg(int d, const BoardConfig& config) const { return kinds_.at(size_t(d / 2)).dma_sg(config); }

  static constexpr uint64_t kWindow = 0x1'0000;  // 64 KB per peripheral

 private:
  std::vector<EngineKind> kinds_;
};

}  // namespace bitsim::hw
