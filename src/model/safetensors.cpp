#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/json_parse.h"
#include "base/error.h"
#include "base/file_io.h"

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; bitsim reads it in place");

namespace bitsim::model {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // 100 MiB: far above any real header

std::string shape_str(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// numel and byte size of a shape; false on negative dims or on overflow.
bool shape_bytes(const std::vector<int64_t>& shape, size_t elem, uint64_t* numel, uint64_t* bytes) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  }
  if (__builtin_mul_overflow(n, static_cast<uint64_t>(elem), bytes)) return false;
  if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  *numel = n;
  return true;
}

bool parse_dtype(const std::string& s, DType* out) {
  if (s == "F32") *out = DType::F32;
  else if (s == "F16") *out = DType::F16;
  else if (s == "BF16") *out = DType::BF16;
  else if (s == "U8") *out = DType::U8;
  else return false;
  return true;
}

// One header entry: {"dtype": str, "shape": [int...], "data_offsets": [begin, end]}.
TensorInfo parse_entry(const std::string& file, const std::string& name, const nlohmann::ordered_json& e,
                       uint64_t data_size) {
  auto fail = [&](const std::string& why) -> Error {
    return Error(fmt::format("{}: tensor '{}': {}", file, name, why));
  };
  if (!e.is_object()) throw fail(fmt::format("header entry must be an object, found {}", e.type_name()));
  for (const auto& [field, value] : e.items())
    if (field != "dtype" && field != "shape" && field != "data_offsets")
      throw fail(fmt::format("unknown field '{}' (an entry holds dtype, shape and data_offsets)", field));
  TensorInfo t;
  t.name = name;

  auto dt = e.find("dtype");
  if (dt == e.end()) throw fail("header entry has no 'dtype'");
  if (!dt->is_string()) throw fail(fmt::format("'dtype' must be a string, found {}", dt->type_name()));
  const std::string dtype = dt->get<std::string>();
  if (!parse_dtype(dtype, &t.dtype))
    throw fail(fmt::format("unsupported dtype '{}' (bitsim reads F32, F16, BF16 and U8)", dtype));

  auto sh = e.find("shape");
  if (sh == e.end()) throw fail("header entry has no 'shape'");
  if (!sh->is_array()) throw fail(fmt::format("'shape' must be an array, found {}", sh->type_name()));
  for (const auto& d : *sh) {
    if (!d.is_number_integer()) throw fail(fmt::format("'shape' holds a non-integer: {}", d.dump()));
    if (d.is_number_unsigned()) {
      const auto u = d.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw fail(fmt::format("shape dimension {} is too large", u));
      t.shape.push_back(static_cast<int64_t>(u));
    } else {
      const auto s = d.get<int64_t>();
      if (s < 0) throw fail(fmt::format("negative shape dimension {}", s));
      t.shape.push_back(s);
    }
  }

  auto off = e.find("data_offsets");
  if (off == e.end()) throw fail("header entry has no 'data_offsets'");
  if (!off->is_array() || off->size() != 2)
    throw fail(fmt::format("'data_offsets' must be an array [begin, end], found {}", off->dump()));
  for (const auto& o : *off)
    if (!o.is_number_unsigned())
      throw fail(fmt::format("'data_offsets' must hold two non-negative integers, found {}", off->dump()));
  t.data_begin = (*off)[0].get<uint64_t>();
  t.data_end = (*off)[1].get<uint64_t>();
  if (t.data_begin > t.data_end)
    throw fail(fmt::format("data_offsets [{}, {}]: begin is after end", t.data_begin, t.data_end));
  if (t.data_end > data_size)
    throw fail(fmt::format("data_offsets [{}, {}] end beyond the data section ({} bytes; file truncated?)",
                           t.data_begin, t.data_end, data_size));

  uint64_t numel = 0, bytes = 0;
  if (!shape_bytes(t.shape, dtype_size(t.dtype), &numel, &bytes))
    throw fail(fmt::format("shape {} is too large", shape_str(t.shape)));
  if (bytes != t.data_end - t.data_begin)
    throw fail(fmt::format("shape {} {} needs {} bytes, but data_offsets [{}, {}] span {} bytes",
                           shape_str(t.shape), dtype, bytes, t.data_begin, t.data_end,
                           t.data_end - t.data_begin));
  return t;
}

const char* nonfinite_name(bool nan, bool negative) { return nan ? "NaN" : (negative ? "-Inf" : "+Inf"); }

// A whole file mapped read-only.
struct Mapping {
  void* addr;
  uint64_t size;
};

// Maps a regular file of at least the 8-byte header length; the descriptor is closed again.
Mapping map_regular_file(const std::filesystem::path& path, const std::string& file) {
  io::check_input_file(path, "safetensors file");  // a FIFO would block open()
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("{}: cannot open safetensors file: {}", file, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(fmt::format("{}: cannot stat: {}", file, std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(fmt::format("{}: not a regular file", file));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    throw Error(fmt::format("{}: file is {} bytes, shorter than the 8-byte header length; not a safetensors file",
                            file, size));
  }
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (m == MAP_FAILED) throw Error(fmt::format("{}: mmap failed: {}", file, std::strerror(map_err)));
  return {m, size};
}

// The u64 header length at the start of a file of `size` bytes (>= 8), checked against the file.
uint64_t read_header_length(const std::string& file, const std::byte* base, uint64_t size) {
  uint64_t header_len = 0;
  std::memcpy(&header_len, base, 8);
  if (header_len > kMaxHeaderBytes)
    throw Error(fmt::format("{}: header length {} bytes is absurd (limit {}); not a safetensors file", file,
                            header_len, kMaxHeaderBytes));
  if (header_len > size - 8)
    throw Error(fmt::format("{}: header length {} bytes exceeds the {} bytes after the length field "
                            "(file truncated or not a safetensors file)",
                            file, header_len, size - 8));
  return header_len;
}

// The header text as a JSON object (keys in file order).
nlohmann::ordered_json parse_header_json(const std::string& file, std::string_view text) {
  nlohmann::ordered_json header;
  try {
    header = io::parse_json_unique_keys<nlohmann::ordered_json>(text, file + ": header");
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(fmt::format("{}: header JSON malformed at byte {} of the header: {}", file, e.byte, e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: header JSON malformed: {}", file, e.what()));
  }
  if (!header.is_object())
    throw Error(fmt::format("{}: header must be a JSON object, found {}", file, header.type_name()));
  // The format: the header begins with '{' and may be padded at its end with spaces (0x20)
  // only.
  const size_t end = text.find_last_not_of(' ');
  if (text.empty() || text[0] != '{' || end == std::string_view::npos || text[end] != '}')
    throw Error(fmt::format("{}: the header must begin with '{{' at its first byte and be "
                            "padded only with spaces (0x20)",
                            file));
  return header;
}

// "__metadata__": an object of strings, copied into `out`.
void read_metadata(const std::string& file, const nlohmann::ordered_json& value, nlohmann::json& out) {
  if (!value.is_object())
    throw Error(fmt::format("{}: __metadata__ must be an object of strings, found {}", file, value.type_name()));
  for (const auto& [mk, mv] : value.items()) {
    if (!mv.is_string())
      throw Error(fmt::format("{}: __metadata__ key '{}' must be a string, found {}", file, mk, mv.type_name()));
    out[mk] = mv.get<std::string>();
  }
}

// No two tensors may share a byte.
void check_no_overlap(const std::string& file, const std::vector<TensorInfo>& tensors) {
  std::vector<const TensorInfo*> by_begin;
  for (const auto& t : tensors)
    if (t.data_end > t.data_begin) by_begin.push_back(&t);
  std::sort(by_begin.begin(), by_begin.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->data_begin < b->data_begin; });
  for (size_t i = 1; i < by_begin.size(); ++i) {
    const TensorInfo& a = *by_begin[i - 1];
    const TensorInfo& b = *by_begin[i];
    if (b.data_begin < a.data_end)
      throw Error(fmt::format("{}: tensor '{}' [{}, {}] overlaps tensor '{}' [{}, {}]", file, b.name, b.data_begin,
                              b.data_end, a.name, a.data_begin, a.data_end));
  }
}

// The safetensors format: the data buffer is entirely indexed, without holes. A gap between
// two tensors or bytes after the last one are refused: they are a truncated header, a
// tensor that was dropped from it, or a file that is not what it claims to be.
void check_fully_covered(const std::string& file, const std::vector<TensorInfo>& tensors, uint64_t data_size) {
  std::vector<const TensorInfo*> by_begin;
  for (const auto& t : tensors)
    if (t.data_end > t.data_begin) by_begin.push_back(&t);
  std::sort(by_begin.begin(), by_begin.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->data_begin < b->data_begin; });
  uint64_t at = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo* t : by_begin) {
    if (t->data_begin != at)
      throw Error(fmt::format("{}: {} unindexed bytes [{}, {}) of the data buffer before tensor '{}'{} (the format "
                              "allows no holes)",
                              file, t->data_begin - at, at, t->data_begin, t->name,
                              prev ? fmt::format(", after tensor '{}'", prev->name) : std::string()));
    at = t->data_end;
    prev = t;
  }
  if (at != data_size)
    throw Error(fmt::format("{}: {} trailing bytes after the last tensor{} (data buffer {} bytes, tensors end at {}; "
                            "the format allows no unindexed bytes)",
                            file, data_size - at, prev ? fmt::format(" '{}'", prev->name) : std::string(), data_size, at));
}

}  // namespace

const char* dtype_name(DType d) {
  switch (d) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::U8: return "U8";
  }
  return "?";
}

size_t dtype_size(DType d) {
  switch (d) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::U8: return 1;
  }
  return 0;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return std::bit_cast<float>(sign);  // +-0
    exp = 127 - 15 + 1;                                   // subnormal: normalize
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    mant &= 0x3ffu;
    return std::bit_cast<float>(sign | (exp << 23) | (mant << 13));
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // Inf / NaN
  return std::bit_cast<float>(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t f32_to_bf16(float value) {
  const auto b = std::bit_cast<uint32_t>(value);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x0040u);  // NaN: quiet
  // Round to nearest even on the 16 bits dropped; a carry into the exponent is the right
  // result (up to +-Inf past the largest finite BF16).
  const uint32_t rounded = b + 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---------------------------------------------------------------------------------------------
// Reader

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept { *this = std::move(o); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    map_ = std::exchange(o.map_, nullptr);
    map_size_ = std::exchange(o.map_size_, 0);
    data_ = std::exchange(o.data_, nullptr);
    data_size_ = std::exchange(o.data_size_, 0);
    tensors_ = std::move(o.tensors_);
    index_ = std::move(o.index_);
    metadata_ = std::move(o.metadata_);
    o.tensors_.clear();
    o.index_.clear();
    o.metadata_ = nlohmann::json::object();
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() { release(); }

void SafetensorsFile::release() noexcept {
  if (map_ != nullptr) ::munmap(map_, map_size_);
  map_ = nullptr;
  map_size_ = 0;
  data_ = nullptr;
  data_size_ = 0;
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  const std::string file = path.string();
  SafetensorsFile f;
  f.path_ = path;
  const Mapping m = map_regular_file(path, file);
  f.map_ = m.addr;  // from here on f unmaps it, whatever is thrown
  f.map_size_ = m.size;
  const auto* base = static_cast<const std::byte*>(m.addr);

  const uint64_t header_len = read_header_length(file, base, m.size);
  f.data_ = base + 8 + header_len;
  f.data_size_ = m.size - 8 - header_len;
  const nlohmann::ordered_json header =
      parse_header_json(file, std::string_view(reinterpret_cast<const char*>(base + 8), header_len));

  try {
    for (const auto& [key, value] : header.items()) {
      if (key == "__metadata__") {
        read_metadata(file, value, f.metadata_);
        continue;
      }
      TensorInfo t = parse_entry(file, key, value, f.data_size_);
      if (f.index_.count(t.name) != 0) throw Error(fmt::format("{}: tensor '{}' appears twice", file, t.name));
      f.index_.emplace(t.name, f.tensors_.size());
      f.tensors_.push_back(std::move(t));
    }
  } catch (const nlohmann::json::exception& e) {  // defensive: all accesses are type-checked
    throw Error(fmt::format("{}: malformed header: {}", file, e.what()));
  }
  check_no_overlap(file, f.tensors_);
  check_fully_covered(file, f.tensors_, f.data_size_);
  return f;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& SafetensorsFile::at(const std::string& name) const {
  const TensorInfo* t = find(name);
  if (t == nullptr) throw Error(fmt::format("{}: no tensor '{}'", path_.string(), name));
  return *t;
}

std::vector<float> SafetensorsFile::read_f32(const std::string& name) const {
  const TensorInfo& t = at(name);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  read_f32_into(name, out.data());
  return out;
}

void SafetensorsFile::read_f32_into(const std::string& name, float* dst) const {
  const TensorInfo& t = at(name);
  const std::byte* p = raw(t);
  const auto n = static_cast<size_t>(t.numel());
  auto bad = [&](size_t i, bool nan, bool negative) {
    return Error(fmt::format("{}: tensor '{}': element {} is {} (weights must be finite)", path_.string(), name, i,
                             nonfinite_name(nan, negative)));
  };
  switch (t.dtype) {
    case DType::F32: {
      if (n != 0) std::memcpy(dst, p, n * 4);
      for (size_t i = 0; i < n; ++i) {
        const auto b = std::bit_cast<uint32_t>(dst[i]);
        if ((b & 0x7f800000u) == 0x7f800000u) throw bad(i, (b & 0x007fffffu) != 0, (b >> 31) != 0);
      }
      break;
    }
    case DType::F16: {
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        if ((h & 0x7c00u) == 0x7c00u) throw bad(i, (h & 0x03ffu) != 0, (h >> 15) != 0);
        dst[i] = f16_to_f32(h);
      }
      break;
    }
    case DType::BF16: {
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        if ((h & 0x7f80u) == 0x7f80u) throw bad(i, (h & 0x007fu) != 0, (h >> 15) != 0);
        dst[i] = bf16_to_f32(h);
      }
      break;
    }
    case DType::U8:
      throw Error(fmt::format("{}: tensor '{}' is U8 (packed ternary weights), not a float tensor", path_.string(),
                              name));
  }
}

// ---------------------------------------------------------------------------------------------
// Writer

SafetensorsWriter::SafetensorsWriter(const std::filesystem::path& path, std::vector<TensorSpec> specs,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path) {
  const std::string file = path.string();
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const auto& s : specs) {
    if (s.name == "__metadata__") throw Error(fmt::format("{}: '__metadata__' is not a valid tensor name", file));
    if (header.contains(s.name)) throw Error(fmt::format("{}: tensor '{}' given twice", file, s.name));
    uint64_t numel = 0, bytes = 0;
    if (!shape_bytes(s.shape, dtype_size(s.dtype), &numel, &bytes))
      throw Error(fmt::format("{}: tensor '{}': invalid shape {}", file, s.name, shape_str(s.shape)));
    header[s.name] = {{"dtype", dtype_name(s.dtype)}, {"shape", s.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  total_ = offset;

  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: cannot encode the header (tensor names must be UTF-8): {}", file, e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  // Written to a temporary file renamed into place by finish() (base/file_io.h).
  tmp_ = std::make_unique<io::OutputFile>(path, "safetensors file");
  out_.open(tmp_->temp_path(), std::ios::binary | std::ios::trunc);
  if (!out_) throw Error(fmt::format("{}: cannot create file: {}", file, std::strerror(errno)));
  const uint64_t len = text.size();
  char len_bytes[8];
  std::memcpy(len_bytes, &len, 8);
  out_.write(len_bytes, 8);
  out_.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out_) throw Error(fmt::format("{}: write failed", file));
}

// Unfinished: the temporary file is removed (by tmp_), the target left as it was.
SafetensorsWriter::~SafetensorsWriter() {
  if (!finished_) out_.close();
}

void SafetensorsWriter::append(const void* data, size_t bytes) {
  if (finished_) throw Error(fmt::format("{}: append after finish", path_.string()));
  if (bytes > total_ - written_)
    throw Error(fmt::format("{}: {} more bytes of data than the header announces ({} bytes)", path_.string(),
                            written_ + bytes - total_, total_));
  out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out_) throw Error(fmt::format("{}: write failed (disk full?)", path_.string()));
  written_ += bytes;
}

void SafetensorsWriter::finish() {
  if (finished_) return;
  if (written_ != total_)
    throw Error(fmt::format("{}: only {} of the {} data bytes announced in the header were written",
                            path_.string(), written_, total_));
  out_.close();
  if (!out_) throw Error(fmt::format("{}: write failed on close (disk full?)", path_.string()));
  tmp_->commit();
  finished_ = true;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const auto& t : tensors) {
    uint64_t numel = 0, bytes = 0;
    if (!shape_bytes(t.shape, dtype_size(t.dtype), &numel, &bytes))
      throw Error(fmt::format("{}: tensor '{}': invalid shape {}", path.string(), t.name, shape_str(t.shape)));
    if (bytes != t.bytes)
      throw Error(fmt::format("{}: tensor '{}': shape {} {} needs {} bytes, {} given", path.string(), t.name,
                              shape_str(t.shape), dtype_name(t.dtype), bytes, t.bytes));
    if (t.bytes != 0 && t.data == nullptr)
      throw Error(fmt::format("{}: tensor '{}': no data", path.string(), t.name));
    specs.push_back({t.name, t.dtype, t.shape});
  }
  SafetensorsWriter w(path, std::move(specs), metadata);
  for (const auto& t : tensors)
    if (t.bytes != 0) w.append(t.data, t.bytes);
  w.finish();
}

}  // namespace bitsim::model
