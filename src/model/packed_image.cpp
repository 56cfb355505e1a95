#include "model/packed_image.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "model/error.h"

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
  for (size_t k = 0; k < nb; ++k) {
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
  put_u32(out16 + 12, 0);
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

StreamError parse_group_header(const uint8_t* in16, GroupHeader* h) {
  if (get_u16(in16) != kMatmulMagic) return StreamError::BadMagic;
  if (in16[2] != kMatmulVersion) return StreamError::BadVersion;
  const uint8_t flags = in16[3];
  GroupHeader g;
  g.last = (flags & 1) != 0;
  g.rows = get_u32(in16 + 4);
  g.n = get_u32(in16 + 8);
  if (h) *h = g;
  if ((flags & 0xFE) != 0 || get_u32(in16 + 12) != 0) return StreamError::ReservedBits;
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
    total += kHeaderBytes + packed_x_bytes(s.n) + packed_row_bytes(s.n) * size_t(s.row_end - s.row_begin);
  }
  std::vector<uint8_t> out;
  out.reserve(total);
  for (size_t g = 0; g < groups.size(); ++g) {
    const GroupSpec& s = groups[g];
    uint8_t hdr[kHeaderBytes];
    write_group_header({uint32_t(s.row_end - s.row_begin), uint32_t(s.n), g + 1 == groups.size()}, hdr);
    out.insert(out.end(), hdr, hdr + kHeaderBytes);
    const size_t xo = out.size();
    out.resize(xo + packed_x_bytes(s.n), 0);
    std::memcpy(out.data() + xo, s.x, size_t(s.n));
    std::vector<uint8_t> rows = pack_rows(*s.m, s.row_begin, s.row_end);
    out.insert(out.end(), rows.begin(), rows.end());
  }
  return out;
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
  size_t pos = 0;
  auto fail = [&](StreamError e, int g, int r, size_t off, std::string detail) {
    res.error = e;
    res.group = g;
    res.row = r;
    res.offset = off;
    res.detail = std::move(detail);
    return res;
  };
  for (int g = 0;; ++g) {
    if (bytes - pos < size_t(kHeaderBytes))
      return fail(StreamError::Truncated, g, -1, pos,
                  pos == bytes ? "no group flagged last" : "partial header");
    GroupHeader h;
    const StreamError he = parse_group_header(data + pos, &h);
    if (he != StreamError::None) {
      std::string d;
      if (he == StreamError::BadMagic) d = fmt::format("magic 0x{:04x}", get_u16(data + pos));
      else if (he == StreamError::BadVersion) d = fmt::format("version {}", data[pos + 2]);
      else if (he == StreamError::ReservedBits)
        d = fmt::format("flags 0x{:02x}, beat 1 high word 0x{:08x}", data[pos + 3], get_u32(data + pos + 12));
      else if (he == StreamError::BadLength) d = fmt::format("n = {}", h.n);
      return fail(he, g, -1, pos, d);
    }
    pos += kHeaderBytes;

    const int n = int(h.n);
    const size_t xb = packed_x_bytes(n);
    if (bytes - pos < xb) return fail(StreamError::Truncated, g, -1, bytes, "inside x");
    DecodedGroup dg;
    dg.n = n;
    dg.rows = int(h.rows);
    dg.last = h.last;
    dg.x.assign(reinterpret_cast<const int8_t*>(data + pos), reinterpret_cast<const int8_t*>(data + pos) + n);
    for (size_t i = size_t(n); i < xb; ++i)
      if (data[pos + i] != 0)
        return fail(StreamError::BadPadding, g, -1, pos + i, fmt::format("x padding byte 0x{:02x}", data[pos + i]));
    pos += xb;

    const size_t rb = packed_row_bytes(n);
    const size_t avail_rows = (bytes - pos) / rb;
    const size_t nb = data_bytes(n);
    dg.trits.resize(std::min<size_t>(h.rows, avail_rows) * size_t(n));
    for (uint32_t r = 0; r < h.rows; ++r) {
      if (r >= avail_rows)
        return fail(StreamError::Truncated, g, int(r), bytes,
                    fmt::format("{} of {} rows present", avail_rows, h.rows));
      const uint8_t* row = data + pos;
      size_t bad = 0;
      const StreamError re = check_row(row, n, dg.trits.data() + size_t(r) * size_t(n), &bad);
      if (re == StreamError::InvalidTrit)
        return fail(re, g, int(r), pos + bad, fmt::format("byte 0x{:02x}", row[bad]));
      if (re == StreamError::BadPadding)
        return fail(re, g, int(r), pos + bad, fmt::format("padding digit in byte 0x{:02x}", row[bad]));
      for (size_t i = nb; i < rb; ++i)
        if (row[i] != 0)
          return fail(StreamError::BadPadding, g, int(r), pos + i, fmt::format("row padding byte 0x{:02x}", row[i]));
      pos += rb;
    }
    res.groups.push_back(std::move(dg));
    if (h.last) break;
  }
  if (pos != bytes)
    return fail(StreamError::TrailingData, int(res.groups.size()), -1, pos,
                fmt::format("{} bytes", bytes - pos));
  return res;
}

ImageSize packed_image_size(int hidden, int ffn, int layers, int vocab) {
  check_n(hidden, "packed_image_size: hidden");
  check_n(ffn, "packed_image_size: ffn");
  if (layers < 0 || vocab < 1)
    throw Error(fmt::format("packed_image_size: bad shape (layers {}, vocab {})", layers, vocab));
  const uint64_t h = uint64_t(hidden), f = uint64_t(ffn);
  const uint64_t row_h = packed_row_bytes(hidden);  // a row of hidden inputs
  const uint64_t row_f = packed_row_bytes(ffn);     // a row of ffn inputs (down_proj)
  ImageSize s{};
  s.layer_bytes = 4 * h * row_h    // q, k, v, o: hidden rows of hidden
                  + 2 * f * row_h  // gate, up: ffn rows of hidden
                  + h * row_f;     // down: hidden rows of ffn
  s.lm_head_bytes = uint64_t(vocab) * row_h;
  s.total_bytes = uint64_t(layers) * s.layer_bytes + s.lm_head_bytes;
  return s;
}

}  // namespace bitsim::model
