#include "sim/trace.h"

#include <algorithm>
#include <fstream>

#include <sstream>

#include <fmt/format.h>

#include "base/error.h"
#include "base/file_io.h"
#include "hw/circuits/engine_registry.h"

namespace bitsim::sim {

namespace trace {

std::string us(uint64_t ps) { return fmt::format("{}.{:06}", ps / 1000000, ps % 1000000); }

std::string short_group(const std::string& group) {
  if (group.rfind("layer ", 0) == 0) {
    const size_t sp = group.find(' ', 6);
    if (sp != std::string::npos) return group.substr(sp + 1);
  }
  return group;
}

}  // namespace trace

namespace {
// The run's board is the shipped one (hw::EngineRegistry::board()): its DMAs' names.
const std::string& dma_name(int d) { return hw::EngineRegistry::board().dma_name(d); }
constexpr int kDmas = 4;  // mm0, mm1, at0, at1: the trace's thread ids (trace::dma_tid)
constexpr const char* kChannel[2] = {"MM2S", "S2MM"};

const char* cat_name(TraceWriter::Cat c) {
  switch (c) {
    case TraceWriter::Cat::Token: return "token";
    case TraceWriter::Cat::Layer: return "layer";
    case TraceWriter::Cat::Cpu: return "cpu";
    case TraceWriter::Cat::Driver: return "driver";
    case TraceWriter::Cat::Engine: return "engine";
    default: return "dma";
  }
}

using nlohmann::json;
using Span = TraceWriter::Span;
using Cat = TraceWriter::Cat;
using trace::us;

// A span of `cat` on track (pid, tid).
Span span_on(int pid, int tid, Cat cat, uint64_t begin_ps, uint64_t end_ps) {
  return {.begin_ps = begin_ps, .end_ps = end_ps, .pid = pid, .tid = tid, .cat = cat};
}

// A span on the host program's track, at context position `position`.
Span host_span(Cat cat, uint32_t name, int position, int layer, uint64_t begin_ps, uint64_t end_ps) {
  Span s = span_on(trace::kPsPid, trace::kHostTid, cat, begin_ps, end_ps);
  s.token = position;
  s.layer = layer;
  s.name = name;
  return s;
}

// Chronological; at one time, the longer (enclosing) span first.
void sort_chronologically(std::vector<Span>& spans) {
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    if (a.begin_ps != b.begin_ps) return a.begin_ps < b.begin_ps;
    return a.end_ps - a.begin_ps > b.end_ps - b.begin_ps;
  });
}

// The "traceEvents" array being written: one event per line, comma-separated.
struct EventList {
  std::ostream& out;
  bool first = true;
  std::ostream& next() {
    out << (first ? "" : ",\n");
    first = false;
    return out;
  }
};

// Metadata: "process_name" / "thread_name" take args.name, "*_sort_index" args.sort_index.
void write_meta(EventList& events, const std::string& what, int pid, int tid, json value) {
  const char* key = what.ends_with("sort_index") ? "sort_index" : "name";
  events.next() << json{{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", json{{key, std::move(value)}}}}
                       .dump();
}

// The names and order of the processes and of every track.
void write_track_names(EventList& events) {
  write_meta(events, "process_name", trace::kPsPid, 0, "PS (Cortex-A9)");
  write_meta(events, "process_sort_index", trace::kPsPid, 0, 1);
  write_meta(events, "thread_name", trace::kPsPid, trace::kHostTid, "host program");
  write_meta(events, "thread_sort_index", trace::kPsPid, trace::kHostTid, 1);
  write_meta(events, "process_name", trace::kPlPid, 0, "PL");
  write_meta(events, "process_sort_index", trace::kPlPid, 0, 2);
  for (int a = 0; a < 2; ++a)
    for (int lane = 0; lane < 2; ++lane) {
      const int tid = trace::engine_tid(a == 1, lane);
      write_meta(events, "thread_name", trace::kPlPid, tid, fmt::format("{} lane {}", a ? "attention" : "matmul", lane));
      write_meta(events, "thread_sort_index", trace::kPlPid, tid, tid);
    }
  for (int d = 0; d < kDmas; ++d)
    for (int c = 0; c < 2; ++c) {
      const int tid = trace::dma_tid(d, c);
      write_meta(events, "thread_name", trace::kPlPid, tid, fmt::format("DMA {} {}", dma_name(d), kChannel[c]));
      write_meta(events, "thread_sort_index", trace::kPlPid, tid, tid);
    }
  write_meta(events, "process_name", trace::kPowerPid, 0, "board power (simulated)");
  write_meta(events, "process_sort_index", trace::kPowerPid, 0, 3);
}

// The power counters (docs/energy.md): one sample per step at its start, its tokens' energy
// over its time. A prompt chunk's positions share one token span's times.
void write_power(EventList& events, const std::vector<Span>& spans,
                 const std::map<int, energy::Breakdown>& energy) {
  std::map<std::pair<uint64_t, uint64_t>, energy::Breakdown> steps;  // (begin, end) -> energy
  for (const Span& s : spans) {
    const auto e = energy.find(s.token);
    if (s.cat == Cat::Token && e != energy.end()) steps[{s.begin_ps, s.end_ps}] += e->second;
  }
  for (const auto& [time, b] : steps) {
    const uint64_t ps = time.second - time.first;
    auto w = [&](double mj) { return ps ? mj * 1e-3 / (double(ps) * 1e-12) : 0.0; };
    auto counter = [&](const char* name, json args) {
      events.next() << "{\"name\":\"" << name << "\",\"ph\":\"C\",\"ts\":" << us(time.first)
                    << ",\"pid\":" << trace::kPowerPid << ",\"tid\":0,\"args\":" << args.dump() << "}";
    };
    counter("power W", json{{"total", w(b.total())}});
    counter("power by part W",
            json{{"dram", w(b.dram())}, {"pl", w(b.pl())}, {"ps", w(b.ps())}, {"other", w(b.board_other)}});
  }
}

// A span's args: token and layer, then what its category carries.
json span_args(const Span& s, const TraceWriter& w) {
  json args{{"token", s.token}};
  if (s.layer >= 0) args["layer"] = s.layer;
  switch (s.cat) {
    case Cat::Token: args["token_id"] = s.token_id; break;
    case Cat::Layer: break;
    case Cat::Cpu:
      args["elements"] = s.elements;
      args["bytes"] = s.bytes;
      break;
    case Cat::Driver:
      args["group"] = w.str(s.group);
      args["part"] = s.part;
      break;
    case Cat::Engine:
    case Cat::Dma:
      args["group"] = w.str(s.group);
      args["part"] = s.part;
      args["start_edge"] = s.start_edge;
      args["end_edge"] = s.end_edge;
      args["cycles"] = s.end_edge >= s.start_edge ? s.end_edge - s.start_edge : 0;
      break;
  }
  return args;
}

// One "X" event: ts and dur as exact decimals (a JSON number with 6 decimals), the rest
// through json.
void write_span(EventList& events, const Span& s, const TraceWriter& w) {
  const json args = span_args(s, w);
  events.next() << "{\"name\":" << json(w.str(s.name)).dump() << ",\"cat\":\"" << cat_name(s.cat)
                << "\",\"ph\":\"X\",\"ts\":" << us(s.begin_ps) << ",\"dur\":" << us(s.end_ps - s.begin_ps)
                << ",\"pid\":" << s.pid << ",\"tid\":" << s.tid << ",\"args\":" << args.dump() << "}";
}
}  // namespace

uint32_t TraceWriter::intern(const std::string& s) {
  auto [it, inserted] = string_ids_.try_emplace(s, uint32_t(strings_.size()));
  if (inserted) strings_.push_back(s);
  return it->second;
}

void TraceWriter::close_layer() {
  if (layer_open_) spans_.push_back(layer_);
  layer_open_ = false;
}

void TraceWriter::token(int position, int token_id, uint64_t begin_ps, uint64_t end_ps) {
  close_layer();
  Span s = host_span(Cat::Token, intern(fmt::format("token {}", position)), position, -1, begin_ps, end_ps);
  s.token_id = token_id;
  spans_.push_back(s);
}

void TraceWriter::cpu_step(host::CpuStep step, uint64_t elements, uint64_t bytes, int position, int layer,
                           uint64_t begin_ps, uint64_t end_ps) {
  Span s = host_span(Cat::Cpu, intern(host::cpu_step_name(step)), position, layer, begin_ps, end_ps);
  s.elements = elements;
  s.bytes = bytes;
  spans_.push_back(s);
  if (layer < 0) {
    close_layer();
  } else if (layer_open_ && layer_.token == position && layer_.layer == layer) {
    layer_.end_ps = end_ps;
  } else {
    close_layer();
    layer_ = host_span(Cat::Layer, intern(fmt::format("layer {}", layer)), position, layer, begin_ps, end_ps);
    layer_open_ = true;
  }
}

void TraceWriter::call(const char* kind, const std::string& group, int part, int position, int layer,
                       uint64_t begin_ps, uint64_t end_ps) {
  const bool attention = std::string(kind) == "attention";
  const uint32_t name = intern(attention ? std::string("attention") : fmt::format("{} {}", kind, trace::short_group(group)));
  Span s = host_span(Cat::Driver, name, position, layer, begin_ps, end_ps);
  s.group = intern(group);
  s.part = part;
  spans_.push_back(s);
  calls_.push_back({begin_ps, end_ps, position, layer, part, attention, name, s.group});
  // A call extends its layer span as a CPU step does (a layer starts with a CPU step).
  if (layer >= 0 && layer_open_ && layer_.token == position && layer_.layer == layer) layer_.end_ps = end_ps;
}

void TraceWriter::add_transfers(const std::vector<host::TransferRecord>& transfers, uint64_t period_ps) {
  close_layer();
  // The driver call a transfer ran in: the last call that began at or before its start.
  auto owner = [&](uint64_t start_ps, bool attention) -> const Call* {
    auto it = std::upper_bound(calls_.begin(), calls_.end(), start_ps,
                               [](uint64_t t, const Call& c) { return t < c.begin_ps; });
    if (it == calls_.begin()) return nullptr;
    --it;
    if (start_ps > it->end_ps || it->attention != attention) return nullptr;
    return &*it;
  };
  const uint32_t unknown = intern("unattributed");
  auto span = [&](Cat cat, int tid, bool attention, uint64_t start, uint64_t completion) {
    Span s = span_on(trace::kPlPid, tid, cat, start * period_ps, std::max(start, completion) * period_ps);
    s.start_edge = start;
    s.end_edge = completion;
    if (const Call* c = owner(s.begin_ps, attention)) {
      s.token = c->token;
      s.layer = c->layer;
      s.name = c->name;
      s.group = c->group;
      s.part = c->part;
    } else {
      s.token = -1;
      s.name = s.group = unknown;
      s.part = 0;
    }
    spans_.push_back(s);
  };
  // Per DMA, the k-th MM2S transfer and the k-th S2MM transfer belong to the same call.
  std::vector<const host::TransferRecord*> by[kDmas][2];
  for (const auto& t : transfers) {
    if (t.dma < 0 || t.dma >= kDmas || t.channel < 0 || t.channel > 1) continue;
    by[t.dma][t.channel].push_back(&t);
    span(Cat::Dma, trace::dma_tid(t.dma, t.channel), t.dma >= 2, t.start, t.completion);
  }
  for (int d = 0; d < kDmas; ++d) {
    const size_t n = std::min(by[d][0].size(), by[d][1].size());
    for (size_t k = 0; k < n; ++k)
      span(Cat::Engine, trace::engine_tid(d >= 2, d % 2), d >= 2, by[d][0][k]->start, by[d][1][k]->completion);
  }
}

void TraceWriter::write(std::ostream& out) const {
  std::vector<Span> all = spans_;
  if (layer_open_) all.push_back(layer_);
  sort_chronologically(all);
  out << "{\"traceEvents\":[\n";
  EventList events{out};
  write_track_names(events);
  for (const Span& s : all) write_span(events, s, *this);
  write_power(events, all, energy_);
  nlohmann::json other = other_;
  if (!energy_.empty())
    other["power"] = "simulated (docs/energy.md): each step's tokens' energy over its simulated time, W";
  other["format"] = "bitsim.trace/1";
  other["time"] = "ts and dur in microseconds, picosecond precision; PL edge e at e x clock period";
  out << "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":" << other.dump() << "}\n";
}

void TraceWriter::write_file(const std::filesystem::path& path) const {
  // Through a temporary file renamed into place: two runs writing the same trace leave one
  // whole document, never a mix (base/file_io.h).
  std::ostringstream text;
  write(text);
  io::write_file(path, text.str(), "trace file");
}

}  // namespace bitsim::sim
