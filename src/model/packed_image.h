#pragma once
// The matmul engine's input stream format (CIRCUITS.md section 2) and the packed ternary
// weight image that lives in the simulated DDR. Format description, worked example and the
// bitnet-large size table: docs/packed-image.md.
//
//   group  := header x rows
//   header := 2 beats (16 bytes, little-endian)
//     beat 0: bits 15:0 magic 0x7E44, 23:16 version 2, 31:24 flags (bit 0: last group of
//             the transfer; bits 1-7 reserved, must be 0), 63:32 R (>= 1)
//     beat 1: bits 31:0 n (1..4096), 39:32 V-1 (V activation vectors, 1..kMaxVectors: the
//             prefill engine's groups, docs/prefill.md; 0 on the board), 63:40 reserved, 0
//   x      := V vectors, each n int8 values zero-padded to a whole beat
//   rows   := R rows; a row is ceil(n/5) bytes of packed trits, zero-padded to a whole beat
//
// Trit packing: byte b = sum_{i=0..4} (t_i + 1) * 3^i, t_i the weight of element 5k+i,
// digit 0 least significant. Digits beyond n in a row's last byte encode trit 0 (digit
// value 1). Bytes 243..255 are invalid.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/board_shape.h"
#include "model/ternary.h"

namespace bitsim::model {

// Packed rows in the simulated DDR: `rows` rows of n trits each (row stride
// packed_row_bytes(n)) from byte address `addr`.
struct PackedRowsSpan {
  uint64_t addr = 0;
  int rows = 0, n = 0;
};

constexpr uint16_t kMatmulMagic = 0x7E44;
constexpr uint8_t kMatmulVersion = 2;
constexpr int kMaxRowLength = 4096;  // n range 1..4096
// A matrix row longer than the engine takes (n > kMaxRowLength: BitNet b1.58 2B4T's down
// projection, n = 6912) goes to the engine as row_segments(n) segments of segment_trits(n)
// elements, each segment in its own call as a group whose header says n = segment_trits(n)
// (the last segment's trits and x past n are zero), and the CPU adds the segments' int32
// partial sums, which is exact (docs/packed-image.md, "Rows longer than the engine's").
// A row of n <= kMaxRowLength is one segment of n.
inline int row_segments(int n) { return int((int64_t(n) + kMaxRowLength - 1) / kMaxRowLength); }
inline int segment_trits(int n) { return int((int64_t(n) + row_segments(n) - 1) / row_segments(n)); }
constexpr int kTritsPerByte = 5;
// The most activation vectors a group carries (prefill.tokens_per_pass's range; V - 1 takes
// the 8 bits 39:32 of header beat 1; docs/prefill.md).
constexpr int kMaxVectors = 64;

// ceil(bytes / 8)
inline size_t beats_for(size_t bytes) { return (bytes + kBeatBytes - 1) / kBeatBytes; }

// ceil(n/5) rounded up to a multiple of 8: the stream bytes of one packed row.
size_t packed_row_bytes(int n);
// n rounded up to a multiple of 8: the stream bytes of x.
size_t packed_x_bytes(int n);

// Pack count (1..5) trits t[0..count) into one byte; missing digits encode trit 0.
// Throws bitsim::Error for a count outside 1..5 or a trit outside {-1,0,1}.
uint8_t pack5(const int8_t* t, int count);
// Pack one row of n trits; writes exactly packed_row_bytes(n) bytes (padding bytes 0x00).
void pack_row(const int8_t* trits, int n, uint8_t* out);

// Byte -> 5 trits (digit 0 first). Invalid bytes (243..255) have valid = false, trits 0.
struct TritDecodeTable {
  int8_t trits[256][5];
  bool valid[256];
};
const TritDecodeTable& trit_decode_table();  // built once, immutable

// Unpack the n trits of one packed row; reads the ceil(n/5) data bytes only (not the
// padding bytes up to the beat). Returns false if a data byte is >= 243 or if a padding
// digit of the last data byte does not encode 0 (strict: this is the format checker; the
// engine itself only flags bytes >= 243). trits[0..n) is written in either case (invalid
// bytes decode to 0).
bool unpack_row(const uint8_t* packed, int n, int8_t* trits);

struct GroupHeader {
  uint32_t rows = 0;
  uint32_t n = 0;
  bool last = false;
  uint32_t vectors = 1;  // V: activation vectors in x (1: the board's group)
};
// Writes the 16 header bytes as given, without validation (so tests can build bad headers).
void write_group_header(const GroupHeader& h, uint8_t* out16);

// Stream errors. BadPadding and TrailingData are decoder-only strictness (extensions of the
// list in the design brief): the writer never produces them, the engine does not check them.
enum class StreamError {
  None,
  BadMagic,      // header magic != 0x7E44
  BadVersion,    // header version != 2
  ReservedBits,  // flags bits 1-7 or beat 1 bits 63:32 set
  BadLength,     // n outside 1..4096
  ZeroRows,      // R == 0
  InvalidTrit,   // a packed byte >= 243 in a row's data bytes
  Truncated,     // the stream ends inside a group, or before a group flagged last
  BadPadding,    // a padding digit not encoding 0, or a non-zero padding byte (x or row)
  TrailingData,  // bytes after the group flagged last
};
const char* stream_error_name(StreamError e);

// Parse and validate a 16-byte header. Checks in this order: magic, version, reserved bits,
// n, R. *h is filled whenever the magic and version are right.
// `max_vectors`: the V the engine is built for (1: the board, which refuses any V > 1 as
// ReservedBits, as it refuses any other reserved bit); a V above it is ReservedBits too.
StreamError parse_group_header(const uint8_t* in16, GroupHeader* h, int max_vectors = 1);

// One group of a matmul stream as the engine walks it: the header at the group's first byte,
// x at +16, the packed rows after x's padding, the next group at +bytes. The one walker of
// the group stream: the fast fidelity's matmul engine and fuzz_matmul_stream use it.
struct GroupLayout {
  GroupHeader header;
  uint64_t x_offset = 0;     // from the group's first byte
  uint64_t rows_offset = 0;  // from the group's first byte
  uint64_t bytes = 0;        // the whole group: header, x and rows
};
// Parses the header of the group that starts `left` bytes before the end of its stream (in16:
// its first 16 bytes, not read when left < 16). Truncated when the header or the group does
// not fit in `left`; the header's own errors as parse_group_header gives them.
// x is the header's V vectors of packed_x_bytes(n) each; `max_vectors` as parse_group_header.
StreamError next_group(const uint8_t* in16, uint64_t left, GroupLayout* g, int max_vectors = 1);

// The packed weight image of rows [row_begin, row_end) of m: the packed rows concatenated,
// each packed_row_bytes(m.cols) bytes (no header, no x). Throws bitsim::Error on a bad
// range or a matrix wider than 4096.
std::vector<uint8_t> pack_rows(const TernaryMatrix& m, int row_begin, int row_end);

// A complete lane stream of one or more groups: header + x + rows per group; the last
// flag is set on the final group only. Throws bitsim::Error if a group's n != m->cols, its
// row range is empty or out of range, n is outside 1..4096, or groups is empty.
struct GroupSpec {
  const int8_t* x;  // vectors x n values (vector p at x + p * n)
  int n;
  const TernaryMatrix* m;
  int row_begin, row_end;
  int vectors = 1;  // V (1..kMaxVectors): a prefill group's vectors (docs/prefill.md)
};
std::vector<uint8_t> build_stream(const std::vector<GroupSpec>& groups);

// Decode a stream back into groups. Decoding stops at the first error; groups holds the
// groups decoded completely before it. group/row locate the error (row = -1 when it is in
// the header or x); offset is the stream byte offset where it was found.
struct DecodedGroup {
  std::vector<int8_t> x;  // n values (padding removed)
  int n = 0;
  int rows = 0;
  bool last = false;
  std::vector<int8_t> trits;  // rows*n, row-major
};
struct DecodeResult {
  StreamError error = StreamError::None;
  int group = -1, row = -1;
  size_t offset = 0;
  std::string detail;  // e.g. "byte 0xf7", "magic 0x1234"
  std::vector<DecodedGroup> groups;
  bool ok() const { return error == StreamError::None; }
  std::string message() const;  // "ok" or e.g. "invalid trit in group 1, row 5 (byte 0xf7 at stream offset 1234)"
};
DecodeResult decode_stream(const uint8_t* data, size_t bytes);

// ---- The per-call format (matmul.format = per-call; docs/variants-host.md) --------------
//
// The earlier format of the board's history: no header; one DMA transfer carries exactly one
// x and the rows that use it; every row has the same fixed length L (the engine's
// matmul.per_call_row_trits), so a matrix row of n > L elements is cut into
// ceil(n/L) segments, each sent in its own call with its own x segment, and the CPU adds the
// partial sums. A segment's elements past n are zero trits (and zero x values).
//
//   transfer := x rows                   (TLAST on the last row's last beat)
//   x        := L int8 values, zero-padded to a whole beat        packed_x_bytes(L)
//   rows     := R >= 1 rows, each ceil(L/5) packed bytes, zero-padded to a whole beat
//               (packed_row_bytes(L)); R = (transfer bytes - packed_x_bytes(L)) / row bytes
enum class MatmulFormat { Header, PerCall };
// "header" | "per-call"; bitsim::Error naming the key otherwise.
MatmulFormat parse_matmul_format(const std::string& name);
const char* matmul_format_name(MatmulFormat f);
// The segments of a row of n elements at fixed length L: ceil(n/L).
inline int per_call_segments(int n, int L) { return (n + L - 1) / L; }
// Pack segment `segment` of one row of n trits at fixed length L (trits past n are 0):
// writes exactly packed_row_bytes(L) bytes.
void pack_row_segment(const int8_t* trits, int n, int segment, int L, uint8_t* out);
// A complete per-call lane stream: x[segment*L ..] (zero past n) then rows [row_begin,
// row_end) of m, segment `segment`. bitsim::Error on a bad range, segment or L.
std::vector<uint8_t> build_per_call_stream(const int8_t* x, const TernaryMatrix& m, int row_begin, int row_end,
                                           int segment, int L);
// Rows of a per-call transfer of `bytes` bytes at fixed length L; -1 if the length is not
// x plus a whole number (>= 1) of rows.
int per_call_rows(uint64_t bytes, int L);

// Bytes of all packed rows of every ternary matrix of a model shape, the ternarized
// lm_head included (no headers, no x). Splitting a matrix's rows between the two lanes
// does not change the total: rows are packed independently.
struct ImageSize {
  uint64_t layer_bytes;    // one layer: q,o + k,v (kv_rows each) + gate,up + down
  uint64_t lm_head_bytes;  // vocab rows of hidden
  uint64_t total_bytes;    // layers * layer_bytes + lm_head_bytes
};
// kv_rows: the rows of k_proj and of v_proj (ModelConfig::kv_dim(); hidden without grouped-query
// attention), 1..hidden. A row longer than kMaxRowLength counts image_row_bytes: its segments.
ImageSize packed_image_size(int hidden, int ffn, int layers, int vocab, int kv_rows);
// The image bytes of one matrix row of n >= 1 trits: row_segments(n) packed rows of
// segment_trits(n) trits (packed_row_bytes(n) when n <= kMaxRowLength).
uint64_t image_row_bytes(int n);

}  // namespace bitsim::model
