#include "host/mmio_program.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <istream>
#include <ostream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "hw/circuits/engine_registry.h"

#include "host/memory_map.h"
#include "hw/interconnect/axi_dma.h"
#include "hw/board.h"
#include "hw/circuits/engine_regs.h"
#include "base/error.h"
#include "base/file_io.h"

namespace bitsim::host {

namespace {

constexpr const char* kMagicLine = "bitsim-mmio 1";
// The longest line but an M record's: a C line (a config key and its value) or a W/R/D
// record, whose fields are at most 20 decimal or 16 hex digits each.
constexpr size_t kMaxMmioLine = 4096;
// An M or D record's size: at most the most DDR any board has (the Zynq-7000's 1 GiB; the
// replayed board's own ddr.size_mib refuses an address past its end).
constexpr uint64_t kMaxMmioBytes = hw::kMaxDdrBytes;

std::string hex_bytes(const std::vector<uint8_t>& b) {
  std::string s(b.size() * 2, '0');
  static constexpr char kDigits[] = "0123456789abcdef";
  for (size_t i = 0; i < b.size(); ++i) {
    s[2 * i] = kDigits[b[i] >> 4];
    s[2 * i + 1] = kDigits[b[i] & 15];
  }
  return s;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Strict parsers: the whole token, in the stated base, in range.
uint64_t parse_u64(const std::string& tok, int base, const std::string& where, const char* field) {
  if (tok.empty()) throw Error(fmt::format("{}: missing {}", where, field));
  uint64_t v = 0;
  for (char c : tok) {
    const int d = hex_digit(c);
    if (d < 0 || d >= base) throw Error(fmt::format("{}: {} '{}' is not a base-{} number", where, field, tok, base));
    if (v > (UINT64_MAX - uint64_t(d)) / uint64_t(base))
      throw Error(fmt::format("{}: {} '{}' is out of range", where, field, tok));
    v = v * uint64_t(base) + uint64_t(d);
  }
  return v;
}

std::vector<uint8_t> parse_hex_bytes(const std::string& tok, uint64_t size, const std::string& where) {
  if (tok.size() != size * 2)
    throw Error(fmt::format("{}: {} hex digits for {} bytes (expected {})", where, tok.size(), size, size * 2));
  std::vector<uint8_t> b(size);
  for (uint64_t i = 0; i < size; ++i) {
    const int hi = hex_digit(tok[2 * i]), lo = hex_digit(tok[2 * i + 1]);
    if (hi < 0 || lo < 0) throw Error(fmt::format("{}: byte {} is not hex", where, i));
    b[i] = uint8_t(hi * 16 + lo);
  }
  return b;
}

MmioOp parse_op(std::istringstream& ls, char kind, const std::string& where) {
  std::string t_time, t_addr, t_a, t_b, t_extra;
  ls >> t_time >> t_addr >> t_a >> t_b >> t_extra;
  if (!t_extra.empty()) throw Error(fmt::format("{}: unexpected field '{}'", where, t_extra));
  MmioOp op;
  op.kind = MmioOp::Kind(kind);
  op.time_ps = parse_u64(t_time, 10, where, "time_ps");
  op.addr = parse_u64(t_addr, 16, where, "address");
  if (kind == 'W' || kind == 'R') {
    const uint64_t v = parse_u64(t_a, 16, where, "value");
    if (v > UINT32_MAX) throw Error(fmt::format("{}: value '{}' is wider than 32 bits", where, t_a));
    op.value = uint32_t(v);
    op.access_ps = parse_u64(t_b, 10, where, "access_ps");
    if (op.access_ps > UINT64_MAX - op.time_ps)
      throw Error(fmt::format("{}: time_ps {} + access_ps {} wraps the 64-bit clock", where, op.time_ps, op.access_ps));
  } else {
    op.size = parse_u64(t_a, 10, where, "size");
    if (op.size == 0 || op.size > kMaxMmioBytes)
      throw Error(fmt::format("{}: size {} out of range (1..{}, the most DDR a Zynq-7000 addresses)", where, op.size, kMaxMmioBytes));
    if (kind == 'M') op.bytes = parse_hex_bytes(t_b, op.size, where);
    else if (t_b == "-") op.digest_known = false;
    else op.digest = parse_u64(t_b, 16, where, "digest");
  }
  return op;
}

std::string dma_register_name(uint32_t off) {
  namespace R = hw::dma_reg;
  const bool s2mm = off >= R::kS2mmOffset && off < 2 * R::kS2mmOffset;
  const char* dir = s2mm ? "S2MM" : "MM2S";
  switch (s2mm ? off - R::kS2mmOffset : off) {
    case R::kMm2sDmacr: return fmt::format("{}_DMACR", dir);
    case R::kMm2sDmasr: return fmt::format("{}_DMASR", dir);
    case R::kMm2sCurdesc: return fmt::format("{}_CURDESC", dir);
    case R::kMm2sTaildesc: return fmt::format("{}_TAILDESC", dir);
    case R::kMm2sSa: return s2mm ? "S2MM_DA" : "MM2S_SA";
    case R::kMm2sLength: return fmt::format("{}_LENGTH", dir);
    default: return fmt::format("+0x{:02x}", off);
  }
}

std::string engine_register_name(uint32_t off) {
  namespace E = hw::engine_reg;
  static constexpr const char* kNames[] = {"STATUS",  "ERROR_CODE", "ERROR_UNIT", "ERROR_ROW", "CONTROL",
                                           "UNITS_DONE", "ROWS_DONE", "BEATS_IN",  "BEATS_OUT"};
  if (off % 4 == 0 && off <= E::kBeatsOut) return kNames[off / 4];
  return fmt::format("+0x{:02x}", off);
}

}  // namespace

uint64_t fnv1a64(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

void write_program(const MmioProgram& program, std::ostream& out) {
  out << kMagicLine << '\n';
  for (const auto& [k, v] : program.config) out << "C " << k << ' ' << v << '\n';
  for (const MmioOp& op : program.ops) {
    const char k = char(op.kind);
    if (k == 'W' || k == 'R')
      out << fmt::format("{} {} {:x} {:08x} {}\n", k, op.time_ps, op.addr, op.value, op.access_ps);
    else if (k == 'M')
      out << fmt::format("M {} {:x} {} {}\n", op.time_ps, op.addr, op.size, hex_bytes(op.bytes));
    else
      out << (op.digest_known ? fmt::format("D {} {:x} {} {:016x}\n", op.time_ps, op.addr, op.size, op.digest)
                              : fmt::format("D {} {:x} {} -\n", op.time_ps, op.addr, op.size));
  }
  out.flush();
  if (!out) throw Error("mmio program: write failed");
}

namespace {

// How a bounded read of one line ended.
enum class LineEnd { kEnd, kNewline, kLong };

// Reads up to `max` bytes of the current line into `line` (the newline is consumed, not kept).
// kEnd: the input ended with nothing read; kLong: `max` bytes were read and the line goes on.
LineEnd read_line_upto(std::istream& in, std::string& line, size_t max) {
  std::streambuf* sb = in.rdbuf();
  while (line.size() < max) {
    const int c = sb->sbumpc();
    if (c == std::char_traits<char>::eof()) return line.empty() ? LineEnd::kEnd : LineEnd::kNewline;
    if (c == '\n') return LineEnd::kNewline;
    line.push_back(char(c));
  }
  return LineEnd::kLong;
}

// One whole line, never more than the format lets it hold: kMaxMmioLine bytes, or for an M
// record its head and exactly the hex digits its size field announces, the size checked
// against the DDR before any of them is read. false at the end of the input.
bool read_record_line(std::istream& in, std::string& line, const std::string& where) {
  line.clear();
  const LineEnd end = read_line_upto(in, line, kMaxMmioLine);
  if (end == LineEnd::kEnd) return false;
  if (end == LineEnd::kNewline) return true;
  if (line.rfind("M ", 0) != 0)
    throw Error(fmt::format("{}: line longer than {} bytes (only an M record's data may be longer)", where,
                            kMaxMmioLine));
  std::istringstream head(line);
  std::string kind, t_time, t_addr, t_size;
  head >> kind >> t_time >> t_addr >> t_size;
  if (head.eof()) throw Error(fmt::format("{}: M record's head longer than {} bytes", where, kMaxMmioLine));
  const uint64_t size = parse_u64(t_size, 10, where, "size");
  if (size == 0 || size > kMaxMmioBytes)
    throw Error(fmt::format("{}: size {} out of range (1..{}, the most DDR a Zynq-7000 addresses)", where, size, kMaxMmioBytes));
  // The rest of the line: the digits not yet read, and a little slack for what a reader
  // would refuse anyway (trailing fields), so that the parser names it.
  if (read_line_upto(in, line, line.size() + 2 * size + 64) == LineEnd::kLong)
    throw Error(fmt::format("{}: M record longer than its {} bytes of data", where, size));
  return true;
}

}  // namespace

MmioProgram read_program(std::istream& in, const std::string& source) {
  MmioProgram p;
  p.source = source;
  std::string line;
  size_t n = 1;
  if (read_line_upto(in, line, std::char_traits<char>::length(kMagicLine) + 1) != LineEnd::kNewline ||
      line != kMagicLine)
    throw Error(fmt::format("{}: not a bitsim MMIO program (the first line must be '{}')", source, kMagicLine));
  std::map<std::string, size_t> config_line;  // the line of each C key
  for (;;) {
    ++n;
    const std::string where = fmt::format("{}:{}", source, n);
    if (!read_record_line(in, line, where)) break;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string kind;
    ls >> kind;
    if (kind == "C") {
      std::string key, value, extra;
      ls >> key >> value >> extra;
      if (key.empty() || value.empty() || !extra.empty()) throw Error(where + ": a C line is 'C key value'");
      if (const auto [it, fresh] = config_line.emplace(key, n); !fresh)
        throw Error(fmt::format("{}: config key '{}' is set twice, here and at line {} (a program sets each key once)",
                                where, key, it->second));
      p.config.emplace_back(key, value);
      p.config_lines.push_back(n);
    } else if (kind == "W" || kind == "R" || kind == "M" || kind == "D") {
      p.ops.push_back(parse_op(ls, kind[0], where));
      p.op_lines.push_back(n);
      if (p.ops.size() > 1 && p.ops.back().time_ps < p.ops[p.ops.size() - 2].time_ps)
        throw Error(where + ": time goes backwards");
    } else {
      throw Error(fmt::format("{}: unknown record '{}' (W, R, M, D or C)", where, kind));
    }
  }
  if (in.bad()) throw Error(source + ": read failed");
  return p;
}

MmioProgram load_program(const std::string& path) {
  io::check_input_file(path, "MMIO program");
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: cannot open", path));
  return read_program(in, path);
}

void save_program(const MmioProgram& program, const std::string& path) {
  std::ostringstream out;
  write_program(program, out);
  io::write_file(path, out.str(), "mmio record file");
}

std::string register_name(uint64_t addr) {
  const hw::EngineRegistry& engines = hw::EngineRegistry::board();
  if (const int d = engines.dma_at(addr); d >= 0)
    return fmt::format("{} {}", engines.dma_name(d), dma_register_name(uint32_t(addr - engines.dma_base(d))));
  if (const int e = engines.engine_at(addr); e >= 0) {
    const uint64_t off = addr - engines[e].regs;
    return fmt::format("{} lane {} {}", engines[e].name, off / hw::engine_reg::kLaneStride,
                       engine_register_name(uint32_t(off % hw::engine_reg::kLaneStride)));
  }
  return fmt::format("0x{:08x}", addr);
}

std::string describe(const ReadMismatch& m) {
  if (m.memory)
    return fmt::format("op {} at {} ps: DDR load at 0x{:x}: digest {:016x}, expected {:016x}", m.op, m.time_ps, m.addr,
                       m.got, m.expected);
  return fmt::format("op {} at {} ps: {} (0x{:08x}) read 0x{:08x}, expected 0x{:08x}", m.op, m.time_ps,
                     register_name(m.addr), m.addr, m.got, m.expected);
}

std::string MmioProgram::where(size_t op) const {
  if (op < op_lines.size()) return fmt::format("{}:{}", source, op_lines[op]);
  return fmt::format("mmio program: op {}", op);
}

std::string MmioProgram::config_where(size_t i) const {
  if (i < config_lines.size()) return fmt::format("{}:{}", source, config_lines[i]);
  return fmt::format("mmio program: config key {}", i);
}

namespace {

void run_op(const MmioProgram& program, size_t i, Platform& platform, ReplayResult& r, std::vector<uint8_t>& buf) {
    const MmioOp& op = program.ops[i];
    const uint64_t now = platform.now_ps();
    if (op.time_ps < now)
      throw Error(fmt::format("{}: due at {} ps, but the board took longer over an earlier access: it is at {} ps",
                              program.where(i), op.time_ps, now));
    platform.spend(op.time_ps - now);
    switch (op.kind) {
      case MmioOp::Kind::kWrite:
        platform.write32(op.addr, op.value, op.access_ps);
        ++r.writes;
        break;
      case MmioOp::Kind::kRead: {
        const uint32_t v = platform.read32(op.addr, op.access_ps);
        r.read_values.push_back(v);
        ++r.reads;
        if (v != op.value) r.mismatches.push_back({i, op.time_ps, op.addr, false, op.value, v});
        break;
      }
      case MmioOp::Kind::kMemWrite:
        platform.mem_write(op.addr, op.bytes.data(), op.bytes.size());
        ++r.mem_writes;
        break;
      case MmioOp::Kind::kMemRead: {
        buf.resize(op.size);
        platform.mem_read(op.addr, buf.data(), buf.size());
        const uint64_t d = fnv1a64(buf.data(), buf.size());
        r.digests.push_back(d);
        ++r.mem_reads;
        if (op.digest_known && d != op.digest) r.mismatches.push_back({i, op.time_ps, op.addr, true, op.digest, d});
        break;
      }
    }
}

}  // namespace

ReplayResult run_program(const MmioProgram& program, Platform& platform) {
  ReplayResult r;
  std::vector<uint8_t> buf;
  for (size_t i = 0; i < program.ops.size(); ++i) {
    try {
      run_op(program, i, platform, r, buf);
    } catch (const Error& e) {
      const std::string where = program.where(i);
      if (std::string_view(e.what()).rfind(where, 0) == 0) throw;
      throw Error(fmt::format("{}: {}", where, e.what()));
    }
  }
  return r;
}

uint32_t RecordingPlatform::read32(uint64_t addr, uint64_t access_ps) {
  MmioOp op;
  op.kind = MmioOp::Kind::kRead;
  op.time_ps = inner_.now_ps();
  op.addr = addr;
  op.access_ps = access_ps;
  op.value = inner_.read32(addr, access_ps);
  out_.ops.push_back(op);
  return op.value;
}

void RecordingPlatform::write32(uint64_t addr, uint32_t value, uint64_t access_ps) {
  MmioOp op;
  op.kind = MmioOp::Kind::kWrite;
  op.time_ps = inner_.now_ps();
  op.addr = addr;
  op.value = value;
  op.access_ps = access_ps;
  inner_.write32(addr, value, access_ps);
  out_.ops.push_back(op);
}

void RecordingPlatform::mem_read(uint64_t addr, void* dst, size_t n) {
  MmioOp op;
  op.kind = MmioOp::Kind::kMemRead;
  op.time_ps = inner_.now_ps();
  op.addr = addr;
  op.size = n;
  inner_.mem_read(addr, dst, n);
  op.digest = fnv1a64(dst, n);
  op.digest_known = loads_computed_;
  if (!loads_computed_) op.digest = 0;
  out_.ops.push_back(op);
}

void RecordingPlatform::mem_write(uint64_t addr, const void* src, size_t n) {
  MmioOp op;
  op.kind = MmioOp::Kind::kMemWrite;
  op.time_ps = inner_.now_ps();
  op.addr = addr;
  op.size = n;
  op.bytes.assign(static_cast<const uint8_t*>(src), static_cast<const uint8_t*>(src) + n);
  inner_.mem_write(addr, src, n);
  out_.ops.push_back(op);
}

}  // namespace bitsim::host
