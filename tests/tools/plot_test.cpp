// The plot scripts (tools/plot_sweep.py, tools/plot_variants.py, tools/plot_prefill.py) as users run them, under
// /usr/bin/python3: a small CSV in, a valid image out; bad input named, exit 2. Every test
// skips when matplotlib is not installed (tools/packages.txt lists python3-matplotlib).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "support/run_bitsim.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

using bitsim::test::TempDir;
using bitsim::testing::run_command;

const std::string kTools = std::string(BITSIM_SOURCE_DIR) + "/tools/";

bool have_matplotlib() { return run_command("/usr/bin/python3 -c 'import matplotlib' >/dev/null").code == 0; }

fs::path write(const TempDir& dir, const std::string& name, const std::string& text) {
  fs::create_directories(dir.path);
  std::ofstream(dir.path / name, std::ios::binary) << text;
  return dir.path / name;
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// A PNG: the 8-byte signature, then the IHDR chunk with a width and height of at least 100
// pixels (big-endian at bytes 16 and 20).
void expect_png(const fs::path& p) {
  const std::string b = read(p);
  ASSERT_GT(b.size(), 1000u) << p;
  EXPECT_EQ(b.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(b.substr(12, 4), "IHDR");
  auto be32 = [&](size_t i) {
    return uint32_t(uint8_t(b[i])) << 24 | uint32_t(uint8_t(b[i + 1])) << 16 | uint32_t(uint8_t(b[i + 2])) << 8 |
           uint32_t(uint8_t(b[i + 3]));
  };
  EXPECT_GE(be32(16), 100u);
  EXPECT_GE(be32(20), 100u);
  EXPECT_EQ(b.substr(b.size() - 8, 4), "IEND");
}

// Two designs' rows as the loop in docs/design-space.md writes them (the context, then a
// sweep CSV row; the provenance columns left out).
const std::string kHeader = "context,clock.mhz,tok_s,total_ms,matmul_ms,attention_ms,cpu_ms,read_gb_s,wall_pct,dma_calls,timing\n";
const std::string kBoard = kHeader +
                           "1,125,8.5413,117.0787,87.3500,3.0787,26.6500,1.6415,81.71,484,met (board)\n"
                           "64,125,8.3704,119.4691,87.3500,5.4691,26.6500,1.6492,82.09,484,met (board)\n"
                           "509,125,7.3300,136.4256,87.3500,22.4256,26.6500,1.7000,85.00,484,met (board)\n";
const std::string kWalker = kHeader +
                            "64,125,11.52,86.80,77.25,3.22,0.58,1.6492,82.09,484,met (board)\n"
                            "1,125,11.80,84.70,77.25,1.00,0.58,1.6415,81.71,484,met (board)\n";

// The command exits 2 and its stderr says `says` (bad input named, no traceback).
void expect_refused(const std::string& command, const std::string& says) {
  const auto r = run_command(command);
  EXPECT_EQ(r.code, 2) << command;
  EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
}

TEST(PlotVariants, DrawsAPngWithOneLinePerDesign) {
  if (!have_matplotlib()) GTEST_SKIP() << "matplotlib is not installed (apt-get install python3-matplotlib)";
  TempDir dir;
  const fs::path a = write(dir, "board.csv", kBoard), b = write(dir, "walker.csv", kWalker);
  const fs::path out = dir.path / "t.png";
  const auto r = run_command(kTools + "plot_variants.py " + out.string() + " 'the board=" + a.string() +
                             "' 'PL walker=" + b.string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + out.string()), std::string::npos) << r.out;
  expect_png(out);
}

TEST(PlotVariants, DrawsAnSvg) {
  if (!have_matplotlib()) GTEST_SKIP() << "matplotlib is not installed (apt-get install python3-matplotlib)";
  TempDir dir;
  const fs::path a = write(dir, "board.csv", kBoard);
  const fs::path out = dir.path / "t.svg";
  const auto r = run_command(kTools + "plot_variants.py " + out.string() + " board=" + a.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string svg = read(out);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST(PlotVariants, BadInputNamesTheFileOrArgumentAndExits2) {
  if (!have_matplotlib()) GTEST_SKIP() << "matplotlib is not installed (apt-get install python3-matplotlib)";
  TempDir dir;
  const fs::path out = dir.path / "t.png";
  // a sweep CSV without the context column
  const fs::path plain = write(dir, "plain.csv", kBoard.substr(kBoard.find(',') + 1));
  const std::string plot = kTools + "plot_variants.py " + out.string();
  expect_refused(plot + " board=" + plain.string(), plain.string() + ": column 'context' missing");
  expect_refused(plot + " " + plain.string(), "expected LABEL=CSV");
  expect_refused(plot + " board=" + (dir.path / "none.csv").string(), "none.csv: No such file");
  const fs::path bad = write(dir, "bad.csv", kHeader + "x,125,8.5,1,1,1,1,1,1,484,met (board)\n");
  expect_refused(plot + " board=" + bad.string(), "bad.csv: a 'context' or 'tok_s' value is not a number");
  EXPECT_FALSE(fs::exists(out));
}

// plot_sweep.py on a sweep CSV as bitsim writes it (docs/sweep-clock.csv).
TEST(PlotSweep, DrawsAPngFromASweepCsv) {
  if (!have_matplotlib()) GTEST_SKIP() << "matplotlib is not installed (apt-get install python3-matplotlib)";
  TempDir dir;
  fs::create_directories(dir.path);
  const fs::path out = dir.path / "clock.png";
  const auto r = run_command(kTools + "plot_sweep.py " + std::string(BITSIM_SOURCE_DIR) + "/docs/sweep-clock.csv " +
                             out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  expect_png(out);
}

// plot_energy.py on the design-space energy data (docs/data/energy/*.csv as bitsim sweep wrote
// them); a sweep CSV without the energy columns is refused naming the file and column, exit 2.
TEST(PlotEnergy, DrawsTheParetoPlotFromSweepCsvsAndRefusesACsvWithoutEnergy) {
  if (!have_matplotlib()) GTEST_SKIP() << "matplotlib is not installed (apt-get install python3-matplotlib)";
  TempDir dir;
  fs::create_directories(dir.path);
  const fs::path out = dir.path / "pareto.png";
  const std::string data = std::string(BITSIM_SOURCE_DIR) + "/docs/data/energy/";
  const auto r = run_command(kTools + "plot_energy.py " + out.string() + " board=" + data + "board-T64.csv clock=" +
                             data + "clock-T64.csv walker=" + data + "walker-T64.csv");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_png(out);
  fs::remove(out);
  const std::string clock = std::string(BITSIM_SOURCE_DIR) + "/docs/sweep-clock.csv";
  const auto bad = run_command(kTools + "plot_energy.py " + out.string() + " old=" + clock);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("sweep-clock.csv: column 'tokens_per_j' missing"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(out));
}

// plot_prefill.py on the design-space data as bitsim sweep wrote it (docs/data/prefill-ttft-*.csv);
// bad input named, exit 2, no image.
TEST(PlotPrefill, DrawsAPngFromTheSweepCsvsAndRefusesBadInput) {
  if (!have_matplotlib()) GTEST_SKIP() << "matplotlib is not installed (apt-get install python3-matplotlib)";
  TempDir dir;
  fs::create_directories(dir.path);
  const fs::path out = dir.path / "ttft.png";
  const std::string data = std::string(BITSIM_SOURCE_DIR) + "/docs/data/prefill-ttft-";
  const auto r = run_command(kTools + "plot_prefill.py " + out.string() + " " + data + "64.csv " + data + "512.csv");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_png(out);
  fs::remove(out);
  // a sweep CSV without the prefill columns (the clock sweep)
  const std::string clock = std::string(BITSIM_SOURCE_DIR) + "/docs/sweep-clock.csv";
  const std::string plot = kTools + "plot_prefill.py " + out.string() + " ";
  expect_refused(plot + clock, clock + ": column 'prefill.tokens_per_pass' missing");
  // a prefill sweep run without --prompt-tokens: empty ttft_ms
  const fs::path empty = write(dir, "noprompt.csv",
                               "prefill.tokens_per_pass,host.walker,ttft_ms,prefill_tok_s,fit\n1,cpu,,,fits\n");
  expect_refused(plot + empty.string(), "noprompt.csv: a row without ttft_ms");
  expect_refused(plot + (dir.path / "none.csv").string(), "none.csv: No such file");
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
