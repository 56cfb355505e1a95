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

// An Error about one field of a request or one setting that the caller filled in: field()
// names it ("legacy_attention", "cache.max_gb"), detail() says what is wrong, and what() is
// "FIELD: DETAIL". The CLI names the option that fills the field instead (cli/options.h).
class FieldError : public Error {
 public:
  FieldError(const std::string& field, const std::string& detail)
      : Error(field + ": " + detail), field_(field), detail_(detail) {}
  const std::string& field() const { return field_; }
  const std::string& detail() const { return detail_; }

 private:
  std::string field_, detail_;
};

}  // namespace bitsim
