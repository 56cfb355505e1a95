#pragma once
// Ddr: the board's 512 MB DDR3 as the PL sees it through the HP ports (CIRCUITS.md 1;
// docs/hw-timing.md "DDR"). Storage is allocated lazily in 1 MiB pages and has a zero-time
// backdoor for the CPU and the tests. Each HP port reaches the DDR through a DdrPortLink
// (AR/R/AW/W/B registered FIFOs): read bursts return their first beat `read_latency`
// cycles after acceptance, write responses leave `write_latency` cycles after a burst's
// last beat, and every beat of every port and direction pays into one token bucket, the
// DDR bandwidth wall. Addresses outside the DDR answer DECERR.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <systemc>

#include "hw/axi_mm.h"
#include "hw/clock.h"
#include "hw/paged_memory.h"
#include "hw/config_field.h"
#include "hw/reg_fifo.h"

namespace bitsim::hw {

namespace detail {
// A fixed-capacity FIFO ring (no allocation after construction), for the per-burst
// bookkeeping queues of the memory-side modules.
template <typename T>
class FixedRing {
 public:
  explicit FixedRing(size_t capacity = 1) : buf_(capacity), cap_(capacity) {}
  void reset(size_t capacity) {
    buf_.assign(capacity, T{});
    cap_ = capacity;
    head_ = count_ = 0;
  }
  bool empty() const { return count_ == 0; }
  bool full() const { return count_ == cap_; }
  size_t size() const { return count_; }
  size_t capacity() const { return cap_; }
  T& front() { return buf_[head_]; }
  const T& front() const { return buf_[head_]; }
  T& at(size_t i) { return buf_[wrap(head_ + i)]; }
  T& back() { return at(count_ - 1); }
  void push_back(const T& item) {
    buf_[wrap(head_ + count_)] = item;
    ++count_;
  }
  void pop_front() {
    if (++head_ == cap_) head_ = 0;
    --count_;
  }
  void clear() { head_ = count_ = 0; }
  void truncate(size_t n) {  // keep the n oldest items
    if (n < count_) count_ = n;
  }

 private:
  size_t wrap(size_t i) const { return i >= cap_ ? i - cap_ : i; }  // i < 2 cap
  std::vector<T> buf_;
  size_t cap_ = 0;
  size_t head_ = 0, count_ = 0;
};
}  // namespace detail

// The shipped default is the board's DDR as bitsim runs it; visit() gives each field's key,
// range, unit, evidence label and meaning (hw/config_field.h).
struct DdrConfig {
  uint64_t size_bytes = 512ull << 20;  // DDR size in bytes, a multiple of 1 MiB (BOARD.md: 512 MB)
  double wall_bytes_per_s = 2.009e9;   // bandwidth wall shared by all ports and both directions,
                                       // bytes per second (key ddr.wall_gb_s, in GB/s)
  double read_latency_ns = 367.86;     // read burst accepted -> its first beat may leave, ns;
                                       // rounded up to whole PL cycles (calibrated)
  double write_latency_ns = 50.0;      // write burst's last beat taken -> its response leaves, ns;
                                       // rounded up to whole PL cycles
  int ports = 2;                       // HP ports wired to the DDR (BOARD.md: HP0 and HP2)
  int max_pending_bursts = 16;         // bursts the DDR holds per port and direction (accepted, not
                                       // finished); a full queue stops taking AR / AW

  template <typename Self, typename Visitor>
  static void visit(Self& c, Visitor&& v) {
    v(c.size_bytes, FieldInfo{"ddr.size_bytes", double(1ull << 20), double(1ull << 40), "bytes", Evidence::kBoard,
                              "DDR size, a multiple of 1 MiB (BOARD.md: 512 MB)", 1, false});
    v(c.wall_bytes_per_s, FieldInfo{"ddr.wall_gb_s", 0.01, 100, "GB/s", Evidence::kBoard,
                                    "DDR read wall seen from the PL, shared by both HP ports (BOARD.md: 2.009 GB/s "
                                    "measured)", 1e9});
    v(c.read_latency_ns, FieldInfo{"ddr.read_latency_ns", 0, 10000, "ns", Evidence::kCalibrated,
                                   "read burst accepted -> first data beat (no board figure; fitted, CIRCUITS.md 6)"});
    v(c.write_latency_ns, FieldInfo{"ddr.write_latency_ns", 0, 10000, "ns", Evidence::kSimulated,
                                    "write burst's last beat -> write response"});
    v(c.ports, FieldInfo{"ddr.ports", 1, 16, "ports", Evidence::kBoard,
                         "HP ports wired to the DDR (BOARD.md: HP0 and HP2)", 1, false});
    v(c.max_pending_bursts, FieldInfo{"ddr.max_pending_bursts", 1, 256, "bursts", Evidence::kSimulated,
                                      "bursts the DDR controller queues per port and direction"});
  }
  // Throws bitsim::Error naming `who` and the key of the first field out of range.
  void validate(const std::string& who) const {
    check_fields(*this, who);
    if (size_bytes % (1ull << 20) != 0)
      throw Error(fmt::format("{}: ddr.size_bytes = {} is not a multiple of 1 MiB", who, size_bytes));
  }
};

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
  uint64_t wall_stall_beats = 0;  // beats that were due and had room but found the bucket empty
};

struct DdrStats {
  std::vector<DdrPortStats> ports;  // one entry per port
  uint64_t busy_cycles = 0;         // edges where any beat of any port moved
  uint64_t first_busy_cycle = 0;    // valid when busy_cycles > 0
  uint64_t last_busy_cycle = 0;     // valid when busy_cycles > 0
};

class Ddr : public sc_core::sc_module {
 public:
  static constexpr uint64_t kPageBytes = PagedMemory::kPageBytes;  // lazy allocation unit

  SC_HAS_PROCESS(Ddr);
  Ddr(sc_core::sc_module_name name, Clock& clock, const DdrConfig& config);

  // The channels of port i (0 <= i < config.ports), for the HP port that drives it.
  DdrPortLink& port(int i);

  // Backdoor, zero simulated time. Throws bitsim::Error naming the range when any byte of
  // [addr, addr + n) lies outside the DDR. An untouched page reads as zero and reading it
  // allocates nothing; a write allocates only the pages it touches.
  void read(uint64_t addr, void* dst, size_t n) const;
  void write(uint64_t addr, const void* src, size_t n);
  uint64_t read64(uint64_t addr) const;  // 8 bytes, little-endian
  void write64(uint64_t addr, uint64_t value);

  // Called after every write that changes memory: each backdoor write (addr, n) and each
  // bus write burst when its last beat is stored (burst address, beats x 8). Not called for
  // DECERR bursts. One listener; an empty function removes it.
  void set_write_listener(std::function<void(uint64_t addr, size_t n)> listener);

  const DdrConfig& config() const { return config_; }
  uint64_t read_latency_cycles() const { return read_latency_; }
  uint64_t write_latency_cycles() const { return write_latency_; }
  size_t allocated_pages() const;
  const DdrStats& stats() const { return stats_; }
  // Achieved bandwidth over the busy span (first to last busy edge), GB/s (1e9 bytes/s), of
  // one port (port >= 0) or all ports together (port = -1); and the same as a percentage of
  // the wall.
  double achieved_gbps(int port = -1) const;
  double wall_percent(int port = -1) const;
  // Timing state at edge `cycle` (hw/fingerprint.h): bursts held, arbiter slot, and the
  // wall's bucket as it would be refilled by then.
  uint64_t state_fingerprint(uint64_t cycle) const;

 private:
  struct PendingRead {
    uint64_t addr = 0;
    uint64_t due = 0;  // edge at which the next beat may leave
    uint32_t beats = 0, done = 0, tag = 0;
    bool error = false;
  };
  struct PendingWrite {
    uint64_t addr = 0;
    uint32_t beats = 0, done = 0, tag = 0;
    bool error = false;
  };
  struct PendingResponse {
    uint64_t due = 0;
    uint32_t tag = 0;
    bool error = false;
  };
  struct PortState {
    std::unique_ptr<DdrPortLink> link;
    detail::FixedRing<PendingRead> reads;
    detail::FixedRing<PendingWrite> writes;
    detail::FixedRing<PendingResponse> responses;
  };

  void tick();
  void end_of_elaboration() override;
  bool idle() const;
  bool outside(uint64_t addr, uint64_t n) const { return addr >= config_.size_bytes || n > config_.size_bytes - addr; }
  void bus_read_beat(uint64_t addr, uint64_t& data) const;
  void bus_write_beat(uint64_t addr, uint64_t data, uint8_t strobe);
  void accept(PortState& p, int index, uint64_t now);
  // One beat of a slot (tick), inlined into it (defined in ddr.cpp only).
  inline bool move_read(PortState& p, DdrPortStats& ps, uint64_t now);
  inline bool move_write(PortState& p, DdrPortStats& ps, size_t pi, uint64_t now);
  void note_busy(DdrPortStats& s, uint64_t now);

  Clock& clock_;
  DdrConfig config_;
  uint64_t read_latency_ = 0, write_latency_ = 0;  // cycles
  // The wall bucket, in units of 1e-12 byte: each edge adds wall_bytes_per_s x period_ps,
  // a beat costs 8e12.
  uint64_t gain_ = 0, cost_ = 0, cap_ = 0, bucket_ = 0;
  uint64_t last_refill_cycle_ = 0;
  bool refilled_once_ = false;
  int rr_start_ = 0;  // slot visited first at the next edge
  size_t in_flight_ = 0;  // bursts held over all ports (reads, writes, responses to send)
  std::vector<PortState> ports_;
  PagedMemory mem_;
  sc_core::sc_event_or_list wake_;
  bool sleeping_ = false;
  DdrStats stats_;
};

}  // namespace bitsim::hw
