#pragma once
// TokenLoop: bitnet on the simulated board, one token at a time, as the PS runs it
// (CIRCUITS.md 5). The weights image, the KV cache, the stream headers and x, the
// attention headers and q, the descriptors and the results all live in the simulated
// DDR; the engines read them from there through the DMAs, never through a side channel.
// The CPU steps use the numerics library (the same float sequences as the golden
// reference) and advance simulated time by the CPU cost model.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "model/derived_store.h"
#include "model/kv_scales.h"
#include "numerics/numerics.h"
#include "host/cpu_model.h"
#include "hw/memory/dram_ledger.h"
#include "host/dma_driver.h"
#include "host/memory_map.h"
#include "host/platform.h"
#include "host/tip_cache.h"
#include "host/walker.h"
#include "model/attention_stream.h"
#include "model/model_loader.h"

namespace bitsim::host {

// Simulated time of one token, split as BOARD.md's end-to-end table: a circuit's column
// spans from programming its DMAs to the return of the wait (driver cost inside it).
struct TokenTiming {
  uint64_t matmul_ps = 0, attention_ps = 0, cpu_ps = 0;
  uint64_t walker_ps = 0;  // host.walker = pl: the walker's operator steps (PL time)
  uint64_t total_ps() const { return matmul_ps + attention_ps + cpu_ps + walker_ps; }
  uint64_t dma_transfers = 0;   // DMA channel starts
  uint64_t bytes_read = 0;      // bytes the PL read from DDR
  uint64_t attention_bytes = 0; // ... of which during the attention calls
  uint64_t matmul_calls = 0, attention_calls = 0;
  // The driver's fixed cost of its calls (docs/variants-host.md): per call its overhead, its
  // register accesses outside the polling loop (one poll per wait counted) and the fixed
  // part of each cache maintenance; inside matmul_ps and attention_ps.
  uint64_t fixed_call_ps = 0;
  uint64_t walker_starts = 0;  // host.walker = pl: the host's starts of the walker
  // The CPU's DDR traffic beside the PL's (the energy model's DRAM bytes): the bytes it
  // cleaned from its cache to DDR (headers, x, q, K/V rows, descriptors) and the results it
  // invalidated and read back (which the PL wrote).
  uint64_t flushed_bytes = 0, invalidated_bytes = 0;
  // ddr.model = ddr3: the DRAM commands the memory issued for the PL and the device cycles
  // with a bank open (hw/memory/dram_ledger.h), from the step's start to its end.
  hw::DramActivity dram;
  // From the step's (or chunk's) start to its first driver call's start: the CPU work before
  // the first DMA (the time to first token counts from the first DMA start).
  uint64_t lead_ps = 0;
  int multiplier_lowered = 0;   // heads whose shift S was lowered for m to fit 18 bits
};

// Sees where the host program's simulated time goes (e.g. sim/trace.h's TraceWriter). The
// calls cost no simulated time. `position` is the token's position in the context (the
// step's index in a run from position 0); `layer` is -1 outside the decoder layers
// (embedding, final norm, lm_head, argmax).
struct StepObserver {
  virtual ~StepObserver() = default;
  // One token step, from its first CPU step to the end of its last.
  virtual void token(int /*position*/, int /*token_id*/, uint64_t /*begin_ps*/, uint64_t /*end_ps*/) {}
  // One CPU step (TokenLoop::cpu): `elements` and `bytes` as the cost model charged them.
  virtual void cpu_step(CpuStep /*step*/, uint64_t /*elements*/, uint64_t /*bytes*/, int /*position*/,
                        int /*layer*/, uint64_t /*begin_ps*/, uint64_t /*end_ps*/) {}
  // One driver call (DmaDriver::matmul or ::attention), programming to the wait's return.
  // kind "matmul" or "attention"; group the matmul group's name ("layer 3 qkv", "lm_head")
  // or "layer 3 attention"; part the call's index within its group (the length limit
  // splits a group).
  virtual void call(const char* /*kind*/, const std::string& /*group*/, int /*part*/, int /*position*/,
                    int /*layer*/, uint64_t /*begin_ps*/, uint64_t /*end_ps*/) {}
};

struct TokenLoopOptions {
  bool legacy_attention = false;
  // attention.variant: the online-softmax unit takes K and V interleaved (the memory map's
  // kv_interleaved must say the same), 2 descriptors per head, and returns normalized o.
  model::AttentionVariant attention_variant = model::AttentionVariant::TwoPhase;
  WalkerConfig walker;           // host.walker = pl: the PL layer walker (host/walker.h)
  uint64_t pl_period_ps = 8000;  // the PL clock, for the walker's cycles
  // kv.format / kv.outlier_channels (docs/variants-attention.md 8): the INT4 codec's rows,
  // written by the CPU with the V group scales, K's channel scales folded into q.
  model::KvFormat kv_format = model::KvFormat::Int8;
  int kv_outlier_channels = 0;
  // kv.format = tip (docs/tip.md): the kv.tip.* settings (the memory map's must be the same).
  model::TipSettings tip{};
  // attention.gqa = shared-stream (docs/variants-attention.md 9): one pass per K/V head for the
  // G query heads of its group (the memory map's attention_shared must say the same).
  bool attention_shared = false;
};

class TokenLoop {
 public:
  TokenLoop(Platform& platform, const MemoryMap& map, const model::TernaryModel& model,
            const model::KvScales& scales, const CpuModelConfig& cpu, const DriverConfig& driver,
            TokenLoopOptions options = {});

  // Writes the packed weights image into DDR (zero simulated time: it is loaded before the
  // run, as on the board). `threads` host threads pack the rows; the bytes are the same.
  // `derived` (may be null): where the packed image of this memory map's weights is kept
  // between runs (model/derived_store.h): read back instead of packed when it is there.
  void load_weights(int threads = 1, model::DerivedStore* derived = nullptr);
  // Programs the DMAs (in the PS thread).
  void init();
  // One token at position() (in the PS thread). Returns the logits; `probe` sees the same
  // intermediate tensors as the golden reference's.
  std::vector<float> step(int token, TokenTiming* timing, const model::Probe& probe = {});
  // Prefill (docs/prefill.md 5-6): V = tokens.size() prompt tokens (1..prefill.tokens_per_pass)
  // at positions position() .. position()+V-1 as one chunk: every matmul group one call with
  // the V vectors, the CPU steps over the V vectors, the chunk's K/V appended before one
  // attention call per position. Returns V logits vectors: the last position's, and the
  // others' only with `all_logits` (empty otherwise). `timing` is the chunk's. `probe` (the
  // golden check's tensors) sees every position's, each with its position; the order of a
  // position's tensors is the golden reference's. A chunk of one token is step().
  std::vector<std::vector<float>> chunk(const std::vector<int>& tokens, TokenTiming* timing, bool all_logits,
                                        const model::Probe& probe = {});
  int position() const { return pos_; }
  // Timing-only runs at a context T: the KV cache is taken as already holding T rows.
  void set_position(int pos);
  const DmaDriver& driver() const { return driver_; }
  // kv.format = tip: the region tables and slots (Error with another format).
  const TipCache& tip_cache() const;
  // Optional; not owned. Observing spends no simulated time.
  void set_observer(StepObserver* observer) { observer_ = observer; }

 private:
  // y = BitLinear over a matrix group for V = xq.size() vectors: CPU writes header + x, the
  // board computes, acc[p] gets vector p's sums (per-call: V = 1).
  void matmul(const MatmulGroup& g, const std::vector<const int8_t*>& xq, const std::vector<int32_t*>& acc);
  // A CPU (or walker) step over `vectors` vectors of `elements` elements and `bytes` bytes each.
  void cpu(CpuStep step, uint64_t elements, uint64_t bytes = 0, uint64_t vectors = 1);
  bool online() const { return options_.attention_variant == model::AttentionVariant::OnlineSoftmax; }
  bool int4() const { return options_.kv_format == model::KvFormat::Int4; }
  bool tip() const { return options_.kv_format == model::KvFormat::Tip; }
  // Query heads per attention pass: the model's G with the shared-stream unit, else 1.
  int members() const { return options_.attention_shared ? model_.config.group() : 1; }
  void write_kv_banks();
  // host.walker = pl: the host starts the walker (a token or a layer), at the CPU's cost of
  // one driver call and two register accesses (docs/variants-host.md).
  void start_walker();
  // host.walker = pl: the CPU's clean (or invalidate) of a buffer it hands to (or takes from)
  // the walker, at the driver's cost per buffer and per byte.
  void count_driver(const DriverStats& before);
  void host_cache_maintenance(uint64_t bytes, bool clean);

  // The pieces of chunk(), in the order CIRCUITS.md 5 lists them; each charges its CPU cost
  // and reports to the observer and the probe as it goes. StepBuffers (token_loop.cpp)
  // holds one position's vectors; a chunk has one per position.
  struct StepBuffers;
  using Chunk = std::vector<StepBuffers>;
  using Vec = std::vector<float> StepBuffers::*;
  using LaneHeads = std::vector<HeadWork>[kLanes];
  void check_step(int token) const;
  void decoder_layer(int layer, Chunk& c, const model::Probe& probe);
  // RMSNorm of each position's `x` (n elements) into a, quantized into xq; the scales.
  std::vector<float> norm_and_quantize(Vec x, const float* weight, int n, Chunk& c);
  struct ProjectionPart {
    const char* acc_name;  // the probe's name of its accumulators
    float w_scale;
    Vec out;               // its dequantized rows
    int rows;              // its matrix's rows (k and v: num_kv_heads x 96)
  };
  void grouped_projection(int layer, const MatmulGroup& g, std::initializer_list<ProjectionPart> parts,
                          const std::vector<float>& x_scale, Chunk& c, const model::Probe& probe);
  void rope_q_and_k(int layer, Chunk& c, const model::Probe& probe);
  // Every position's K and V rows of every K/V head appended to the cache; the CPU's cost of
  // the heads' quantization (q's too) over the chunk. Returns the bytes written.
  uint64_t append_chunk_kv(int layer, Chunk& c);
  uint64_t append_kv(int layer, int head, int pos, StepBuffers& b);
  // TIP (docs/tip.md): before position pos's attention call, per head the region leaving the
  // recent window placed, demoted regions re-encoded into their new slots and the new KVQ8 row
  // written. Returns the bytes the CPU wrote.
  uint64_t tip_place_and_write(int layer, int pos, StepBuffers& b);
  // Position pos's header + q of every head into the head buffers; `work` gets each lane's
  // heads. Returns the bytes written.
  uint64_t write_q_headers(int layer, int pos, StepBuffers& b, LaneHeads& work);
  uint64_t write_q_header(int layer, int head, int pos, StepBuffers& b, LaneHeads& work);
  void q_per_channel(const float* q, const uint16_t* sk, int8_t* qq, model::AttentionHeadHeader* hdr);
  void attention_call(int layer, int pos, const LaneHeads& work, uint64_t written);
  void finish_attention(int layer, int pos, const LaneHeads& work, StepBuffers& b, const model::Probe& probe);
  void projection_residual(int layer, const MatmulGroup& g, float w_scale, const char* acc_name,
                           const std::vector<float>& x_scale, Chunk& c, const model::Probe& probe);
  std::vector<float> gate_ffn_norm(const model::LayerWeights& L, Chunk& c);
  // The final norm and the lm_head for the positions `which` of the chunk; their logits.
  std::vector<std::vector<float>> final_norm_lm_head(Chunk& c, const std::vector<int>& which,
                                                     const model::Probe& probe);
  void note_call_start();  // the first driver call of the step or chunk sets lead_ps

  Platform& ps_;
  const MemoryMap& map_;
  const model::TernaryModel& model_;
  const model::KvScales& scales_;
  CpuModel cpu_;
  DriverConfig host_driver_;  // the CPU's driver costs (with the walker: its starts)
  WalkerModel walker_;
  DmaDriver driver_;          // the engine calls: the CPU's driver, or the walker's sequencer
  TokenLoopOptions options_;
  int d_;  // the head dimension: the attention unit's (the memory map's attention.head_dim)
  num::RopeTable rope_;
  int pos_ = 0;
  TokenTiming* t_ = nullptr;
  std::vector<uint8_t> scratch_;
  std::vector<int32_t> partial_;  // per-call: one segment's partial sums
  StepObserver* observer_ = nullptr;
  std::vector<model::KvInt4Bank> banks_;  // kv.format = int4: per (layer, K/V head)
  std::vector<model::TipBank> tip_banks_;  // kv.format = tip: per (layer, K/V head)
  std::unique_ptr<TipCache> tip_cache_;    // kv.format = tip: region tables and slots
  int token_ = 0, layer_ = -1;  // the token id and layer being run (for the observer)
  uint64_t begin_ps_ = 0;       // the step's (chunk's) start
  bool called_ = false;         // a driver call of the step (chunk) has started
};

}  // namespace bitsim::host
