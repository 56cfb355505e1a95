#include "study/campaign.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "bitsim/version.h"
#include "host/mmio_program.h"
#include "base/json_parse.h"
#include "base/error.h"
#include "base/parse_number.h"
#include "base/file_io.h"
#include "base/stop_signal.h"
#include "sim/board_config.h"
#include "study/provenance.h"

namespace bitsim::study {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCampaignSchema = "bitsim.campaign/1";
constexpr const char* kPointSchema = "bitsim.sweep-point/1";

// A shard number or an array index (base/parse_number.h: decimal digits only, no sign).
int parse_int(const std::string& text, const std::string& what) {
  return int(parse_unsigned(text, what, 0, 100000));
}

// A parser's message as valid UTF-8 (U+FFFD for each bad byte): nlohmann's messages quote the
// input's bytes, and the message goes into `sweep merge --json`, which must stay valid JSON.
std::string utf8_text(const std::string& s) {
  return nlohmann::json::parse(nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
      .get<std::string>();
}

// A campaign file's text, through the one regular-file check (a FIFO or a folder in its place
// is an Error naming it, never a wait).
std::string read_text(const fs::path& p) { return io::read_file(p, "campaign file", io::kMaxRecordFileBytes); }

// True if `p` exists as anything (a dangling symlink, a FIFO, a folder included).
bool present(const fs::path& p) {
  std::error_code ec;
  return fs::symlink_status(p, ec).type() != fs::file_type::not_found && !ec;
}

// One grid point as the campaign knows it.
struct GridPoint {
  int index = 0;
  std::vector<std::string> values;  // as given, grid order
  std::string key;                  // point_key()
  std::string file;                 // "points/<hash>.json"
  std::string name;                 // "k=v k=v", grid order
};

std::string display_name(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  std::string s;
  for (size_t i = 0; i < keys.size(); ++i) s += (i ? " " : "") + keys[i] + "=" + values[i];
  return s;
}

std::string file_of(const std::string& key) { return fmt::format("points/{:016x}.json", point_hash(key)); }

nlohmann::json campaign_document(const sim::ParamSet& base, const SweepOptions& o, const std::vector<GridPoint>& pts) {
  nlohmann::json axes = nlohmann::json::array();
  for (const auto& a : o.grid) axes.push_back({{"key", a.key}, {"values", a.values}});
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : pts) points.push_back({{"index", p.index}, {"values", p.values}, {"key", p.key}, {"file", p.file}});
  return {{"schema", kCampaignSchema},
          {"axes", axes},
          {"context", o.context},
          {"tokens", o.tokens},
          {"prompt_tokens", o.prompt_tokens},
          {"shape", o.shape},
          {"check_model", o.check_model},
          {"base_config", base.flat()},
          {"base_config_hash", config_hash(base)},
          {"bitsim_version", kVersion},
          {"git_commit", kGitCommit},
          {"shard_rule", "splitmix64(FNV-1a 64 of the point key) mod N"},
          {"points", points}};
}

// What differs between two campaign documents' definitions (empty: the same campaign).
std::vector<std::string> differences(const nlohmann::json& have, const nlohmann::json& want, bool allow_mixed) {
  std::vector<std::string> d;
  // The grid is its set of points (canonical keys): axes in another order, values in another
  // order or spelling (100.0 for 100) are the same campaign.
  auto point_keys = [](const nlohmann::json& doc) {
    std::set<std::string> keys;
    if (doc.contains("points") && doc["points"].is_array())
      for (const auto& p : doc["points"])
        if (p.is_object() && p.contains("key") && p["key"].is_string()) keys.insert(p["key"].get<std::string>());
    return keys;
  };
  if (point_keys(have) != point_keys(want))
    d.push_back(fmt::format("axes: {} there, {} here", have.value("axes", nlohmann::json()).dump(), want["axes"].dump()));
  for (const char* k : {"context", "tokens"})
    if (have.value(k, nlohmann::json()) != want[k])
      d.push_back(fmt::format("{}: {} there, {} here", k, have.value(k, nlohmann::json()).dump(), want[k].dump()));
  // A campaign from before --prompt-tokens timed no prompt: 0.
  const nlohmann::json have_prompt = have.value("prompt_tokens", nlohmann::json(0));
  if (have_prompt != want["prompt_tokens"])
    d.push_back(fmt::format("prompt_tokens: {} there, {} here", have_prompt.dump(), want["prompt_tokens"].dump()));
  // A campaign from before --shape timed bitnet-large.
  const nlohmann::json have_shape = have.value("shape", nlohmann::json("bitnet-large"));
  if (have_shape != want["shape"])
    d.push_back(fmt::format("shape: {} there, {} here", have_shape.dump(), want["shape"].dump()));
  if (!allow_mixed && have.value("base_config_hash", "") != want["base_config_hash"]) {
    std::string keys;
    const auto hb = have.value("base_config", nlohmann::json::object());
    for (const auto& [k, v] : want["base_config"].items())
      if (hb.value(k, nlohmann::json()) != v) keys += fmt::format(" {} ({} there, {} here)", k, hb.value(k, nlohmann::json()).dump(), v.dump());
    d.push_back("the base config differs:" + (keys.empty() ? std::string(" (keys)") : keys));
  }
  return d;
}

// Writes DIR/campaign.json if absent (atomically: link(2) fails if another shard was first),
// else checks that it is this campaign.
void claim_campaign(const fs::path& dir, const nlohmann::json& doc, bool allow_mixed) {
  const fs::path file = dir / "campaign.json";
  const fs::path tmp = dir / fmt::format(".campaign.json.tmp.{}", ::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << doc.dump(1) << "\n";
    f.flush();
    if (!f) throw Error(fmt::format("campaign directory {}: cannot write {}", dir.string(), tmp.string()));
  }
  const int rc = ::link(tmp.c_str(), file.c_str());
  const int err = errno;
  std::error_code ec;
  fs::remove(tmp, ec);
  if (rc == 0) return;
  if (err != EEXIST) throw Error(fmt::format("campaign directory {}: cannot create campaign.json ({})", dir.string(),
                            std::strerror(err)));
  nlohmann::json have;
  try {
    have = io::parse_json_unique_keys(read_text(file), file.string());
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not a campaign file ({}); remove it or use another directory", file.string(), e.what()));
  }
  if (!have.is_object() || !have.contains("schema") || have["schema"] != kCampaignSchema)
    throw Error(fmt::format("{}: not a {} document", file.string(), kCampaignSchema));
  const auto d = differences(have, doc, allow_mixed);
  if (d.empty()) return;
  std::string msg = fmt::format("campaign directory {}: holds another campaign:", dir.string());
  for (const auto& x : d) msg += "\n  " + x;
  // The base config's line is the last: allowing mixed base configs would lift it.
  if (d.back().rfind("the base config differs", 0) == 0)
    throw CampaignRefused(msg, CampaignRefused::LiftedBy::kAllowMixed);
  throw Error(msg);
}

// A point's result file: its figures if valid and ok; else why not (empty error: absent).
struct PointFile {
  bool exists = false, ok = false;
  bool foreign = false;  // not a regular file (a folder, a FIFO): never read, never replaced
  std::string error;  // the point's own error (status failed) or why the file is invalid
  bool corrupt = false;
  SweepPoint point;
  std::string base_config_hash;
};

// A point's figures as a measurement can give them: finite, non-negative, each part of the
// token's time within its total (a tolerance of 1e-9 relative for the rounding of medians).
void check_figures(const SweepPoint& p, const std::string& src) {
  const std::pair<const char*, double> figures[] = {
      {"matmul_ms", p.matmul_ms},     {"attention_ms", p.attention_ms}, {"cpu_ms", p.cpu_ms},
      {"walker_ms", p.walker_ms},     {"total_ms", p.total_ms},         {"tok_s", p.tok_s},
      {"read_gb_s", p.read_gb_s},     {"wall_pct", p.wall_pct},         {"tpot_ms", p.tpot_ms},
      {"ttft_ms", p.ttft_ms.value_or(0)}, {"prefill_tok_s", p.prefill_tok_s.value_or(0)},
      {"provenance.point_wall_s", p.prov.wall_s},
      {"provenance.peak_rss_mib", p.prov.peak_rss_mib}};
  for (const auto& [name, v] : figures)
    if (!std::isfinite(v) || v < 0)
      throw Error(fmt::format("{}: field \"{}\" is {} (a figure must be finite and not negative)", src, name, v));
  if (!(p.total_ms > 0) || !(p.tok_s > 0))
    throw Error(fmt::format("{}: total_ms {} and tok_s {}: a measured token takes time", src, p.total_ms, p.tok_s));
  const double limit = p.total_ms * (1 + 1e-9);
  for (const auto& [name, v] : {std::pair<const char*, double>{"matmul_ms", p.matmul_ms}, {"attention_ms", p.attention_ms},
                                {"cpu_ms", p.cpu_ms}, {"walker_ms", p.walker_ms}})
    if (v > limit)
      throw Error(fmt::format("{}: field \"{}\" is {}, more than the token's total_ms {}", src, name, v, p.total_ms));
}

// The point file's "config" against the campaign's config of that point: every key when the
// file has the campaign's base config, else (a mixed campaign, which the merge names) the swept keys.
void check_point_config(const nlohmann::json& j, const sim::ParamSet& expected, const std::vector<std::string>& swept,
                        bool same_base, const std::string& src) {
  if (!j.contains("config") || !j["config"].is_object()) throw Error(fmt::format("{}: no \"config\" object", src));
  const auto have = j["config"].get<std::map<std::string, std::string>>();
  const auto want = expected.flat();
  auto differs = [&](const std::string& k) {
    const auto h = have.find(k);
    const auto w = want.find(k);
    if (h == have.end() || w == want.end()) return h != have.end() || w != want.end();
    return h->second != w->second;
  };
  auto show = [](const std::map<std::string, std::string>& m, const std::string& k) {
    const auto it = m.find(k);
    return it == m.end() ? std::string("absent") : "'" + it->second + "'";
  };
  std::vector<std::string> keys = swept;
  if (same_base) {
    for (const auto& [k, v] : have) keys.push_back(k);
    for (const auto& [k, v] : want) keys.push_back(k);
  }
  for (const auto& k : keys)
    if (differs(k))
      throw Error(fmt::format("{}: config key {} is {}, the campaign's point has {}", src, k, show(have, k), show(want, k)));
}

// prompt_tokens: the campaign's (campaign.json "prompt_tokens"): a point of a campaign that
// times a prompt holds ttft_ms and prefill_tok_s, a point of one that does not holds neither.
PointFile read_point(const fs::path& dir, const GridPoint& g, const sim::ParamSet& expected,
                     const std::vector<std::string>& swept, const std::string& campaign_hash, int prompt_tokens) {
  PointFile r;
  const fs::path file = dir / g.file;
  if (!present(file)) return r;
  r.exists = true;
  const std::string src = file.string();
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    r.corrupt = r.foreign = true;
    r.error = utf8_text(fmt::format("{}: not a regular file (a folder, a FIFO, a device or a dangling link "
                                    "where a point's result file belongs)", src));
    return r;
  }
  try {
    const auto j = io::parse_json_unique_keys(read_text(file), src);
    if (!j.is_object() || j.value("schema", "") != kPointSchema) throw Error(fmt::format("{}: not a {} document", src, kPointSchema));
    if (j.value("key", "") != g.key) throw Error(fmt::format("{}: holds another point ({})", src, j.value("key", "")));
    r.base_config_hash = j.value("base_config_hash", "");
    const std::string status = j.value("status", "");
    if (status == "failed") {
      r.error = j.value("error", "failed (no message)");
      return r;
    }
    if (status != "ok") throw Error(fmt::format("{}: status '{}' (expected ok or failed)", src, status));
    if (!j.contains("result")) throw Error(fmt::format("{}: no \"result\"", src));
    r.point = sweep_point_from_json(j["result"], src);
    const bool same_base = r.base_config_hash == campaign_hash;
    check_point_config(j, expected, swept, same_base, src);
    if (same_base && r.point.prov.config_hash != config_hash(expected))
      throw Error(fmt::format("{}: provenance.config_hash {} is not the hash {} of the point's config", src,
                              r.point.prov.config_hash, config_hash(expected)));
    check_figures(r.point, src);
    const bool timed_prompt = r.point.ttft_ms.has_value() && r.point.prefill_tok_s.has_value();
    if (prompt_tokens > 0 && !timed_prompt)
      throw Error(fmt::format("{}: no \"ttft_ms\" and \"prefill_tok_s\", but the campaign times a {}-token prompt "
                              "(campaign.json prompt_tokens)", src, prompt_tokens));
    if (prompt_tokens == 0 && (r.point.ttft_ms || r.point.prefill_tok_s))
      throw Error(fmt::format("{}: holds \"ttft_ms\" or \"prefill_tok_s\", but the campaign times no prompt "
                              "(campaign.json prompt_tokens)", src));
    r.point.values = g.values;
    r.point.done = true;
    r.ok = true;
  } catch (const nlohmann::json::exception& e) {
    r.corrupt = true;
    r.error = utf8_text(fmt::format("{}: corrupt or truncated result file ({})", src, e.what()));
  } catch (const Error& e) {
    r.corrupt = true;
    r.error = utf8_text(e.what());
  }
  return r;
}

void write_point(const fs::path& dir, const GridPoint& g, const sim::ParamSet& config, const std::string& base_hash,
                 const Shard& shard, const std::string& base_check, const SweepPoint* result, const std::string& error) {
  nlohmann::json point = nlohmann::json::object();
  nlohmann::json j{{"schema", kPointSchema},
                   {"index", g.index},
                   {"key", g.key},
                   {"point", g.name},
                   {"status", result ? "ok" : "failed"},
                   {"shard", fmt::format("{}/{}", shard.index, shard.count)},
                   {"base_config_hash", base_hash},
                   {"base_check", base_check},
                   {"config", config.flat()}};
  if (result) j["result"] = sweep_point_json(*result);
  else j["error"] = error;
  io::write_file(dir / g.file, j.dump(1) + "\n", "campaign file");
}

// One point of campaign.json's "points", checked against the axes and its file name.
GridPoint grid_point_of(const nlohmann::json& p, const std::vector<std::string>& keys) {
  GridPoint g;
  g.index = p.at("index").get<int>();
  g.values = p.at("values").get<std::vector<std::string>>();
  g.key = p.at("key").get<std::string>();
  g.file = p.at("file").get<std::string>();
  if (g.values.size() != keys.size() || g.file != file_of(g.key))
    throw Error(fmt::format("point {} does not match the axes or its file name", g.index));
  g.name = display_name(keys, g.values);
  return g;
}

std::vector<GridPoint> grid_points(const std::vector<std::string>& keys, const SweepGrid& configs,
                                   const SweepResult& res) {
  std::vector<GridPoint> pts;
  std::set<std::string> files;
  for (size_t i = 0; i < configs.size(); ++i) {
    GridPoint g;
    g.index = int(i);
    g.values = res.points[i].values;
    g.key = point_key(keys, configs[i]);
    g.file = file_of(g.key);
    g.name = display_name(keys, g.values);
    if (!files.insert(g.file).second)
      throw Error(fmt::format("sweep: two grid points share the result file {} (the same point twice in an axis, "
                              "or a hash collision): {}", g.file, g.name));
    pts.push_back(std::move(g));
  }
  return pts;
}

// This shard's points in DIR: the ones to run (missing, failed, corrupt; all with resume),
// the ones already done; without resume, any result file is a refusal.
std::vector<int> pending_points(const fs::path& dir, const std::vector<GridPoint>& pts, const SweepGrid& configs,
                                const std::vector<std::string>& keys, const std::string& base_hash,
                                const CampaignOptions& c, int prompt_tokens, ShardReport& rep) {
  std::vector<int> pending;
  std::vector<std::string> existing;
  for (const auto& g : pts) {
    if (shard_of(g.key, c.shard.count) != c.shard.index) continue;
    ++rep.shard_points;
    check_stop();
    const PointFile f = read_point(dir, g, configs[size_t(g.index)], keys, base_hash, prompt_tokens);
    if (f.foreign) throw Error(f.error + "; remove it");
    if (f.exists && !c.resume) {
      existing.push_back(g.name);
      continue;
    }
    if (f.ok) {
      ++rep.skipped;
      continue;
    }
    if (f.corrupt) rep.warnings.push_back(fmt::format("redoing {}: {}", g.name, f.error));
    else if (f.exists) rep.warnings.push_back(fmt::format("redoing {}: it failed before: {}", g.name, f.error));
    pending.push_back(g.index);
  }
  if (!existing.empty())
    throw CampaignRefused(fmt::format("campaign directory {}: holds results of {} of this shard's points (first: {})",
                                      c.dir, existing.size(), existing.front()),
                          CampaignRefused::LiftedBy::kResume);
  return pending;
}

// Passes `sig` to every worker still running, gives them 10 s to end their point, then kills
// and reaps them all: no worker outlives this call.
void stop_workers(const std::vector<pid_t>& pids, int sig) {
  for (pid_t pid : pids) ::kill(pid, sig);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::vector<bool> reaped(pids.size(), false);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t w = 0; w < pids.size(); ++w) {
      if (reaped[w]) continue;
      const pid_t r = ::waitpid(pids[w], nullptr, WNOHANG);
      if (r == pids[w] || (r < 0 && errno == ECHILD)) {
        reaped[w] = true;
        --left;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t w = 0; w < pids.size(); ++w)
        if (!reaped[w]) {
          ::kill(pids[w], SIGKILL);
          while (::waitpid(pids[w], nullptr, 0) < 0 && errno == EINTR) {
          }
        }
      break;
    }
    ::usleep(10000);
  }
}

// Runs grid points and writes each one's result file (its figures or its error).
struct PointRunner {
  const fs::path& dir;
  const std::vector<GridPoint>& pts;
  const SweepGrid& configs;
  const SweepOptions& options;
  const std::string base_hash;
  const Shard shard;
  const std::string& base_check;
  const std::vector<std::string>& keys;

  // The point's error, or empty. A stop (SIGINT / SIGTERM) is no error of the point: it
  // writes no file and goes on as Stopped, so that the campaign looks interrupted, not failed.
  std::string run(int i) const {
    const GridPoint& g = pts[size_t(i)];
    try {
      const sim::ParamSet config = configs[size_t(i)];
      const SweepPoint p = measure_sweep_point(config, options);
      write_point(dir, g, config, base_hash, shard, base_check, &p, "");
      return "";
    } catch (const Stopped&) {
      throw;
    } catch (const std::exception& e) {
      write_point(dir, g, configs[size_t(i)], base_hash, shard, base_check, nullptr, e.what());
      return e.what();
    }
  }

  // In this process, one after the other.
  void run_here(const std::vector<int>& pending, ShardReport& rep,
                const std::function<void(const std::string&)>& status) const {
    int done = 0;
    for (int i : pending) {
      const std::string err = run(i);
      if (!err.empty()) rep.failed.push_back(pts[size_t(i)].name + ": " + err);
      if (status) status(fmt::format("point {}/{} {} ({})", ++done, pending.size(), err.empty() ? "done" : "FAILED",
                                     pts[size_t(i)].name));
    }
  }

  // In `jobs` worker processes (one SystemC simulation context per process), each writing
  // its points' files itself; the files then say what happened.
  // A stop signal to the parent is passed on to the workers (each ends its point at the next
  // check, writing no file), which are then reaped; a worker dies with its parent however the
  // parent ends (the parent-death signal).
  void run_forked(const std::vector<int>& pending, int jobs, ShardReport& rep) const {
    const pid_t parent = ::getpid();
    std::vector<pid_t> pids;
    for (int j = 0; j < jobs; ++j) {
      const pid_t pid = ::fork();
      if (pid < 0) {
        stop_workers(pids, SIGKILL);
        throw Error("sweep: fork() failed");
      }
      if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(1);
        int code = 0;
        for (size_t k = size_t(j); k < pending.size(); k += size_t(jobs)) {
          try {
            if (!run(pending[k]).empty()) code = 1;
          } catch (const Stopped& s) {
            ::_exit(s.exit_code());
          } catch (...) {
            code = 1;  // the failed point's file could not be written either
          }
        }
        ::_exit(code);
      }
      pids.push_back(pid);
    }
    std::vector<int> status(pids.size(), 0);
    for (size_t w = 0; w < pids.size(); ++w) {
      while (::waitpid(pids[w], &status[w], 0) < 0) {
        if (errno != EINTR) break;
        if (const int sig = stop_signal()) {
          stop_workers(pids, sig);
          check_stop();
        }
      }
    }
    check_stop();  // a signal after the last worker ended: its points are in, the run was stopped
    for (size_t w = 0; w < pids.size(); ++w)
      if (WIFSIGNALED(status[w]))
        rep.warnings.push_back(fmt::format("a worker process died of signal {}", WTERMSIG(status[w])));
    for (int i : pending) {
      const PointFile f = read_point(dir, pts[size_t(i)], configs[size_t(i)], keys, base_hash, options.prompt_tokens);
      if (!f.ok) rep.failed.push_back(pts[size_t(i)].name + ": " + (f.exists ? f.error : "no result (worker died)"));
    }
  }
};

// campaign.json of DIR as the merge knows it: its points checked against the grid that its
// axes and base config make (sweep_configs, as the shards ran it), and that grid's configs.
struct CampaignGrid {
  std::vector<GridPoint> pts;
  std::optional<SweepGrid> configs;
};

// The base config of a campaign: the defaults with campaign.json's "base_config" set.
sim::ParamSet base_of(const nlohmann::json& flat) {
  sim::ParamSet p = sim::board_params();
  for (const auto& [k, v] : flat.items()) p.set(k + "=" + v.get<std::string>(), "base_config");
  return p;
}

// campaign.json's "points" against the product of its axes (less the combinations the config
// refuses): as many, in grid order, each with the grid's values, key and file. A list cut
// short, a point twice, or a point relabelled is an Error naming it.
void check_points_against_axes(const std::vector<GridPoint>& listed, const std::vector<GridPoint>& grid,
                               size_t skipped) {
  if (listed.size() != grid.size())
    throw Error(fmt::format("\"points\" lists {} point(s), the product of its axes holds {}{}: the list was cut "
                            "short, padded or duplicated", listed.size(), grid.size(),
                            skipped ? fmt::format(" (less {} combination(s) the config refuses)", skipped) : ""));
  for (size_t i = 0; i < grid.size(); ++i) {
    const GridPoint& l = listed[i];
    const GridPoint& g = grid[i];
    if (l.index != g.index || l.values != g.values || l.key != g.key || l.file != g.file)
      throw Error(fmt::format("\"points\" entry {} (index {}, {}, file {}) is not the axes' point {} ({}, file {}): "
                              "relabelled, reordered or duplicated", i, l.index, l.name, l.file, g.index, g.name, g.file));
  }
}

CampaignGrid read_campaign_file(const fs::path& file, MergeResult& m) {
  nlohmann::json doc;
  try {
    doc = io::parse_json_unique_keys(read_text(file), file.string());
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: corrupt ({})", file.string(), e.what()));
  }
  CampaignGrid c;
  try {
    if (doc.value("schema", "") != kCampaignSchema) throw Error(fmt::format("not a {} document", kCampaignSchema));
    for (const auto& a : doc.at("axes")) {
      SweepAxis axis;
      axis.key = a.at("key").get<std::string>();
      axis.values = a.at("values").get<std::vector<std::string>>();
      m.options.grid.push_back(axis);
      m.result.keys.push_back(axis.key);
    }
    m.options.context = doc.at("context").get<int>();
    m.options.tokens = doc.at("tokens").get<int>();
    m.options.prompt_tokens = doc.value("prompt_tokens", 0);  // absent: a campaign that timed no prompt
    m.options.check_model = doc.at("check_model").get<std::string>();
    m.base_config_hash = doc.at("base_config_hash").get<std::string>();
    m.version = doc.at("bitsim_version").get<std::string>();
    m.commit = doc.at("git_commit").get<std::string>();
    std::vector<GridPoint> listed;
    for (const auto& p : doc.at("points")) listed.push_back(grid_point_of(p, m.result.keys));
    const sim::ParamSet base = base_of(doc.at("base_config"));
    if (config_hash(base) != m.base_config_hash)
      throw Error(fmt::format("base_config_hash {} is not the hash {} of its base_config", m.base_config_hash,
                              config_hash(base)));
    check_sweep_options(m.options);
    SweepResult grid;
    c.configs.emplace(sweep_configs(base, m.options, grid));
    c.pts = grid_points(grid.keys, *c.configs, grid);
    check_points_against_axes(listed, c.pts, grid.skipped.size());
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: malformed ({})", file.string(), e.what()));
  } catch (const Error& e) {
    throw Error(fmt::format("{}: corrupt: {}", file.string(), e.what()));
  }
  return c;
}

// The base check of the campaign: what the first shard's file says.
std::string first_base_check(const fs::path& dir, const std::vector<GridPoint>& pts) {
  for (const auto& g : pts) {
    std::error_code e2;
    if (!fs::exists(dir / g.file, e2)) continue;
    try {
      const auto j = io::parse_json_unique_keys(read_text(dir / g.file), "");
      const std::string check = j.value("base_check", "");
      if (!check.empty()) return check;
    } catch (const nlohmann::json::exception&) {
    } catch (const Error&) {  // a key twice: read_point has named the file as corrupt
    }
  }
  return "";
}

// "rows from N WHAT(s) (campaign.json: X): a: n point(s), first p; ..." when the rows come
// from more than one, or from another than the campaign's.
void note_mixed(const std::map<std::string, std::vector<std::string>>& by, const std::string& campaign,
                const char* what, std::vector<std::string>& mixed) {
  if (by.empty() || (by.size() == 1 && by.begin()->first == campaign)) return;
  std::string s = fmt::format("rows from {} {}(s) (campaign.json: {}):", by.size(), what, campaign);
  for (const auto& [b, names] : by) s += fmt::format(" {}: {} point(s), first {};", b, names.size(), names.front());
  mixed.push_back(s);
}

}  // namespace

Shard parse_shard(const std::string& text, const std::string& origin) {
  const std::string what = fmt::format("{} '{}'", origin, text);
  const auto slash = text.find('/');
  if (slash == std::string::npos) throw Error(fmt::format("{}: expected K/N (0 <= K < N)", what));
  Shard s;
  s.index = parse_int(text.substr(0, slash), what);
  s.count = parse_int(text.substr(slash + 1), what);
  if (s.count < 1 || s.index >= s.count)
    throw Error(fmt::format("{}: expected K/N with 0 <= K < N (shards are numbered from 0)", what));
  return s;
}

std::optional<Shard> shard_from_slurm(const std::function<const char*(const char*)>& env) {
  const char* id = env("SLURM_ARRAY_TASK_ID");
  if (!id || !*id) return std::nullopt;
  auto get = [&](const char* name) -> std::optional<int> {
    const char* v = env(name);
    if (!v || !*v) return std::nullopt;
    return parse_int(v, name);
  };
  const int task = parse_int(id, "SLURM_ARRAY_TASK_ID");
  const int min = get("SLURM_ARRAY_TASK_MIN").value_or(0);
  const auto max = get("SLURM_ARRAY_TASK_MAX");
  auto count = get("SLURM_ARRAY_TASK_COUNT");
  if (!count && max) count = *max - min + 1;
  if (!count)
    throw Error("a Slurm array task without SLURM_ARRAY_TASK_COUNT or SLURM_ARRAY_TASK_MAX: its shard count is unknown");
  if (max && *count != *max - min + 1)
    throw Error(fmt::format("Slurm array {}-{} has {} tasks: a campaign's array must be every index MIN..MAX "
                            "(an sbatch array 0-{})", min, *max, *count, *count - 1));
  if (task < min || task - min >= *count)
    throw Error(fmt::format("SLURM_ARRAY_TASK_ID {} is outside the array {}..{}", task, min, min + *count - 1));
  return Shard{task - min, *count};
}

std::string point_key(const std::vector<std::string>& keys, const sim::ParamSet& point) {
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  std::string k;
  for (const auto& key : sorted) k += key + "=" + point.to_string(key) + "\n";
  return k;
}

uint64_t point_hash(const std::string& key) {
  // FNV-1a 64, then the splitmix64 finalizer: FNV's low bits depend only on the low bits of
  // each byte ("100" and "108" would share every shard of N = 8), the finalizer spreads all 64.
  uint64_t z = host::fnv1a64(key.data(), key.size());
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int shard_of(const std::string& key, int count) { return int(point_hash(key) % uint64_t(count)); }

ShardReport run_shard(const sim::ParamSet& base, const SweepOptions& o, const CampaignOptions& c,
                      const std::function<void(const std::string&)>& status) {
  check_sweep_options(o);
  if (c.dir.empty()) throw Error("campaign: no directory given (a campaign needs one)");
  if (c.shard.count < 1 || c.shard.index < 0 || c.shard.index >= c.shard.count)
    throw Error(fmt::format("shard {}/{}: expected 0 <= K < N", c.shard.index, c.shard.count));
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path dir(c.dir);
  SweepResult res;
  const SweepGrid configs = sweep_configs(base, o, res);
  const std::vector<GridPoint> pts = grid_points(res.keys, configs, res);

  std::error_code ec;
  fs::create_directories(dir / "points", ec);
  if (ec || !fs::is_directory(dir / "points"))
    throw Error(fmt::format("campaign directory {}: cannot create it ({})", c.dir, ec ? ec.message() : "not a directory"));
  claim_campaign(dir, campaign_document(base, o, pts), c.allow_mixed);

  ShardReport rep;
  rep.grid_points = int(pts.size());
  const std::vector<int> pending = pending_points(dir, pts, configs, res.keys, config_hash(base), c, o.prompt_tokens, rep);
  for (const auto& w : rep.warnings)
    if (status) status("warning: " + w);

  if (!pending.empty() && !o.check_model.empty()) {
    if (status) status(fmt::format("checking the base config functionally on {} ...", o.check_model));
    rep.base_check = check_sweep_base(base, o.check_model);
  }
  const PointRunner runner{dir, pts, configs, o, config_hash(base), c.shard, rep.base_check, res.keys};
  const int jobs = std::min(o.jobs, int(pending.size()));
  if (jobs <= 1) runner.run_here(pending, rep, status);
  else runner.run_forked(pending, jobs, rep);
  rep.ran = int(pending.size());
  rep.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

MergeResult merge_campaign(const std::string& dir_text) {
  const fs::path dir(dir_text);
  const fs::path file = dir / "campaign.json";
  std::error_code ec;
  if (!fs::exists(file, ec))
    throw Error(fmt::format("{}: no campaign.json (not a campaign directory: a campaign's first shard writes one)",
                            dir_text));
  MergeResult m;
  m.dir = dir_text;
  const CampaignGrid grid = read_campaign_file(file, m);
  const std::vector<GridPoint>& pts = grid.pts;
  m.total = int(pts.size());
  std::map<std::string, std::vector<std::string>> builds, bases;  // "version (commit)" / base hash -> points
  for (const auto& g : pts) {
    check_stop();
    const PointFile f =
        read_point(dir, g, (*grid.configs)[size_t(g.index)], m.result.keys, m.base_config_hash, m.options.prompt_tokens);
    if (!f.ok) {
      m.missing.push_back({g.index, g.name, (dir / g.file).string(), f.error, f.corrupt});
      continue;
    }
    builds[fmt::format("bitsim {} (commit {})", f.point.prov.version, f.point.prov.commit)].push_back(g.name);
    bases[f.base_config_hash].push_back(g.name);
    m.result.points.push_back(f.point);
    m.result.wall_s += f.point.prov.wall_s;
  }
  m.result.base_check = first_base_check(dir, pts);
  note_mixed(builds, fmt::format("bitsim {} (commit {})", m.version, m.commit), "build", m.mixed);
  note_mixed(bases, m.base_config_hash, "base config", m.mixed);
  return m;
}

std::string merge_csv(const MergeResult& m) {
  std::string head;
  if (!m.complete())
    head = fmt::format("# PARTIAL: {} of {} points; {} missing or failed (bitsim sweep merge {})\n",
                       m.result.points.size(), m.total, m.missing.size(), m.dir);
  return head + sweep_csv(m.result);
}

nlohmann::json merge_json(const MergeResult& m) {
  nlohmann::json j = sweep_json(m.result, m.options);
  nlohmann::json missing = nlohmann::json::array();
  for (const auto& p : m.missing)
    missing.push_back({{"index", p.index}, {"point", p.point}, {"file", p.file},
                       {"error", p.error.empty() ? nlohmann::json() : nlohmann::json(p.error)},
                       {"corrupt", p.corrupt}});
  j["campaign"] = {{"dir", m.dir},
                   {"complete", m.complete()},
                   {"partial", !m.complete()},
                   {"completed", m.result.points.size()},
                   {"total", m.total},
                   {"missing", missing},
                   {"bitsim_version", m.version},
                   {"git_commit", m.commit},
                   {"base_config_hash", m.base_config_hash},
                   {"mixed", m.mixed}};
  return j;
}

}  // namespace bitsim::study
