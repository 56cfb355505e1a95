// libFuzzer target: a campaign point's result file (DIR/points/<hash>.json,
// bitsim.sweep-point/1; study/campaign.h) as `bitsim sweep merge` reads it. The input replaces
// the first point's file of a real 2-point campaign (fuzz_campaign.h); the merge must end in
// bitsim::Error or a result whose completed and missing points add up to the campaign's 2,
// and must print as CSV and JSON.
#include <fstream>

#include "fuzz_campaign.h"

extern "C" void bitsim_fuzz_prepare() { (void)bitsim::fuzz::campaign_dir(); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bitsim::fuzz::CampaignDir& campaign = bitsim::fuzz::campaign_dir();
  {
    std::ofstream out(campaign.point_file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
    if (!out) bitsim::fuzz::fail("cannot write the point file");
  }
  bitsim::fuzz::merge_and_check(campaign.dir);
  return 0;
}
