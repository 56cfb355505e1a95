// Result records declared once (study/record.h): each record's field list gives its JSON
// writer and reader and its CSV columns, and docs/json-schemas.md names exactly those fields.
#include "study/record.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "hw/circuits/attention_resources.h"
#include "study/bench.h"
#include "study/calibrate.h"
#include "study/eval.h"
#include "study/provenance.h"
#include "study/run_record.h"
#include "study/sweep.h"

namespace bitsim::study {
namespace {

using ::testing::StrEq;
using ::testing::ThrowsMessage;

std::set<std::string> as_set(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

template <typename R>
std::vector<std::string> names(const Fields<R>& fields) {
  std::vector<std::string> out;
  for (const auto& f : fields) out.push_back(f.name);
  return out;
}

// The section of docs/json-schemas.md whose heading starts with `heading`, up to the next.
std::string doc_section(const std::string& heading) {
  std::ifstream in(std::string(BITSIM_SOURCE_DIR) + "/docs/json-schemas.md");
  const std::string doc{std::istreambuf_iterator<char>(in), {}};
  const size_t at = doc.find("\n## " + heading);
  if (at == std::string::npos) return "";
  const size_t end = doc.find("\n## ", at + 4);
  return doc.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// Every "name" quoted in `text` between `from` and `to` (the first `to` after `from`), in order.
std::vector<std::string> quoted_between(const std::string& text, const std::string& from, const std::string& to,
                                        const std::regex& name = std::regex("\"([a-z0-9_]+)\"")) {
  const size_t a = text.find(from);
  if (a == std::string::npos) return {};
  const size_t b = text.find(to, a + from.size());
  const size_t from_end = a + from.size();
  const std::string part = text.substr(from_end, b == std::string::npos ? std::string::npos : b - from_end);
  std::vector<std::string> out;
  for (std::sregex_iterator it(part.begin(), part.end(), name), end; it != end; ++it) out.push_back((*it)[1]);
  return out;
}

// The keys of the JSON object that starts at the first `opener` in `text` (an opener ends
// with the object's "{"; `"operators": [{` is an array's first object): every "KEY": at its
// top level, in order; `//` comments are skipped.
std::vector<std::string> object_keys(const std::string& text, const std::string& opener) {
  const size_t at = text.find(opener);
  if (at == std::string::npos) return {};
  std::vector<std::string> out;
  int depth = 1;
  for (size_t i = at + opener.size(); i < text.size() && depth > 0; ++i) {
    const char c = text[i];
    if (c == '/' && text.compare(i, 2, "//") == 0) {
      i = text.find('\n', i);
      if (i == std::string::npos) break;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == '"') {
      const size_t end = text.find('"', i + 1);
      if (end == std::string::npos) break;
      const size_t colon = text.find_first_not_of(' ', end + 1);
      if (depth == 1 && colon != std::string::npos && text[colon] == ':') out.push_back(text.substr(i + 1, end - i - 1));
      i = end;
    }
  }
  return out;
}

template <typename Json>
std::set<std::string> keys_of(const Json& j) {
  std::set<std::string> out;
  for (const auto& [key, value] : j.items()) out.insert(key);
  return out;
}

Provenance sample_provenance() {
  return {"0.9.1", "abc123", "00112233aabbccdd", "8899aabbccddeeff", "timing-only", "node7", 1.23456, 789.06};
}

SweepPoint sample_point() {
  SweepPoint p;
  p.tok_s = 11.5;
  p.total_ms = 86.95652;
  p.matmul_ms = 75.5;
  p.attention_ms = 0.61234;
  p.cpu_ms = 9.8;
  p.walker_ms = 1.00004;
  p.read_gb_s = 1.95;
  p.wall_pct = 45.678;
  p.dma_calls = 484;
  p.timing = "met (board)";
  p.fit = "fits";
  p.prov = sample_provenance();
  return p;
}

TEST(Record, ProvenanceCsvAndJsonFollowItsFieldList) {
  const Provenance p = sample_provenance();
  EXPECT_EQ(provenance_csv(p), "0.9.1,abc123,00112233aabbccdd,8899aabbccddeeff,timing-only,node7,1.235,789.1");
  EXPECT_EQ(provenance_columns(), names(provenance_fields()));
  const nlohmann::json j = provenance_json(p);
  EXPECT_EQ(j.size(), provenance_fields().size());
  EXPECT_EQ(j["point_wall_s"].get<double>(), 1.23456);
  const Provenance back = provenance_from_json(j, "test");
  EXPECT_EQ(back.version, p.version);
  EXPECT_EQ(back.host, p.host);
  EXPECT_EQ(back.wall_s, p.wall_s);
  EXPECT_EQ(back.peak_rss_mib, p.peak_rss_mib);
}

TEST(Record, SweepPointRoundTripsThroughJsonAndWritesItsCsvFormats) {
  const SweepPoint p = sample_point();
  const SweepPoint back = sweep_point_from_json(sweep_point_json(p), "test");
  EXPECT_EQ(back.total_ms, p.total_ms);
  EXPECT_EQ(back.walker_ms, p.walker_ms);
  EXPECT_EQ(back.dma_calls, p.dma_calls);
  EXPECT_EQ(back.timing, p.timing);
  EXPECT_EQ(back.prov.commit, p.prov.commit);
  EXPECT_EQ(record_csv_header(sweep_point_fields()),
            "tok_s,total_ms,matmul_ms,attention_ms,cpu_ms,walker_ms,read_gb_s,wall_pct,dma_calls,timing,fit,tpot_ms,"
            "ttft_ms,prefill_tok_s,energy_mj_per_token,avg_power_w,tokens_per_j,prompt_j,energy_evidence");
  EXPECT_EQ(record_csv_row(p, sweep_point_fields()),
            "11.5000,86.9565,75.5000,0.6123,9.8000,1.0000,1.9500,45.68,484,met (board),fits,0.0000,,,0.0000,0.0000,0.0000,,");
  EXPECT_EQ(back.fit, p.fit);
  // A verdict with a comma is one quoted CSV field (RFC 4180), a quote doubled.
  SweepPoint q = p;
  q.fit = "DOES NOT FIT (BRAM36 159 > 140, LUT 53272 > 53200)";
  q.timing = "say \"x\"";
  EXPECT_EQ(record_csv_row(q, sweep_point_fields()),
            "11.5000,86.9565,75.5000,0.6123,9.8000,1.0000,1.9500,45.68,484,\"say \"\"x\"\"\","
            "\"DOES NOT FIT (BRAM36 159 > 140, LUT 53272 > 53200)\",0.0000,,,0.0000,0.0000,0.0000,,");
}

TEST(Record, AMissingOrMistypedFieldIsNamed) {
  nlohmann::json j = sweep_point_json(sample_point());
  j.erase("cpu_ms");
  EXPECT_THAT([&] { sweep_point_from_json(j, "f.json"); },
              ThrowsMessage<Error>(StrEq("f.json: field \"cpu_ms\" missing or not a number")));
  j = sweep_point_json(sample_point());
  j["dma_calls"] = -3;
  EXPECT_THAT([&] { sweep_point_from_json(j, "f.json"); },
              ThrowsMessage<Error>(StrEq("f.json: field \"dma_calls\" missing or not a count")));
  j = sweep_point_json(sample_point());
  j["provenance"]["host"] = 7;
  EXPECT_THAT([&] { sweep_point_from_json(j, "f.json"); },
              ThrowsMessage<Error>(StrEq("f.json: provenance field \"host\" missing or not a string")));
}

TEST(Record, EvalRowsWriteTheirFields) {
  const EvalRow row{"board", "simulated", "the board's arithmetic", 27.1, 3.3, 10000, {}};
  const nlohmann::json j = record_json(row, eval_row_fields());
  EXPECT_EQ(j.size(), eval_row_fields().size());
  EXPECT_EQ(j["tokens"].get<int64_t>(), 10000);
  EXPECT_FALSE(j.contains("meaning"));  // the help text's, not the document's
  const nlohmann::json c = record_json(EvalLogitCompare{"board", 256, 0.0093, 0.0358, 0.984}, eval_compare_fields());
  EXPECT_EQ(c["rel_error_worst"].get<double>(), 0.0358);
  EXPECT_EQ(c["positions"].get<int>(), 256);
}

TEST(Record, EvalRowsWriteTheirBucketsAndTheRowsNotRun) {
  EvalResult r;
  r.rows.push_back(EvalRow{"float", "simulated", "", 2.0, std::log(2.0), 300, {}});
  r.rows[0].buckets = {EvalBucket{1, 256, 256, 2.0, std::log(2.0), 0, 0.1, 1, 0.5},
                       EvalBucket{257, 512, 44, 2.0, std::log(2.0), 0, 0.2, 1, 0.25}};
  r.rows_not_run = {"board"};
  const nlohmann::json j = eval_json(r);
  EXPECT_EQ(j["schema"], "bitsim.eval/2");
  ASSERT_EQ(j["rows"][0]["buckets"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["buckets"][1]["from"].get<int>(), 257);
  EXPECT_EQ(j["rows"][0]["buckets"][1]["tokens"].get<int64_t>(), 44);
  EXPECT_EQ(j["rows"][0]["buckets"][0]["kl_float_ternary_head"].get<double>(), 0.1);
  EXPECT_EQ(j["rows_not_run"], nlohmann::json::parse(R"(["board"])"));
}

TEST(Record, ARunTokenWritesNullForAnUncheckedTokenAndReadsBack) {
  sim::TokenRecord t;
  t.index = 3;
  t.text = "the";
  t.generated = true;
  t.dma_calls = 484;
  t.total_ms = 85.9;
  nlohmann::json j = record_json(t, run_token_fields());
  EXPECT_TRUE(j["logits_equal"].is_null());
  EXPECT_TRUE(j["generated"].get<bool>());
  EXPECT_EQ(j["dma_calls"].get<uint64_t>(), 484u);
  sim::TokenRecord back;
  record_from_json(j, run_token_fields(), "test", "token field", back);
  EXPECT_FALSE(back.logits_equal.has_value());
  EXPECT_EQ(back.text, "the");
  t.logits_equal = false;
  j = record_json(t, run_token_fields());
  record_from_json(j, run_token_fields(), "test", "token field", back);
  ASSERT_TRUE(back.logits_equal.has_value());
  EXPECT_FALSE(*back.logits_equal);
  j["generated"] = nullptr;
  EXPECT_THAT([&] { record_from_json(j, run_token_fields(), "t.json", "token field", back); },
              ThrowsMessage<Error>(StrEq("t.json: token field \"generated\" missing or not true or false")));
}

TEST(Record, RunSummaryFromTheTokens) {
  sim::BoardRunResult r;
  for (double ms : {80.0, 100.0, 90.0}) {
    sim::TokenRecord t;
    t.total_ms = ms;
    t.generated = ms > 85;
    t.logits_equal = true;
    r.tokens.push_back(t);
  }
  r.checked = true;
  r.wall_s = 2.0;
  r.kv_capacity = 512;
  RunSummary s = run_summary(r);
  EXPECT_EQ(s.tokens, 3u);
  EXPECT_EQ(s.generated, 2);
  EXPECT_DOUBLE_EQ(s.median_total_ms, 90.0);
  EXPECT_DOUBLE_EQ(s.tok_s, 1e3 / 90.0);
  EXPECT_DOUBLE_EQ(s.simulated_s, 0.27);
  EXPECT_DOUBLE_EQ(s.sim_tok_per_wall_s, 1.5);
  EXPECT_EQ(s.logits_checked, 3);
  ASSERT_TRUE(s.logits_equal.has_value());
  EXPECT_TRUE(*s.logits_equal);
  r.mismatch = "layer 0";
  EXPECT_FALSE(*run_summary(r).logits_equal);
  r.checked = false;
  const nlohmann::json j = record_json(run_summary(r), run_summary_fields());
  EXPECT_TRUE(j["logits_equal"].is_null());
  EXPECT_EQ(j["kv_capacity"].get<int>(), 512);
  EXPECT_EQ(j["fixed_cost_share_evidence"], "simulated");
}

sim::BoardRunResult sample_run() {
  sim::BoardRunResult r;
  r.fidelity = sim::Fidelity::kFast;
  r.mismatch = "layer 0 q_acc element 3";
  r.stopped_at_capacity = true;
  r.fast.batches = 9;
  r.timing_entries_cached = 4;
  r.walker = host::walker_resources(host::WalkerConfig{}, model::ModelConfig::tiny());
  r.attention = hw::attention_resources(hw::AttentionUnitConfig{});
  return r;
}

TEST(Record, TheSummarysNestedObjectsFollowTheirFieldLists) {
  sim::BoardRunResult r = sample_run();
  r.attention.rows[0].lut.reset();
  const nlohmann::json j = run_summary_json(r);
  EXPECT_EQ(j["timing_cache"]["batches"].get<uint64_t>(), 9u);
  EXPECT_EQ(j["timing_cache"]["shapes_from_startup_cache"].get<uint64_t>(), 4u);
  const nlohmann::json& a = j["attention_resources"];
  EXPECT_EQ(a["evidence"], "simulated");
  EXPECT_TRUE(a["operators"][0]["lut"].is_null());  // a row whose LUTs are not modelled
  EXPECT_EQ(a["operators"][1]["lut"].get<int>(), *r.attention.rows[1].lut);
  EXPECT_EQ(a["operators"].size(), r.attention.rows.size());
  const nlohmann::json& w = j["walker_resources"];
  EXPECT_EQ(w["device"]["lut"].get<int>(), host::WalkerResources::kDeviceLut);
  EXPECT_EQ(w["dsp"].get<int>(), r.walker->dsp);
  EXPECT_EQ(w["operators"][0]["name"], r.walker->rows[0].name);
  r.fidelity = sim::Fidelity::kCycle;
  r.walker.reset();
  EXPECT_FALSE(run_summary_json(r).contains("timing_cache"));
  EXPECT_FALSE(run_summary_json(r).contains("walker_resources"));
}

TEST(Record, EvalWritesNullForNoHashAndNoMismatch) {
  EvalResult r;
  r.board = EvalBoardCheck{};
  nlohmann::json j = eval_json(r);
  EXPECT_TRUE(j["model_sha256"].is_null());
  EXPECT_TRUE(j["board_check"]["first_mismatch"].is_null());
  EXPECT_EQ(j["board_check"]["fidelity"], "fast");
  r.model_sha256 = "ab";
  r.board->first_mismatch = 3;
  j = eval_json(r);
  EXPECT_EQ(j["model_sha256"], "ab");
  EXPECT_EQ(j["board_check"]["first_mismatch"].get<int>(), 3);
  r.board.reset();
  EXPECT_TRUE(eval_json(r)["board_check"].is_null());
}

TEST(Record, BenchFiguresWriteTheirSamples) {
  BenchFigure f;
  f.name = "x";
  f.samples = {1.5, 2.0};
  const nlohmann::json j = nlohmann::json::parse(bench_json({f}, BenchOptions{}, 1.0));
  EXPECT_EQ(j["figures"][0]["samples"], nlohmann::json::parse("[1.5, 2.0]"));
  EXPECT_EQ(j["options"]["repeat"].get<int>(), BenchOptions{}.repeat);
  EXPECT_TRUE(j["load_average"]["start"].empty());  // not given: unknown, not zeros
  const BenchLoad load{{0.5, 1.25, 2.0}, {3.0, 2.0, 1.0}};
  const nlohmann::json k = nlohmann::json::parse(bench_json({f}, BenchOptions{}, 1.0, load));
  EXPECT_EQ(k["load_average"]["start"], nlohmann::json::parse("[0.5, 1.25, 2.0]"));
  EXPECT_EQ(k["load_average"]["end"], nlohmann::json::parse("[3.0, 2.0, 1.0]"));
  EXPECT_NE(bench_table({f}, BenchOptions{}, 1.0, load).find("0.50 1.25 2.00 at the start, 3.00 2.00 1.00 at the end"),
            std::string::npos);
  EXPECT_EQ(record_csv_row(f, bench_figure_fields()).find(",1.5;2,"), std::string("x,,0,0,0").size());
}

TEST(Record, AValidationRowWithoutABoardFigureWritesNull) {
  ValidationRow row{"end_to_end_python", 64, "total_ms", 120.5, std::nullopt, std::nullopt, "python"};
  nlohmann::json j = record_json(row, validation_row_fields());
  EXPECT_TRUE(j["board"].is_null());
  EXPECT_TRUE(j["error_pct"].is_null());
  EXPECT_EQ(j["driver"], "python");
  row.board = 118.0;
  row.error_pct = 2.1186;
  j = record_json(row, validation_row_fields());
  EXPECT_EQ(j["board"].get<double>(), 118.0);
  ValidationRow back;
  record_from_json(j, validation_row_fields(), "test", "row field", back);
  EXPECT_EQ(back.error_pct, row.error_pct);
  EXPECT_EQ(record_csv_row(ValidationRow{"a", 1, "f", 2.0, std::nullopt, 1.5, "c"}, validation_row_fields()),
            "a,1,f,2,,1.5,c");
}

// ---- docs/json-schemas.md names exactly the fields of each record --------------------------

TEST(RecordDocs, SweepPointFieldsAreTheDocumentedOnes) {
  const std::string sweep = doc_section("`bitsim.sweep/1`");
  ASSERT_FALSE(sweep.empty());
  // "points": [{KEY: value, ..., "tok_s", ..., "timing", "provenance": {...}}]
  EXPECT_EQ(quoted_between(sweep, "KEY: value, ...,", "\"provenance\""), names(sweep_point_fields()));
  EXPECT_NE(sweep.find("`" + record_csv_header(sweep_point_fields()) + "`"), std::string::npos)
      << "the CSV columns of a sweep point";
}

TEST(RecordDocs, ProvenanceFieldsAreTheDocumentedOnes) {
  const std::string sweep = doc_section("`bitsim.sweep/1`");
  EXPECT_EQ(quoted_between(sweep, "`provenance` (src/study/provenance.h, docs/campaigns.md): `{", "}"),
            names(provenance_fields()));
  EXPECT_NE(sweep.find("`" + record_csv_header(provenance_fields()) + "`"), std::string::npos)
      << "the provenance CSV columns";
}

TEST(RecordDocs, EvalRowAndComparisonFieldsAreTheDocumentedOnes) {
  const std::string eval = doc_section("`bitsim.eval/2`");
  ASSERT_FALSE(eval.empty());
  const std::regex key("\"([a-z0-9_]+)\":");
  const auto rows = quoted_between(eval, "\"rows\": [", "\"buckets\": [", key);
  EXPECT_EQ(as_set(rows), as_set(names(eval_row_fields())));
  EXPECT_EQ(quoted_between(eval, "\"buckets\": [", "]}", key), names(eval_bucket_fields()));
  EXPECT_EQ(as_set(quoted_between(eval, "\"logits_vs_float\": [", "],", key)), as_set(names(eval_compare_fields())));
}

TEST(RecordDocs, EvalHeaderAndBoardCheckFieldsAreTheDocumentedOnes) {
  const std::string eval = doc_section("`bitsim.eval/2`");
  EvalResult r;
  r.board = EvalBoardCheck{};
  const nlohmann::json j = eval_json(r);
  EXPECT_EQ(as_set(object_keys(eval, "```\n{")), keys_of(j));
  EXPECT_EQ(object_keys(eval, "\"board_check\": {"), names(eval_board_check_fields()));
}

TEST(RecordDocs, RunTokenFieldsAreTheDocumentedOnes) {
  const std::string run = doc_section("`bitsim.run/1`");
  ASSERT_FALSE(run.empty());
  const auto documented = quoted_between(run, "\"tokens\": [", "\n  ],", std::regex("\"([a-z0-9_]+)\":"));
  EXPECT_EQ(as_set(documented), as_set(names(run_token_fields())));
}

TEST(RecordDocs, RunSummaryAndItsNestedObjectsAreTheDocumentedOnes) {
  const std::string run = doc_section("`bitsim.run/1`");
  ASSERT_FALSE(run.empty());
  const nlohmann::json j = run_summary_json(sample_run());  // every optional key present
  EXPECT_EQ(as_set(object_keys(run, "\"summary\": {")), keys_of(j));
  for (const std::string nested : {"timing_cache", "walker_resources", "attention_resources"})
    EXPECT_EQ(as_set(object_keys(run, "\"" + nested + "\": {")), keys_of(j[nested])) << nested;
  const std::string walker = run.substr(run.find("\"walker_resources\": {"));
  EXPECT_EQ(object_keys(walker, "\"operators\": [{"), names(walker_operator_fields()));
  EXPECT_EQ(object_keys(walker, "\"device\": {"), names(walker_resources_fields()));
  const std::string attention = run.substr(run.find("\"attention_resources\": {"));
  EXPECT_EQ(object_keys(attention, "\"operators\": [{"), names(attention_operator_fields()));
}

TEST(RecordDocs, BenchFigureAndOptionFieldsAreTheDocumentedOnes) {
  const std::string bench = doc_section("`bitsim.bench/2`");
  ASSERT_FALSE(bench.empty());
  EXPECT_EQ(quoted_between(bench, "\"options\": {", "}"), names(bench_option_fields()));
  EXPECT_EQ(as_set(quoted_between(bench, "\"figures\": [", "} ]", std::regex("\"([a-z0-9_]+)\":"))),
            as_set(names(bench_figure_fields())));
  const nlohmann::json j = nlohmann::json::parse(bench_json({BenchFigure{}}, BenchOptions{}, 1.0));
  EXPECT_EQ(as_set(object_keys(bench, "```\n{")), keys_of(j));
}

TEST(RecordDocs, ValidationRowAndFittedParameterFieldsAreTheDocumentedOnes) {
  EXPECT_EQ(quoted_between(doc_section("`bitsim.validate/1`"), "\"rows\": [{", "}"), names(validation_row_fields()));
  EXPECT_EQ(quoted_between(doc_section("`bitsim.calibrate/1`"), "\"parameters\": [{", "}"),
            names(fitted_parameter_fields()));
}

}  // namespace
}  // namespace bitsim::study
