#pragma once
// Strings that land in a generated script (`bitsim sweep --slurm-script`), each quoted for the
// place it lands: a word of a POSIX shell, a word of an `#SBATCH` line (Slurm's own quoting:
// '...' or "..." with \ escaping the next character, an unquoted # starting a comment), a
// Slurm filename pattern (`%` as `%%`). A string holding a control character is refused
// before any of that: no quoting keeps a newline out of a comment or an `#SBATCH` line.
#include <string>

namespace bitsim::cli::script {

// The string as it can be shown in a message: control characters and \ as C escapes.
std::string printable(const std::string& s);

// Refuses (bitsim::Error naming `what`, e.g. "--out", and the byte) a string with a control
// character (0x00-0x1f, 0x7f).
void refuse_control_chars(const std::string& s, const std::string& what);

// One word for a POSIX shell (bash, /bin/sh): single-quoted, ' as '\''.
std::string sh_word(const std::string& s);

// One word of an `#SBATCH` line: double-quoted, " and \ escaped with \.
std::string sbatch_word(const std::string& s);

// A path as a Slurm filename pattern (--output, --error) that names exactly that path: % as %%.
// Refuses a path with a backslash (naming `what`): Slurm turns off every pattern of a name
// that holds one (the array's %a among them) and drops the backslash.
std::string slurm_pattern(const std::string& path, const std::string& what);

// Text for a comment line: control characters (say, of a host name) as '?'.
std::string comment_text(const std::string& s);

}  // namespace bitsim::cli::script
