#pragma once
// Memory: the board's DDR as the clocked board sees it, whatever model times it (ddr.model;
// hw/memory/memory_model.h has the model's SystemC-free part). The board, the timing oracle, the
// progress watchdog and the cycle platform know this interface only; make_memory builds the
// model the config names.
//
// A memory has: the HP ports' channels (port(i), DdrPortLink), the storage with its
// zero-time backdoor (the same PagedMemory for every model), statistics, a fingerprint of
// its timing state, and the state it carries across an idle gap (carried_state /
// restore_state: empty for wall and latency-bandwidth, open rows and refresh phase for ddr3).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <systemc>

#include "hw/interconnect/axi_mm.h"
#include "hw/parts/clock.h"
#include "hw/memory/memory_model.h"
#include "hw/memory/paged_memory.h"
#include "hw/parts/reg_fifo.h"

namespace bitsim::hw {

// A burst as the HP port issues it to the DDR: at most 256 beats of 8 bytes.
struct DdrBurst {
  uint64_t addr = 0;   // byte address, 8-byte aligned
  uint32_t beats = 0;  // number of 64-bit beats, >= 1
  uint32_t tag = 0;    // the port's routing tag, echoed on the burst's beats / response
};

struct DdrReadBeat {
  uint64_t data = 0;
  uint32_t tag = 0;    // the burst's tag
  bool last = false;   // final beat of the burst
  bool error = false;  // DECERR: the burst lies outside the DDR (data is 0)
};

struct DdrWriteResponse {
  uint32_t tag = 0;    // the burst's tag
  bool error = false;  // DECERR: the burst lies outside the DDR (nothing was stored)
};

// The channels between one HP port and the DDR. The HP port pushes ar / aw / w and pops
// r / b; the DDR does the opposite. Write beats (`w`) must arrive in the order of the
// bursts on `aw`, with `last` set on the final beat of each burst.
struct DdrPortLink {
  explicit DdrPortLink(const std::string& name)
      : ar((name + "_ar").c_str()),
        r((name + "_r").c_str()),
        aw((name + "_aw").c_str()),
        w((name + "_w").c_str()),
        b((name + "_b").c_str()) {}
  RegFifo<DdrBurst> ar;
  RegFifo<DdrReadBeat> r;
  RegFifo<DdrBurst> aw;
  RegFifo<WriteBeat> w;
  RegFifo<DdrWriteResponse> b;
};

struct DdrPortStats {
  uint64_t bytes_read = 0;        // bytes of read beats returned (DECERR beats excluded)
  uint64_t bytes_written = 0;     // bytes of write beats stored (DECERR beats excluded)
  uint64_t read_bursts = 0;       // read bursts completed
  uint64_t write_bursts = 0;      // write bursts completed (response issued)
  uint64_t decerr_bursts = 0;     // bursts answered with DECERR (both directions)
  uint64_t busy_cycles = 0;       // edges where at least one beat of this port moved
  uint64_t first_busy_cycle = 0;  // first such edge (valid when busy_cycles > 0)
  uint64_t last_busy_cycle = 0;   // last such edge (valid when busy_cycles > 0)
  uint64_t wall_stall_beats = 0;  // beats that were due and had room but found no bandwidth
};

struct DdrStats {
  std::vector<DdrPortStats> ports;  // one entry per port
  uint64_t busy_cycles = 0;         // edges where any beat of any port moved
  uint64_t first_busy_cycle = 0;    // valid when busy_cycles > 0
  uint64_t last_busy_cycle = 0;     // valid when busy_cycles > 0
};

class Memory : public sc_core::sc_module {
 public:
  static constexpr uint64_t kPageBytes = PagedMemory::kPageBytes;  // lazy allocation unit

  // Validates `config` (bitsim::Error naming the key) and allocates the storage lazily.
  Memory(sc_core::sc_module_name name, Clock& clock, const DdrConfig& config);

  // The channels of port i (0 <= i < config.ports), for the HP port that drives it; another i
  // throws bitsim::Error naming ddr.ports.
  DdrPortLink& port(int i);

  // Backdoor, zero simulated time. Throws bitsim::Error naming the range when any byte of
  // [addr, addr + n) lies outside the DDR. An untouched page reads as zero and reading it
  // allocates nothing; a write allocates only the pages it touches.
  void read(uint64_t addr, void* dst, size_t n) const { mem_.read(addr, dst, n); }
  void write(uint64_t addr, const void* src, size_t n) { mem_.write(addr, src, n); }
  uint64_t read64(uint64_t addr) const;  // 8 bytes, little-endian
  void write64(uint64_t addr, uint64_t value);
  // Called after every write that changes memory: each backdoor write (addr, n) and each
  // bus write burst when its last beat is stored (burst address, beats x 8). Not called for
  // DECERR bursts. One listener; an empty function removes it.
  void set_write_listener(std::function<void(uint64_t addr, size_t n)> listener);
  size_t allocated_pages() const { return mem_.allocated_pages(); }
  // Reads the pages this memory has not written from `backing` (hw/memory/paged_memory.h:
  // copy on write; the timing oracle's board over the fast board's DDR). Before any write.
  void set_backing(const PagedMemory* backing) { mem_.set_backing(backing); }
  // Called for every burst the memory accepts from a port (AR or AW), at the edge it is
  // accepted: `bytes` = beats x 8 (`bitsim run --dram-trace`, hw/memory/dram_trace.h). One
  // listener; an empty function removes it.
  using RequestListener = std::function<void(uint64_t cycle, int port, bool write, uint64_t addr, uint32_t bytes)>;
  void set_request_listener(RequestListener listener) { request_listener_ = std::move(listener); }
  // Called when a burst the memory accepted has completed, at the edge its last read beat or
  // its write response was pushed to the port (`bitsim run --dram-trace`). Each port
  // completes its reads in the order they were accepted, and its writes likewise. One
  // listener; an empty function removes it.
  using CompletionListener = std::function<void(uint64_t cycle, int port, bool write)>;
  void set_completion_listener(CompletionListener listener) { completion_listener_ = std::move(listener); }

  const DdrConfig& config() const { return config_; }
  const DdrStats& stats() const { return stats_; }
  // The bursts the memory has accepted and completed (every model tells heard() and
  // completed()); the progress watchdog names the ones it holds when data stops moving.
  struct RequestCounts {
    uint64_t heard = 0, completed = 0, last_completion = 0;  // last_completion: an edge (0: none yet)
  };
  const RequestCounts& requests() const { return requests_; }
  // Achieved bandwidth over the busy span (first to last busy edge), GB/s (1e9 bytes/s), of
  // one port (port >= 0) or all ports together (port = -1).
  double achieved_gbps(int port = -1) const;

  // Timing state at edge `cycle` (hw/parts/fingerprint.h) apart from the carried state: equal to
  // the reset value's whenever the board is quiet (the idle-board check).
  virtual uint64_t state_fingerprint(uint64_t cycle) const = 0;
  // The state that survives an idle gap, as of edge `cycle` of a quiet memory; and setting
  // it, on a memory in its reset state before the first edge (the timing oracle opening a
  // batch). By default a model carries nothing: restore_state refuses a non-empty state (Ddr3Memory overrides both).
  virtual MemoryState carried_state(uint64_t cycle) const;
  virtual void restore_state(const MemoryState& state);
  // The DRAM commands issued since reset or the last restore_state, accounted up to edge
  // `cycle` of a quiet memory (hw/memory/dram_ledger.h): the engine is caught up to that
  // edge first, which changes no timing. `tail`, when given: the ledger's record
  // (DramLedger::record: its head and what it carries past `cycle`), relative to the device
  // cycle of edge 0. Models
  // without commands (wall, latency-bandwidth) give an empty activity and tail.
  virtual DramActivity close_dram_activity(uint64_t cycle, std::vector<uint64_t>* tail = nullptr);
  // Records, from now on, the requests the memory's timing engine takes and the edge at which
  // it answers each (MemoryTrace: the timing oracle's batches, for MemoryTiming::replay), and
  // gives them. Models that do not replay record nothing and give an empty trace.
  virtual void record_trace() {}
  virtual MemoryTrace take_trace() { return {}; }
  // Told every DRAM command as the engine decides it (`bitsim run --dram-commands`); an empty
  // function removes it. Models without commands refuse a listener.
  virtual void set_command_listener(Ddr3CommandListener listener);

  // One rising edge `now` of the model's clocked method, awake: true when the model is idle
  // after it (its method then sleeps until a request reaches an empty AR or AW FIFO:
  // request_waiting). hw/edge_loop.h drives a board with it, without SystemC's scheduler; a
  // model that does not give it (has_edge false: the default) is driven by SystemC only.
  virtual bool has_edge() const { return false; }
  virtual bool edge(uint64_t now);
  bool request_waiting() const;

 protected:
  static constexpr uint64_t kBusBeatBytes = 8;  // one beat of a DdrPortLink
  // One beat of a bus burst through the storage: a read (an untouched page reads as zero)
  // and a write under its byte strobe (a write listener is told by the caller, per burst).
  void bus_read_beat(uint64_t addr, uint64_t& data) const;
  void bus_write_beat(uint64_t addr, uint64_t data, uint8_t strobe);
  // The next beat of read burst `r` (tag, error, addr, beats, done) pushed on `link`'s R
  // channel: its data from the storage (none for a DECERR burst), `last` on the burst's last
  // beat, the port's statistics counted. True when that was the burst's last beat (the caller
  // drops the burst). The one beat builder of every model.
  template <typename Read>
  static bool emit_read_beat(const Memory& m, Read& r, DdrPortLink& link, DdrPortStats& ps) {
    DdrReadBeat beat;
    beat.tag = r.tag;
    beat.error = r.error;
    beat.last = r.done + 1 == r.beats;
    if (!r.error) {
      m.bus_read_beat(r.addr + uint64_t(r.done) * kBusBeatBytes, beat.data);
      ps.bytes_read += kBusBeatBytes;
    }
    link.r.push(beat);
    if (++r.done < r.beats) return false;
    if (r.error) ++ps.decerr_bursts;
    ++ps.read_bursts;
    return true;
  }
  // The links' AR and AW written events (wake_), for a model that sleeps while idle.
  void end_of_elaboration() override;
  // The opening of a model's clocked method at each edge: a model asleep is woken by a
  // request and acts from the next rising edge on; nothing acts once the clock is asked to
  // stop. True when the model acts at this edge.
  bool awake_at_edge() {
    if (sleeping_) {
      sleeping_ = false;
      clock_.wake();
      return false;
    }
    return !clock_.stop_requested();
  }
  // An idle model sleeps until a request is written to a port (its method's next trigger).
  void sleep_until_request() {
    sleeping_ = true;
    clock_.sleep();
    next_trigger(wake_);
  }
  // A port's busy-edge statistics: one more edge at `now`.
  static void note_busy(DdrPortStats& s, uint64_t now) {
    if (s.busy_cycles == 0) s.first_busy_cycle = now;
    s.last_busy_cycle = now;
    ++s.busy_cycles;
  }
  // Tells the request listener, if any, of a burst accepted at `cycle` (and counts it).
  void heard(uint64_t cycle, int port, bool write, const DdrBurst& b) {
    ++requests_.heard;
    if (request_listener_) request_listener_(cycle, port, write, b.addr, b.beats * uint32_t(kBusBeatBytes));
  }
  // Tells the completion listener, if any, of a burst completed at `cycle` (and counts it).
  void completed(uint64_t cycle, int port, bool write) {
    ++requests_.completed;
    requests_.last_completion = cycle;
    if (completion_listener_) completion_listener_(cycle, port, write);
  }

  Clock& clock_;
  DdrConfig config_;
  PagedMemory mem_;
  DdrStats stats_;
  std::vector<std::unique_ptr<DdrPortLink>> links_;  // one per port, "port<i>"
  sc_core::sc_event_or_list wake_;                    // any link's AR or AW written
  bool sleeping_ = false;                             // asleep until wake_ (sleep_until_request)
  RequestListener request_listener_;
  CompletionListener completion_listener_;
  RequestCounts requests_;
};

// (Inline: every beat of every model goes through them.)
inline void Memory::bus_read_beat(uint64_t addr, uint64_t& data) const {
  const uint8_t* p = mem_.page(addr / kPageBytes);
  if (!p) {
    data = 0;
    return;
  }
  const uint64_t off = addr % kPageBytes;
  std::memcpy(&data, p + off, kBusBeatBytes);
  // Bursts read on through memory: fetch a few cache lines ahead into the host's cache.
  constexpr uint64_t kAhead = 512;
  if (off % 64 == 0 && off + kAhead < kPageBytes) __builtin_prefetch(p + off + kAhead);
}

inline void Memory::bus_write_beat(uint64_t addr, uint64_t data, uint8_t strobe) {
  if (strobe == 0) return;
  uint8_t* dst = mem_.span_for_write(addr, kBusBeatBytes);
  if (strobe == 0xFF) {
    std::memcpy(dst, &data, kBusBeatBytes);
    return;
  }
  for (int i = 0; i < 8; ++i)
    if (strobe & (1u << i)) dst[i] = uint8_t(data >> (8 * i));
}

// The clocked memory the config's ddr.model names.
std::unique_ptr<Memory> make_memory(sc_core::sc_module_name name, Clock& clock, const DdrConfig& config);

}  // namespace bitsim::hw
