// The MMIO program file (docs/mmio-record.md): what a reader holds in memory is bounded by
// what the format can legally hold, whatever the file's size.
#include "host/mmio_program.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"
#include "host/memory_map.h"
#include "hw/memory/memory_model.h"
#include "support/run_argv.h"
#include "support/temp_dir.h"

namespace {

using namespace bitsim;

std::string error_of(const std::string& text) {
  std::istringstream in(text);
  try {
    host::read_program(in, "p.mmio");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A sparse file of `size` bytes that starts with `head` (the rest reads as NUL bytes).
void sparse_file(const std::filesystem::path& p, const std::string& head, uintmax_t size) {
  std::ofstream(p, std::ios::binary) << head;
  std::filesystem::resize_file(p, size);
}

TEST(MmioProgram, RecordsRoundTripThroughTheFile) {
  host::MmioProgram p;
  p.config.emplace_back("clock.mhz", "125");
  host::MmioOp w;
  w.kind = host::MmioOp::Kind::kWrite;
  w.time_ps = 10, w.addr = 0x40400030, w.value = 4, w.access_ps = 200000;
  host::MmioOp m;
  m.kind = host::MmioOp::Kind::kMemWrite;
  m.time_ps = 20, m.addr = 0x100000, m.size = 3, m.bytes = {0x01, 0xab, 0xff};
  host::MmioOp d;  // a load whose bytes a timing-only run never computed: no digest
  d.kind = host::MmioOp::Kind::kMemRead;
  d.time_ps = 30, d.addr = 0x200000, d.size = 8, d.digest_known = false;
  p.ops = {w, m, d};
  std::stringstream file;
  host::write_program(p, file);
  EXPECT_NE(file.str().find("\nD 30 200000 8 -\n"), std::string::npos) << file.str();
  const host::MmioProgram back = host::read_program(file, "p.mmio");
  EXPECT_EQ(back.config, p.config);
  EXPECT_EQ(back.ops, p.ops);
  // Each record keeps its line, for the errors of a replay.
  EXPECT_EQ(back.config_where(0), "p.mmio:2");
  EXPECT_EQ(back.where(0), "p.mmio:3");
  EXPECT_EQ(back.where(2), "p.mmio:5");
}

TEST(MmioProgram, ALineIsBoundedByItsRecordsLongestLegalForm) {
  const std::string magic = "bitsim-mmio 1\n";
  EXPECT_NE(error_of(magic + "# " + std::string(5000, 'x') + "\n").find("p.mmio:2: line longer than 4096 bytes"),
            std::string::npos);
  EXPECT_NE(error_of(magic + "W " + std::string(10000, '1') + "\n").find("p.mmio:2: line longer"), std::string::npos);
  // An M record is read as its size field says: no more digits than that, and no size past the DDR.
  const uint64_t ddr = hw::kMaxDdrBytes;
  EXPECT_NE(error_of(magic + "M 0 100 " + std::to_string(ddr + 1) + " " + std::string(5000, '0') + "\n")
                .find("p.mmio:2: size " + std::to_string(ddr + 1) + " out of range"),
            std::string::npos);
  EXPECT_NE(error_of(magic + "M 0 100 8 " + std::string(6000, '0') + "\n").find("p.mmio:2: M record longer than its 8"),
            std::string::npos);
  EXPECT_NE(error_of(magic + "M 0 100 " + std::string(5000, '9') + "\n").find("p.mmio:2: M record's head"),
            std::string::npos);
  // A long M record of the size it announces is read whole.
  const std::string digits(2 * 3000, 'a');
  std::istringstream ok(magic + "M 0 100 3000 " + digits + "\n");
  const host::MmioProgram p = host::read_program(ok, "p.mmio");
  ASSERT_EQ(p.ops.size(), 1u);
  EXPECT_EQ(p.ops[0].bytes, std::vector<uint8_t>(3000, 0xaa));
  // The first line is compared without reading past its length.
  EXPECT_NE(error_of(std::string(100000, '\0')).find("not a bitsim MMIO program"), std::string::npos);
}

// The command on a gigabyte file: refused at once, naming the file and line, in a few MiB.
TEST(MmioProgram, ReplayOfAHugeFileRefusesItWithoutReadingIt) {
  test::MadeTempDir dir;
  const uintmax_t gib = uintmax_t(1) << 30;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "not a bitsim MMIO program"},
      {"bitsim-mmio 1\n", "a.mmio:2: line longer than"},
      {"bitsim-mmio 1\nC clock.mhz ", "a.mmio:2: line longer than"},
      {"bitsim-mmio 1\nM 0 100 16 ", "a.mmio:2: M record longer than its 16 bytes"},
      {"bitsim-mmio 1\nM 0 100 999999999999 ", "a.mmio:2: size 999999999999 out of range"},
  };
  for (const auto& [head, message] : cases) {
    sparse_file(dir.path / "a.mmio", head, gib);
    const bitsim::testing::Outcome r = bitsim::testing::run_argv({BITSIM_BINARY, "replay", "a.mmio"}, dir.path, dir.path);
    EXPECT_EQ(r.code, 2) << head << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_LT(r.peak_kb, 128 * 1024) << head << ": peak " << r.peak_kb << " KiB";
  }
}

}  // namespace
