#pragma once
// The one strict number parser of bitsim: every number a user types (CLI options, config
// values set on the command line, sweep grid values, synthetic:NAME:SEED, a VCD window)
// goes through these. A number is read in decimal only (a leading 0 is not octal, no 0x),
// the whole text must be the number (no trailing characters, no spaces), and it must lie
// in [min, max]: nothing wraps ("-1" as an unsigned value) or saturates (a 20-digit seed).
// Reals must be finite (no nan, no inf). A failure is a bitsim::Error that begins with
// `what` (the option or key) and says what was expected.
#include <cstdint>
#include <limits>
#include <string>

namespace bitsim {

int64_t parse_integer(const std::string& text, const std::string& what,
                      int64_t min = std::numeric_limits<int64_t>::min(),
                      int64_t max = std::numeric_limits<int64_t>::max());
uint64_t parse_unsigned(const std::string& text, const std::string& what, uint64_t min = 0,
                        uint64_t max = std::numeric_limits<uint64_t>::max());
double parse_real(const std::string& text, const std::string& what,
                  double min = -std::numeric_limits<double>::max(),
                  double max = std::numeric_limits<double>::max());

}  // namespace bitsim
