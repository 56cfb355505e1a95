#include "cli/script_quote.h"

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::cli::script {

namespace {

bool is_control(char ch) { return (unsigned char)ch < 0x20 || (unsigned char)ch == 0x7f; }

}  // namespace

std::string printable(const std::string& s) {
  std::string p;
  for (char ch : s) {
    switch (ch) {
      case '\n': p += "\\n"; break;
      case '\r': p += "\\r"; break;
      case '\t': p += "\\t"; break;
      case '\\': p += "\\\\"; break;
      default:
        if (is_control(ch)) p += fmt::format("\\x{:02x}", (unsigned char)ch);
        else p += ch;
    }
  }
  return p;
}

void refuse_control_chars(const std::string& s, const std::string& what) {
  for (size_t i = 0; i < s.size(); ++i)
    if (is_control(s[i]))
      throw Error(fmt::format("{} \"{}\": holds a control character (0x{:02x} at byte {}), which a generated script "
                              "cannot carry (it would end a comment or an #SBATCH line)",
                              what, printable(s), (unsigned char)s[i], i));
}

std::string sh_word(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

std::string sbatch_word(const std::string& s) {
  std::string q = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') q += '\\';
    q += ch;
  }
  return q + "\"";
}

std::string slurm_pattern(const std::string& path, const std::string& what) {
  if (path.find('\\') != std::string::npos)
    throw Error(fmt::format("{} \"{}\": holds a backslash, which turns off Slurm's filename patterns (the array "
                            "task's %a of the log files) and is dropped from the name; choose a path without one",
                            what, printable(path)));
  std::string p;
  for (char ch : path) {
    if (ch == '%') p += '%';
    p += ch;
  }
  return p;
}

std::string comment_text(const std::string& s) {
  std::string c = s;
  for (char& ch : c)
    if (is_control(ch)) ch = '?';
  return c;
}

}  // namespace bitsim::cli::script
