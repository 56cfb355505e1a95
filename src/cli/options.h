#pragma once
// Number options of the bitsim command: CLI11 validators that read the text with the one
// strict parser (base/parse_number.h: decimal, the whole text, the range; no octal, no
// wrap, no saturation, no nan) and hand CLI11 the canonical decimal, so that CLI11's own
// conversion never sees a text it could read differently.
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "base/error.h"
#include "base/parse_number.h"

namespace bitsim::cli {

inline CLI::Validator integer_in(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& s) -> std::string {
        try {
          s = std::to_string(parse_integer(s, "", min, max));
          return {};
        } catch (const Error& e) {
          return e.what();
        }
      },
      fmt::format("INT in {}..{}", min, max));
}

inline CLI::Validator unsigned_in(uint64_t min, uint64_t max) {
  return CLI::Validator(
      [min, max](std::string& s) -> std::string {
        try {
          s = std::to_string(parse_unsigned(s, "", min, max));
          return {};
        } catch (const Error& e) {
          return e.what();
        }
      },
      fmt::format("UINT in {}..{}", min, max));
}

inline CLI::Validator real_in(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& s) -> std::string {
        try {
          (void)parse_real(s, "", min, max);
          return {};
        } catch (const Error& e) {
          return e.what();
        }
      },
      fmt::format("NUMBER in {}..{}", min, max));
}

}  // namespace bitsim::cli
