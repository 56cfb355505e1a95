// Start-up through the cache (sim/startup.h): a cached start-up gives the same model and
// K/V scales bit for bit, and the simulated board then gives bit-identical logits and
// identical cycle counts; a damaged model entry is rebuilt, never used; a model's identity
// follows its content (seed, checkpoint bytes). Every test has its own cache folder.
#include "sim/startup.h"

#include <gtest/gtest.h>

#include "support/edit_byte.h"
#include "support/temp_dir.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "model/synthetic.h"
#include "model/tokenizer.h"
#include "sim/board_config.h"
#include "sim/board_run.h"

using namespace bitsim;
using namespace bitsim::sim;
namespace fs = std::filesystem;

namespace {

using bitsim::test::TempDir;

CacheSettings settings(const fs::path& dir) {
  CacheSettings s;
  s.enabled = true;
  s.dir = dir;
  return s;
}

std::vector<int> calibration(const model::TensorSource& src) {
  auto tok = model::make_byte_tokenizer(src.config().vocab_size);
  return golden::calibration_tokens(*tok, src.config().bos_token_id);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

bool same_model(const model::TernaryModel& a, const model::TernaryModel& b) {
  auto same_m = [](const model::TernaryMatrix& x, const model::TernaryMatrix& y) {
    return x.rows == y.rows && x.cols == y.cols && std::memcmp(&x.scale, &y.scale, 4) == 0 && x.trits == y.trits;
  };
  if (a.embed.size() != b.embed.size() || std::memcmp(a.embed.data(), b.embed.data(), a.embed.size() * 4) != 0)
    return false;
  if (!same_bits(a.final_norm, b.final_norm) || !same_m(a.lm_head, b.lm_head) || a.layers.size() != b.layers.size())
    return false;
  for (size_t l = 0; l < a.layers.size(); ++l) {
    const auto &x = a.layers[l], &y = b.layers[l];
    if (!same_bits(x.input_norm, y.input_norm) || !same_bits(x.inner_attn_norm, y.inner_attn_norm) ||
        !same_bits(x.post_attn_norm, y.post_attn_norm) || !same_bits(x.ffn_norm, y.ffn_norm) || !same_m(x.q, y.q) ||
        !same_m(x.k, y.k) || !same_m(x.v, y.v) || !same_m(x.o, y.o) || !same_m(x.gate, y.gate) ||
        !same_m(x.up, y.up) || !same_m(x.down, y.down))
      return false;
  }
  return true;
}

// The model entries (model-KEY.bin) in a cache folder.
std::vector<fs::path> model_entries(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("model-", 0) == 0 && e.path().extension() == ".bin") out.push_back(e.path());
  return out;
}

// A cache folder with its store (warnings collected), a tiny synthetic model, its
// calibration tokens, and its start-up without the cache to compare with.
struct CachedTiny {
  explicit CachedTiny(uint64_t seed)
      : store(CacheStore::open(settings(d.path), [this](const std::string& m) { warnings.push_back(m); })),
        src(model::Shape::Tiny, seed),
        calib(calibration(src)),
        plain(prepare_model(src, calib, 2, nullptr)) {}
  TempDir d;
  std::vector<std::string> warnings;
  std::unique_ptr<CacheStore> store;
  model::SyntheticSource src;
  std::vector<int> calib;
  PreparedModel plain;
};

}  // namespace

TEST(Startup, ACachedStartUpGivesBitIdenticalLogitsAndIdenticalCycleCounts) {
  TempDir d;
  std::vector<std::string> warnings;
  auto store = CacheStore::open(settings(d.path), [&](const std::string& m) { warnings.push_back(m); });
  ASSERT_TRUE(store);
  model::SyntheticSource src(model::Shape::Tiny, 3);
  const auto calib = calibration(src);

  const PreparedModel plain = prepare_model(src, calib, 2, nullptr);
  PreparedModel first = prepare_model(src, calib, 2, store.get());  // fills the cache
  first.model_store.wait();  // the model entry is written on a helper thread
  const PreparedModel cached = prepare_model(src, calib, 2, store.get());  // from the cache
  EXPECT_FALSE(first.times.model_cached);
  EXPECT_FALSE(first.times.scales_cached);
  EXPECT_TRUE(cached.times.model_cached);
  EXPECT_TRUE(cached.times.scales_cached);
  EXPECT_TRUE(cached.model.lm_head.trits.is_view());  // mapped, not copied
  EXPECT_TRUE(same_model(cached.model, plain.model));
  EXPECT_TRUE(same_bits(cached.scales.k, plain.scales.k));
  EXPECT_TRUE(same_bits(cached.scales.v, plain.scales.v));
  EXPECT_TRUE(warnings.empty());

  // The board with each: every token's logits bit for bit, every time figure to the ps.
  const SimConfig cfg = make_sim_config(board_params());
  const std::vector<int> tokens{1, 40, 41, 42, 300, 7};
  SimulateOptions o;
  const auto a = simulate_tokens(cfg, plain.model, plain.scales, tokens, o);
  const auto b = simulate_tokens(cfg, cached.model, cached.scales, tokens, o);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(same_bits(a[i].logits, b[i].logits)) << "token " << i;
    EXPECT_FALSE(a[i].logits.empty());
    EXPECT_EQ(a[i].timing.total_ps(), b[i].timing.total_ps()) << "token " << i;
    EXPECT_EQ(a[i].timing.matmul_ps, b[i].timing.matmul_ps) << "token " << i;
    EXPECT_EQ(a[i].timing.attention_ps, b[i].timing.attention_ps) << "token " << i;
    EXPECT_EQ(a[i].timing.bytes_read, b[i].timing.bytes_read) << "token " << i;
  }
}

TEST(Startup, TheModelEntryIsWrittenBesideTheCalibrationAndComplete) {
  // prepare_model returns with the model entry possibly still being written; once the
  // write is joined the entry is whole and the next start-up maps it. The model and the
  // scales do not depend on whether the write has finished.
  CachedTiny c(12);
  {
    PreparedModel first = prepare_model(c.src, c.calib, 2, c.store.get());
    EXPECT_FALSE(first.times.model_cached);
    EXPECT_TRUE(same_model(first.model, c.plain.model));
    EXPECT_TRUE(same_bits(first.scales.k, c.plain.scales.k));
  }  // the destructor joins the write
  for (const auto& e : fs::directory_iterator(c.d.path))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  EXPECT_EQ(model_entries(c.d.path).size(), 1u);
  const PreparedModel again = prepare_model(c.src, c.calib, 2, c.store.get());
  EXPECT_TRUE(again.times.model_cached);
  EXPECT_TRUE(again.times.scales_cached);
  EXPECT_TRUE(same_model(again.model, c.plain.model));
  EXPECT_TRUE(c.warnings.empty());
}

TEST(Startup, ADamagedModelEntryIsRebuiltNotUsed) {
  CachedTiny c(4);
  prepare_model(c.src, c.calib, 2, c.store.get());
  // Damage one trit byte in the middle of the stored model image.
  const std::vector<fs::path> entries = model_entries(c.d.path);
  ASSERT_EQ(entries.size(), 1u);
  const fs::path entry = entries[0];
  test::edit_byte(entry, fs::file_size(entry) / 2, [](char b) { return char(b == 0 ? 1 : 0); });
  PreparedModel again = prepare_model(c.src, c.calib, 2, c.store.get());
  again.model_store.wait();
  EXPECT_FALSE(again.times.model_cached);  // rebuilt
  EXPECT_TRUE(same_model(again.model, c.plain.model));
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("corrupt"), std::string::npos) << c.warnings[0];
  const PreparedModel third = prepare_model(c.src, c.calib, 2, c.store.get());
  EXPECT_TRUE(third.times.model_cached);  // the rebuilt entry is good
  EXPECT_TRUE(same_model(third.model, c.plain.model));
  EXPECT_EQ(c.warnings.size(), 1u);
}

TEST(Startup, AModelsIdentityFollowsItsContent) {
  TempDir d;
  auto store = CacheStore::open(settings(d.path / "cache"), {});
  model::SyntheticSource s1(model::Shape::Tiny, 1), s1b(model::Shape::Tiny, 1), s2(model::Shape::Tiny, 2);
  EXPECT_EQ(model_identity(s1, nullptr), model_identity(s1b, nullptr));
  EXPECT_NE(model_identity(s1, nullptr), model_identity(s2, nullptr));
  EXPECT_NE(model_identity(s1, nullptr), model_identity(model::SyntheticSource(model::Shape::BitnetLarge, 1), nullptr));

  const fs::path folder = d.path / "ckpt";
  model::write_synthetic_checkpoint(model::Shape::Tiny, 1, folder);
  const std::string id = model_identity(model::CheckpointSource(folder), store.get());
  EXPECT_EQ(id.size(), 32u);
  EXPECT_EQ(model_identity(model::CheckpointSource(folder), store.get()), id);  // memoized
  EXPECT_EQ(model_identity(model::CheckpointSource(folder), nullptr), id);      // the same without the memo
  // A changed byte of the weights (same size) is another model.
  const fs::path st = folder / "model.safetensors";
  test::flip_byte(st, fs::file_size(st) - 3, 0x40);
  fs::last_write_time(st, fs::last_write_time(st) + std::chrono::seconds(1));
  EXPECT_NE(model_identity(model::CheckpointSource(folder), store.get()), id);
}

TEST(Startup, BoardRunReportsTheCacheAndGivesTheSameRun) {
  TempDir d;
  BoardRunRequest req{RunRequest{}, board_params()};
  req.run.model = "synthetic:tiny";
  req.run.prompt = "The cache";
  req.run.tokens = 3;
  const BoardRunResult plain = run_board(req);
  req.run.cache = settings(d.path);
  const BoardRunResult first = run_board(req);
  const BoardRunResult second = run_board(req);
  EXPECT_FALSE(plain.model_cached);
  EXPECT_FALSE(first.model_cached);
  EXPECT_TRUE(second.model_cached);
  EXPECT_TRUE(second.scales_cached);
  EXPECT_TRUE(second.all_equal);
  ASSERT_EQ(second.tokens.size(), plain.tokens.size());
  for (size_t i = 0; i < plain.tokens.size(); ++i) {
    EXPECT_EQ(second.tokens[i].token_id, plain.tokens[i].token_id);
    EXPECT_EQ(second.tokens[i].total_ms, plain.tokens[i].total_ms);
    EXPECT_EQ(second.tokens[i].logits_equal, std::optional<bool>(true));
  }
  EXPECT_EQ(second.generated_text, plain.generated_text);
}

// The layouts derived from the model (the golden reference's 2-bit codes, the packed weights
// image of the memory map, the fast kernels' decoded rows: model/derived_store.h) are kept in
// the cache by the first run and mapped by the next, which gives the same run to the bit and
// the picosecond, in both fidelities and with the per-call format (another image). A damaged
// layout entry is warned about and rebuilt, never used.
TEST(Startup, TheDerivedLayoutsAreKeptAndAWarmRunMapsThem) {
  auto layouts = [](const fs::path& dir) {
    std::map<std::string, uint64_t> hits;  // key -> hits
    const auto s = CacheStore::open_existing(settings(dir));
    for (const auto& e : s->info().entries)
      if (e.kind == "layout") hits[e.key] = e.hits;
    return hits;
  };
  for (const char* format : {"header", "per-call"})
    for (const Fidelity fidelity : {Fidelity::kFast, Fidelity::kCycle}) {
      SCOPED_TRACE(std::string(format) + (fidelity == Fidelity::kFast ? " fast" : " cycle"));
      TempDir d;
      BoardRunRequest req{RunRequest{}, board_params()};
      req.params.set(std::string("matmul.format=") + format);
      req.fidelity = fidelity;
      req.run.model = "synthetic:tiny";
      req.run.prompt = "Layouts";
      req.run.tokens = 2;
      const BoardRunResult plain = run_board(req);
      req.run.cache = settings(d.path);
      std::vector<std::string> warnings;
      BoardRunCallbacks cb;
      cb.on_warning = [&](const std::string& m) { warnings.push_back(m); };
      (void)run_board(req, cb);
      const auto kept = layouts(d.path);
      // golden codes and the packed image; the decoded rows under the fast fidelity only
      ASSERT_EQ(kept.size(), fidelity == Fidelity::kFast ? 3u : 2u);
      for (const auto& [key, hits] : kept) EXPECT_EQ(hits, 0u) << key;
      const BoardRunResult warm = run_board(req, cb);
      for (const auto& [key, hits] : layouts(d.path)) EXPECT_EQ(hits, 1u) << key;
      // Every layout entry damaged: each is warned about, rebuilt, and the run is the same.
      for (const auto& [key, hits] : kept) bitsim::test::flip_byte(d.path / ("layout-" + key + ".bin"), 128 + 5, 0x40);
      const BoardRunResult rebuilt = run_board(req, cb);
      EXPECT_EQ(warnings.size(), kept.size());
      for (const auto& w : warnings) EXPECT_NE(w.find("corrupt payload"), std::string::npos) << w;
      for (const BoardRunResult* r : {&warm, &rebuilt}) {
        EXPECT_TRUE(r->all_equal);
        ASSERT_EQ(r->tokens.size(), plain.tokens.size());
        for (size_t i = 0; i < plain.tokens.size(); ++i) {
          EXPECT_EQ(r->tokens[i].token_id, plain.tokens[i].token_id);
          EXPECT_EQ(r->tokens[i].total_ms, plain.tokens[i].total_ms);
          EXPECT_EQ(r->tokens[i].logits_digest, plain.tokens[i].logits_digest);
          EXPECT_EQ(r->tokens[i].logits_equal, std::optional<bool>(true));
        }
      }
    }
}
