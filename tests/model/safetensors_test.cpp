#include "model/safetensors.h"


#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <sys/stat.h>

#include "base/error.h"
#include "support/temp_dir.h"

namespace bitsim::model {
namespace {

namespace fs = std::filesystem;

using TempDir = test::MadeTempDir;

// `got` is `want` bit for bit (-0.0f is not 0.0f).
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << "element " << i;
}

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A file with the given header text and `data_bytes` zero bytes of data; the length field is
// the header size unless overridden.
void write_raw(const fs::path& p, const std::string& header, size_t data_bytes, uint64_t length_field = ~0ull) {
  const uint64_t len = length_field == ~0ull ? header.size() : length_field;
  std::vector<uint8_t> bytes(8);
  std::memcpy(bytes.data(), &len, 8);
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.resize(bytes.size() + data_bytes, 0);
  write_bytes(p, bytes);
}

// Opens `p` and reads every tensor; the result must be a bitsim::Error containing each of
// `needles` (the file name is always required).
void expect_error(const fs::path& p, const std::vector<std::string>& needles) {
  try {
    const SafetensorsFile f = SafetensorsFile::open(p);
    for (const auto& t : f.tensors()) f.read_f32(t.name);
    ADD_FAILURE() << "no error for " << p;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  }
}

template <typename T>
TensorToWrite tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, const std::vector<T>& v) {
  return {name, dtype, std::move(shape), v.data(), v.size() * sizeof(T)};
}

TEST(Safetensors, DTypeNamesAndSizes) {
  EXPECT_STREQ(dtype_name(DType::F32), "F32");
  EXPECT_STREQ(dtype_name(DType::F16), "F16");
  EXPECT_STREQ(dtype_name(DType::BF16), "BF16");
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(dtype_size(DType::F16), 2u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_STREQ(dtype_name(DType::U8), "U8");
  EXPECT_EQ(dtype_size(DType::U8), 1u);
  TensorInfo t{"x", DType::F32, {3, 4, 5}, 0, 240};
  EXPECT_EQ(t.numel(), 60);
  t.shape = {};
  EXPECT_EQ(t.numel(), 1);
}

TEST(Safetensors, F32RoundTrip) {
  TempDir dir;
  const fs::path p = dir.path / "model.safetensors";
  const std::vector<float> a = {1.0f, -2.5f, 3.25e-30f, -0.0f, 1e-45f /*denormal*/, 65504.0f};
  const std::vector<float> b = {0.5f};
  const std::vector<float> empty;
  // b first in the header: tensors() keeps the header order, not the name order.
  write_safetensors(p,
                    {tensor("zeta", DType::F32, {2, 3}, a), tensor("alpha", DType::F32, {}, b),
                     tensor("none", DType::F32, {0, 3}, empty)},
                    {{"format", "pt"}, {"note", "hello"}});

  const auto bytes = read_bytes(p);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  EXPECT_EQ(header_len % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + header_len + (a.size() + b.size()) * 4);

  const SafetensorsFile f = SafetensorsFile::open(p);
  EXPECT_EQ(f.path(), p);
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.tensors()[0].name, "zeta");
  EXPECT_EQ(f.tensors()[1].name, "alpha");
  EXPECT_EQ(f.tensors()[2].name, "none");
  const TensorInfo& z = f.at("zeta");
  EXPECT_EQ(z.dtype, DType::F32);
  EXPECT_EQ(z.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(z.data_begin, 0u);
  EXPECT_EQ(z.data_end, 24u);
  EXPECT_EQ(f.at("alpha").data_begin, 24u);  // back to back
  EXPECT_TRUE(f.at("alpha").shape.empty());
  EXPECT_EQ(f.at("none").numel(), 0);

  const std::vector<float> za = f.read_f32("zeta");
  ASSERT_EQ(za.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(std::bit_cast<uint32_t>(za[i]), std::bit_cast<uint32_t>(a[i]));
  float scalar = 0;
  f.read_f32_into("alpha", &scalar);
  EXPECT_EQ(scalar, 0.5f);
  EXPECT_TRUE(f.read_f32("none").empty());

  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("note"), "hello");
  EXPECT_EQ(f.find("missing"), nullptr);
  EXPECT_NE(f.find("zeta"), nullptr);
  try {
    f.at("missing");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("'missing'"), std::string::npos);
  }
  EXPECT_THROW(f.read_f32("missing"), Error);
}

TEST(Safetensors, NoMetadataGivesEmptyObject) {
  TempDir dir;
  const fs::path p = dir.path / "m.safetensors";
  const std::vector<float> a = {1, 2};
  write_safetensors(p, {tensor("a", DType::F32, {2}, a)});
  const SafetensorsFile f = SafetensorsFile::open(p);
  EXPECT_TRUE(f.metadata().is_object());
  EXPECT_TRUE(f.metadata().empty());
}

TEST(Safetensors, F16KnownValuesAndSubnormals) {
  TempDir dir;
  const fs::path p = dir.path / "f16.safetensors";
  const std::vector<uint16_t> bits = {0x3C00, 0xBC00, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x8000, 0x3555, 0x8001};
  const std::vector<float> want = {1.0f,
                                   -1.0f,
                                   std::ldexp(1.0f, -24),
                                   1023.0f * std::ldexp(1.0f, -24),
                                   std::ldexp(1.0f, -14),
                                   65504.0f,
                                   -0.0f,
                                   0.333251953125f,
                                   -std::ldexp(1.0f, -24)};
  write_safetensors(p, {tensor("h", DType::F16, {3, 3}, bits)});
  const SafetensorsFile f = SafetensorsFile::open(p);
  EXPECT_EQ(f.at("h").dtype, DType::F16);
  ASSERT_NO_FATAL_FAILURE(expect_same_bits(f.read_f32("h"), want));

  // Every finite F16 value converts exactly (reference: sign * mantissa * 2^exponent).
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 31) continue;
    const float mag = e == 0 ? std::ldexp(static_cast<float>(m), -24)
                             : std::ldexp(static_cast<float>(1024 + m), static_cast<int>(e) - 25);
    const float ref = (h & 0x8000) ? -mag : mag;
    ASSERT_EQ(std::bit_cast<uint32_t>(f16_to_f32(static_cast<uint16_t>(h))), std::bit_cast<uint32_t>(ref))
        << std::hex << h;
  }
}

TEST(Safetensors, BF16KnownValues) {
  TempDir dir;
  const fs::path p = dir.path / "bf16.safetensors";
  const std::vector<uint16_t> bits = {0x3F80, 0xC000, 0x0001, 0x7F7F, 0x8000, 0x3EAB};
  const std::vector<float> want = {1.0f, -2.0f, std::ldexp(1.0f, -133), std::bit_cast<float>(0x7F7F0000u), -0.0f,
                                   std::bit_cast<float>(0x3EAB0000u)};
  write_safetensors(p, {tensor("b", DType::BF16, {6}, bits)});
  const SafetensorsFile f = SafetensorsFile::open(p);
  EXPECT_EQ(f.at("b").dtype, DType::BF16);
  ASSERT_NO_FATAL_FAILURE(expect_same_bits(f.read_f32("b"), want));
}

// U8 (the packed ternary release's projections): read as raw bytes, never as floats.
TEST(Safetensors, U8IsReadRawAndRefusedAsFloats) {
  TempDir dir;
  const fs::path p = dir.path / "u8.safetensors";
  const std::vector<uint8_t> bytes = {0x92, 0x54, 0x49, 0x0A, 0xFF, 0x00};
  write_safetensors(p, {tensor("w", DType::U8, {2, 3}, bytes)});
  const SafetensorsFile f = SafetensorsFile::open(p);
  const TensorInfo& t = f.at("w");
  EXPECT_EQ(t.dtype, DType::U8);
  EXPECT_EQ(t.data_end - t.data_begin, 6u);
  EXPECT_EQ(std::memcmp(f.raw(t), bytes.data(), 6), 0);
  try {
    f.read_f32("w");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p.string() + ": tensor 'w' is U8"), std::string::npos) << e.what();
  }
}

// F32 to BF16: round to nearest, ties to even; NaN stays NaN; overflow to Inf.
TEST(Safetensors, F32ToBF16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie, even below
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F818000u)), 0x3F82);  // tie, even above
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F808001u)), 0x3F81);  // above the tie
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F807FFFu)), 0x3F80);  // below the tie
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to +Inf
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  const uint16_t nan = f32_to_bf16(std::bit_cast<float>(0x7F800001u));  // a signalling NaN's payload below bit 16
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);
  for (uint32_t h = 0; h < 0x10000; h += 7) {  // every finite BF16 value converts back to itself
    if ((h & 0x7F80u) != 0x7F80u) {
      EXPECT_EQ(f32_to_bf16(bf16_to_f32(uint16_t(h))), h);
    }
  }
}

TEST(Safetensors, NanAndInfRejectedWithFileAndTensor) {
  TempDir dir;
  const fs::path p = dir.path / "nan.safetensors";
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> f32_nan = {1, 2, std::numeric_limits<float>::quiet_NaN()};
  const std::vector<float> f32_inf = {-inf, 0};
  const std::vector<uint16_t> f16_inf = {0x3C00, 0x7C00};
  const std::vector<uint16_t> f16_nan = {0x7E00};
  const std::vector<uint16_t> bf16_nan = {0x3F80, 0x3F80, 0x7FC0};
  const std::vector<uint16_t> bf16_inf = {0xFF80};
  const std::vector<float> fine = {1, 2};
  write_safetensors(p, {tensor("fine", DType::F32, {2}, fine), tensor("f32_nan", DType::F32, {3}, f32_nan),
                        tensor("f32_inf", DType::F32, {2}, f32_inf), tensor("f16_inf", DType::F16, {2}, f16_inf),
                        tensor("f16_nan", DType::F16, {1}, f16_nan), tensor("bf16_nan", DType::BF16, {3}, bf16_nan),
                        tensor("bf16_inf", DType::BF16, {1}, bf16_inf)});
  const SafetensorsFile f = SafetensorsFile::open(p);  // opening is fine: values are checked on read
  EXPECT_NO_THROW(f.read_f32("fine"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"f32_nan", "element 2 is NaN"}, {"f32_inf", "element 0 is -Inf"}, {"f16_inf", "element 1 is +Inf"},
      {"f16_nan", "element 0 is NaN"}, {"bf16_nan", "element 2 is NaN"}, {"bf16_inf", "element 0 is -Inf"}};
  for (const auto& [name, what] : cases) {
    try {
      f.read_f32(name);
      ADD_FAILURE() << name;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
      EXPECT_NE(msg.find("'" + name + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
    }
  }
}

TEST(Safetensors, ShortFilesAndBadHeaderLengths) {
  TempDir dir;
  const fs::path p = dir.path / "bad.safetensors";
  write_bytes(p, {1, 2, 3, 4, 5});
  expect_error(p, {"shorter than the 8-byte"});
  write_bytes(p, {});
  expect_error(p, {"shorter than the 8-byte"});
  write_raw(p, "{}", 0, 1000);  // claims 1000 header bytes, has 2
  expect_error(p, {"header length 1000"});
  write_raw(p, "{}", 0, 1ull << 40);
  expect_error(p, {"absurd"});
  write_raw(p, "{}", 0, ~0ull - 1);  // would wrap around a naive 8 + N bound check
  expect_error(p, {"absurd"});
  expect_error(dir.path / "does-not-exist.safetensors", {"no such file"});
  expect_error(dir.path, {"is a folder, a regular file is expected"});
  write_raw(p, "{}", 0);  // an empty but valid file
  EXPECT_TRUE(SafetensorsFile::open(p).tensors().empty());
}

TEST(Safetensors, MalformedHeadersNameFileAndTensor) {
  TempDir dir;
  const fs::path p = dir.path / "bad.safetensors";
  struct Case {
    std::string header;
    size_t data;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})", 8, {"malformed", "at byte"}},
      {"[1, 2, 3]", 0, {"must be a JSON object"}},
      {R"("text")", 0, {"must be a JSON object"}},
      {R"({"w": [1, 2]})", 0, {"'w'", "must be an object"}},
      {R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", 8, {"'w'", "no 'dtype'"}},
      {R"({"w": {"dtype": "F32", "data_offsets": [0, 8]}})", 8, {"'w'", "no 'shape'"}},
      {R"({"w": {"dtype": "F32", "shape": [2]}})", 8, {"'w'", "no 'data_offsets'"}},
      {R"({"w": {"dtype": 32, "shape": [2], "data_offsets": [0, 8]}})", 8, {"'w'", "'dtype' must be a string"}},
      {R"({"w": {"dtype": "F32", "shape": 2, "data_offsets": [0, 8]}})", 8, {"'w'", "'shape' must be an array"}},
      {R"({"w": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}})", 8, {"'w'", "non-integer"}},
      {R"({"w": {"dtype": "F32", "shape": ["2"], "data_offsets": [0, 8]}})", 8, {"'w'", "non-integer"}},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", 8, {"'w'", "[begin, end]"}},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": "0-8"}})", 8, {"'w'", "[begin, end]"}},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8.0]}})", 8, {"'w'", "non-negative integers"}},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}})", 8, {"'w'", "non-negative integers"}},
      {R"({"w": {"dtype": "I8", "shape": [2], "data_offsets": [0, 2]}})", 2, {"'w'", "unsupported dtype 'I8'"}},
      {R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", 8, {"'w'", "unsupported dtype 'F64'"}},
      {R"({"w": {"dtype": "F32", "shape": [-2, -1], "data_offsets": [0, 8]}})", 8, {"'w'", "negative shape"}},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8, {"'w'", "begin is after end"}},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 7, {"'w'", "beyond the data section"}},
      {R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8, {"'w'", "needs 12 bytes"}},
      {R"({"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 8]}})", 8, {"'w'", "needs 4 bytes"}},
      {R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 4], "data_offsets": [0, 8]}})",
       8,
       {"'w'", "too large"}},
      {R"({"w": {"dtype": "F32", "shape": [18446744073709551615], "data_offsets": [0, 8]}})", 8, {"'w'", "too large"}},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
       12,
       {"'b'", "overlaps", "'a'"}},
      {R"({"b": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
           "a": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
       16,
       {"'a'", "overlaps", "'b'"}},
      {R"({"__metadata__": [1], "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
       4,
       {"__metadata__", "must be an object"}},
      {R"({"__metadata__": {"k": 1}, "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
       4,
       {"__metadata__", "'k'"}},
      {"\xff\xfe{}", 0, {"malformed"}},
      // The format's own rules beyond what a loader needs: an entry holds exactly its three
      // fields; the header begins with '{' and is padded only with spaces.
      {R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "scale": 2}})", 4, {"'w'", "unknown field 'scale'"}},
      {R"( {"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4, {"must begin with '{'"}},
      {"{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}\n", 4, {"padded only with spaces"}},
      {"{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}\t ", 4, {"padded only with spaces"}},
      {R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
       4,
       {"key \"w\" appears twice"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.header);
    write_raw(p, c.header, c.data);
    expect_error(p, c.needles);
  }
}

// The format indexes the whole data buffer, without holes: a gap between tensors or bytes
// after the last one (a dropped tensor, a truncated header, another file format) is refused,
// naming the tensors around it.
TEST(Safetensors, GapsAndTrailingBytesAreRefused) {
  TempDir dir;
  const fs::path p = dir.path / "holes.safetensors";
  write_raw(p, R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                   "b": {"dtype": "F32", "shape": [1], "data_offsets": [12, 16]}})", 16);
  expect_error(p, {"4 unindexed bytes [8, 12)", "before tensor 'b'", "after tensor 'a'"});
  write_raw(p, R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12);
  expect_error(p, {"4 unindexed bytes [0, 4)", "before tensor 'a'"});
  write_raw(p, R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 11);
  expect_error(p, {"3 trailing bytes after the last tensor 'a'"});
  write_raw(p, R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 8);
  EXPECT_EQ(SafetensorsFile::open(p).tensors().size(), 1u);  // exactly covered: fine
  write_raw(p, R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}   )", 8);
  EXPECT_EQ(SafetensorsFile::open(p).tensors().size(), 1u);  // padded with spaces: fine
}

// A FIFO or a folder in place of the file is refused before open() (which would block on a
// FIFO), naming the path.
TEST(Safetensors, NonRegularFilesAreRefusedNamingThem) {
  TempDir dir;
  const fs::path fifo = dir.path / "fifo.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error(fifo, {"FIFO"});
  const fs::path folder = dir.path / "folder.safetensors";
  fs::create_directories(folder);
  expect_error(folder, {"is a folder"});
}

TEST(Safetensors, TruncatedAndCorruptedFilesNeverCrash) {
  TempDir dir;
  const fs::path good = dir.path / "good.safetensors";
  const fs::path bad = dir.path / "bad.safetensors";
  const std::vector<float> a = {0.5f, -1.5f, 2.0f, 3.0f, 0.25f, -0.125f};
  const std::vector<uint16_t> h = {0x3C00, 0x0001, 0xBC00};
  const std::vector<uint16_t> b = {0x3F80, 0xC000};
  write_safetensors(good, {tensor("model.a", DType::F32, {2, 3}, a), tensor("model.h", DType::F16, {3}, h),
                           tensor("model.b", DType::BF16, {1, 2}, b)},
                    {{"format", "pt"}});
  const std::vector<uint8_t> bytes = read_bytes(good);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);

  size_t ok = 0, errors = 0;
  auto attempt = [&](const std::vector<uint8_t>& content, const std::string& what) {
    write_bytes(bad, content);
    try {
      const SafetensorsFile f = SafetensorsFile::open(bad);
      for (const auto& t : f.tensors()) {
        const auto v = f.read_f32(t.name);
        ASSERT_EQ(static_cast<int64_t>(v.size()), t.numel());
      }
      ++ok;
    } catch (const Error& e) {
      ++errors;
      EXPECT_NE(std::string(e.what()).find(bad.string()), std::string::npos) << what << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": unexpected exception type: " << e.what();
    }
  };

  for (size_t len = 0; len < bytes.size(); ++len)
    attempt(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len)),
            "truncated to " + std::to_string(len));
  EXPECT_EQ(ok, 0u);  // every cut loses bytes that the header announces
  EXPECT_EQ(errors, bytes.size());

  std::mt19937_64 rng(12345);
  const size_t header_end = 8 + header_len;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> c = bytes;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) {
      const size_t pos = rng() % header_end;  // mostly header bytes, sometimes the length field
      switch (rng() % 4) {
        case 0: c[pos] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 1: c[pos] = static_cast<uint8_t>(rng()); break;
        case 2: c[pos] = static_cast<uint8_t>("0123456789-[]{}\",:e."[rng() % 20]); break;
        default: c[pos] = '9'; break;
      }
    }
    attempt(c, "corruption " + std::to_string(iter));
  }
  EXPECT_GT(errors, 0u);
}

TEST(Safetensors, WriterRejectsInconsistentInput) {
  TempDir dir;
  const fs::path p = dir.path / "w.safetensors";
  const std::vector<float> a = {1, 2, 3};
  try {
    write_safetensors(p, {tensor("model.x", DType::F32, {2, 2}, a)});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("'model.x'"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(p));
  EXPECT_THROW(write_safetensors(p, {tensor("x", DType::F32, {3}, a), tensor("x", DType::F32, {3}, a)}), Error);
  EXPECT_THROW(write_safetensors(p, {tensor("__metadata__", DType::F32, {3}, a)}), Error);
  EXPECT_THROW(write_safetensors(p, {tensor("x", DType::F32, {-3}, a)}), Error);
  EXPECT_FALSE(fs::exists(p));
  EXPECT_THROW(write_safetensors(dir.path / "no" / "such" / "dir.safetensors", {tensor("x", DType::F32, {3}, a)}),
               Error);
}

TEST(Safetensors, StreamingWriterChecksByteCount) {
  TempDir dir;
  const fs::path p = dir.path / "s.safetensors";
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
  {
    SafetensorsWriter w(p, {{"first", DType::F32, {10, 50}}, {"second", DType::F32, {500}}}, {{"k", "v"}});
    EXPECT_EQ(w.data_bytes(), 4000u);
    for (size_t i = 0; i < v.size(); i += 300)  // pieces that straddle the tensor boundary
      w.append(v.data() + i, std::min<size_t>(300, v.size() - i) * 4);
    EXPECT_THROW(w.append(v.data(), 4), Error);  // more than announced
    w.finish();
  }
  const SafetensorsFile f = SafetensorsFile::open(p);
  const auto first = f.read_f32("first");
  const auto second = f.read_f32("second");
  EXPECT_EQ(first[499], 249.5f);
  EXPECT_EQ(second[0], 250.0f);
  EXPECT_EQ(second[499], 499.5f);

  const fs::path q = dir.path / "incomplete.safetensors";
  {
    SafetensorsWriter w(q, {{"t", DType::F32, {4}}});
    w.append(v.data(), 8);
    EXPECT_THROW(w.finish(), Error);
    EXPECT_FALSE(fs::exists(q));  // written to a temporary file, renamed into place by finish()
  }
  EXPECT_FALSE(fs::exists(q));  // an unfinished file never appears
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) files += e.path() == p ? 1 : 100;
  EXPECT_EQ(files, 1u);  // and its temporary file is gone
}

TEST(Safetensors, MoveKeepsTheMapping) {
  TempDir dir;
  const fs::path p = dir.path / "m.safetensors";
  const std::vector<float> a = {4, 5, 6};
  write_safetensors(p, {tensor("a", DType::F32, {3}, a)});
  SafetensorsFile f = SafetensorsFile::open(p);
  SafetensorsFile g = std::move(f);
  EXPECT_EQ(g.read_f32("a"), a);
  SafetensorsFile h = SafetensorsFile::open(p);
  h = std::move(g);
  EXPECT_EQ(h.read_f32("a")[2], 6.0f);
  EXPECT_EQ(h.path(), p);
}

}  // namespace
}  // namespace bitsim::model
