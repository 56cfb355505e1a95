// BoardReference: the board's arithmetic without hardware, checked against hand-worked
// cases (CIRCUITS.md 2 and 3) and for the properties the simulated board relies on.
#include "golden/board_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "base/error.h"
#include "model/kv_format.h"
#include "model/packed_image.h"
#include "model/synthetic.h"
#include "model/tokenizer.h"
#include "support/repeat_kv.h"

namespace bitsim::golden {
namespace {

using model::TernaryMatrix;
constexpr int kHeadDim = model::kBoardHeadDim;  // the board's unit (attention.head_dim's default)

TernaryMatrix matrix(int rows, int cols, std::vector<int8_t> trits, float scale = 1.0f) {
  TernaryMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.scale = scale;
  m.trits = std::move(trits);
  return m;
}

TEST(TernaryMatvec, HandWorkedTrits) {
  // rows: [+1 -1 0], [0 +1 +1], [-1 -1 -1]; x = [3, 5, -7]
  const auto w = matrix(3, 3, {1, -1, 0, 0, 1, 1, -1, -1, -1});
  const int8_t x[3] = {3, 5, -7};
  int32_t acc[3];
  ternary_matvec(w, 0, 3, x, acc);
  EXPECT_EQ(acc[0], 3 - 5);
  EXPECT_EQ(acc[1], 5 - 7);
  EXPECT_EQ(acc[2], -3 - 5 + 7);
  int32_t tail[1];
  ternary_matvec(w, 2, 3, x, tail);  // a row range writes from acc[0]
  EXPECT_EQ(tail[0], acc[2]);
}

// The per-call format's counterpart: segments of L = 3 of the row (+1, 0, -1, -1, +1, 0, +1)
// against x = (1, -2, 3, 0, 5, -6, 7) give the partial sums -2, 5 and 7, added to 10 by
// the CPU; a row of +1s gives the sum of x, 8.
TEST(TernaryMatvec, PerCallSegmentsHandWorked) {
  model::TernaryMatrix m;
  m.rows = 2;
  m.cols = 7;
  m.trits = {1, 0, -1, -1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1};
  const int8_t x[7] = {1, -2, 3, 0, 5, -6, 7};
  int32_t acc[2] = {};
  golden::ternary_matvec_per_call(m, 0, 2, x, 3, acc);
  EXPECT_EQ(acc[0], -2 + 5 + 7);
  EXPECT_EQ(acc[1], 8);
  golden::ternary_matvec_per_call(m, 1, 2, x, 7, acc);  // one segment: the whole row
  EXPECT_EQ(acc[0], 8);
  golden::ternary_matvec_per_call(m, 0, 1, x, 4096, acc);
  EXPECT_EQ(acc[0], 10);
}

// A row longer than the engine's 4096 (2B4T's down projection, 6912; and 8193, three segments),
// summed in the header format's equal segments of model::segment_trits(n) with the CPU's
// additions, is the whole row's sum, with random trits and x and at the extremes (every trit
// +1 or -1, x = -128: 6912 * 128 = 884,736).
TEST(TernaryMatvec, RowsLongerThanTheEngineInSegmentsAreTheWholeRowsSum) {
  std::mt19937 rng(7);
  for (const int n : {6912, 8193}) {
    SCOPED_TRACE(n);
    std::vector<int8_t> t(3 * size_t(n)), x(size_t(n), -128);
    for (int j = 0; j < n; ++j) {
      t[size_t(j)] = 1;
      t[size_t(n + j)] = -1;
      t[size_t(2 * n + j)] = int8_t(int(rng() % 3) - 1);
    }
    const auto w = matrix(3, n, t);
    int32_t whole[3], split[3];
    golden::ternary_matvec(w, 0, 3, x.data(), whole);
    golden::ternary_matvec_per_call(w, 0, 3, x.data(), model::segment_trits(n), split);
    EXPECT_EQ(whole[0], -128 * n);
    EXPECT_EQ(whole[1], 128 * n);
    for (int r = 0; r < 3; ++r) EXPECT_EQ(split[r], whole[r]) << r;
    for (int j = 0; j < n; ++j) x[size_t(j)] = int8_t(int(rng() % 256) - 128);
    golden::ternary_matvec(w, 0, 3, x.data(), whole);
    golden::ternary_matvec_per_call(w, 0, 3, x.data(), model::segment_trits(n), split);
    for (int r = 0; r < 3; ++r) EXPECT_EQ(split[r], whole[r]) << r;
  }
}

TEST(TernaryMatvec, ExtremesDoNotOverflow) {
  const int n = 4096;
  const auto w = matrix(2, n, [&] {
    std::vector<int8_t> t(2 * n, 1);
    for (int j = 0; j < n; ++j) t[n + j] = -1;
    return t;
  }());
  std::vector<int8_t> x(n, -128);
  int32_t acc[2];
  ternary_matvec(w, 0, 2, x.data(), acc);
  EXPECT_EQ(acc[0], -128 * n);
  EXPECT_EQ(acc[1], 128 * n);
}

struct Head {
  std::vector<int8_t> q = std::vector<int8_t>(kHeadDim, 0);
  std::vector<int8_t> K, V;
  explicit Head(int T) : K(size_t(T) * kHeadDim, 0), V(size_t(T) * kHeadDim, 0) {}
};

TEST(AttentionHead, SingleRowGivesFullWeight) {
  // T = 1: s_max = s_0, z_0 = 0, p_0 = EXP[0] = 32767, so sum = 32767 and acc = 32767 * V.
  Head h(1);
  for (int d = 0; d < kHeadDim; ++d) {
    h.q[d] = int8_t(d - 48);
    h.K[d] = int8_t(3 * d - 100);
    h.V[d] = int8_t(d % 2 ? -128 : 127 - d);
  }
  int32_t acc[kHeadDim];
  uint32_t sum = 0;
  attention_head(h.q.data(), h.K.data(), h.V.data(), 1, model::kBoardHeadDim, {40000, 24, false}, acc, &sum);
  EXPECT_EQ(sum, 32767u);
  for (int d = 0; d < kHeadDim; ++d) EXPECT_EQ(acc[d], 32767 * int32_t(h.V[d])) << "d=" << d;
}

TEST(AttentionHead, TwoRowsWorkedByHand) {
  // q = 10 e_0; K_0[0] = 10, K_1[0] = 0  ->  s = (100, 0), s_max = 100.
  // m = 2^14, S = 14  ->  z_0 = 0, z_1 = (100 * 2^14) >> 14 = 100.
  // EXP[100] = round(32767 * exp(-100/16)) = round(32767 * 0.0019305) = round(63.26) = 63.
  // V_0 = 2, V_1 = -3 everywhere  ->  acc_d = 32767*2 + 63*(-3) = 65345, sum = 32830.
  ASSERT_EQ(num::exp_table()[100], 63);
  Head h(2);
  h.q[0] = 10;
  h.K[0] = 10;
  for (int d = 0; d < kHeadDim; ++d) {
    h.V[d] = 2;
    h.V[kHeadDim + d] = -3;
  }
  int32_t acc[kHeadDim];
  uint32_t sum = 0;
  attention_head(h.q.data(), h.K.data(), h.V.data(), 2, model::kBoardHeadDim, {1u << 14, 14, false}, acc, &sum);
  EXPECT_EQ(sum, 32830u);
  for (int d = 0; d < kHeadDim; ++d) EXPECT_EQ(acc[d], 65345);
}

TEST(AttentionHead, LegacyShiftIgnoresMultiplier) {
  // Legacy: z = (s_max - s_t) >> 8. s = (100, 0): z_1 = 0, both rows weigh 32767.
  // Then s = (600, 0): z_1 = 600 >> 8 = 2, p_1 = EXP[2].
  Head h(2);
  h.q[0] = 10;
  h.K[0] = 10;
  for (int d = 0; d < kHeadDim; ++d) h.V[d] = h.V[kHeadDim + d] = 1;
  int32_t acc[kHeadDim];
  uint32_t sum = 0;
  attention_head(h.q.data(), h.K.data(), h.V.data(), 2, model::kBoardHeadDim, {1u << 17, 10, true}, acc, &sum);
  EXPECT_EQ(sum, 2u * 32767u);
  h.q[0] = 60;
  attention_head(h.q.data(), h.K.data(), h.V.data(), 2, model::kBoardHeadDim, {1u << 17, 10, true}, acc, &sum);
  EXPECT_EQ(sum, 32767u + num::exp_table()[2]);
  // The same scores with the multiplier path: z_1 = (600 * 2^17) >> 10 = 76800 -> clamps to 255.
  attention_head(h.q.data(), h.K.data(), h.V.data(), 2, model::kBoardHeadDim, {1u << 17, 10, false}, acc, &sum);
  EXPECT_EQ(sum, 32767u + num::exp_table()[255]);
}

TEST(AttentionHead, MaxContextAccumulatorIsExact) {
  // T = 512 rows that all tie: p_t = 32767, V = -128: acc = 512 * 32767 * -128 fits int32.
  const int T = kMaxContext;
  Head h(T);
  for (auto& v : h.V) v = -128;
  int32_t acc[kHeadDim];
  uint32_t sum = 0;
  attention_head(h.q.data(), h.K.data(), h.V.data(), T, model::kBoardHeadDim, {79505, 24, false}, acc, &sum);
  EXPECT_EQ(sum, uint32_t(T) * 32767u);
  EXPECT_EQ(int64_t(acc[0]), int64_t(T) * 32767 * -128);
}

// A tiny synthetic model shared by the tests below (loaded once per test binary).
const model::TernaryModel& tiny() {
  static const model::TernaryModel m = [] {
    model::SyntheticSource src(model::Shape::Tiny, 7);
    return model::load_ternary_model(src, 2);
  }();
  return m;
}

const KvScales& tiny_scales() {
  static const KvScales s = [] {
    auto tok = model::make_byte_tokenizer(tiny().config.vocab_size);
    return calibrate_kv_scales(tiny(), calibration_tokens(*tok, tiny().config.bos_token_id));
  }();
  return s;
}

// ---- The online-softmax unit (docs/variants-attention.md section 3) ---------------------

// One head of T = 2 with q = e_0 (so s_t = K_t0), V_0 = 1 and V_1 = 2 in every dimension.
struct TwoRows {
  int8_t q[kHeadDim] = {}, K[2 * kHeadDim] = {}, V[2 * kHeadDim] = {};
  TwoRows(int s0, int s1) {
    q[0] = 1;
    K[0] = int8_t(s0);
    K[kHeadDim] = int8_t(s1);
    for (int d = 0; d < kHeadDim; ++d) V[d] = 1, V[kHeadDim + d] = 2;
  }
};

// attention_head_online on a TwoRows head with S = 16: every output dimension and the sum.
struct OnlineHead {
  int32_t o[kHeadDim];
  uint32_t sum = 0;
  OnlineHead(const TwoRows& h, uint32_t m) {
    golden::attention_head_online(h.q, h.K, h.V, 2, model::kBoardHeadDim, AttentionParams{m, 16, false}, o, &sum);
  }
  void expect(uint32_t want_sum, int32_t want_o) const {
    EXPECT_EQ(sum, want_sum);
    for (int d = 0; d < kHeadDim; ++d) EXPECT_EQ(o[d], want_o) << d;
  }
};

TEST(AttentionHeadOnline, SingleRowIsVInQ16) {
  int8_t q[kHeadDim], K[kHeadDim], V[kHeadDim];
  for (int d = 0; d < kHeadDim; ++d) q[d] = int8_t(d - 40), K[d] = int8_t(3 * d - 100), V[d] = int8_t(d * 2 - 96);
  int32_t o[kHeadDim];
  uint32_t sum = 0;
  golden::attention_head_online(q, K, V, 1, model::kBoardHeadDim, AttentionParams{12345, 24, false}, o, &sum);
  // p = 32767, sum = 32767, r = floor(2^46 / 32767); 32767 r = 2^46 - 2 (2^15 = 1 mod 32767),
  // so o_d = (V_d (2^46 - 2) + 2^29) >> 30 = 65536 V_d.
  EXPECT_EQ(sum, 32767u);
  for (int d = 0; d < kHeadDim; ++d) EXPECT_EQ(o[d], 65536 * V[d]) << d;
}

TEST(AttentionHeadOnline, TwoRowsMaximumFirstWorkedByHand) {
  // s = (10, 9), m = 2^16, S = 16: z8 = 256 (diff 1): p_1 = EXP[1] = 30782, no rescale.
  // acc_d = 32767 + 2 * 30782 = 94331, sum = 63549, r = floor(2^46 / 63549) = 1107314736,
  // o_d = (94331 r + 2^29) >> 30 = 97280 (94331 / 63549 * 65536 = 97280.47).
  TwoRows h(10, 9);
  const OnlineHead online(h, 1u << 16);
  online.expect(63549u, 97280);
}

TEST(AttentionHeadOnline, TwoRowsGrowingMaximumRescalesWorkedByHand) {
  // s = (9, 10): row 0 gives acc_d = 32767, sum = 32767; row 1 grows M by 1: alpha = 30782,
  // acc_d = (32767 * 30782 + 2^14) >> 15 = 30781, sum likewise 30781; then + 32767 * 2 and
  // + 32767: acc_d = 96315, sum = 63548 (one less than the exact 32767 + 30782: the >> 15
  // rescale's bias). r = floor(2^46 / 63548) = 1107332161, o_d = 99328 (99328.06).
  TwoRows h(9, 10);
  const OnlineHead online(h, 1u << 16);
  online.expect(63548u, 99328);
}

TEST(AttentionHeadOnline, InterpolatesBetweenTableEntriesWorkedByHand) {
  // s = (10, 9), m = 2^15, S = 16: z8 = 128, half way between EXP[0] and EXP[1]:
  // p_1 = 32767 - ((1985 * 128 + 128) >> 8) = 31774 (the board's unit: EXP[0] = 32767).
  // acc_d = 32767 + 2 * 31774 = 96315, sum = 64541, o_d = 97800 (97799.85).
  TwoRows h(10, 9);
  const OnlineHead online(h, 1u << 15);
  online.expect(64541u, 97800);
  // The two-phase unit drops the fraction: p_1 = EXP[0].
  int32_t acc[kHeadDim];
  uint32_t sum = 0;
  golden::attention_head(h.q, h.K, h.V, 2, model::kBoardHeadDim, AttentionParams{1u << 15, 16, false}, acc, &sum);
  EXPECT_EQ(sum, 2u * 32767);
}

// Channel d of the exact softmax-weighted mean of the rows of V (kHeadDim values a row), one
// row per score in s (nats), whose maximum is smax.
template <class Rows>
double softmax_mean(const std::vector<double>& s, double smax, const Rows& V, int d) {
  double num = 0, den = 0;
  for (size_t t = 0; t < s.size(); ++t) {
    const double w = std::exp(s[t] - smax);
    num += w * V[t * kHeadDim + d];
    den += w;
  }
  return num / den;
}

TEST(AttentionHeadOnline, CloseToTheExactSoftmaxAndRefusesLegacy) {
  // Random heads: o_d / 2^16 against the exact softmax-weighted mean of V with the
  // exponent the integers stand for (e^(-z/16) per index step): within half an int8 step.
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> val(-128, 127);
  for (int T : {1, 3, 40, 512}) {
    std::vector<int8_t> q(kHeadDim), K(size_t(T) * kHeadDim), V(K.size());
    for (auto& x : q) x = int8_t(val(rng) / 4);
    for (auto& x : K) x = int8_t(val(rng));
    for (auto& x : V) x = int8_t(val(rng));
    const AttentionParams p{60000, 24, false};
    int32_t o[kHeadDim];
    uint32_t sum = 0;
    golden::attention_head_online(q.data(), K.data(), V.data(), T, model::kBoardHeadDim, p, o, &sum);
    std::vector<double> s(static_cast<size_t>(T));
    double smax = -1e30;
    for (int t = 0; t < T; ++t) {
      long dot = 0;
      for (int d = 0; d < kHeadDim; ++d) dot += long(q[d]) * K[size_t(t) * kHeadDim + d];
      s[size_t(t)] = double(dot) * p.m / double(1 << 24) / 16.0;  // nats
      smax = std::max(smax, s[size_t(t)]);
    }
    for (int d = 0; d < kHeadDim; ++d)
      EXPECT_NEAR(o[d] / 65536.0, softmax_mean(s, smax, V, d), 0.5) << "T " << T << " d " << d;
  }
  int8_t z[kHeadDim] = {};
  int32_t o[kHeadDim];
  uint32_t sum;
  EXPECT_THROW(golden::attention_head_online(z, z, z, 1, model::kBoardHeadDim, AttentionParams{1, 24, true}, o, &sum), Error);
}


TEST(Calibration, TokensStartWithBosAndCount144) {
  auto tok = model::make_byte_tokenizer(512);
  const auto ids = calibration_tokens(*tok, 1);
  ASSERT_EQ(ids.size(), size_t(kCalibrationTokens));
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3 + 'A');  // byte-level: "A lighthouse ..."
}

TEST(Calibration, ScalesArePositiveFiniteAndPerHead) {
  const auto& s = tiny_scales();
  const auto& c = tiny().config;
  ASSERT_EQ(s.k.size(), size_t(c.num_layers * c.num_heads));
  ASSERT_EQ(s.v.size(), s.k.size());
  for (size_t i = 0; i < s.k.size(); ++i) {
    EXPECT_TRUE(std::isfinite(s.k[i]) && s.k[i] > 0) << i;
    EXPECT_TRUE(std::isfinite(s.v[i]) && s.v[i] > 0) << i;
  }
  EXPECT_NE(s.k[0], s.k[1]);  // per head, not one global scale
}

TEST(Calibration, ScalesDoNotDependOnTheBatch) {
  // The pass run 1, 5, 48 and all 144 positions at a time (layer by layer within a batch)
  // gives the one-at-a-time scales bit for bit, and each matmul call takes the whole batch.
  auto tok = model::make_byte_tokenizer(tiny().config.vocab_size);
  const auto tokens = calibration_tokens(*tok, tiny().config.bos_token_id);
  const KvScales& one = tiny_scales();
  for (int batch : {1, 5, 48, 144, 1000}) {
    int largest = 0;
    const MatmulFn plain = [&](const TernaryMatrix& w, const int8_t* x, int count, int32_t* acc) {
      largest = std::max(largest, count);
      for (int i = 0; i < count; ++i) ternary_matvec(w, 0, w.rows, x + size_t(i) * w.cols, acc + size_t(i) * w.rows);
    };
    const KvScales s = calibrate_kv_scales_batched(tiny(), tokens, plain, batch);
    EXPECT_EQ(largest, std::min(batch, int(tokens.size()))) << "batch " << batch;
    ASSERT_EQ(s.k.size(), one.k.size());
    EXPECT_EQ(0, std::memcmp(s.k.data(), one.k.data(), s.k.size() * 4)) << "batch " << batch;
    EXPECT_EQ(0, std::memcmp(s.v.data(), one.v.data(), s.v.size() * 4)) << "batch " << batch;
    ASSERT_EQ(s.k_channel.size(), one.k_channel.size());
    EXPECT_EQ(0, std::memcmp(s.k_channel.data(), one.k_channel.data(), s.k_channel.size() * 4)) << "batch " << batch;
  }
  const MatmulFn none = [](const TernaryMatrix&, const int8_t*, int, int32_t*) {};
  EXPECT_THROW(calibrate_kv_scales_batched(tiny(), tokens, none, 0), Error);
}

std::vector<std::vector<float>> run_tokens(const std::vector<int>& tokens, BoardReferenceOptions o = {}) {
  BoardReference ref(tiny(), tiny_scales(), o);
  std::vector<std::vector<float>> out;
  for (int t : tokens) out.push_back(ref.step(t));
  return out;
}

TEST(BoardReference, DeterministicAcrossInstancesAndThreads) {
  const std::vector<int> toks{1, 87, 104, 101, 32, 99, 97, 112};
  const auto a = run_tokens(toks, {.threads = 1});
  const auto b = run_tokens(toks, {.threads = 2});
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), size_t(tiny().config.vocab_size));
    EXPECT_EQ(0, std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float))) << "token " << i;
    for (float v : a[i]) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(BoardReference, CompactTritsGiveTheInt8TritsLogitsBitForBit) {
  const std::vector<int> toks{1, 87, 104, 101, 32, 99};
  const auto plain = run_tokens(toks, {.threads = 1, .compact_trits = false});
  for (int threads : {1, 2}) {
    const auto compact = run_tokens(toks, {.threads = threads, .compact_trits = true});
    ASSERT_EQ(compact.size(), plain.size());
    for (size_t i = 0; i < plain.size(); ++i)
      EXPECT_EQ(0, std::memcmp(plain[i].data(), compact[i].data(), plain[i].size() * sizeof(float)))
          << "token " << i << ", " << threads << " thread(s)";
  }
}

TEST(BoardReference, AHelperThreadChangesNoLogit) {
  // As in a checked run (sim/board_run.cpp): another thread lends itself to each step's
  // matvecs (SharedRows::help) while the step runs on this one; the logits are those of
  // the reference alone, bit for bit.
  const std::vector<int> toks{1, 87, 104, 101, 32, 99, 97, 112, 44, 32, 116, 104};
  const auto alone = run_tokens(toks, {.threads = 1});
  for (int threads : {1, 2}) {
    BoardReference ref(tiny(), tiny_scales(), {.threads = threads});
    int helped = 0;
    for (size_t i = 0; i < toks.size(); ++i) {
      ref.shared_rows().open();
      std::thread helper([&] { helped += ref.shared_rows().help(); });
      const std::vector<float> logits = ref.step(toks[i]);
      ref.shared_rows().close();
      helper.join();
      ASSERT_EQ(logits.size(), alone[i].size());
      EXPECT_EQ(0, std::memcmp(logits.data(), alone[i].data(), logits.size() * sizeof(float)))
          << "token " << i << ", " << threads << " thread(s)";
    }
    RecordProperty("helped_chunks_threads_" + std::to_string(threads), helped);
  }
}

TEST(BoardReference, LogitsDependOnContext) {
  const auto a = run_tokens({1, 50, 60});
  const auto b = run_tokens({1, 51, 60});
  EXPECT_NE(0, std::memcmp(a[2].data(), b[2].data(), a[2].size() * sizeof(float)));
  // Same prefix, same logits at that position.
  EXPECT_EQ(0, std::memcmp(a[0].data(), b[0].data(), a[0].size() * sizeof(float)));
}

TEST(BoardReference, KvCacheHoldsFixedScaleQuantizedRows) {
  BoardReference ref(tiny(), tiny_scales());
  std::vector<float> k_rope;
  ref.step(1);
  ref.step(200, [&](const StepProbe& p) {
    if (p.layer == 1 && std::string(p.step) == "k_rope") k_rope.assign(p.data, p.data + p.n);
  });
  ASSERT_EQ(k_rope.size(), size_t(tiny().config.hidden_size));
  std::vector<int8_t> expect(kHeadDim);
  const int heads = tiny().config.num_heads;
  for (int hd = 0; hd < heads; ++hd) {
    num::quantize_fixed(k_rope.data() + hd * kHeadDim, kHeadDim, ref.scales().k_scale(1, hd, heads), expect.data());
    EXPECT_EQ(0, std::memcmp(expect.data(), ref.k_rows(1, hd) + kHeadDim, kHeadDim)) << "head " << hd;
  }
}

TEST(BoardReference, ProbeReportsEveryLayerStep) {
  BoardReference ref(tiny(), tiny_scales());
  std::map<std::string, int> seen;
  ref.step(1, [&](const StepProbe& p) { seen[std::to_string(p.layer) + ":" + p.step]++; });
  for (int l = 0; l < tiny().config.num_layers; ++l)
    for (const char* s : {"q_acc", "k_acc", "v_acc", "attn_out", "o_acc", "gate_acc", "up_acc", "down_acc", "residual"})
      EXPECT_EQ(seen[std::to_string(l) + ":" + s], 1) << l << ":" << s;
  EXPECT_EQ(seen["-1:logits"], 1);
}

TEST(BoardReference, LegacyAttentionChangesLogits) {
  const auto a = run_tokens({1, 70, 80, 90});
  const auto b = run_tokens({1, 70, 80, 90}, {.legacy_attention = true});
  // Position 0 has T = 1: both modes give p = 32767 and agree exactly.
  EXPECT_EQ(0, std::memcmp(a[0].data(), b[0].data(), a[0].size() * sizeof(float)));
  EXPECT_NE(0, std::memcmp(a[3].data(), b[3].data(), a[3].size() * sizeof(float)));
}

TEST(BoardReference, RefusesPastTheKvCapacity) {
  BoardReference ref(tiny(), tiny_scales());
  for (int i = 0; i < kMaxContext; ++i) ref.step(3 + (i % 200));
  EXPECT_EQ(ref.position(), kMaxContext);
  EXPECT_THROW(ref.step(5), Error);
}

TEST(BoardReference, RejectsTokenOutsideVocabulary) {
  BoardReference ref(tiny(), tiny_scales());
  try {
    ref.step(tiny().config.vocab_size);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id"), std::string::npos);
  }
}

TEST(BoardReference, Int4HoldsAContextPast512AndRefusesAfterIt) {
  // docs/variants-attention.md 8.8: with kv.format = int4 the caches hold `context` positions
  // (up to 2048); the size of the cache changes no logit; other units stop at 512.
  BoardReferenceOptions int4{.attention_variant = model::AttentionVariant::OnlineSoftmax};
  int4.kv_format = model::KvFormat::Int4;
  BoardReferenceOptions wide = int4;
  wide.context = 600;
  BoardReference a(tiny(), tiny_scales(), int4), b(tiny(), tiny_scales(), wide);
  for (int i = 0; i < 24; ++i) {
    const auto x = a.step(3 + i), y = b.step(3 + i);
    ASSERT_EQ(0, std::memcmp(x.data(), y.data(), x.size() * sizeof(float))) << "token " << i;
  }
  for (int i = 24; i < 600; ++i) b.step(3 + (i * 7) % 500);
  EXPECT_EQ(b.position(), 600);
  try {
    b.step(5);
    FAIL() << "no error past the context";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("600 positions"), std::string::npos) << e.what();
  }
  BoardReferenceOptions bad = int4;
  bad.context = 2049;
  EXPECT_THROW(BoardReference(tiny(), tiny_scales(), bad), Error);
  bad = BoardReferenceOptions{};
  bad.context = 513;  // the two-phase unit
  EXPECT_THROW(BoardReference(tiny(), tiny_scales(), bad), Error);
  bad.attention_variant = model::AttentionVariant::OnlineSoftmax;  // int8 rows
  EXPECT_THROW(BoardReference(tiny(), tiny_scales(), bad), Error);
  bad.context = 0;
  EXPECT_THROW(BoardReference(tiny(), tiny_scales(), bad), Error);
}

// ---- The INT4 KV codec (docs/variants-attention.md section 8.3) --------------------------

// Rows as stored: a bank with every sk_d = 1.0 (0x3C00), K rows of n = 0 or 1 lanes, V rows of
// 56 bytes; nibbles set per channel.
struct Int4Head {
  int n, krow;
  std::vector<uint8_t> bank, K, V;
  Int4Head(int T, int n_) : n(n_), krow(int(model::kv_storage(model::KvFormat::Int4, n_, model::kBoardHeadDim).k.total())) {
    bank.assign(model::kv_storage(model::KvFormat::Int4, n, model::kBoardHeadDim).bank, 0);
    for (int d = 0; d < kHeadDim; ++d) bank[size_t(2 * d) + 1] = 0x3C;  // 0x3C00 little-endian
    K.assign(size_t(T) * krow, 0);
    V.assign(size_t(T) * 56, 0);
  }
  static void nibble(uint8_t* row, int d, int v) {
    const uint8_t x = uint8_t(v) & 0xF;
    row[d / 2] = uint8_t(d % 2 ? (row[d / 2] & 0x0F) | (x << 4) : (row[d / 2] & 0xF0) | x);
  }
  void k(int t, int d, int v) { nibble(&K[size_t(t) * krow], d, v); }
  void k_lane(int t, int j, uint16_t h) { std::memcpy(&K[size_t(t) * krow + 48 + 2 * j], &h, 2); }
  void v_all(int t, int v, uint16_t sv) {
    for (int d = 0; d < kHeadDim; ++d) nibble(&V[size_t(t) * 56], d, v);
    for (int g = 0; g < 3; ++g) std::memcpy(&V[size_t(t) * 56 + 48 + 2 * g], &sv, 2);
  }
};

// A query whose first channels are `head`, the rest 0.
std::array<int8_t, kHeadDim> query(std::initializer_list<int> head) {
  std::array<int8_t, kHeadDim> q{};
  std::copy(head.begin(), head.end(), q.begin());
  return q;
}

// attention_head_int4 over T rows of an Int4Head with m = 2^12, S = 16: the output and the sum.
struct Int4Out {
  int32_t o[kHeadDim];
  uint32_t sum = 0;
  Int4Out(const int8_t* q, const Int4Head& h, int T) {
    golden::attention_head_int4(q, h.bank.data(), h.K.data(), h.V.data(), T, h.n, model::kBoardHeadDim, AttentionParams{1u << 12, 16, false},
                                o, &sum);
  }
  void expect(uint32_t want_sum, int32_t want_o) const {
    EXPECT_EQ(sum, want_sum);
    for (int d = 0; d < kHeadDim; ++d) EXPECT_EQ(o[d], want_o) << d;
  }
};

TEST(AttentionHeadInt4, SingleRowIsTheDequantizedVInQ16) {
  // T = 1: p = 32767; V nibbles 2 with sv = 0.5: w = 32767 * 1024 << 5 = 32767 * 2^15,
  // acc_d = 2 w = 32767 * 2^16, sum = 32767, o_d = 2^16 (2 * 0.5 = 1.0 in Q15.16).
  Int4Head h(1, 0);
  h.k(0, 0, 3);
  h.v_all(0, 2, 0x3800);
  const Int4Out out(query({1}).data(), h, 1);
  out.expect(32767u, 65536);
}

TEST(AttentionHeadInt4, GrowingMaximumRescalesWorkedByHand) {
  // q = e_0; K nibbles k_00 = 0, k_10 = 1: s = (0, 16) (16 k). m = 2^12, S = 16: diff 16 gives
  // z8 = 256, alpha = EXP[1] = 30782. V_0 nibbles 1, V_1 nibbles 3, sv = 1.0: w = 32767 * 2^16.
  // Row 0: acc = 2147418112, sum = 32767. Row 1 rescales: acc = 32767 * 30782 * 2 = 2017267588
  // (exact), sum = (32767 * 30782 + 2^14) >> 15 = 30781; adds 3 w and 32767: acc = 8459521924,
  // sum = 63548; r = floor(2^46 / 63548) = 1107332161, o_d = 133120 (133120.19).
  Int4Head h(2, 0);
  h.k(1, 0, 1);
  h.v_all(0, 1, 0x3C00);
  h.v_all(1, 3, 0x3C00);
  const Int4Out out(query({1}).data(), h, 2);
  out.expect(63548u, 133120);
}

TEST(AttentionHeadInt4, TheLargestAccumulatorAt2048RowsFits62Bits) {
  // 8.8's bound: every row at the same score (p = 32767), the largest V scale (fp16 65504,
  // 0x7BFF) and nibbles -8: w = 32767 * 65504 * 2^16 < 2^47 a row, acc_d = -8 w T with
  // T = 2048 is just inside -2^61 (62 bits signed), and the mean (-8 * 65504) saturates.
  constexpr int T = 2048;
  Int4Head h(T, 0);
  for (int t = 0; t < T; ++t) h.v_all(t, -8, 0x7BFF);
  const Int4Out out(query({}).data(), h, T);
  out.expect(uint32_t(T) * 32767u, INT32_MIN);
  const int64_t w = int64_t(32767) * 65504 * 65536;
  EXPECT_LT(w, int64_t(1) << 47);
  EXPECT_GE(-8 * w * T, -(int64_t(1) << 61));
  EXPECT_GE(-8 * w * 512, -(int64_t(1) << 59));  // 512 rows: the 60 bits of T <= 512
  EXPECT_LT(-8 * w * 513, -(int64_t(1) << 59));  // 513: past them
}

TEST(AttentionHeadInt4, OutlierLaneEntersTheScoreWorkedByHand) {
  // n = 1, outlier channel 0 with sk_0 = 0.5; its nibble is ignored (set to 7 here). q = (2, 1).
  // Row 0: lane 1.25 -> k12 = 16 * 1.25 / 0.5 = 40, k_01 = -2 -> -32: s_0 = 80 - 32 = 48.
  // Row 1: lane 0.75 -> 24, k_11 = -1 -> -16: s_1 = 48 - 16 = 32: diff 16, p_1 = EXP[1] = 30782.
  // V_0 nibbles 1, V_1 nibbles -1, sv = 1.0: acc = (32767 - 30782) 2^16 = 130088960,
  // sum = 63549, r = floor(2^46 / 63549) = 1107314736, o_d = 2047 (2047.07).
  Int4Head h(2, 1);
  h.bank[0] = 0x00, h.bank[1] = 0x38;  // sk_0 = 0.5
  h.bank[192] = 0;                     // outlier channel 0
  for (int t = 0; t < 2; ++t) h.k(t, 0, 7);
  h.k_lane(0, 0, 0x3D00);  // 1.25
  h.k(0, 1, -2);
  h.k_lane(1, 0, 0x3A00);  // 0.75
  h.k(1, 1, -1);
  h.v_all(0, 1, 0x3C00);
  h.v_all(1, -1, 0x3C00);
  int8_t q[kHeadDim] = {};
  q[0] = 2, q[1] = 1;
  const Int4Out out(q, h, 2);
  out.expect(63549u, 2047);
  // The same rows read with n = 0 score the nibble 7 instead: s_0 = 2 * 112 - 32 = 192 > s_1.
  Int4Head plain(2, 0);
  std::vector<uint8_t> k0(plain.K.size());
  for (int t = 0; t < 2; ++t) std::memcpy(&k0[size_t(t) * 48], &h.K[size_t(t) * h.krow], 48);
  int32_t o[kHeadDim];
  uint32_t sum = 0;
  golden::attention_head_int4(q, plain.bank.data(), k0.data(), h.V.data(), 2, 0, model::kBoardHeadDim, AttentionParams{1u << 12, 16, false},
                              o, &sum);
  EXPECT_NE(sum, 63549u);
}

TEST(AttentionHeadInt4, CloseToTheDecodedSoftmaxAndRefusesLegacy) {
  // Random rows encoded from floats: o_d / 2^16 against the exact softmax over the decoded
  // rows with the score the integers stand for, within a small fraction of V's range.
  std::mt19937 rng(9);
  std::normal_distribution<float> val(0.0f, 1.0f);
  for (int n : {0, 3}) {
    for (int T : {1, 5, 64, 512}) {
      const model::KvStorage st = model::kv_storage(model::KvFormat::Int4, n, model::kBoardHeadDim);
      float kmax[kHeadDim];
      for (int d = 0; d < kHeadDim; ++d) kmax[d] = 2.0f + float(d % 7);
      const model::KvInt4Bank bank = model::kv_int4_bank(kmax, n, model::kBoardHeadDim);
      std::vector<uint8_t> bb(st.bank), K(size_t(T) * st.k.total()), V(size_t(T) * st.v.total());
      model::write_kv_bank(bank, bb.data());
      std::vector<float> kd(size_t(T) * kHeadDim), vd(kd.size());
      for (int t = 0; t < T; ++t) {
        float k[kHeadDim], v[kHeadDim];
        for (int d = 0; d < kHeadDim; ++d) k[d] = val(rng) * kmax[d] / 3, v[d] = val(rng);
        model::encode_k_int4(k, bank.sk.data(), bank.outliers.data(), n, model::kBoardHeadDim, &K[size_t(t) * st.k.total()]);
        model::encode_v_int4(v, model::kBoardHeadDim, &V[size_t(t) * st.v.total()]);
        model::decode_v_int4(&V[size_t(t) * st.v.total()], model::kBoardHeadDim, &vd[size_t(t) * kHeadDim]);
      }
      int8_t q[kHeadDim];
      for (int d = 0; d < kHeadDim; ++d) q[d] = int8_t(std::clamp(int(val(rng) * 40), -128, 127));
      const AttentionParams p{3000, 24, false};
      int32_t o[kHeadDim];
      uint32_t sum = 0;
      golden::attention_head_int4(q, bb.data(), K.data(), V.data(), T, n, model::kBoardHeadDim, p, o, &sum);
      // Scores from the 12-bit K each channel stands for (nibble or lane).
      std::vector<double> s(static_cast<size_t>(T));
      double smax = -1e30;
      for (int t = 0; t < T; ++t) {
        const uint8_t* kr = &K[size_t(t) * st.k.total()];
        double dot = 0;
        for (int d = 0; d < kHeadDim; ++d) {
          double k12 = 16.0 * model::kv_nibble(kr, d);
          for (int j = 0; j < n; ++j)
            if (bank.outliers[size_t(j)] == d) {
              uint16_t lane;
              std::memcpy(&lane, kr + 48 + 2 * j, 2);
              k12 = std::clamp(std::nearbyint(16.0 * model::float_from_fp16(lane) / model::float_from_fp16(bank.sk[size_t(d)])),
                               -2048.0, 2047.0);
            }
          dot += q[d] * k12;
        }
        s[size_t(t)] = dot * p.m / double(1 << 24) / 16.0;
        smax = std::max(smax, s[size_t(t)]);
      }
      for (int d = 0; d < kHeadDim; ++d)
        EXPECT_NEAR(o[d] / 65536.0, softmax_mean(s, smax, vd, d), 0.02) << "n " << n << " T " << T << " d " << d;
    }
  }
  uint8_t bank[192] = {}, K[48] = {}, V[56] = {};
  int8_t q[kHeadDim] = {};
  int32_t o[kHeadDim];
  uint32_t sum;
  EXPECT_THROW(golden::attention_head_int4(q, bank, K, V, 1, 0, model::kBoardHeadDim, AttentionParams{1, 24, true}, o, &sum), Error);
}

// How far the logits b of every token are from a: the largest |a - b| and the largest |a|
// (their range); b must equal its rerun c bit for bit.
std::pair<double, double> logit_gap(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b,
                                    const std::vector<std::vector<float>>& c) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(b[i].data(), c[i].data(), b[i].size() * sizeof(float))) << "deterministic, token " << i;
    for (size_t j = 0; j < a[i].size(); ++j) {
      worst = std::max(worst, double(std::fabs(a[i][j] - b[i][j])));
      scale = std::max(scale, double(std::fabs(a[i][j])));
    }
  }
  return {worst, scale};
}

TEST(BoardReference, OnlineSoftmaxLogitsCloseToTwoPhase) {
  const std::vector<int> toks{1, 70, 80, 90, 100};
  const auto a = run_tokens(toks);
  const auto b = run_tokens(toks, {.attention_variant = model::AttentionVariant::OnlineSoftmax});
  const auto c = run_tokens(toks, {.attention_variant = model::AttentionVariant::OnlineSoftmax});
  const auto [worst, scale] = logit_gap(a, b, c);
  // A different arithmetic (interpolated exp, the division on the PL) ...
  EXPECT_NE(0, std::memcmp(a[4].data(), b[4].data(), a[4].size() * sizeof(float)));
  // ... that computes the same attention: logits within 10% of their range.
  EXPECT_LT(worst, 0.1 * scale);
}

TEST(BoardReference, Int4KvLogitsCloseToInt8AndChecksItsKeys) {
  const std::vector<int> toks{1, 70, 80, 90, 100};
  const BoardReferenceOptions online{.attention_variant = model::AttentionVariant::OnlineSoftmax};
  BoardReferenceOptions int4 = online, int4_lanes = online;
  int4.kv_format = int4_lanes.kv_format = model::KvFormat::Int4;
  int4_lanes.kv_outlier_channels = 4;
  const auto a = run_tokens(toks, online);
  const auto b = run_tokens(toks, int4);
  const auto c = run_tokens(toks, int4);
  const auto d = run_tokens(toks, int4_lanes);
  const auto [worst, scale] = logit_gap(a, b, c);
  EXPECT_NE(0, std::memcmp(a[4].data(), b[4].data(), a[4].size() * sizeof(float)));
  EXPECT_NE(0, std::memcmp(b[4].data(), d[4].data(), b[4].size() * sizeof(float)));  // the lanes change K
  EXPECT_LT(worst, 0.25 * scale);  // a coarser cache computing the same attention
  // The bank is the calibration's: sk_d from the per-channel maxima.
  BoardReference ref(tiny(), tiny_scales(), int4_lanes);
  const model::KvInt4Bank bank = model::read_kv_bank(ref.int4_bank(1, 0), 4, model::kBoardHeadDim);
  const float* kmax = &tiny_scales().k_channel[size_t(1 * tiny().config.num_heads + 0) * kHeadDim];
  EXPECT_EQ(bank.sk[7], model::fp16_from_float(std::max(kmax[7], 1e-5f) / 7.0f));
  EXPECT_EQ(bank.outliers.size(), 4u);
  // Refused: int4 with the two-phase unit, outlier lanes with int8, scales without channels.
  BoardReferenceOptions bad = int4;
  bad.attention_variant = model::AttentionVariant::TwoPhase;
  EXPECT_THROW(BoardReference(tiny(), tiny_scales(), bad), Error);
  bad = online;
  bad.kv_outlier_channels = 2;
  EXPECT_THROW(BoardReference(tiny(), tiny_scales(), bad), Error);
  KvScales no_channels = tiny_scales();
  no_channels.k_channel.clear();
  EXPECT_THROW(BoardReference(tiny(), no_channels, int4), Error);
}

// A prefill chunk (docs/prefill.md 2, 6) is the positions one at a time, in every attention
// and KV variant: the same K/V cache bytes after it, the last position's logits (and with
// all_logits every position's) bit for bit, the same tensors per position to the probe; a
// chunk past the cache's end is refused.
TEST(BoardReference, AChunkIsItsPositionsOneAtATime) {
  const std::vector<int> toks{1, 87, 104, 101, 32, 99, 97, 112, 44, 32, 116};
  BoardReferenceOptions online{.attention_variant = model::AttentionVariant::OnlineSoftmax};
  BoardReferenceOptions int4 = online;
  int4.kv_format = model::KvFormat::Int4;
  int4.kv_outlier_channels = 4;
  for (const BoardReferenceOptions& o : {BoardReferenceOptions{}, online, int4}) {
    const auto one = run_tokens(toks, o);
    BoardReference a(tiny(), tiny_scales(), o), b(tiny(), tiny_scales(), o);
    for (int t : toks) a.step(t);
    // Chunks of 4, 4 and 3; the middle one with all_logits.
    std::vector<std::vector<float>> got;
    std::vector<int> positions;
    for (size_t p0 = 0; p0 < toks.size(); p0 += 4) {
      const std::vector<int> chunk(toks.begin() + long(p0), toks.begin() + long(std::min(p0 + 4, toks.size())));
      const auto l = b.chunk(chunk, p0 == 4, [&](const StepProbe& p) { positions.push_back(p.position); });
      ASSERT_EQ(l.size(), chunk.size());
      for (size_t i = 0; i < l.size(); ++i) {
        const bool computed = i + 1 == l.size() || p0 == 4;
        ASSERT_EQ(l[i].empty(), !computed) << p0 + i;
        if (computed)
          EXPECT_EQ(0, std::memcmp(l[i].data(), one[p0 + i].data(), l[i].size() * sizeof(float))) << p0 + i;
      }
    }
    EXPECT_EQ(b.position(), int(toks.size()));
    // Every position's tensors reach the probe: as many for position 0 as for 9 (neither's
    // logits computed), two more (lm_head_acc, logits) for 3, the first chunk's last.
    const auto seen = [&](int p) { return std::count(positions.begin(), positions.end(), p); };
    EXPECT_GT(seen(0), 0);
    EXPECT_EQ(seen(0), seen(9));
    EXPECT_EQ(seen(3), seen(0) + 2);
    const int heads = tiny().config.num_heads;
    for (int l = 0; l < tiny().config.num_layers; ++l)
      for (int h = 0; h < heads; ++h) {
        if (o.kv_format == model::KvFormat::Int4) {
          const size_t kb = model::kv_storage(model::KvFormat::Int4, 4, model::kBoardHeadDim).k.total() * toks.size();
          const size_t vb = model::kv_storage(model::KvFormat::Int4, 4, model::kBoardHeadDim).v.total() * toks.size();
          EXPECT_EQ(0, std::memcmp(a.int4_k_rows(l, h), b.int4_k_rows(l, h), kb)) << l << " " << h;
          EXPECT_EQ(0, std::memcmp(a.int4_v_rows(l, h), b.int4_v_rows(l, h), vb)) << l << " " << h;
        } else {
          EXPECT_EQ(0, std::memcmp(a.k_rows(l, h), b.k_rows(l, h), toks.size() * kHeadDim)) << l << " " << h;
          EXPECT_EQ(0, std::memcmp(a.v_rows(l, h), b.v_rows(l, h), toks.size() * kHeadDim)) << l << " " << h;
        }
      }
  }
  BoardReference small(tiny(), tiny_scales(), {.context = 6});
  small.chunk({1, 2, 3, 4}, false);
  EXPECT_THROW(small.chunk({5, 6, 7}, false), Error);
  EXPECT_THROW(small.chunk({}, false), Error);
}

// ---- TIP's tiers (docs/tip.md) ----------------------------------------------------------

// A TIP head of T random rows at one tier: the rows in 192-byte slots as BoardReference keeps
// them, and the same rows as the INT4 unit's K and V arrays.
struct TipHead {
  model::TipBank bank;
  int n;
  std::vector<uint8_t> slots, K, V, bank_bytes;
  TipHead(int T, model::TipTier tier, int lanes, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    float kmax[kHeadDim];
    for (float& x : kmax) x = 0.5f + std::fabs(u(rng));
    kmax[11] = 6.0f;
    bank = model::tip_bank(kmax, 0.01f, lanes, model::kBoardHeadDim);
    n = tier == model::TipTier::Kvq4Lanes ? lanes : 0;
    const model::KvStorage st = model::kv_storage(model::KvFormat::Int4, n, model::kBoardHeadDim);
    slots.assign(size_t(T) * 192, 0);
    K.assign(size_t(T) * st.k.total(), 0);
    V.assign(size_t(T) * st.v.total(), 0);
    bank_bytes.assign(st.bank, 0);
    model::KvInt4Bank kb = bank.k;
    kb.outliers.resize(size_t(n));
    model::write_kv_bank(kb, bank_bytes.data());
    for (int t = 0; t < T; ++t) {
      float k[kHeadDim], v[kHeadDim];
      for (int d = 0; d < kHeadDim; ++d) k[d] = u(rng) * kmax[d], v[d] = u(rng);
      model::encode_k_int4(k, bank.k.sk.data(), kb.outliers.data(), n, model::kBoardHeadDim, &K[size_t(t) * st.k.total()]);
      model::encode_v_int4(v, model::kBoardHeadDim, &V[size_t(t) * st.v.total()]);
      std::memcpy(&slots[size_t(t) * 192], &K[size_t(t) * st.k.total()], st.k.total());
      std::memcpy(&slots[size_t(t) * 192 + st.k.total()], &V[size_t(t) * st.v.total()], st.v.total());
    }
  }
};

TEST(AttentionHeadTip, Kvq4RegionsAreReadExactlyAsTheInt4Unit) {
  // With every region at KVQ4 (or KVQ4+L), TIP's read path is the INT4 unit's: the same
  // outputs and sum, bit for bit.
  constexpr int T = 150, R = 16;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> qd(-127, 127);
  std::array<int8_t, kHeadDim> q{};
  for (auto& x : q) x = int8_t(qd(rng));
  for (model::TipTier tier : {model::TipTier::Kvq4, model::TipTier::Kvq4Lanes}) {
    const TipHead h(T, tier, 4, 11);
    const std::vector<model::TipTier> tiers((T + R - 1) / R, tier);
    int32_t o[kHeadDim], o4[kHeadDim];
    uint32_t sum = 0, sum4 = 0;
    std::vector<uint32_t> masses;
    const AttentionParams p{3000, 20, false};
    attention_head_tip(q.data(), h.bank, h.slots.data(), 192, tiers.data(), R, T, p, o, &sum, &masses);
    attention_head_int4(q.data(), h.bank_bytes.data(), h.K.data(), h.V.data(), T, h.n, model::kBoardHeadDim, p, o4, &sum4);
    EXPECT_EQ(sum, sum4) << model::tip_tier_name(tier);
    EXPECT_EQ(0, std::memcmp(o, o4, sizeof o)) << model::tip_tier_name(tier);
    // The masses: one per region, summing to about 1.0 in UQ0.16.
    ASSERT_EQ(masses.size(), size_t((T + R - 1) / R));
    uint64_t total = 0;
    for (uint32_t a : masses) total += a;
    EXPECT_NEAR(double(total), 65536.0, 655.0);
  }
}

TEST(AttentionHeadTip, Kvq8RowWorkedByHandAndTheHeaviestRegionGetsTheMass) {
  // T = 1 KVQ8: p = 32767; v8 = 2 with sv = 0.5 (0x3800): w = 32767 * 2^15, acc = 2 w,
  // o_d = 2^16 (1.0 in Q15.16); the only region holds all the mass: l e / total in UQ0.16 with
  // l = total = 32767 and e = EXP[0] = 32767, (l e rr + 2^44) >> 45 = 65,534.
  model::TipBank bank;
  bank.k.sk.assign(kHeadDim, 0x3C00);
  bank.k.outliers = {0, 1, 2, 3};
  bank.sv = 0x3800;
  std::vector<uint8_t> rows(32 * 192, 0);
  for (int d = 0; d < kHeadDim; ++d) rows[size_t(kHeadDim + d)] = 2;
  const std::vector<model::TipTier> tiers(2, model::TipTier::Kvq8);
  int32_t o[kHeadDim];
  uint32_t sum = 0;
  std::vector<uint32_t> masses;
  const auto q = query({1});
  attention_head_tip(q.data(), bank, rows.data(), 192, tiers.data(), 16, 1, {1u << 12, 16, false}, o, &sum, &masses);
  EXPECT_EQ(sum, 32767u);
  for (int d = 0; d < kHeadDim; ++d) EXPECT_EQ(o[d], 65536) << d;
  ASSERT_EQ(masses.size(), 1u);
  EXPECT_EQ(masses[0], 65534u);
  // 32 rows in two regions of 16; with q_0 = 127, row 20's key (k8_0 = 127) scores 16,129
  // above the rest: z = 16129 * 2^12 >> 16 = 1008 > 255, so every other row's p is EXP[255] = 0
  // and region 1 holds all the mass, region 0 none.
  rows[20 * 192] = 127;
  const auto q2 = query({127});
  attention_head_tip(q2.data(), bank, rows.data(), 192, tiers.data(), 16, 32, {1u << 12, 16, false}, o, &sum, &masses);
  ASSERT_EQ(masses.size(), 2u);
  EXPECT_EQ(masses[1], 65534u);
  EXPECT_EQ(masses[0], 0u);
}

TEST(BoardReference, TipMatchesAllKvq8UntilTheFirstDemotionAndResetsItsTables) {
  // Region 16, sink 16, recent 32, one KVQ8 and one lanes region: region 1 leaves at
  // position 47 (it keeps KVQ8: the budget is free), region 2 at 63 (one of them is demoted).
  BoardReferenceOptions tip{.attention_variant = model::AttentionVariant::OnlineSoftmax};
  tip.kv_format = model::KvFormat::Tip;
  tip.tip = {.region = 16, .sink = 16, .recent = 32, .kvq8_regions = 1, .lane_regions = 1, .lanes = 4};
  BoardReferenceOptions all8 = tip;
  all8.tip.kvq8_regions = 2048;
  BoardReference a(tiny(), tiny_scales(), tip), b(tiny(), tiny_scales(), all8);
  std::vector<std::vector<float>> first;
  int first_diff = -1;
  for (int i = 0; i < 120; ++i) {
    const int tok = 3 + (i * 7) % 200;
    const auto x = a.step(tok), y = b.step(tok);
    first.push_back(x);
    const bool same = std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
    if (i < 63) ASSERT_TRUE(same) << "position " << i;
    if (!same && first_diff < 0) first_diff = i;
  }
  EXPECT_GE(first_diff, 63);  // demoted rows change what later queries read
  // No hidden state: after reset the same tokens give the same logits.
  a.reset();
  for (int i = 0; i < 120; ++i) {
    const auto x = a.step(3 + (i * 7) % 200);
    ASSERT_EQ(0, std::memcmp(x.data(), first[size_t(i)].data(), x.size() * sizeof(float))) << "position " << i;
  }
  // Refusals: TIP needs the online-softmax unit; a bad tier key names itself.
  BoardReferenceOptions bad = tip;
  bad.attention_variant = model::AttentionVariant::TwoPhase;
  EXPECT_THROW(BoardReference(tiny(), tiny_scales(), bad), Error);
  bad = tip;
  bad.tip.lanes = 5;
  try {
    BoardReference r(tiny(), tiny_scales(), bad);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kv.tip.lanes"), std::string::npos) << e.what();
  }
}

// ---- Grouped-query attention (docs/numerics.md "Grouped-query attention") --------------

// tiny-gqa: 4 query heads of 96 sharing 2 K/V heads; its K/V scales; and its repeat_kv
// expansion (tests/support/repeat_kv.h): the multi-head model with each K/V head copied for
// every query head of its group, HF's reference semantics of GQA.
const model::TernaryModel& tiny_gqa() {
  static const model::TernaryModel m = [] {
    model::SyntheticSource src(model::Shape::TinyGqa, 7);
    return model::load_ternary_model(src, 2);
  }();
  return m;
}
const KvScales& tiny_gqa_scales() {
  static const KvScales s = [] {
    auto tok = model::make_byte_tokenizer(tiny_gqa().config.vocab_size);
    return calibrate_kv_scales(tiny_gqa(), calibration_tokens(*tok, tiny_gqa().config.bos_token_id));
  }();
  return s;
}

TEST(BoardReferenceGqa, ScalesArePerKvHeadAndThoseOfTheExpansion) {
  const auto& c = tiny_gqa().config;
  const KvScales& s = tiny_gqa_scales();
  ASSERT_EQ(s.k.size(), size_t(c.num_layers * c.num_kv_heads));
  ASSERT_EQ(s.k_channel.size(), s.k.size() * kHeadDim);
  const model::TernaryModel full = testing::repeat_kv(tiny_gqa());
  auto tok = model::make_byte_tokenizer(c.vocab_size);
  const KvScales e = calibrate_kv_scales(full, calibration_tokens(*tok, c.bos_token_id));
  const KvScales r = testing::repeat_kv(s, c);
  ASSERT_EQ(e.k.size(), r.k.size());
  EXPECT_EQ(0, std::memcmp(e.k.data(), r.k.data(), e.k.size() * 4));
  EXPECT_EQ(0, std::memcmp(e.v.data(), r.v.data(), e.v.size() * 4));
  EXPECT_EQ(0, std::memcmp(e.k_channel.data(), r.k_channel.data(), e.k_channel.size() * 4));
  EXPECT_NE(s.k[0], s.k[1]);  // the two K/V heads differ
}

// Every attention variant and KV format: the GQA model gives its repeat_kv expansion's logits
// bit for bit (TIP too while no region has left the recent window: past that a K/V head's
// region counters sum its group's masses, which the expansion keeps per query head), and the
// cache holds one row per K/V head, the row every query head of the group read.
TEST(BoardReferenceGqa, EqualsItsRepeatKvExpansionBitForBit) {
  const model::TernaryModel full = testing::repeat_kv(tiny_gqa());
  const KvScales full_scales = testing::repeat_kv(tiny_gqa_scales(), tiny_gqa().config);
  const BoardReferenceOptions online{.attention_variant = model::AttentionVariant::OnlineSoftmax};
  BoardReferenceOptions legacy{.legacy_attention = true}, int4 = online, lanes = online, tip = online;
  int4.kv_format = lanes.kv_format = model::KvFormat::Int4;
  lanes.kv_outlier_channels = 4;
  tip.kv_format = model::KvFormat::Tip;
  const std::vector<int> toks{1, 87, 104, 101, 32, 99, 97, 112, 44, 32, 116, 104};
  for (const BoardReferenceOptions& o : {BoardReferenceOptions{}, legacy, online, int4, lanes, tip}) {
    BoardReference a(tiny_gqa(), tiny_gqa_scales(), o), b(full, full_scales, o);
    for (size_t i = 0; i < toks.size(); ++i) {
      const auto x = a.step(toks[i]), y = b.step(toks[i]);
      ASSERT_EQ(0, std::memcmp(x.data(), y.data(), x.size() * sizeof(float)))
          << "kv format " << int(o.kv_format) << ", variant " << int(o.attention_variant) << ", position " << i;
    }
    if (o.kv_format != model::KvFormat::Int8) continue;
    for (int h = 0; h < 4; ++h)  // query head h's rows in the expansion are K/V head h / 2's
      EXPECT_EQ(0, std::memcmp(a.k_rows(1, h / 2), b.k_rows(1, h), toks.size() * kHeadDim)) << h;
    EXPECT_NE(0, std::memcmp(a.k_rows(1, 0), a.k_rows(1, 1), toks.size() * kHeadDim));
  }
}

// Past the recent window TIP's placement runs on the K/V heads' tables (which the group's
// queries fill): the logits stay finite and close to the all-KVQ8 cache's, and a chunk is its
// positions one at a time.
TEST(BoardReferenceGqa, TipPlacesRegionsPerKvHeadAndAChunkIsItsPositions) {
  BoardReferenceOptions tip{.attention_variant = model::AttentionVariant::OnlineSoftmax};
  tip.kv_format = model::KvFormat::Tip;
  tip.tip = {.region = 16, .sink = 16, .recent = 32, .kvq8_regions = 1, .lane_regions = 1, .lanes = 4};
  BoardReference a(tiny_gqa(), tiny_gqa_scales(), tip), b(tiny_gqa(), tiny_gqa_scales(), tip);
  for (int i = 0; i < 96; ++i) (void)a.step(3 + (i * 7) % 200);
  // Regions 1..3 have left the recent window (64..95); one KVQ8 region is the budget.
  for (int g = 0; g < 2; ++g) {
    int kvq8 = 0;
    for (int r = 1; r <= 3; ++r) kvq8 += a.tip_regions(1, g).tier(r) == model::TipTier::Kvq8;
    EXPECT_EQ(kvq8, 1) << "K/V head " << g;
  }
  std::vector<int> toks;
  for (int i = 0; i < 60; ++i) toks.push_back(3 + (i * 7) % 200);  // region 1 leaves at 47
  const auto chunked = b.chunk(toks, false);
  a.reset();
  std::vector<float> last_a;
  for (int t : toks) last_a = a.step(t);
  EXPECT_EQ(0, std::memcmp(last_a.data(), chunked.back().data(), last_a.size() * sizeof(float)));
}

}  // namespace
}  // namespace bitsim::golden
