#pragma once
// bitsim::Error: the one exception type for bad input (files, tensors, keys, fields,
// registers). Its message always names the thing at fault; the CLI prints it and exits 2.
#include <stdexcept>
#include <string>

namespace bitsim {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace bitsim
