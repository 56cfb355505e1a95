#pragma once
// safetensors checkpoint files: a memory-mapped, validating reader and a streaming writer.
//
// Format: an 8-byte little-endian u64 header length N, N bytes of JSON header
//   {name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {str: str}}
// then the data section; offsets are relative to the start of the data section.
// F32, F16 and BF16 tensors are read as floats; U8 tensors (the packed ternary projections of
// BitNet b1.58 2B4T's release, docs/packed-image.md) only as raw bytes. Every
// malformed file is a bitsim::Error naming the file (and the tensor where there is one);
// the reader never reads outside the mapping, whatever the file holds (a file truncated by
// another process while mapped is the one thing it cannot guard against: SIGBUS).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/file_io.h"

namespace bitsim::model {

enum class DType { F32, F16, BF16, U8 };
const char* dtype_name(DType);  // "F32", "F16", "BF16", "U8" (the safetensors spelling)
size_t dtype_size(DType);       // bytes per element

// Exact conversions to F32 (no rounding happens: every F16/BF16 value is an F32 value).
float f16_to_f32(uint16_t bits);
float bf16_to_f32(uint16_t bits);
// F32 to BF16, rounded to nearest, ties to even (a NaN stays a quiet NaN of the same sign).
uint16_t f32_to_bf16(float value);

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t data_begin = 0, data_end = 0;  // offsets relative to the data section
  int64_t numel() const;                  // product of shape (1 for a scalar)
};

class SafetensorsFile {  // memory-mapped (mmap, PROT_READ), move-only, unmaps in destructor
 public:
  static SafetensorsFile open(const std::filesystem::path& path);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::filesystem::path& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in header order
  const TensorInfo* find(const std::string& name) const;               // nullptr if absent
  const TensorInfo& at(const std::string& name) const;  // throws Error naming file and tensor

  // Converts F16/BF16 to F32 exactly; throws Error naming file + tensor (and the element
  // index) if any value is NaN or Inf, or if the tensor is U8 (not a float tensor). Safe to
  // call from several threads at once.
  std::vector<float> read_f32(const std::string& name) const;
  void read_f32_into(const std::string& name, float* dst) const;  // dst holds numel() floats

  // The raw bytes of a tensor inside the mapping (little-endian, unaligned in general).
  const std::byte* raw(const TensorInfo& t) const { return data_ + t.data_begin; }

  const nlohmann::json& metadata() const { return metadata_; }  // __metadata__ or {}

 private:
  SafetensorsFile() = default;
  void release() noexcept;

  std::filesystem::path path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  const std::byte* data_ = nullptr;  // start of the data section
  uint64_t data_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
  nlohmann::json metadata_ = nlohmann::json::object();
};

struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;  // bytes bytes, little-endian
  size_t bytes;
};

// Writes a whole file. Tensors are laid out in the given order, back to back (no gaps, as
// the reference safetensors library requires); the header is padded with spaces to a multiple
// of 8 bytes. Throws Error naming the file (and tensor) on a duplicate name, a byte count that
// is not numel * dtype_size, or an I/O failure.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// A tensor announced in the header before its data is written.
struct TensorSpec {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

// Streams a safetensors file whose data does not fit in memory: the constructor writes the
// header for `specs`, then append() takes the data of the tensors in order, in pieces of any
// size, and finish() checks that every byte arrived and closes the file. A writer destroyed
// without finish() (e.g. by an exception) deletes the incomplete file.
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::filesystem::path& path, std::vector<TensorSpec> specs,
                    const std::map<std::string, std::string>& metadata = {});
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  ~SafetensorsWriter();

  void append(const void* data, size_t bytes);
  void finish();
  uint64_t data_bytes() const { return total_; }  // size of the data section

 private:
  std::filesystem::path path_;
  std::unique_ptr<io::OutputFile> tmp_;  // the file being written, renamed into place by finish()
  std::ofstream out_;
  uint64_t total_ = 0, written_ = 0;
  bool finished_ = false;
};

}  // namespace bitsim::model
