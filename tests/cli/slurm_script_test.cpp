// `bitsim sweep --slurm-script`: every string that reaches the generated script (the campaign
// folder, the script's path, the config's path, the partition, the --set and --grid words,
// the check model) lands as exactly the one word it was, in each place it lands: a shell
// word (checked by running the script's two branches under bash and capturing the argv of
// every command they start), an #SBATCH word (checked with Slurm's rules for those lines) and
// a Slurm filename pattern (% as %%). A string with a control character is refused, exit 2
// naming its option, and no script is written (cli/script_quote.h).
#include "cli/script_quote.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "support/run_argv.h"
#include "support/temp_dir.h"

namespace bitsim::cli {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

using bitsim::testing::Outcome;
using bitsim::testing::run_argv;

// The words of an #SBATCH line (after "#SBATCH") as sbatch reads them: whitespace separates
// words, '...' and "..." quote, \ takes the next character as it is (in quotes too), an
// unquoted # ends the line (Slurm 22.05's _get_argument in src/sbatch/opt.c; the slurm test,
// tests/slurm, runs such a line on the real daemons). nullopt for an unterminated quote.
std::optional<std::vector<std::string>> sbatch_words(const std::string& line) {
  std::vector<std::string> words;
  size_t i = 0;
  while (true) {
    while (i < line.size() && std::isspace((unsigned char)line[i])) ++i;
    if (i == line.size() || line[i] == '#') return words;
    std::string w;
    char quote = 0;
    while (i < line.size() && (quote || !std::isspace((unsigned char)line[i]))) {
      const char ch = line[i++];
      if (ch == '\\') {
        if (i == line.size()) return std::nullopt;
        w += line[i++];
      } else if (quote) {
        if (ch == quote) quote = 0;
        else w += ch;
      } else if (ch == '"' || ch == '\'') {
        quote = ch;
      } else if (ch == '#') {
        words.push_back(w);
        return words;
      } else {
        w += ch;
      }
    }
    if (quote) return std::nullopt;
    words.push_back(w);
  }
}

// The path a Slurm filename pattern names for array task `task`: %% is %, %a the task;
// any other pattern stays visible as "<%x>" (so that a comparison with a path fails).
std::string expand_pattern(const std::string& p, int task) {
  std::string path;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '%') {
      path += p[i];
    } else if (i + 1 < p.size() && p[i + 1] == '%') {
      path += '%';
      ++i;
    } else if (i + 1 < p.size() && p[i + 1] == 'a') {
      path += std::to_string(task);
      ++i;
    } else {
      path += "<%" + (i + 1 < p.size() ? std::string(1, p[i + 1]) : std::string()) + ">";
      ++i;
    }
  }
  return path;
}

// A file of NUL-separated words (what `printf '%s\0' "$@"` wrote).
std::vector<std::string> nul_words(const fs::path& p) {
  const std::string text = read(p);
  std::vector<std::string> w;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find('\0', at);
    w.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return w;
}

std::string joined(const std::vector<std::string>& w) {
  std::string s;
  for (const auto& x : w) s += "[" + script::printable(x) + "]";
  return s;
}

// The word after `flag=` among `words`, or nullopt.
std::optional<std::string> value_of(const std::vector<std::string>& words, const std::string& flag) {
  for (const auto& w : words)
    if (w.rfind(flag + "=", 0) == 0) return w.substr(flag.size() + 1);
  return std::nullopt;
}

// Names a user may give a folder, a file or a partition that a shell, sbatch or Slurm's
// patterns would take as code or split: every one must come back as the word it was.
// "PWNED" is the canary a string that leaves its quotes would create in the working folder.
const std::vector<std::string>& hostile_names() {
  static const std::vector<std::string> names = {
      "a b",
      "  two  spaces  ",
      "q'uote",
      "d\"quote",
      "'\"'\"'",
      "$(touch PWNED)",
      "`touch PWNED`",
      ";touch PWNED;#",
      "&& touch PWNED",
      "| touch PWNED",
      "> PWNED",
      "%a%j%%%",
      "%",
      "100%%",
      "h#ash # x",
      "#SBATCH --mem=1",
      "*?[a]{b,c}~",
      "!! !$",
      "-x",
      "${IFS}$HOME$0$1",
      "\u00e9-\u00fc-\u4e2d",
      "hetjob packjob",
      "x\" --wrap=\"touch PWNED",
      "x' ; touch PWNED ; '",
      "back\\slash \\' \\\" \\$(touch PWNED)",  // not in the campaign folder (refused there)
      "all: '\"$`;&|<>()*?[]{}~!#% \u00e9",
  };
  return names;
}

struct Generated {
  fs::path out, script, config;
  std::string partition;
  Outcome run;
};

// `bitsim sweep --slurm-script` with `name` in the campaign folder (its backslashes as _: a
// Slurm filename pattern cannot hold one), the script's name, the config's name and the
// partition; --set with a valid value.
Generated generate(const fs::path& root, const fs::path& scratch, const std::string& name, size_t k) {
  Generated g;
  const fs::path dir = root / ("case" + std::to_string(k));
  fs::create_directories(dir);
  std::string out_name = name;
  for (char& ch : out_name)
    if (ch == '\\') ch = '_';
  g.out = dir / ("o" + out_name);
  g.script = dir / ("s" + name + ".sh");
  g.config = dir / ("c" + name + ".toml");
  g.partition = "p" + name;
  fs::copy_file(fs::path(BITSIM_SOURCE_DIR) / "configs" / "pynq-z2.toml", g.config);
  g.run = run_argv({BITSIM_BINARY, "sweep", "--grid", "clock_mhz=100,125", "--set", "ddr.wall_gb_s=1.5", "--tokens",
                    "1", "--context", "1", "--check-model", "", "--config", g.config.string(), "--out", g.out.string(),
                    "--slurm-script", g.script.string(), "--partition", g.partition, "--shards", "2", "--quiet"},
                   dir, scratch);
  return g;
}

// The script's #SBATCH lines, their words as sbatch reads them; every line before the first
// command is a comment or a directive.
std::vector<std::vector<std::string>> sbatch_lines(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::vector<std::vector<std::string>> out;
  std::getline(in, line);
  EXPECT_EQ(line, "#!/bin/bash");
  while (std::getline(in, line) && line != "set -euo pipefail") {
    EXPECT_EQ(line.substr(0, 1), "#") << "a line before the script's first command is not a comment: " << line;
    if (line.rfind("#SBATCH", 0) != 0) continue;
    const auto words = sbatch_words(line.substr(7));
    EXPECT_TRUE(words.has_value()) << "unterminated quote: " << line;
    EXPECT_EQ(words ? words->size() : 0u, 1u) << "an #SBATCH line that is not one word: " << line;
    if (words) out.push_back(*words);
  }
  EXPECT_EQ(line, "set -euo pipefail");
  return out;
}

TEST(SlurmScript, EveryHostileStringLandsAsTheWordItWas) {
  test::MadeTempDir root;
  const fs::path scratch = root.path / "scratch", bin = root.path / "bin", calls = root.path / "calls";
  fs::create_directories(scratch);
  fs::create_directories(bin);
  // sbatch as the submit branch calls it: each call's argv into calls/N, job id 41 + N.
  write(bin / "sbatch",
        "#!/bin/bash\nn=$(ls \"$SBATCH_CALLS\" | wc -l)\nprintf '%s\\0' \"$@\" > \"$SBATCH_CALLS/$n\"\necho $((41 + n))\n");
  fs::permissions(bin / "sbatch", fs::perms::owner_all);
  const std::string exe = fs::canonical(BITSIM_BINARY).string();
  const std::string path_env = "PATH=" + bin.string() + ":" + std::string(std::getenv("PATH"));

  size_t k = 0;
  for (const auto& name : hostile_names()) {
    SCOPED_TRACE("name [" + name + "]");
    const Generated g = generate(root.path, scratch, name, k);
    const fs::path dir = root.path / ("case" + std::to_string(k++));
    ASSERT_EQ(g.run.code, 0) << g.run.err;
    const std::string text = read(g.script);

    // bash reads it.
    EXPECT_EQ(run_argv({"/bin/bash", "-n", g.script.string()}, dir, scratch).code, 0) << text;

    // sbatch reads each directive as one word; --output names OUT/logs/shard-K.out for task K.
    const auto directives = sbatch_lines(text);
    std::vector<std::string> flat;
    for (const auto& d : directives) flat.insert(flat.end(), d.begin(), d.end());
    const auto output = value_of(flat, "--output");
    ASSERT_TRUE(output.has_value()) << text;
    EXPECT_EQ(expand_pattern(*output, 1), (g.out / "logs" / "shard-1.out").string()) << text;
    EXPECT_EQ(value_of(flat, "--partition"), g.partition) << text;
    EXPECT_EQ(value_of(flat, "--array"), "0-1%4") << text;

    // The submit branch: the array, then the merge, each sbatch call with its words intact.
    fs::remove_all(calls);
    fs::create_directories(calls);
    Outcome r = run_argv({"/bin/bash", g.script.string()}, dir, scratch, {path_env, "SBATCH_CALLS=" + calls.string()});
    ASSERT_EQ(r.code, 0) << r.err << text;
    EXPECT_EQ(r.out, "array job 41 (2 tasks), merge job 42 (after every task succeeded)\n");
    const auto array_call = nul_words(calls / "0"), merge_call = nul_words(calls / "1");
    EXPECT_EQ(joined(array_call), joined({"--parsable", g.script.string()}));
    ASSERT_GE(merge_call.size(), 2u);
    EXPECT_EQ(value_of(merge_call, "--partition"), g.partition) << joined(merge_call);
    const auto merge_output = value_of(merge_call, "--output");
    ASSERT_TRUE(merge_output.has_value()) << joined(merge_call);
    EXPECT_EQ(expand_pattern(*merge_output, 0), (g.out / "logs" / "merge.out").string());
    EXPECT_EQ(value_of(merge_call, "--dependency"), "afterok:41");
    ASSERT_EQ(merge_call[merge_call.size() - 2], "--wrap");
    const std::string wrap = merge_call.back();
    // The merge job's command as /bin/sh (what sbatch --wrap runs) splits it.
    r = run_argv({"/bin/sh", "-c", "printf '%s\\0' " + wrap + " > \"$ARGS\"", "sh"}, dir, scratch,
                 {"ARGS=" + (scratch / "wrap").string()});
    ASSERT_EQ(r.code, 0) << r.err << wrap;
    EXPECT_EQ(joined(nul_words(scratch / "wrap")),
              joined({exe, "sweep", "merge", g.out.string(), "--csv", (g.out / "merged.csv").string(), "--json",
                      (g.out / "merged.json").string()}));

    // An array task: the command it starts, word for word.
    r = run_argv({"/bin/bash", "-c", "exec() { printf '%s\\0' \"$@\" > \"$ARGS\"; }; . \"$1\"", "bash",
                  g.script.string()},
                 dir, scratch, {"SLURM_ARRAY_TASK_ID=1", "SLURM_ARRAY_TASK_COUNT=2", "ARGS=" + (scratch / "task").string()});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(joined(nul_words(scratch / "task")),
              joined({exe, "sweep",
                      "--grid", "clock_mhz=100,125", "--tokens", "1", "--context", "1", "--shape", "bitnet-large", "--check-model", "",
                      "--config", g.config.string(), "--set", "ddr.wall_gb_s=1.5", "--out", g.out.string(),
                      "--resume", "--quiet", "--jobs", "1"}));
    EXPECT_FALSE(fs::exists(dir / "PWNED"));
    EXPECT_FALSE(fs::exists(g.out / "PWNED"));
  }
}

// One folder with every hostile character, end to end: both array tasks run (bitsim itself,
// from the script), then the merge job's command, into the campaign folder of that name.
TEST(SlurmScript, AHostileCampaignFolderRunsAndMergesWhereItSays) {
  test::MadeTempDir root;
  const fs::path scratch = root.path / "scratch";
  fs::create_directories(scratch);
  const std::string name = hostile_names().back();
  const Generated g = generate(root.path, scratch, name, 0);
  ASSERT_EQ(g.run.code, 0) << g.run.err;
  const fs::path dir = root.path / "case0";
  for (int task = 0; task < 2; ++task) {
    const Outcome r = run_argv({"/bin/bash", g.script.string()}, dir, scratch,
                           {"SLURM_ARRAY_TASK_ID=" + std::to_string(task), "SLURM_ARRAY_TASK_COUNT=2"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("shard " + std::to_string(task) + "/2 (the Slurm array task)"), std::string::npos) << r.out;
  }
  // The merge job's command, as sbatch --wrap would run it.
  const std::string text = read(g.script);
  const Outcome wrap = run_argv({"/bin/bash", "-c", "exec() { :; }; sbatch() { :; }; . \"$1\" >/dev/null; printf %s \"$MERGE\"",
                             "bash", g.script.string()},
                            dir, scratch, {"SLURM_ARRAY_TASK_ID=0", "SLURM_ARRAY_TASK_COUNT=2"});
  ASSERT_EQ(wrap.code, 0) << wrap.err;
  const Outcome merge = run_argv({"/bin/sh", "-c", wrap.out}, dir, scratch);
  ASSERT_EQ(merge.code, 0) << merge.err << merge.out;
  EXPECT_NE(merge.out.find("complete: all 2 points"), std::string::npos) << merge.out;
  EXPECT_TRUE(fs::is_regular_file(g.out / "merged.csv"));
  EXPECT_TRUE(fs::is_regular_file(g.out / "merged.json"));
  EXPECT_FALSE(fs::exists(dir / "PWNED"));
}

// A control character in any string that reaches the script: exit 2 naming the option, and
// nothing written. A backslash in the campaign folder (it would turn off Slurm's patterns) too.
TEST(SlurmScript, AControlCharacterInAnyScriptStringIsRefusedNamingItsOption) {
  test::MadeTempDir root;
  const fs::path scratch = root.path / "scratch";
  fs::create_directories(scratch);
  const fs::path config = root.path / "ok.toml";
  fs::copy_file(fs::path(BITSIM_SOURCE_DIR) / "configs" / "pynq-z2.toml", config);
  const std::vector<std::string> controls = {"\n", "\r", "\t", "\x1b", "\x7f", "\x01", "\v", "\f"};
  int cases = 0;
  for (const auto& c : controls) {
    const std::string bad = "x" + c + "touch PWNED #";
    // A config file of that name exists, so that only the script refuses it.
    const fs::path bad_config = root.path / ("c" + bad + ".toml");
    fs::copy_file(config, bad_config, fs::copy_options::overwrite_existing);
    struct Case {
      std::string option;
      std::vector<std::string> args;
    };
    const std::vector<Case> table = {
        {"--out", {"--out", (root.path / bad).string()}},
        {"--slurm-script", {"--slurm-script", (root.path / (bad + ".sh")).string()}},
        {"--partition", {"--partition", bad}},
        {"--config", {"--config", bad_config.string()}},
        {"--check-model", {"--check-model", bad}},
        {"--set", {"--set", "ddr.wall_gb_s=1.5" + c}},
        {"--grid", {"--grid", "dma.length_bits=20,23" + c}},
    };
    for (const auto& t : table) {
      SCOPED_TRACE(t.option + " with control character " + script::printable(c));
      std::vector<std::string> argv = {BITSIM_BINARY, "sweep", "--grid", "clock_mhz=100", "--tokens", "1", "--context",
                                       "1", "--quiet", "--shards", "1"};
      if (t.option != "--out") argv.insert(argv.end(), {"--out", (root.path / "c").string()});
      if (t.option != "--slurm-script") argv.insert(argv.end(), {"--slurm-script", (root.path / "s.sh").string()});
      if (t.option != "--check-model") argv.insert(argv.end(), {"--check-model", ""});
      argv.insert(argv.end(), t.args.begin(), t.args.end());
      const Outcome r = run_argv(argv, root.path, scratch);
      EXPECT_EQ(r.code, 2) << r.err;
      EXPECT_NE(r.err.find(t.option), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
      EXPECT_FALSE(fs::exists(root.path / "s.sh"));
      EXPECT_FALSE(fs::exists(root.path / (bad + ".sh")));
      EXPECT_FALSE(fs::exists(root.path / "PWNED"));
      ++cases;
    }
  }
  EXPECT_EQ(cases, 56);

  // The issue's example, word for word.
  Outcome r = run_argv({BITSIM_BINARY, "sweep", "--grid", "clock_mhz=100,125", "--tokens", "1", "--context", "1",
                    "--check-model", "", "--out", "c1\ntouch /tmp/PWNED #", "--slurm-script", "c1.sh"},
                   root.path, scratch);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--out \"c1\\ntouch /tmp/PWNED #\": holds a control character (0x0a at byte 2)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(root.path / "c1.sh"));

  // A working folder with a newline reaches the script through a relative --out.
  const fs::path odd = root.path / "w\nd";
  fs::create_directories(odd);
  r = run_argv({BITSIM_BINARY, "sweep", "--grid", "clock_mhz=100", "--tokens", "1", "--context", "1", "--shape", "bitnet-large", "--check-model",
                "", "--out", "c", "--slurm-script", (root.path / "s.sh").string()},
               odd, scratch);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--out \"" + root.path.string() + "/w\\nd/c\": holds a control character"), std::string::npos)
      << r.err;

  // A backslash in the campaign folder: Slurm would drop it and expand no %a.
  r = run_argv({BITSIM_BINARY, "sweep", "--grid", "clock_mhz=100", "--tokens", "1", "--context", "1", "--shape", "bitnet-large", "--check-model",
                "", "--out", "back\\slash", "--slurm-script", (root.path / "s.sh").string()},
               root.path, scratch);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--out \"back\\\\slash\": holds a backslash"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(root.path / "s.sh"));
}

// The quoting functions on their own: each one's output read back by the reader of its place.
TEST(SlurmScript, EachQuotingReadsBackAsTheString) {
  for (const auto& name : hostile_names()) {
    const std::string with_backslash = name + "\\x\\\\";
    const auto words = sbatch_words(" --partition=" + script::sbatch_word(with_backslash) + "  # comment");
    ASSERT_TRUE(words.has_value());
    ASSERT_EQ(words->size(), 1u) << name;
    EXPECT_EQ((*words)[0], "--partition=" + with_backslash);
    if (name.find('\\') == std::string::npos) EXPECT_EQ(expand_pattern(script::slurm_pattern(name, "--out"), 0), name);
    EXPECT_EQ(script::comment_text("a\nb\x7f" + name), "a?b?" + name);
  }
  EXPECT_EQ(script::sh_word("it's"), "'it'\\''s'");
  EXPECT_THROW(script::slurm_pattern("a\\b", "--out"), Error);
  EXPECT_THROW(script::refuse_control_chars("a\x1f", "--out"), Error);
  EXPECT_NO_THROW(script::refuse_control_chars("\u00e9 \x20~", "--out"));
}

}  // namespace
}  // namespace bitsim::cli
