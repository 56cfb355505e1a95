// SIGINT / SIGTERM during run, sweep, validate and bench: the real bitsim in a child
// process, the signal sent once it is at work, then its exit code (130 / 143), what it
// wrote (the trace of the tokens run, the sweep rows done marked partial), what it said on
// stderr, and no worker process left behind.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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

TEST(Signal, RunStopsOnSigintClosesTheTraceAndExits130) {
  TempDir d;
  const fs::path trace = d.path / "t.json";
  const pid_t pid = spawn({"run", "--model", "synthetic:tiny", "--prompt", "hi", "--tokens", "400", "--no-check",
                           "--fidelity", "cycle", "--trace", trace.string()},
                          d.path);
  ASSERT_TRUE(wait_for(d.path, "running on the simulated board", pid)) << slurp(d.path / "stderr");
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid), 130);
  const std::string err = slurp(d.path / "stderr");
  EXPECT_TRUE(has(err, "stopped by SIGINT after")) << err;
  EXPECT_TRUE(has(err, "the trace of them is in " + trace.string())) << err;
  const auto j = nlohmann::json::parse(slurp(trace));  // a whole document
  EXPECT_EQ(j["otherData"]["format"], "bitsim.trace/1");
  for (const auto& e : fs::directory_iterator(d.path))
    EXPECT_TRUE(e.path() == trace || e.path().filename() == "stdout" || e.path().filename() == "stderr") << e.path();
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
