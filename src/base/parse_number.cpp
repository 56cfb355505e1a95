#include "base/parse_number.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <type_traits>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim {

namespace {

// "WHAT: " before a message, or nothing when the caller adds the name itself (CLI11).
std::string prefix(const std::string& what) { return what.empty() ? std::string() : what + ": "; }

// "[-]DIGITS": optional minus (when allowed), then one or more decimal digits, nothing else.
bool is_decimal_integer(const std::string& t, bool allow_minus) {
  size_t i = 0;
  if (allow_minus && !t.empty() && t[0] == '-') i = 1;
  if (i >= t.size()) return false;
  for (; i < t.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(t[i]))) return false;
  return true;
}

// The range as people read it: "0..511", "at least 1", or nothing for the full type range.
template <typename T>
std::string range_text(T min, T max) {
  const bool low = min != std::numeric_limits<T>::lowest(), high = max != std::numeric_limits<T>::max();
  if (low && high) return fmt::format("{}..{}", min, max);
  if (low) return fmt::format("at least {}", min);
  // An unsigned range from 0 reads "0..N": "at most N" would not say that "-0" is refused.
  if (high) return std::is_unsigned_v<T> ? fmt::format("{}..{}", min, max) : fmt::format("at most {}", max);
  return fmt::format("{}..{}", min, max);
}

template <typename T>
[[noreturn]] void out_of_range(const std::string& text, const std::string& what, const char* kind, T min, T max) {
  throw Error(fmt::format("{}'{}' is out of range: expected {} {}", prefix(what), text, kind, range_text(min, max)));
}

}  // namespace

int64_t parse_integer(const std::string& text, const std::string& what, int64_t min, int64_t max) {
  if (!is_decimal_integer(text, true))
    throw Error(fmt::format("{}'{}' is not a decimal integer{}", prefix(what), text,
                            " (expected " + range_text(min, max) + ")"));
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || v < min || v > max) out_of_range(text, what, "an integer", min, max);
  return v;
}

uint64_t parse_unsigned(const std::string& text, const std::string& what, uint64_t min, uint64_t max) {
  if (!is_decimal_integer(text, false)) {
    if (is_decimal_integer(text, true)) out_of_range(text, what, "an integer", min, max);  // negative
    throw Error(fmt::format("{}'{}' is not a decimal integer (expected {})", prefix(what), text, range_text(min, max)));
  }
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno == ERANGE || v < min || v > max) {
    out_of_range(text, what, "an integer", min, max);
  }
  return v;
}

double parse_real(const std::string& text, const std::string& what, double min, double max) {
  // Decimal notation only: [-]digits[.digits][e[+-]digits]; no hex floats, nan or inf.
  size_t i = 0, digits = 0;
  const size_t n = text.size();
  if (i < n && text[i] == '-') ++i;  // no '+', as for integers
  while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++digits;
  if (i < n && text[i] == '.') {
    ++i;
    while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++digits;
  }
  bool ok = digits > 0;
  if (ok && i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < n && (text[i] == '-' || text[i] == '+')) ++i;
    size_t exp_digits = 0;
    while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++exp_digits;
    ok = exp_digits > 0;
  }
  if (!ok || i != n) throw Error(fmt::format("{}'{}' is not a number (decimal notation expected)", prefix(what), text));
  errno = 0;
  const double v = std::strtod(text.c_str(), nullptr);
  if (errno == ERANGE || !std::isfinite(v) || v < min || v > max) {
    throw Error(fmt::format("{}'{}' is out of range: expected a finite number {}", prefix(what), text, range_text(min, max)));
  }
  return v;
}

}  // namespace bitsim
