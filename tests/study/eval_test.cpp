// bitsim eval: perplexity under the model's, the board's and the variants' arithmetics.
#include "support/run_bitsim.h"
#include "study/eval.h"
#include "base/sha256.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "golden/board_reference.h"
#include "golden/float_reference.h"
#include "base/error.h"
#include "model/model_loader.h"
#include "model/tokenizer.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;

namespace bitsim::study {
namespace {

const fs::path kModel = fs::path(BITSIM_SOURCE_DIR) / "models" / "kjv-ternary";
const fs::path kTest = kModel / "test.txt";

// A folder for the test, created at once (tests/support/temp_dir.h names and removes it), and
// the text files a test writes into it.
struct TempDir : ::bitsim::test::TempDir {
  TempDir() { std::filesystem::create_directories(path); }
  fs::path file(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return path / name;
  }
};

std::map<std::string, EvalRow> by_name(const EvalResult& r) {
  std::map<std::string, EvalRow> m;
  for (const auto& row : r.rows) m[row.arithmetic] = row;
  return m;
}

EvalRequest request(const std::string& model, const fs::path& text, int64_t tokens) {
  EvalRequest q;
  q.model = model;
  q.text = text;
  q.tokens = tokens;
  return q;
}

const std::string kProse =
    "In the beginning the keeper wrote the weather in a book, and the wind was in the east. "
    "And the sea was grey, and three ships passed before noon; and he wrote them all. "
    "At evening the lamp was lit, the tide came over the rocks, and the keeper counted the gulls "
    "that stood on the wall until the dark.";

TEST(Eval, ThirteenRowsInOrderEachSimulatedOverEveryToken) {
  TempDir dir;
  const auto r = run_eval(request("synthetic:tiny", dir.file("t.txt", kProse), 0));
  ASSERT_EQ(r.rows.size(), 13u);
  const char* names[] = {"float", "float-ternary-head", "board", "board-legacy-shift", "board-dynamic-kv",
                         "board-int8-head", "board-online-softmax", "board-online-softmax-int4-kv",
                         "board-online-softmax-int4-kv-4-outliers", "board-online-softmax-int4-kv-8-outliers",
                         "board-online-softmax-kvq8", "board-online-softmax-tip", "board-online-softmax-tip-lean"};
  for (size_t i = 0; i < 13; ++i) {
    EXPECT_EQ(r.rows[i].arithmetic, names[i]);
    EXPECT_EQ(r.rows[i].evidence, "simulated");
    EXPECT_EQ(r.rows[i].tokens, int64_t(kProse.size()));  // byte tokenizer: one token per byte
    EXPECT_TRUE(std::isfinite(r.rows[i].ppl));
    EXPECT_NEAR(r.rows[i].ppl, std::exp(r.rows[i].nll_mean), 1e-9 * r.rows[i].ppl);
  }
  EXPECT_EQ(r.text_tokens, int64_t(kProse.size()));
  EXPECT_EQ(r.window, 512);  // tiny: max_position_embeddings 2048, the board's KV area 512
  EXPECT_EQ(r.windows, 1);
  EXPECT_EQ(r.text_sha256, sha256_hex(kProse));
  EXPECT_FALSE(r.model_sha256.has_value());  // synthetic: no file
}

// The float row is the mean over every text token of -log softmax(FloatReference logits),
// windows restarting the KV cache with BOS: recomputed here by hand with 3 windows.
TEST(Eval, FloatRowIsTheTeacherForcedNllOfTheFloatReference) {
  TempDir dir;
  const std::string text(kProse + kProse + kProse + kProse + kProse + kProse + kProse);  // > 1024 bytes
  auto r = run_eval(request("synthetic:tiny", dir.file("t.txt", text), 1100));
  ASSERT_EQ(r.windows, 3);
  auto src = model::open_model_source("synthetic:tiny");
  const auto m = model::load_ternary_model(*src);
  const auto tok = model::make_byte_tokenizer(m.config.vocab_size);
  const std::vector<int> ids = tok->encode(text.substr(0, 1100));
  double total = 0;
  for (size_t b = 0; b < ids.size(); b += 512) {
    golden::FloatReference ref(m);
    const size_t e = std::min(ids.size(), b + 512);
    for (size_t i = b; i < e; ++i) {
      const auto logits = ref.step(i == b ? m.config.bos_token_id : ids[i - 1]);
      double mx = -INFINITY, sum = 0;
      for (float l : logits) mx = std::max(mx, double(l));
      for (float l : logits) sum += std::exp(double(l) - mx);
      total += mx + std::log(sum) - logits[size_t(ids[i])];
    }
  }
  EXPECT_NEAR(r.rows[0].nll_mean, total / 1100.0, 1e-12);
  EXPECT_EQ(r.rows[0].tokens, 1100);
}

// The board rows run the matmuls through the fast fidelity's kernels; they must give what
// the plain-loop BoardReference gives, to the last bit of every logit.
TEST(Eval, BoardRowsAreThePlainLoopBoardReferenceNll) {
  TempDir dir;
  const std::string text = kProse + kProse;
  auto r = run_eval(request("synthetic:tiny", dir.file("t.txt", text), 300));
  auto src = model::open_model_source("synthetic:tiny");
  const auto m = model::load_ternary_model(*src);
  const auto tok = model::make_byte_tokenizer(m.config.vocab_size);
  const auto scales = golden::calibrate_kv_scales(m, golden::calibration_tokens(*tok, m.config.bos_token_id));
  const std::vector<int> ids = tok->encode(text.substr(0, 300));
  // board, board-legacy-shift, board-online-softmax, ... -int4-kv, ... with 4 and 8 outlier lanes
  for (int row : {2, 3, 6, 7, 8, 9}) {
    const bool legacy = row == 3;
    golden::BoardReference ref(m, scales,
                               golden::BoardReferenceOptions{
                                   legacy, 1, row >= 6 ? model::AttentionVariant::OnlineSoftmax : model::AttentionVariant::TwoPhase,
                                   row >= 7 ? model::KvFormat::Int4 : model::KvFormat::Int8,
                                   row == 8 ? 4 : row == 9 ? 8 : 0});
    double total = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto logits = ref.step(i == 0 ? m.config.bos_token_id : ids[i - 1]);
      double mx = -INFINITY, sum = 0;
      for (float l : logits) mx = std::max(mx, double(l));
      for (float l : logits) sum += std::exp(double(l) - mx);
      total += mx + std::log(sum) - logits[size_t(ids[i])];
    }
    EXPECT_NEAR(r.rows[size_t(row)].nll_mean, total / 300.0, 1e-12) << r.rows[size_t(row)].arithmetic;
  }
}

// --compare: each board row's logits against FloatReference's (ternary head), recomputed here.
TEST(Eval, CompareRowsAreTheLogitErrorsAgainstFloatReference) {
  TempDir dir;
  auto q = request("synthetic:tiny", dir.file("t.txt", kProse), 0);
  q.compare_positions = 6;
  const auto r = run_eval(q);
  ASSERT_EQ(r.compare.size(), 6u);
  auto src = model::open_model_source("synthetic:tiny");
  const auto m = model::load_ternary_model(*src);
  const auto tok = model::make_byte_tokenizer(m.config.vocab_size);
  const auto scales = golden::calibrate_kv_scales(m, golden::calibration_tokens(*tok, m.config.bos_token_id));
  const std::vector<int> ids = tok->encode(kProse);
  golden::FloatReference fl(m, golden::FloatReferenceOptions{true});
  std::vector<std::vector<float>> ref;
  for (int p = 0; p < 6; ++p) ref.push_back(fl.step(p == 0 ? m.config.bos_token_id : ids[size_t(p - 1)]));
  const char* names[] = {"board", "board-legacy-shift", "board-online-softmax", "board-online-softmax-int4-kv",
                         "board-online-softmax-int4-kv-4-outliers", "board-online-softmax-int4-kv-8-outliers"};
  for (int k = 0; k < 6; ++k) {
    golden::BoardReference bd(m, scales,
                              golden::BoardReferenceOptions{
                                  k == 1, 1, k >= 2 ? model::AttentionVariant::OnlineSoftmax : model::AttentionVariant::TwoPhase,
                                  k >= 3 ? model::KvFormat::Int4 : model::KvFormat::Int8, k == 4 ? 4 : k == 5 ? 8 : 0});
    double mean = 0, worst = 0;
    int agree = 0;
    for (int p = 0; p < 6; ++p) {
      const auto l = bd.step(p == 0 ? m.config.bos_token_id : ids[size_t(p - 1)]);
      const auto& f = ref[size_t(p)];
      double d = 0, sc = 0;
      size_t al = 0, af = 0;
      for (size_t i = 0; i < l.size(); ++i) {
        d = std::max(d, std::fabs(double(l[i]) - f[i]));
        sc = std::max(sc, std::fabs(double(f[i])));
        if (l[i] > l[al]) al = i;
        if (f[i] > f[af]) af = i;
      }
      mean += d / sc / 6;
      worst = std::max(worst, d / sc);
      agree += al == af;
    }
    EXPECT_EQ(r.compare[size_t(k)].arithmetic, names[k]);
    EXPECT_EQ(r.compare[size_t(k)].positions, 6);
    EXPECT_NEAR(r.compare[size_t(k)].rel_mean, mean, 1e-12) << names[k];
    EXPECT_NEAR(r.compare[size_t(k)].rel_worst, worst, 1e-12) << names[k];
    EXPECT_EQ(r.compare[size_t(k)].top1, agree / 6.0) << names[k];
    EXPECT_GT(r.compare[size_t(k)].rel_worst, 0.0) << names[k];  // integer arithmetic is not float
  }
  q.compare_positions = 10'000;
  EXPECT_THROW(run_eval(q), Error);
}

TEST(Eval, ResultsDoNotDependOnTheThreads) {
  TempDir dir;
  const auto text = dir.file("t.txt", kProse + kProse + kProse + kProse);
  auto q = request("synthetic:tiny", text, 600);
  q.threads = 1;
  const auto a = run_eval(q);
  q.threads = 3;
  const auto b = run_eval(q);
  for (size_t i = 0; i < a.rows.size(); ++i) EXPECT_EQ(a.rows[i].nll_mean, b.rows[i].nll_mean) << a.rows[i].arithmetic;
}

TEST(Eval, BoardPositionsRunOnTheSimulatedBoardWithEqualLogits) {
  TempDir dir;
  auto q = request("synthetic:tiny", dir.file("t.txt", kProse), 0);
  q.board_positions = 12;
  const auto r = run_eval(q);
  ASSERT_TRUE(r.board.has_value());
  EXPECT_EQ(r.board->positions, 12);
  EXPECT_TRUE(r.board->logits_equal);
  EXPECT_FALSE(r.board->first_mismatch.has_value());
}

TEST(Eval, BadInputIsAnErrorNamingTheFileOrOption) {
  TempDir dir;
  auto expect_error = [](EvalRequest q, const std::string& what) {
    try {
      run_eval(q);
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error(request("synthetic:tiny", dir.path / "missing.txt", 0), "missing.txt: no such file");
  expect_error(request("synthetic:tiny", dir.path, 0), "is a folder, a regular file is expected");
  expect_error(request("synthetic:tiny", dir.file("empty.txt", ""), 0), "empty.txt: the file is empty");
  expect_error(request("synthetic:tiny", dir.file("t.txt", "abc"), 4), "tokens 4");
  expect_error(request("synthetic:tiny", dir.file("t.txt", "abc"), -1), "tokens -1");
  auto q = request("synthetic:tiny", dir.file("t.txt", "abcdef"), 0);
  q.board_positions = 7;
  expect_error(q, "board positions 7");
  q = request("synthetic:tiny", dir.file("t.txt", "abcdef"), 0);
  q.window = 4096;
  expect_error(q, "window 4096: must be 1..2048 (the model's max_position_embeddings)");
  // Fewer tokens than the first context bucket (1-256, or 1-W for a window W < 256).
  const auto short_text = dir.file("short.txt", std::string(200, 'a'));
  expect_error(request("synthetic:tiny", short_text, 0),
               "short.txt: 200 tokens scored, fewer than the first context bucket's 256 positions");
  expect_error(request("synthetic:tiny", short_text, 100), "100 tokens scored");
  q = request("synthetic:tiny", short_text, 100);
  q.window = 128;
  expect_error(q, "fewer than the first context bucket's 128 positions");
  q.window = 100;
  EXPECT_NO_THROW(run_eval(q));
}

// ---- By context ------------------------------------------------------------------------

TEST(EvalBuckets, DoubleFrom256UntilTheyCoverTheWindow) {
  using B = std::vector<std::pair<int, int>>;
  EXPECT_EQ(eval_buckets(100), (B{{1, 256}}));
  EXPECT_EQ(eval_buckets(256), (B{{1, 256}}));
  EXPECT_EQ(eval_buckets(300), (B{{1, 256}, {257, 512}}));
  EXPECT_EQ(eval_buckets(2048), (B{{1, 256}, {257, 512}, {513, 1024}, {1025, 2048}}));
}

// One window of 1,100 positions: every bucket up to 1,025-2,048 holds tokens; the rows whose
// unit holds 512 positions are not run, the float, INT4 and TIP ones are.
TEST(EvalBuckets, AWindowOver1024PositionsFillsFourBuckets) {
  TempDir dir;
  std::string text;
  while (text.size() < 1100) text += kProse;
  auto q = request("synthetic:tiny", dir.file("t.txt", text), 1100);
  q.window = 1100;
  const auto r = run_eval(q);
  EXPECT_EQ(r.window, 1100);
  EXPECT_EQ(r.windows, 1);
  EXPECT_EQ(r.rows_not_run, (std::vector<std::string>{"board", "board-legacy-shift", "board-dynamic-kv",
                                                       "board-int8-head", "board-online-softmax"}));
  ASSERT_EQ(r.rows.size(), 8u);
  const int64_t expected_tokens[] = {256, 256, 512, 76};
  for (const auto& row : r.rows) {
    ASSERT_EQ(row.buckets.size(), 4u) << row.arithmetic;
    int64_t tokens = 0;
    double nll = 0;
    for (size_t b = 0; b < 4; ++b) {
      const EvalBucket& k = row.buckets[b];
      EXPECT_EQ(k.tokens, expected_tokens[b]);
      tokens += k.tokens;
      nll += k.nll_mean * double(k.tokens);
      EXPECT_GE(k.kl_float, 0.0) << row.arithmetic;
      EXPECT_GE(k.kl_float_ternary_head, 0.0) << row.arithmetic;
      EXPECT_GE(k.top1_float, 0.0);
      EXPECT_LE(k.top1_float, 1.0);
      EXPECT_NEAR(k.ppl, std::exp(k.nll_mean), 1e-9 * k.ppl);
    }
    EXPECT_EQ(row.buckets[3].from, 1025);
    EXPECT_EQ(row.buckets[3].to, 2048);
    EXPECT_EQ(tokens, row.tokens) << row.arithmetic;
    EXPECT_NEAR(nll / double(tokens), row.nll_mean, 1e-12) << row.arithmetic;
  }
  const auto rows = by_name(r);
  for (const auto& k : rows.at("float").buckets) {  // a row against itself
    EXPECT_EQ(k.kl_float, 0.0);
    EXPECT_EQ(k.top1_float, 1.0);
    EXPECT_GT(k.kl_float_ternary_head, 0.0);
  }
  for (const auto& k : rows.at("float-ternary-head").buckets) {
    EXPECT_EQ(k.kl_float_ternary_head, 0.0);
    EXPECT_EQ(k.top1_float_ternary_head, 1.0);
  }
  // The INT4 cache moves the distribution away from float-ternary-head's, which it approximates.
  for (const auto& k : rows.at("board-online-softmax-int4-kv").buckets) EXPECT_GT(k.kl_float_ternary_head, 0.0);
}

// The KL and top-1 figures of float-ternary-head against float, recomputed by hand with plain
// loops over FloatReference's two heads: 300 tokens in one window, buckets 1-256 and 257-512.
TEST(EvalBuckets, KlAndTop1AreThoseOfThePlainLoop) {
  TempDir dir;
  const std::string text = kProse + kProse;
  const auto r = run_eval(request("synthetic:tiny", dir.file("t.txt", text), 300));
  auto src = model::open_model_source("synthetic:tiny");
  const auto m = model::load_ternary_model(*src);
  const std::vector<int> ids = model::make_byte_tokenizer(m.config.vocab_size)->encode(text.substr(0, 300));
  golden::FloatReference ref(m);
  double kl[2] = {0, 0}, nll[2] = {0, 0};
  int top1[2] = {0, 0};
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::vector<float> f = ref.step(i == 0 ? m.config.bos_token_id : ids[i - 1]);
    const std::vector<float> t = ref.last_logits(true);
    auto log_softmax = [](const std::vector<float>& l) {
      double mx = -INFINITY, sum = 0;
      for (float x : l) mx = std::max(mx, double(x));
      for (float x : l) sum += std::exp(double(x) - mx);
      std::vector<double> out;
      for (float x : l) out.push_back(double(x) - mx - std::log(sum));
      return out;
    };
    const auto lf = log_softmax(f), lt = log_softmax(t);
    const size_t b = i < 256 ? 0 : 1;
    for (size_t v = 0; v < lf.size(); ++v) kl[b] += std::exp(lf[v]) * (lf[v] - lt[v]);
    nll[b] -= lt[size_t(ids[i])];
    top1[b] += std::max_element(f.begin(), f.end()) - f.begin() == std::max_element(t.begin(), t.end()) - t.begin();
  }
  const EvalRow row = by_name(r).at("float-ternary-head");
  ASSERT_EQ(row.buckets.size(), 2u);
  const int n[2] = {256, 44};
  for (size_t b = 0; b < 2; ++b) {
    EXPECT_EQ(row.buckets[b].tokens, n[b]);
    EXPECT_NEAR(row.buckets[b].kl_float, kl[b] / n[b], 1e-9);
    EXPECT_NEAR(row.buckets[b].nll_mean, nll[b] / n[b], 1e-9);
    EXPECT_DOUBLE_EQ(row.buckets[b].top1_float, double(top1[b]) / n[b]);
  }
  EXPECT_TRUE(r.rows_not_run.empty());
}

// ---- The trained model (models/kjv-ternary) -------------------------------------------

TEST(EvalTrained, TheArithmeticsOrderAsTheirErrorsPredict) {
  const auto r = run_eval(request(kModel.string(), kTest, 1024));
  const auto rows = by_name(r);
  EXPECT_EQ(r.window, 256);  // the model's max_position_embeddings
  EXPECT_EQ(r.windows, 4);
  // The board's earlier fixed >> 8 shift ignores the q and K scales: clearly worse.
  EXPECT_GT(rows.at("board-legacy-shift").ppl, 1.05 * rows.at("board").ppl);
  // A ternary lm_head loses against the float one, and an INT8 head wins most of it back.
  EXPECT_GT(rows.at("float-ternary-head").ppl, rows.at("float").ppl);
  EXPECT_LT(rows.at("board-int8-head").ppl, rows.at("board").ppl);
  // The board's integer pipeline stays close to float with the same (ternary) head.
  EXPECT_LT(std::fabs(rows.at("board").ppl / rows.at("float-ternary-head").ppl - 1.0), 0.05);
  ASSERT_TRUE(r.model_sha256.has_value());
  EXPECT_EQ(r.model_sha256->size(), 64u);
}

// ---- The command line -----------------------------------------------------------------

using Cmd = testing::CommandResult;
Cmd bitsim(const std::string& args) { return testing::run_bitsim(args); }

TEST(EvalCli, JsonDocumentFollowsTheSchema) {
  TempDir dir;
  const auto text = dir.file("t.txt", kProse);
  const auto r =
      bitsim("eval --model synthetic:tiny --text " + text.string() + " --tokens 256 --board 4 --compare 5 --json --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("schema"), "bitsim.eval/2");
  EXPECT_EQ(j.at("rows_not_run"), nlohmann::json::array());
  EXPECT_EQ(j.at("text_sha256"), sha256_hex(kProse));
  EXPECT_TRUE(j.at("model_sha256").is_null());
  EXPECT_EQ(j.at("text_tokens"), int64_t(kProse.size()));
  ASSERT_EQ(j.at("rows").size(), 13u);
  ASSERT_EQ(j.at("logits_vs_float").size(), 6u);
  for (const auto& c : j.at("logits_vs_float")) {
    EXPECT_EQ(c.at("positions"), 5);
    EXPECT_EQ(c.at("evidence"), "simulated");
    EXPECT_GE(c.at("rel_error_worst").get<double>(), c.at("rel_error_mean").get<double>());
    EXPECT_GE(c.at("top1_agreement").get<double>(), 0.0);
    EXPECT_LE(c.at("top1_agreement").get<double>(), 1.0);
  }
  for (const auto& row : j.at("rows")) {
    EXPECT_TRUE(row.at("arithmetic").is_string());
    EXPECT_EQ(row.at("evidence"), "simulated");
    EXPECT_EQ(row.at("tokens"), 256);
    ASSERT_EQ(row.at("buckets").size(), 1u);
    EXPECT_EQ(row.at("buckets")[0].at("from"), 1);
    EXPECT_EQ(row.at("buckets")[0].at("tokens"), 256);
    EXPECT_NEAR(row.at("ppl").get<double>(), std::exp(row.at("nll_mean").get<double>()), 1e-9 * row.at("ppl").get<double>());
  }
  EXPECT_EQ(j.at("board_check").at("positions"), 4);
  EXPECT_EQ(j.at("board_check").at("logits_equal"), true);
}

TEST(EvalCli, TrainedModelJsonNamesTheCheckpointHash) {
  const auto r = bitsim("eval --model " + kModel.string() + " --text " + kTest.string() + " --tokens 256 --json --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::ifstream f(kModel / "model.safetensors", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(j.at("model_sha256"), sha256_hex(bytes));
}

TEST(EvalCli, BadInputExitsTwoNamingTheFileOrOption) {
  TempDir dir;
  const auto empty = dir.file("empty.txt", "");
  const auto text = dir.file("t.txt", "abc");
  struct Case {
    std::string args, says;
  } cases[] = {
      {"--text " + (dir.path / "nope.txt").string(), "nope.txt: no such file"},
      {"--text " + dir.path.string(), "is a folder, a regular file is expected"},
      {"--text " + empty.string(), "empty.txt: the file is empty"},
      {"--text " + text.string() + " --tokens 9", "tokens 9"},
      {"--text " + text.string() + " --tokens -2", "--tokens: '-2' is out of range"},
      {"--text " + text.string() + " --tokens many", "--tokens"},
      {"--text " + text.string() + " --board 5", "board positions 5"},
      {"--text " + text.string() + " --window 3000", "window 3000: must be 1..2048"},
      {"--text " + text.string(), "t.txt: 3 tokens scored, fewer than the first context bucket's 256 positions"},
  };
  for (const auto& c : cases) {
    const auto r = bitsim("eval --model synthetic:tiny " + c.args);
    EXPECT_EQ(r.code, 2) << c.args;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << ": " << r.err;
  }
  const auto help = bitsim("eval --help");
  EXPECT_EQ(help.code, 0);
  for (const char* row : {"float-ternary-head", "board-legacy-shift", "board-dynamic-kv", "board-int8-head", "simulated"})
    EXPECT_NE(help.out.find(row), std::string::npos) << row;
}

}  // namespace
}  // namespace bitsim::study
