// libFuzzer target: the matmul engine's stream parser (model/packed_image.h: the group
// header and the packed image). Arbitrary bytes through decode_stream. A stream that
// decodes must be rebuilt byte for byte by build_stream (the format is canonical), and the
// fast fidelity's kernel on its packed rows (hw::fast::matvec_packed, every kernel this CPU
// runs) must equal the golden reference (golden::ternary_matvec) on the decoded trits. The
// group walker the fast fidelity's matmul engine runs (model::next_group) must find the same
// groups, at the same offsets, as decode_stream.
#include <cstring>
#include <vector>

#include "fuzz_common.h"
#include "golden/board_reference.h"
#include "hw/fast/fast_kernels.h"
#include "model/packed_image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace m = bitsim::model;
  namespace fast = bitsim::hw::fast;
  bitsim::fuzz::expect_only_bitsim_errors([&] {
    if (size >= 16) {
      m::GroupHeader h;
      const m::StreamError e = m::parse_group_header(data, &h);
      (void)m::stream_error_name(e);
    }
    const m::DecodeResult r = m::decode_stream(data, size);
    (void)r.message();
    if (!r.ok()) return;
    if (r.groups.empty()) bitsim::fuzz::fail("a stream decoded ok without groups");
    std::vector<m::TernaryMatrix> mats(r.groups.size());
    std::vector<m::GroupSpec> specs;
    size_t offset = 0;
    for (size_t g = 0; g < r.groups.size(); ++g) {
      const m::DecodedGroup& dg = r.groups[g];
      mats[g].rows = dg.rows;
      mats[g].cols = dg.n;
      mats[g].scale = 1;
      mats[g].trits = dg.trits;
      specs.push_back({dg.x.data(), dg.n, &mats[g], 0, dg.rows});
      m::GroupLayout lay;
      if (m::next_group(data + offset, size - offset, &lay) != m::StreamError::None || lay.header.n != uint32_t(dg.n) ||
          lay.header.rows != uint32_t(dg.rows) || lay.header.last != dg.last)
        bitsim::fuzz::fail("next_group disagrees with decode_stream on a group that decoded ok");
      // The fast kernels on the packed rows as they sit in the stream.
      const uint8_t* rows = data + offset + lay.rows_offset;
      std::vector<int32_t> want(size_t(dg.rows)), got(size_t(dg.rows));
      bitsim::golden::ternary_matvec(mats[g], 0, dg.rows, dg.x.data(), want.data());
      for (fast::Kernel k : {fast::Kernel::Portable, fast::Kernel::Avx2, fast::Kernel::Avx512}) {
        if (!fast::kernel_supported(k)) continue;
        std::fill(got.begin(), got.end(), 0x5A5A5A5A);
        fast::matvec_packed(rows, dg.rows, dg.n, dg.x.data(), got.data(), k);
        if (got != want) bitsim::fuzz::fail("fast matvec_packed differs from golden ternary_matvec");
      }
      offset += lay.bytes;
    }
    const std::vector<uint8_t> rebuilt = m::build_stream(specs);
    if (rebuilt.size() != size || std::memcmp(rebuilt.data(), data, size) != 0)
      bitsim::fuzz::fail("build_stream does not rebuild a stream that decoded ok");
  });
  return 0;
}
