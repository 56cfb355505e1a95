#include "model/packed_image.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "base/error.h"

namespace bitsim::model {
namespace {

void put_u16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
}
void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint16_t get_u16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t get_u32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

size_t round_up_beat(size_t bytes) { return beats_for(bytes) * kBeatBytes; }
size_t data_bytes(int n) { return (size_t(n) + kTritsPerByte - 1) / kTritsPerByte; }

void check_n(int n, const char* who) {
  if (n < 1 || n > kMaxRowLength)
    throw Error(fmt::format("{}: row length n = {} outside 1..{}", who, n, kMaxRowLength));
}

// Row check: InvalidTrit for a data byte >= 243, BadPadding for a padding digit that does not
// encode 0. *bad_index is the offending byte's index within the row.
StreamError check_row(const uint8_t* packed, int n, int8_t* trits, size_t* bad_index) {
  const TritDecodeTable& tab = trit_decode_table();
  const size_t nb = data_bytes(n);
  StreamError err = StreamError::None;
  for (size_t k = 0; k < nb; ++k) {
    const uint8_t b = packed[k];
    const size_t first = k * kTritsPerByte;
    const int here = int(std::min<size_t>(kTritsPerByte, size_t(n) - first));
    if (!tab.valid[b]) {
      if (err == StreamError::None) {
        err = StreamError::InvalidTrit;
        *bad_index = k;
      }
      for (int i = 0; i < here; ++i) trits[first + i] = 0;
      continue;
    }
    for (int i = 0; i < here; ++i) trits[first + i] = tab.trits[b][i];
    for (int i = here; i < kTritsPerByte; ++i)
      if (tab.trits[b][i] != 0 && err == StreamError::None) {
        err = StreamError::BadPadding;
        *bad_index = k;
      }
  }
  return err;
}


// ---- Decoding a stream ----------------------------------------------------------------

// The stream being decoded and the offset of the next byte to read.
struct StreamReader {
  const uint8_t* data;
  size_t bytes;
  size_t pos;
  size_t left() const { return bytes - pos; }
};

// An error inside one group: the row (-1 in the header or x), the stream offset and detail.
struct GroupFault {
  StreamError error;
  int row;
  size_t offset;
  std::string detail;
};

// What a header that parse_group_header rejected holds, e.g. "magic 0x1234".
std::string header_fault_detail(StreamError e, const uint8_t* hdr, const GroupHeader& h) {
  if (e == StreamError::BadMagic) return fmt::format("magic 0x{:04x}", get_u16(hdr));
  if (e == StreamError::BadVersion) return fmt::format("version {}", hdr[2]);
  if (e == StreamError::ReservedBits)
    return fmt::format("flags 0x{:02x}, beat 1 high word 0x{:08x}", hdr[3], get_u32(hdr + 12));
  if (e == StreamError::BadLength) return fmt::format("n = {}", h.n);
  return "";
}

std::optional<GroupFault> decode_header(StreamReader& in, GroupHeader* h) {
  if (in.left() < size_t(kHeaderBytes))
    return GroupFault{StreamError::Truncated, -1, in.pos,
                      in.pos == in.bytes ? "no group flagged last" : "partial header"};
  const StreamError he = parse_group_header(in.data + in.pos, h);
  if (he != StreamError::None) return GroupFault{he, -1, in.pos, header_fault_detail(he, in.data + in.pos, *h)};
  in.pos += kHeaderBytes;
  return std::nullopt;
}

// x: n int8 values, then zero padding to the beat.
std::optional<GroupFault> decode_x(StreamReader& in, DecodedGroup* dg) {
  const size_t xb = packed_x_bytes(dg->n);
  if (in.left() < xb) return GroupFault{StreamError::Truncated, -1, in.bytes, "inside x"};
  const auto* x = reinterpret_cast<const int8_t*>(in.data + in.pos);
  dg->x.assign(x, x + dg->n);
  for (size_t i = size_t(dg->n); i < xb; ++i)
    if (in.data[in.pos + i] != 0)
      return GroupFault{StreamError::BadPadding, -1, in.pos + i,
                        fmt::format("x padding byte 0x{:02x}", in.data[in.pos + i])};
  in.pos += xb;
  return std::nullopt;
}

// Row r of the group: its trits into dg->trits, then the zero padding to the beat.
std::optional<GroupFault> decode_row(StreamReader& in, int r, DecodedGroup* dg) {
  const int n = dg->n;
  const size_t rb = packed_row_bytes(n), nb = data_bytes(n);
  const uint8_t* row = in.data + in.pos;
  size_t bad = 0;
  const StreamError re = check_row(row, n, dg->trits.data() + size_t(r) * size_t(n), &bad);
  if (re == StreamError::InvalidTrit) return GroupFault{re, r, in.pos + bad, fmt::format("byte 0x{:02x}", row[bad])};
  if (re == StreamError::BadPadding)
    return GroupFault{re, r, in.pos + bad, fmt::format("padding digit in byte 0x{:02x}", row[bad])};
  for (size_t i = nb; i < rb; ++i)
    if (row[i] != 0)
      return GroupFault{StreamError::BadPadding, r, in.pos + i, fmt::format("row padding byte 0x{:02x}", row[i])};
  in.pos += rb;
  return std::nullopt;
}

// The header's `rows` packed rows.
std::optional<GroupFault> decode_rows(StreamReader& in, uint32_t rows, DecodedGroup* dg) {
  const size_t avail_rows = in.left() / packed_row_bytes(dg->n);
  dg->trits.resize(std::min<size_t>(rows, avail_rows) * size_t(dg->n));
  for (uint32_t r = 0; r < rows; ++r) {
    if (r >= avail_rows)
      return GroupFault{StreamError::Truncated, int(r), in.bytes,
                        fmt::format("{} of {} rows present", avail_rows, rows)};
    if (std::optional<GroupFault> f = decode_row(in, int(r), dg)) return f;
  }
  return std::nullopt;
}

// One group: header, x, rows; in.pos ends past it.
std::optional<GroupFault> decode_group(StreamReader& in, DecodedGroup* dg) {
  GroupHeader h;
  if (std::optional<GroupFault> f = decode_header(in, &h)) return f;
  dg->n = int(h.n);
  dg->rows = int(h.rows);
  dg->last = h.last;
  if (std::optional<GroupFault> f = decode_x(in, dg)) return f;
  return decode_rows(in, h.rows, dg);
}

}  // namespace

size_t packed_row_bytes(int n) { return n <= 0 ? 0 : round_up_beat(data_bytes(n)); }
size_t packed_x_bytes(int n) { return n <= 0 ? 0 : round_up_beat(size_t(n)); }

uint8_t pack5(const int8_t* t, int count) {
  if (count < 1 || count > kTritsPerByte)
    throw Error(fmt::format("pack5: trit count {} outside 1..5", count));
  unsigned b = 0, pow3 = 1;
  for (int i = 0; i < kTritsPerByte; ++i) {
    int v = 0;
    if (i < count) {
      v = t[i];
      if (v < -1 || v > 1) throw Error(fmt::format("pack5: trit {} at digit {} is not in {{-1,0,1}}", v, i));
    }
    b += unsigned(v + 1) * pow3;
    pow3 *= 3;
  }
  return uint8_t(b);
}

void pack_row(const int8_t* trits, int n, uint8_t* out) {
  check_n(n, "pack_row");
  const size_t nb = data_bytes(n);
  const size_t total = packed_row_bytes(n);
  // All trits valid (one pass), so that the whole bytes are packed without pack5's checks;
  // otherwise pack5 finds and names the bad trit.
  uint8_t top = 0;  // the largest trit + 1 as a byte: at most 2 when every trit is -1, 0 or 1
  for (int j = 0; j < n; ++j) top = std::max(top, uint8_t(trits[j] + 1));
  const bool bad = top > 2;
  const size_t whole = bad ? 0 : size_t(n) / kTritsPerByte;
  // pack5 of five valid trits, digit i of weight 3^i, four digits at a time in a 32-bit word:
  // the trits' bytes 0xFF, 0x00, 0x01 become the digits 0, 1, 2 (+1 without a carry between
  // bytes), and the word times 27 + 9*2^8 + 3*2^16 + 2^24 has u0 + 3 u1 + 9 u2 + 27 u3 in its
  // top byte (each lower byte's partial sum is at most 78, so nothing carries into it).
  for (size_t k = 0; k < whole; ++k) {
    const int8_t* t = trits + k * kTritsPerByte;
    uint32_t w;
    std::memcpy(&w, t, 4);
    w = ((w & 0x7F7F7F7Fu) + 0x01010101u) ^ (w & 0x80808080u);
    out[k] = uint8_t(((w * 0x0103091Bu) >> 24) + 81u * uint32_t(t[4] + 1));
  }
  for (size_t k = whole; k < nb; ++k) {
    const size_t first = k * kTritsPerByte;
    out[k] = pack5(trits + first, int(std::min<size_t>(kTritsPerByte, size_t(n) - first)));
  }
  std::memset(out + nb, 0, total - nb);
}

const TritDecodeTable& trit_decode_table() {
  static const TritDecodeTable table = [] {
    TritDecodeTable t{};
    for (int b = 0; b < 256; ++b) {
      t.valid[b] = b < 243;
      int v = b;
      for (int i = 0; i < kTritsPerByte; ++i) {
        t.trits[b][i] = t.valid[b] ? int8_t(v % 3 - 1) : int8_t(0);
        v /= 3;
      }
    }
    return t;
  }();
  return table;
}

bool unpack_row(const uint8_t* packed, int n, int8_t* trits) {
  if (n < 1) return false;
  size_t bad = 0;
  return check_row(packed, n, trits, &bad) == StreamError::None;
}

void write_group_header(const GroupHeader& h, uint8_t* out16) {
  put_u16(out16 + 0, kMatmulMagic);
  out16[2] = kMatmulVersion;
  out16[3] = h.last ? 1 : 0;
  put_u32(out16 + 4, h.rows);
  put_u32(out16 + 8, h.n);
  put_u32(out16 + 12, h.vectors >= 1 ? (h.vectors - 1) & 0xFF : 0);
}

const char* stream_error_name(StreamError e) {
  switch (e) {
    case StreamError::None: return "ok";
    case StreamError::BadMagic: return "bad magic";
    case StreamError::BadVersion: return "bad version";
    case StreamError::ReservedBits: return "reserved bits set";
    case StreamError::BadLength: return "row length n out of range";
    case StreamError::ZeroRows: return "zero rows";
    case StreamError::InvalidTrit: return "invalid trit byte";
    case StreamError::Truncated: return "truncated stream";
    case StreamError::BadPadding: return "non-zero padding";
    case StreamError::TrailingData: return "data after the last group";
  }
  return "unknown stream error";
}

StreamError parse_group_header(const uint8_t* in16, GroupHeader* h, int max_vectors) {
  if (get_u16(in16) != kMatmulMagic) return StreamError::BadMagic;
  if (in16[2] != kMatmulVersion) return StreamError::BadVersion;
  const uint8_t flags = in16[3];
  GroupHeader g;
  g.last = (flags & 1) != 0;
  g.rows = get_u32(in16 + 4);
  g.n = get_u32(in16 + 8);
  const uint32_t high = get_u32(in16 + 12);
  g.vectors = (high & 0xFF) + 1;
  if (h) *h = g;
  if ((flags & 0xFE) != 0 || (high >> 8) != 0 || g.vectors > uint32_t(std::max(1, max_vectors)))
    return StreamError::ReservedBits;
  if (g.n < 1 || g.n > uint32_t(kMaxRowLength)) return StreamError::BadLength;
  if (g.rows == 0) return StreamError::ZeroRows;
  return StreamError::None;
}

std::vector<uint8_t> pack_rows(const TernaryMatrix& m, int row_begin, int row_end) {
  check_n(m.cols, "pack_rows");
  if (row_begin < 0 || row_end < row_begin || row_end > m.rows)
    throw Error(fmt::format("pack_rows: row range [{}, {}) outside the matrix's {} rows",
                            row_begin, row_end, m.rows));
  if (m.trits.size() != size_t(m.rows) * size_t(m.cols))
    throw Error(fmt::format("pack_rows: matrix holds {} trits, expected {} x {}",
                            m.trits.size(), m.rows, m.cols));
  const size_t rb = packed_row_bytes(m.cols);
  std::vector<uint8_t> out(rb * size_t(row_end - row_begin));
  for (int r = row_begin; r < row_end; ++r) pack_row(m.row(r), m.cols, out.data() + rb * size_t(r - row_begin));
  return out;
}

std::vector<uint8_t> build_stream(const std::vector<GroupSpec>& groups) {
  if (groups.empty()) throw Error("build_stream: no groups");
  size_t total = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const GroupSpec& s = groups[g];
    if (!s.m || !s.x) throw Error(fmt::format("build_stream: group {} has no matrix or no x", g));
    check_n(s.n, "build_stream");
    if (s.m->cols != s.n)
      throw Error(fmt::format("build_stream: group {}: n = {} but the matrix has {} columns", g,
                              s.n, s.m->cols));
    if (s.row_begin < 0 || s.row_end <= s.row_begin || s.row_end > s.m->rows)
      throw Error(fmt::format("build_stream: group {}: row range [{}, {}) empty or outside the "
                              "matrix's {} rows", g, s.row_begin, s.row_end, s.m->rows));
    if (s.vectors < 1 || s.vectors > kMaxVectors)
      throw Error(fmt::format("build_stream: group {}: {} vectors outside 1..{}", g, s.vectors, kMaxVectors));
    total += kHeaderBytes + size_t(s.vectors) * packed_x_bytes(s.n) + packed_row_bytes(s.n) * size_t(s.row_end - s.row_begin);
  }
  std::vector<uint8_t> out;
  out.reserve(total);
  for (size_t g = 0; g < groups.size(); ++g) {
    const GroupSpec& s = groups[g];
    uint8_t hdr[kHeaderBytes];
    write_group_header({uint32_t(s.row_end - s.row_begin), uint32_t(s.n), g + 1 == groups.size(),
                        uint32_t(s.vectors)}, hdr);
    out.insert(out.end(), hdr, hdr + kHeaderBytes);
    for (int p = 0; p < s.vectors; ++p) {
      const size_t xo = out.size();
      out.resize(xo + packed_x_bytes(s.n), 0);
      std::memcpy(out.data() + xo, s.x + size_t(p) * size_t(s.n), size_t(s.n));
    }
    std::vector<uint8_t> rows = pack_rows(*s.m, s.row_begin, s.row_end);
    out.insert(out.end(), rows.begin(), rows.end());
  }
  return out;
}

MatmulFormat parse_matmul_format(const std::string& name) {
  if (name == "header") return MatmulFormat::Header;
  if (name == "per-call") return MatmulFormat::PerCall;
  throw Error(fmt::format("matmul.format = '{}' is not one of: header, per-call", name));
}

const char* matmul_format_name(MatmulFormat f) { return f == MatmulFormat::Header ? "header" : "per-call"; }

void pack_row_segment(const int8_t* trits, int n, int segment, int L, uint8_t* out) {
  check_n(L, "pack_row_segment");
  if (segment < 0 || segment >= per_call_segments(n, L))
    throw Error(fmt::format("pack_row_segment: segment {} outside 0..{} for n = {}, L = {}", segment,
                            per_call_segments(n, L) - 1, n, L));
  std::vector<int8_t> seg(size_t(L), 0);
  const int first = segment * L, count = std::min(L, n - first);
  std::memcpy(seg.data(), trits + first, size_t(count));
  pack_row(seg.data(), L, out);
}

std::vector<uint8_t> build_per_call_stream(const int8_t* x, const TernaryMatrix& m, int row_begin, int row_end,
                                           int segment, int L) {
  check_n(L, "build_per_call_stream");
  if (row_begin < 0 || row_end <= row_begin || row_end > m.rows)
    throw Error(fmt::format("build_per_call_stream: row range [{}, {}) empty or outside the matrix's {} rows",
                            row_begin, row_end, m.rows));
  const size_t xb = packed_x_bytes(L), rb = packed_row_bytes(L);
  std::vector<uint8_t> out(xb + rb * size_t(row_end - row_begin), 0);
  const int first = segment * L;
  if (segment < 0 || first >= m.cols)
    throw Error(fmt::format("build_per_call_stream: segment {} outside 0..{}", segment,
                            per_call_segments(m.cols, L) - 1));
  std::memcpy(out.data(), x + first, size_t(std::min(L, m.cols - first)));
  for (int r = row_begin; r < row_end; ++r)
    pack_row_segment(m.row(r), m.cols, segment, L, out.data() + xb + rb * size_t(r - row_begin));
  return out;
}

int per_call_rows(uint64_t bytes, int L) {
  const uint64_t xb = packed_x_bytes(L), rb = packed_row_bytes(L);
  if (L < 1 || L > kMaxRowLength || bytes < xb + rb || (bytes - xb) % rb != 0) return -1;
  return int((bytes - xb) / rb);
}

StreamError next_group(const uint8_t* in16, uint64_t left, GroupLayout* g, int max_vectors) {
  if (left < 16) return StreamError::Truncated;
  const StreamError e = parse_group_header(in16, &g->header, max_vectors);
  if (e != StreamError::None) return e;
  g->x_offset = 16;
  g->rows_offset = 16 + uint64_t(g->header.vectors) * packed_x_bytes(int(g->header.n));
  g->bytes = g->rows_offset + uint64_t(g->header.rows) * packed_row_bytes(int(g->header.n));
  return g->bytes > left ? StreamError::Truncated : StreamError::None;
}

std::string DecodeResult::message() const {
  if (error == StreamError::None) return "ok";
  std::string where = fmt::format("group {}", group);
  if (row >= 0) where += fmt::format(", row {}", row);
  std::string extra = detail.empty() ? "" : detail + " ";
  return fmt::format("{} in {} ({}at stream offset {})", stream_error_name(error), where, extra, offset);
}

DecodeResult decode_stream(const uint8_t* data, size_t bytes) {
  DecodeResult res;
  auto fail = [&](int group, GroupFault f) {
    res.error = f.error;
    res.group = group;
    res.row = f.row;
    res.offset = f.offset;
    res.detail = std::move(f.detail);
    return res;
  };
  StreamReader in{data, bytes, 0};
  for (int g = 0;; ++g) {
    DecodedGroup dg;
    if (std::optional<GroupFault> f = decode_group(in, &dg)) return fail(g, std::move(*f));
    const bool last = dg.last;
    res.groups.push_back(std::move(dg));
    if (last) break;
  }
  if (in.pos != bytes)
    return fail(int(res.groups.size()),
                {StreamError::TrailingData, -1, in.pos, fmt::format("{} bytes", bytes - in.pos)});
  return res;
}

uint64_t image_row_bytes(int n) {
  if (n < 1) throw Error(fmt::format("image_row_bytes: row length n = {} is not positive", n));
  return uint64_t(row_segments(n)) * packed_row_bytes(segment_trits(n));
}

ImageSize packed_image_size(int hidden, int ffn, int layers, int vocab, int kv_rows) {
  if (hidden < 1 || ffn < 1 || layers < 0 || vocab < 1 || kv_rows < 1 || kv_rows > hidden)
    throw Error(fmt::format("packed_image_size: bad shape (hidden {}, ffn {}, layers {}, vocab {}, K/V rows {})",
                            hidden, ffn, layers, vocab, kv_rows));
  const uint64_t h = uint64_t(hidden), f = uint64_t(ffn), kv = uint64_t(kv_rows);
  const uint64_t row_h = image_row_bytes(hidden);  // a row of hidden inputs
  const uint64_t row_f = image_row_bytes(ffn);     // a row of ffn inputs (down_proj)
  ImageSize s{};
  s.layer_bytes = 2 * h * row_h    // q, o: hidden rows of hidden
                  + 2 * kv * row_h // k, v: num_kv_heads x head_dim rows of hidden
                  + 2 * f * row_h  // gate, up: ffn rows of hidden
                  + h * row_f;     // down: hidden rows of ffn
  s.lm_head_bytes = uint64_t(vocab) * row_h;
  s.total_bytes = uint64_t(layers) * s.layer_bytes + s.lm_head_bytes;
  return s;
}

}  // namespace bitsim::model
