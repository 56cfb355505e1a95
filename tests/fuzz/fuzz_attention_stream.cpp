// libFuzzer target: the attention unit's stream parser (model/attention_stream.h). The
// first 16 bytes are a head header (parse_attention_header); when it is valid and the input
// holds the head (q, then T rows of K and of V), the fast fidelity's kernel
// (hw::fast::attention_head, every kernel this CPU runs) must equal the golden reference
// (golden::attention_head), and the header must re-encode to the same bytes. T's range is
// the unit's: 1..512, or 1..2048 with the INT4 or TIP flag (model::attention_max_t). The head walker
// the fast fidelity's attention engine runs (model::next_head) must agree with the header
// parse and with attention_head_bytes (a shared-stream pass's member beats included).
#include <cstring>
#include <vector>

#include "fuzz_common.h"
#include "golden/board_reference.h"
#include "hw/fast/fast_kernels.h"
#include "model/attention_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace m = bitsim::model;
  namespace fast = bitsim::hw::fast;
  if (size < 16) return 0;
  bitsim::fuzz::expect_only_bitsim_errors([&] {
    uint64_t beat0 = 0, beat1 = 0;
    std::memcpy(&beat0, data, 8);
    std::memcpy(&beat1, data + 8, 8);
    const m::AttentionError e0 = m::check_attention_beat0(beat0);
    m::AttentionHeadHeader h;
    const m::AttentionError e = m::parse_attention_header(beat0, beat1, &h);
    (void)m::attention_error_name(e);
    m::HeadLayout lay;
    const m::AttentionError we = m::next_head(data, size, m::kBoardHeadDim, &lay);
    if (e == m::AttentionError::None && (h.tip || h.group > 1)) {
      // TIP: the tag beats after the queries size the head; a shared-stream pass's member
      // beats carry each member's (m, S). A walker that read them agrees with them.
      if (we == m::AttentionError::None &&
          (lay.bytes != m::attention_head_bytes(h, m::kBoardHeadDim, lay.tiers.data()) || lay.bytes > size ||
           lay.members.size() != size_t(h.group) ||
           (h.tip && int(lay.tiers.size()) != m::tip_regions(int(h.T), int(h.region_log2)))))
        bitsim::fuzz::fail("next_head disagrees with a TIP head's tags or a pass's members");
      if (we != m::AttentionError::None && we != m::AttentionError::Truncated && we != m::AttentionError::ReservedBits &&
          (h.group == 1 || we != m::AttentionError::MultiplierTooWide))
        bitsim::fuzz::fail("next_head gives a TIP head or a pass an error its tags or member beats cannot cause");
      for (const auto& mb : lay.members)
        if (we == m::AttentionError::None && (mb[0] > m::kAttentionMaxM || mb[1] > 63))
          bitsim::fuzz::fail("a member beat outside its ranges parsed ok");
    } else if (e != m::AttentionError::None ? we != e
                                            : (lay.bytes != m::attention_head_bytes(h, m::kBoardHeadDim) ||
                                               we != (lay.bytes > size ? m::AttentionError::Truncated
                                                                       : m::AttentionError::None))) {
      bitsim::fuzz::fail("next_head disagrees with parse_attention_header");
    }
    if (e0 != m::AttentionError::None && e != e0) bitsim::fuzz::fail("beat 0 check and header parse disagree");
    if (e != m::AttentionError::None) return;
    if (h.T < 1 || h.T > uint32_t(m::attention_max_t(h.int4 || h.tip)) || h.m > m::kAttentionMaxM || h.shift > 63)
      bitsim::fuzz::fail("a header outside its ranges parsed ok");
    uint8_t again[16];
    m::write_attention_header(h, again);
    if (std::memcmp(again, data, 16) != 0) bitsim::fuzz::fail("a valid header does not re-encode to its bytes");
    // The kernels below read int8 rows: an INT4 head's rows are in another format (its
    // kernels are compared with golden by FastKernels.Int4AttentionEqualsGolden, TIP's by
    // FastKernels.TipAttentionEqualsGolden).
    if (h.int4 || h.tip || size < m::attention_head_bytes(int(h.T), m::kBoardHeadDim)) return;
    const auto* q = reinterpret_cast<const int8_t*>(data + 16);
    const int8_t* K = q + m::kBoardHeadDim;
    const int8_t* V = K + size_t(h.T) * m::kBoardHeadDim;
    std::vector<int32_t> want(m::kBoardHeadDim), got(m::kBoardHeadDim);
    uint32_t want_sum = 0, got_sum = 0;
    bitsim::golden::AttentionParams p;
    p.m = h.m;
    p.shift = int(h.shift);
    p.legacy = h.legacy;
    bitsim::golden::attention_head(q, K, V, int(h.T), m::kBoardHeadDim, p, want.data(), &want_sum);
    for (fast::Kernel k : {fast::Kernel::Portable, fast::Kernel::Avx2, fast::Kernel::Avx512}) {
      if (!fast::kernel_supported(k)) continue;
      got_sum = 0x5A5A5A5A;
      fast::attention_head(q, K, V, int(h.T), m::kBoardHeadDim, h.m, int(h.shift), h.legacy, got.data(), &got_sum, k);
      if (got != want || got_sum != want_sum) bitsim::fuzz::fail("fast attention_head differs from golden");
    }
  });
  return 0;
}
