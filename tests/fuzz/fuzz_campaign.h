#pragma once
// Shared by the campaign file targets (fuzz_campaign_point, fuzz_campaign_json): a real
// campaign directory, written once per process by study/campaign.h itself (a 2-point grid,
// clock.mhz = 100, 125, one timing-only token at T=1), in a per-process scratch folder
// removed at exit. Each input then replaces one of its files and the directory is merged.
// The directory is written in LLVMFuzzerInitialize (bitsim_fuzz_prepare, fuzz_systemc.cpp),
// outside the per-input timeout: its two timing tokens of the bitnet-large shape take
// seconds under ASan, and inside the first input they were reported as a timeout.
#include <filesystem>
#include <string>
#include <system_error>

#include <unistd.h>

#include <fmt/format.h>

#include "fuzz_common.h"
#include "sim/board_config.h"
#include "study/campaign.h"
#include "study/sweep.h"

namespace bitsim::fuzz {

struct CampaignDir {
  std::filesystem::path dir;
  std::filesystem::path point_file;  // the first grid point's result file
  int points = 0;

  CampaignDir() {
    const std::filesystem::path base =
        std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    dir = base / ("bitsim-fuzz-" + std::to_string(::getpid()) + "-campaign");
    std::filesystem::remove_all(dir);
    const sim::ParamSet params = sim::load_board_params("");
    study::SweepOptions o;
    o.grid.push_back(study::parse_axis(params, "clock.mhz=100,125"));
    o.tokens = 1;
    o.context = 1;
    o.check_model.clear();
    study::CampaignOptions c;
    c.dir = dir.string();
    const study::ShardReport r = study::run_shard(params, o, c);
    if (r.ran != 2 || !r.failed.empty()) fail("the campaign of the fuzz target did not run its 2 points");
    const study::MergeResult m = study::merge_campaign(dir.string());
    if (!m.complete() || m.total != 2) fail("the campaign of the fuzz target is not complete");
    points = m.total;
    sim::ParamSet first = params;
    first.set("clock.mhz=100");
    point_file = dir / "points" / (fmt::format("{:016x}", study::point_hash(study::point_key({"clock.mhz"}, first))) + ".json");
    if (!std::filesystem::is_regular_file(point_file)) fail("the first point's result file is not where expected");
  }
  ~CampaignDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

// The process's campaign directory, written on first use.
inline const CampaignDir& campaign_dir() {
  static const CampaignDir campaign;
  return campaign;
}

// The merge of a campaign directory: never anything but bitsim::Error; what it returns
// adds up (completed and missing points are the campaign's points) and prints.
inline void merge_and_check(const std::filesystem::path& dir) {
  expect_only_bitsim_errors([&] {
    const study::MergeResult m = study::merge_campaign(dir.string());
    if (m.total < 0 || m.result.points.size() + m.missing.size() != size_t(m.total))
      fail("completed + missing points != the campaign's points");
    if (m.complete() != m.missing.empty()) fail("complete() disagrees with the missing points");
    (void)study::merge_csv(m);
    (void)study::merge_json(m).dump();
  });
}

}  // namespace bitsim::fuzz
