#pragma once
// The message of the bitsim::Error that `f` throws, or "" when it throws none (another
// exception goes on to fail the test).
#include <functional>
#include <string>

#include "base/error.h"

namespace bitsim::test {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace bitsim::test
