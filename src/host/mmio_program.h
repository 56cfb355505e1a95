#pragma once
// MmioProgram: a host program as the machine sees it: AXI-Lite register reads and writes
// and the CPU's loads and stores to DDR, each at its simulated time. It is what
// `bitsim run --record-mmio FILE` captures from the host runtime (RecordingPlatform), what
// `bitsim replay FILE` runs again on either fidelity (run_program), and what the register
// differential test generates. Replaying a program issues every access at its recorded time
// and compares every read (register values, and a digest of the bytes of every DDR load)
// with what was recorded; a register-level trace captured from a real board's driver in
// the same format can be checked the same way. The file format is in docs/mmio-record.md.
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "host/platform.h"

namespace bitsim::host {

struct MmioOp {
  enum class Kind : char {
    kWrite = 'W',     // register write: addr, value
    kRead = 'R',      // register read: addr, value read
    kMemWrite = 'M',  // CPU store to DDR: addr, bytes
    kMemRead = 'D',   // CPU load from DDR: addr, size, digest of the bytes loaded ('-': not known)
  };
  Kind kind = Kind::kWrite;
  uint64_t time_ps = 0;    // simulated time at which the access starts
  uint64_t addr = 0;
  uint32_t value = 0;      // register value (W, R)
  uint64_t access_ps = 0;  // CPU time of the register access (W, R)
  uint64_t size = 0;       // bytes (M, D)
  uint64_t digest = 0;     // FNV-1a 64 of the bytes (D)
  bool digest_known = true;  // false: a timing-only recording, whose loads read results never computed
  std::vector<uint8_t> bytes;  // the bytes stored (M)
  bool operator==(const MmioOp&) const = default;
};

struct MmioProgram {
  // Board config keys the program was recorded with (key, value as text), in order.
  std::vector<std::pair<std::string, std::string>> config;
  std::vector<MmioOp> ops;
  // Where a read program came from: its file and the line of each C record and op (empty
  // for a program built in memory); where() names an op "FILE:LINE" (or "op N").
  std::string source;
  std::vector<size_t> config_lines, op_lines;
  std::string where(size_t op) const;
  std::string config_where(size_t i) const;
};

// FNV-1a 64 of a byte range (the digest of D records).
uint64_t fnv1a64(const void* data, size_t n);

// Text format (docs/mmio-record.md). write_program throws bitsim::Error if the stream fails;
// read_program throws bitsim::Error naming `source` and the line at fault.
void write_program(const MmioProgram& program, std::ostream& out);
MmioProgram read_program(std::istream& in, const std::string& source);
MmioProgram load_program(const std::string& path);
void save_program(const MmioProgram& program, const std::string& path);  // temp file + rename

// One read whose value differs from the program's.
struct ReadMismatch {
  size_t op = 0;  // index into program.ops
  uint64_t time_ps = 0, addr = 0;
  bool memory = false;  // a DDR load (digest) rather than a register
  uint64_t expected = 0, got = 0;
};
struct ReplayResult {
  size_t reads = 0, writes = 0, mem_writes = 0, mem_reads = 0;
  std::vector<ReadMismatch> mismatches;
  std::vector<uint32_t> read_values;  // every register read's value, in program order
  std::vector<uint64_t> digests;      // every DDR load's digest, in program order
  bool ok() const { return mismatches.empty(); }
};

// Runs the program on a platform: waits (Platform::spend) until each op's time, issues it,
// and compares what it reads. Throws bitsim::Error if an op's time lies before the
// platform's clock (the platform took longer over an earlier op than the recording did).
ReplayResult run_program(const MmioProgram& program, Platform& platform);

// A register's name for messages, e.g. "at0 S2MM_DMASR" or "matmul lane 1 STATUS";
// the hex address where the map has no name.
std::string register_name(uint64_t addr);
std::string describe(const ReadMismatch& m);

// A Platform that forwards to another and records every access into a program.
// loads_computed false (the timing-only fidelity, whose engines skip the arithmetic): DDR
// loads are recorded without a digest, since the bytes they read were never computed.
class RecordingPlatform : public Platform {
 public:
  RecordingPlatform(Platform& inner, MmioProgram& out, bool loads_computed = true)
      : inner_(inner), out_(out), loads_computed_(loads_computed) {}
  uint32_t read32(uint64_t addr, uint64_t access_ps) override;
  void write32(uint64_t addr, uint32_t value, uint64_t access_ps) override;
  void spend(uint64_t ps) override { inner_.spend(ps); }
  uint64_t now_ps() const override { return inner_.now_ps(); }
  void mem_read(uint64_t addr, void* dst, size_t n) override;
  void mem_write(uint64_t addr, const void* src, size_t n) override;
  uint64_t pl_bytes_read() const override { return inner_.pl_bytes_read(); }
  hw::DramActivity dram_activity() override { return inner_.dram_activity(); }
  bool dma_has_sg(int id) const override { return inner_.dma_has_sg(id); }
  const std::vector<TransferRecord>& transfers() const override { return inner_.transfers(); }

 private:
  Platform& inner_;
  MmioProgram& out_;
  bool loads_computed_;
};

}  // namespace bitsim::host
