// SIGINT / SIGTERM during run, sweep, validate and bench: the real bitsim in a child
// process, the signal sent once it is at work, then its exit code (130 / 143), what it
// wrote (the trace of the tokens run, the sweep rows done marked partial), what it said on
// stderr, and no worker process left behind.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

// A folder for the test, created at once (tests/support/temp_dir.h names and removes it).
struct TempDir : ::bitsim::test::TempDir {
  TempDir() { std::filesystem::create_directories(path); }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// bitsim with `args`, stdout and stderr into files of `dir`.
pid_t spawn(const std::vector<std::string>& args, const fs::path& dir) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out = ::open((dir / "stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open((dir / "stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    std::vector<char*> argv{const_cast<char*>(BITSIM_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(BITSIM_BINARY, argv.data());
    ::_exit(127);
  }
  return pid;
}

// Waits (polling; a safety net, not a timing assertion) until stderr holds `marker`.
bool wait_for(const fs::path& dir, const std::string& marker, pid_t pid) {
  for (int i = 0; i < 6000; ++i) {
    if (has(slurp(dir / "stderr"), marker)) return true;
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return false;  // ended before
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Waits (polling, a safety net) until `pid` catches SIGINT and SIGTERM (/proc/PID/status,
// SigCgt): a command that says nothing on stderr is then at work.
bool wait_for_handlers(pid_t pid) {
  const unsigned long both = (1ul << (SIGINT - 1)) | (1ul << (SIGTERM - 1));
  for (int i = 0; i < 6000; ++i) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("SigCgt:", 0) == 0 && (std::stoul(line.substr(7), nullptr, 16) & both) == both) return true;
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return false;  // ended before
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// The exit code, or -1 (and the child killed) if it does not end.
int wait_exit(pid_t pid) {
  int st = 0;
  for (int i = 0; i < 3000; ++i) {
    if (::waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &st, 0);
  return -1;
}

// The child processes of `pid` (/proc/PID/task/PID/children).
std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> out;
  for (pid_t c; in >> c;) out.push_back(c);
  return out;
}

// Running (not gone, not a zombie waiting for a reaper).
bool alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

// Every output of an interrupted run holds what ran before the stop and says it was cut
// short (docs/errors.md): the trace's otherData, a last "# partial:" line in the per-layer CSV,
// the MMIO program and the DRAM trace; the stop message names every one; the program replays
// equal.
TEST(Signal, RunStopsOnSigintWritesEveryOutputMarkedPartialAndExits130) {
  TempDir d;
  const fs::path trace = d.path / "t.json", layers = d.path / "l.csv", mmio = d.path / "r.mmio",
                 dram = d.path / "d.trace";
  const pid_t pid = spawn({"run", "--model", "synthetic:tiny", "--prompt", "hi", "--tokens", "400", "--no-check",
                           "--fidelity", "cycle", "--trace", trace.string(), "--layers-csv", layers.string(),
                           "--record-mmio", mmio.string(), "--dram-trace", dram.string()},
                          d.path);
  ASSERT_TRUE(wait_for(d.path, "running on the simulated board", pid)) << slurp(d.path / "stderr");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few tokens in
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid), 130);
  const std::string err = slurp(d.path / "stderr");
  EXPECT_TRUE(has(err, "stopped by SIGINT after")) << err;
  EXPECT_TRUE(has(err, "written up to the stop, marked partial: " + layers.string() + ", " + trace.string() + ", " +
                           mmio.string() + ", " + dram.string()))
      << err;
  const std::string dram_text = slurp(dram);
  EXPECT_TRUE(has(dram_text, "# partial")) << dram_text.substr(dram_text.size() > 200 ? dram_text.size() - 200 : 0);
  const auto j = nlohmann::json::parse(slurp(trace));  // a whole document
  EXPECT_EQ(j["otherData"]["format"], "bitsim.trace/1");
  EXPECT_EQ(j["otherData"]["partial"], true);
  EXPECT_EQ(j["otherData"]["stopped_by"], "SIGINT");
  const int tokens = j["otherData"]["tokens"].get<int>();
  const std::string mark = "# partial: stopped by SIGINT after " + std::to_string(tokens) + " token(s)\n";
  for (const auto& f : {layers, mmio}) {
    const std::string text = slurp(f);
    ASSERT_GE(text.size(), mark.size()) << f;
    EXPECT_EQ(text.substr(text.size() - mark.size()), mark) << f;
    EXPECT_GT(std::count(text.begin(), text.end(), '\n'), 10) << f;
  }
  for (const auto& e : fs::directory_iterator(d.path))  // no temporary file left
    EXPECT_TRUE(e.path() == trace || e.path() == layers || e.path() == mmio || e.path() == dram ||
                e.path().filename() == "stdout" ||
                e.path().filename() == "stderr")
        << e.path();
  // The cut-short program replays, every read equal.
  TempDir r;
  const pid_t replay = spawn({"replay", mmio.string()}, r.path);
  EXPECT_EQ(wait_exit(replay), 0) << slurp(r.path / "stderr");
  EXPECT_TRUE(has(slurp(r.path / "stdout"), "every read equal")) << slurp(r.path / "stdout");
}

// The DRAM outputs under ddr.model = ddr3 (docs/errors.md): a run stopped by SIGINT names the
// DRAM trace and the DRAM command file in its stop message, and both end marked partial.
TEST(Signal, AStoppedDdr3RunNamesItsDramTraceAndCommandFileMarkedPartial) {
  TempDir d;
  const fs::path dram = d.path / "d.trace", commands = d.path / "c.csv";
  const pid_t pid = spawn({"run", "--model", "synthetic:tiny", "--prompt", "hi", "--tokens", "400", "--no-check",
                           "--fidelity", "cycle", "--set", "ddr.model=ddr3", "--dram-trace", dram.string(),
                           "--dram-commands", commands.string()},
                          d.path);
  ASSERT_TRUE(wait_for(d.path, "running on the simulated board", pid)) << slurp(d.path / "stderr");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few tokens in
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid), 130);
  const std::string err = slurp(d.path / "stderr");
  EXPECT_TRUE(has(err, "written up to the stop, marked partial: " + dram.string() + ", " + commands.string())) << err;
  for (const fs::path& f : {dram, commands}) {
    const std::string text = slurp(f);
    EXPECT_TRUE(has(text, "# partial")) << f << ": " << text.substr(text.size() > 200 ? text.size() - 200 : 0);
    EXPECT_GT(std::count(text.begin(), text.end(), '\n'), 10) << f;
  }
}

// A signal that arrives after the last token, while the outputs are being written: the
// outputs are whole, and the command still ends as stopped (143 for SIGTERM), saying so.
// Standard output is a pipe nobody reads until the signal has been sent: the trace, written
// to /dev/stdout after the run, fills it and blocks the writer.
TEST(Signal, ASignalWhileTheOutputsAreWrittenKeepsThemWholeAndExits143) {
  TempDir d;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    const int err = ::open((d.path / "stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(err, 2);
    const char* argv[] = {BITSIM_BINARY, "run", "--model", "synthetic:tiny", "--prompt", "hi", "--tokens", "3",
                          "--no-check", "--trace", "/dev/stdout", nullptr};
    ::execv(BITSIM_BINARY, const_cast<char* const*>(argv));
    ::_exit(127);
  }
  ::close(fds[1]);
  // The writer blocked in the trace: its message said so, and the pipe, nearly full (Linux's
  // default holds 64 KiB in 16 pages), stops filling.
  int queued = 0, before = -1;
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_EQ(::ioctl(fds[0], FIONREAD, &queued), 0);
    if (queued >= 32768 && queued == before && has(slurp(d.path / "stderr"), "writing the trace to /dev/stdout")) break;
    before = queued;
  }
  ASSERT_GE(queued, 32768) << slurp(d.path / "stderr");
  ASSERT_EQ(queued, before) << slurp(d.path / "stderr");
  ::kill(pid, SIGTERM);
  std::string out;
  char buf[65536];
  for (ssize_t k; (k = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (k < 0 && errno == EINTR) continue;
    ASSERT_GT(k, 0);
    out.append(buf, size_t(k));
  }
  ::close(fds[0]);
  EXPECT_EQ(wait_exit(pid), 143);
  const std::string err = slurp(d.path / "stderr");
  EXPECT_TRUE(has(err, "stopped by SIGTERM after the work had finished: every output is complete")) << err;
  // The trace is whole (not marked partial, all 3 tokens) and the summary follows it.
  const auto begin = out.find("{\"traceEvents\"");
  ASSERT_NE(begin, std::string::npos);
  const auto end = out.find("\n--- end of text ---", begin);
  ASSERT_NE(end, std::string::npos) << out.substr(out.size() - std::min<size_t>(out.size(), 400));
  const auto j = nlohmann::json::parse(out.substr(begin, end - begin));
  EXPECT_EQ(j["otherData"]["tokens"], j["otherData"]["prompt_tokens"].get<int>() + 3);
  EXPECT_FALSE(j["otherData"].contains("partial"));
  EXPECT_TRUE(has(out.substr(end), "fast fidelity")) << out.substr(end);
}

// A closed pipe on standard output is a failed output, exit 2 (docs/errors.md), not death by
// SIGPIPE (141).
TEST(Signal, RunIntoAClosedPipeExits2) {
  TempDir d;
  const std::string cmd = "cd '" + d.path.string() + "' && BITSIM_CACHE_DIR=cache '" + BITSIM_BINARY +
                          "' run --model synthetic:tiny --prompt hi --tokens 60 --no-check --quiet 2>err | head -c 10 "
                          ">/dev/null; echo \"${PIPESTATUS[0]}\"";
  std::ofstream(d.path / "p.sh") << cmd << "\n";
  FILE* p = ::popen(("bash '" + (d.path / "p.sh").string() + "'").c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[64] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, p);
  ::pclose(p);
  EXPECT_EQ(std::string(buf, n), "2\n") << slurp(d.path / "err");
  EXPECT_TRUE(has(slurp(d.path / "err"), "standard output: write failed")) << slurp(d.path / "err");
}

// A campaign shard stopped by SIGINT or SIGTERM, with one process or two workers: exit
// 130 / 143, no "failed" file for the points only stopped, no temporary file, every worker
// reaped, the finished points kept; --resume completes it and the merge finds it whole.
TEST(Signal, ACampaignStoppedLooksInterruptedAndResumes) {
  for (const int sig : {SIGINT, SIGTERM})
    for (const char* jobs : {"1", "2"}) {
      SCOPED_TRACE(std::string(sig == SIGINT ? "SIGINT" : "SIGTERM") + ", --jobs " + jobs);
      TempDir d;
      const fs::path out = d.path / "c";
      const std::vector<std::string> args{"sweep", "--grid", "clock_mhz=90,100,110,125", "--grid",
                                          "dma.length_bits=20,23", "--tokens", "2", "--context", "32",
                                          "--check-model", "", "--jobs", jobs, "--out", out.string()};
      const pid_t pid = spawn(args, d.path);
      std::vector<pid_t> workers;
      bool started = false;
      for (int i = 0; i < 3000 && !started; ++i) {  // a point done (a safety net, not a timing assertion)
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(out / "points", ec))
          if (e.path().filename().string().front() != '.') started = true;
        if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ASSERT_TRUE(started) << slurp(d.path / "stderr");
      workers = children_of(pid);
      if (std::string(jobs) == "2") EXPECT_EQ(workers.size(), 2u);
      ::kill(pid, sig);
      EXPECT_EQ(wait_exit(pid), 128 + sig);
      for (pid_t w : workers) EXPECT_FALSE(alive(w)) << "worker " << w << " outlived the shard";
      const std::string err = slurp(d.path / "stderr");
      EXPECT_TRUE(has(err, "interrupted; its finished points are kept and `--resume` completes it")) << err;
      EXPECT_FALSE(has(slurp(d.path / "stdout"), "failed")) << slurp(d.path / "stdout");
      size_t kept = 0;
      for (const auto& e : fs::directory_iterator(out / "points")) {
        EXPECT_NE(e.path().filename().string().front(), '.') << "temporary file left: " << e.path();
        EXPECT_FALSE(has(slurp(e.path()), "\"failed\"")) << e.path() << " written as failed";
        ++kept;
      }
      EXPECT_LT(kept, 8u);
      std::vector<std::string> resume = args;
      resume.push_back("--resume");
      const pid_t again = spawn(resume, d.path);
      EXPECT_EQ(wait_exit(again), 0) << slurp(d.path / "stderr");
      EXPECT_TRUE(has(slurp(d.path / "stdout"), std::to_string(kept) + " already done (kept)")) << slurp(d.path / "stdout");
      const pid_t merge = spawn({"sweep", "merge", out.string()}, d.path);
      EXPECT_EQ(wait_exit(merge), 0);
      EXPECT_TRUE(has(slurp(d.path / "stdout"), "complete: all 8 points")) << slurp(d.path / "stdout");
    }
}

// A FIFO where a campaign file belongs is named at once by merge and resume, never waited on.
TEST(Signal, MergeAndResumeNeverWaitOnAFifo) {
  TempDir d;
  fs::create_directories(d.path / "c");
  ASSERT_EQ(::mkfifo((d.path / "c" / "campaign.json").c_str(), 0644), 0);
  pid_t pid = spawn({"sweep", "merge", (d.path / "c").string()}, d.path);
  EXPECT_EQ(wait_exit(pid), 2);
  EXPECT_TRUE(has(slurp(d.path / "stderr"), "campaign.json")) << slurp(d.path / "stderr");
  pid = spawn({"sweep", "--grid", "clock_mhz=100", "--tokens", "1", "--context", "1", "--check-model", "", "--out",
               (d.path / "c").string(), "--resume"},
              d.path);
  EXPECT_EQ(wait_exit(pid), 2);
  EXPECT_TRUE(has(slurp(d.path / "stderr"), "campaign.json")) << slurp(d.path / "stderr");
}

// SIGTERM to the sweep's parent alone: the workers are killed and reaped, the rows done are
// written marked partial, exit 143.
TEST(Signal, SweepStopsOnSigtermWritesTheRowsDoneAndReapsItsWorkers) {
  TempDir d;
  std::string clocks = "clock_mhz=50";
  for (int mhz = 55; mhz <= 250; mhz += 5) clocks += "," + std::to_string(mhz);
  const fs::path csv = d.path / "s.csv", json = d.path / "s.json";
  const pid_t pid = spawn({"sweep", "--grid", clocks, "--tokens", "4", "--jobs", "2", "--check-model", "", "--csv",
                           csv.string(), "--json", json.string()},
                          d.path);
  ASSERT_TRUE(wait_for(d.path, "sweep: 2 of 41 points done", pid)) << slurp(d.path / "stderr");
  const std::vector<pid_t> workers = children_of(pid);
  ASSERT_EQ(workers.size(), 2u);
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 143);
  for (pid_t w : workers) EXPECT_FALSE(alive(w)) << "worker " << w << " outlived the sweep";
  const std::string err = slurp(d.path / "stderr");
  EXPECT_TRUE(has(err, "sweep stopped by SIGTERM")) << err;
  EXPECT_TRUE(has(err, "marked partial")) << err;

  const auto j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j["partial"], true);
  EXPECT_EQ(j["points_total"], 41);
  const size_t done = j["points"].size();
  EXPECT_GE(done, 2u);
  EXPECT_LT(done, 41u);
  std::istringstream lines(slurp(csv));
  std::vector<std::string> rows;
  for (std::string l; std::getline(lines, l);) rows.push_back(l);
  ASSERT_EQ(rows.size(), done + 2);  // header, the rows done, the partial marker
  EXPECT_EQ(rows.back(), "# partial: " + std::to_string(done) + " of 41 points, stopped by SIGTERM");
  for (const auto& p : j["points"]) EXPECT_GT(p["tok_s"].get<double>(), 0.0);
}

// The parent killed outright (no handler runs): its workers die with it.
TEST(Signal, SweepWorkersDieWithAKilledParent) {
  TempDir d;
  const pid_t pid = spawn({"sweep", "--grid", "clock_mhz=50,75,100,125,150,175,200,225,250", "--tokens", "8", "--jobs",
                           "2", "--check-model", ""},
                          d.path);
  ASSERT_TRUE(wait_for(d.path, "sweep: 1 of 9 points done", pid)) << slurp(d.path / "stderr");
  const std::vector<pid_t> workers = children_of(pid);
  ASSERT_FALSE(workers.empty());
  ::kill(pid, SIGKILL);
  EXPECT_EQ(wait_exit(pid), 1000 + SIGKILL);
  for (pid_t w : workers) {
    bool gone = false;
    for (int i = 0; i < 500 && !gone; ++i) {  // the kernel delivers the parent-death signal
      gone = !alive(w);
      if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(gone) << "worker " << w << " outlived its killed parent";
  }
}

// The class "every long operation stops on SIGINT / SIGTERM within a second": each long
// command, once at work (its progress line on stderr), is signalled at two points of its
// work, SIGINT at one and SIGTERM at the other, and ends 128 + the signal within a second
// (2 s allowed here: the test machine is shared), saying it was stopped, no process of it
// left: eval over long windows, runs under ddr.model = ddr3 in both fidelities (one while it
// builds bitnet-large without the start-up cache), sweep, membench, validate, calibrate,
// regress.
TEST(Signal, EveryLongCommandStopsWithinASecondAtSeveralPoints) {
  TempDir d;
  const fs::path text = d.path / "long.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 3000; ++i) out << "in the beginning was the word and the word was " << i << "\n";
  }
  struct Work {
    std::vector<std::string> args;
    std::string at_work;                 // on stderr once at work ("": once it catches the signals)
    int first_ms = 50, second_ms = 600;  // the two points, after it is at work
  };
  const std::vector<std::string> run = {"run", "--model", "synthetic:tiny", "--prompt", "hi", "--tokens", "500",
                                        "--no-check", "--set", "ddr.model=ddr3", "--stop-at-capacity"};
  auto with = [](std::vector<std::string> v, std::initializer_list<std::string> more) {
    v.insert(v.end(), more);
    return v;
  };
  std::string clocks = "clock_mhz=50";
  for (int mhz = 55; mhz <= 250; mhz += 5) clocks += "," + std::to_string(mhz);
  const std::vector<Work> works = {
      {{"eval", "--model", "synthetic:tiny", "--text", text.string(), "--window", "256", "--threads", "1"}, "scoring"},
      {with(run, {"--fidelity", "cycle"}), "running on the simulated board"},
      {with(run, {"--fidelity", "fast"}), "running on the simulated board"},
      {{"run", "--prompt", "hi", "--tokens", "50", "--timing-only", "--no-cache", "--no-check", "--set",
        "ddr.model=ddr3", "--fidelity", "fast"},
       "loading", 100, 900},
      {{"sweep", "--grid", clocks, "--tokens", "4", "--jobs", "1", "--check-model", ""}, "sweep: 1 of 41"},
      {{"membench"}, "", 0, 100},  // under a second in all: its two points come early
      {{"validate"}, "T="},
      {{"calibrate"}, "T=512"},
      {{"regress"}, "regress: running", 300, 1500},
  };
  for (const Work& w : works)
    for (const auto& [sig, ms] : {std::pair{SIGINT, w.first_ms}, std::pair{SIGTERM, w.second_ms}}) {
      SCOPED_TRACE(w.args[0] + " " + w.args.back() + ", " + (sig == SIGINT ? "SIGINT" : "SIGTERM") + " after " +
                   std::to_string(ms) + " ms");
      TempDir out;
      const pid_t pid = spawn(w.args, out.path);
      if (w.at_work.empty()) ASSERT_TRUE(wait_for_handlers(pid)) << slurp(out.path / "stderr");
      else ASSERT_TRUE(wait_for(out.path, w.at_work, pid)) << slurp(out.path / "stderr");
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      ASSERT_EQ(::waitpid(pid, nullptr, WNOHANG), 0) << "ended before the signal: " << slurp(out.path / "stderr");
      const std::vector<pid_t> workers = children_of(pid);
      ::kill(pid, sig);
      const auto sent = std::chrono::steady_clock::now();
      const int code = wait_exit(pid);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
      EXPECT_EQ(code, 128 + sig) << slurp(out.path / "stderr");
      EXPECT_LT(s, 2.0) << "stopped " << s << " s after the signal";
      EXPECT_TRUE(has(slurp(out.path / "stderr"), std::string(sig == SIGINT ? "SIGINT" : "SIGTERM")))
          << slurp(out.path / "stderr");
      EXPECT_TRUE(has(slurp(out.path / "stderr"), "stopped by")) << slurp(out.path / "stderr");
      for (pid_t c : workers) EXPECT_FALSE(alive(c)) << "process " << c << " outlived " << w.args[0];
    }
}

TEST(Signal, ValidateStopsOnSigint) {
  TempDir d;
  const pid_t pid = spawn({"validate"}, d.path);
  ASSERT_TRUE(wait_for(d.path, "T=", pid)) << slurp(d.path / "stderr");
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid), 130);
  EXPECT_TRUE(has(slurp(d.path / "stderr"), "bitsim: stopped by SIGINT")) << slurp(d.path / "stderr");
  EXPECT_FALSE(has(slurp(d.path / "stdout"), "within 2%"));  // no table of half the rows as if complete
}

TEST(Signal, BenchStopsOnSigterm) {
  TempDir d;
  const fs::path json = d.path / "b.json";
  const pid_t pid = spawn({"bench", "--quick", "--json", json.string()}, d.path);
  ASSERT_TRUE(wait_for(d.path, "[1/6]", pid)) << slurp(d.path / "stderr");
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 143);
  EXPECT_TRUE(has(slurp(d.path / "stderr"), "bitsim: stopped by SIGTERM")) << slurp(d.path / "stderr");
  EXPECT_FALSE(fs::exists(json));  // no figures of an unfinished bench
}

}  // namespace
