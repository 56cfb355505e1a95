#pragma once
// Result records declared once: a record's fields in one list, each with its name (the JSON
// key and the CSV column), the member it reads and writes, and its CSV format. The JSON
// writer and reader and the CSV header and row of a record all follow from its list
// (provenance_fields(), sweep_point_fields(), eval_header_fields(), eval_row_fields(),
// eval_board_check_fields(), eval_compare_fields(), run_token_fields(), run_summary_fields()
// and the summary's nested objects (study/run_record.h), validation_row_fields(),
// fitted_parameter_fields(), bench_figure_fields(), bench_option_fields());
// tests/study/record_test.cpp checks docs/json-schemas.md against the lists.
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace bitsim::study {

template <typename R>
struct Field {
  const char* name;  // JSON key and CSV column
  std::variant<double R::*, int64_t R::*, uint64_t R::*, int R::*, std::string R::*, bool R::*,
               std::optional<bool> R::*, std::optional<double> R::*, std::optional<int> R::*,
               std::optional<std::string> R::*, std::vector<double> R::*>
      member;  // an empty optional is JSON null and an empty CSV cell
  const char* csv = "{}";  // the value's format in a CSV row (a list: each value, ';'-separated)
};

template <typename R>
using Fields = std::vector<Field<R>>;

// Every field of `r` into the JSON object `j`.
namespace record_detail {

template <typename T>
nlohmann::json json_of(const T& v) {
  return nlohmann::json(v);
}
template <typename T>
nlohmann::json json_of(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

template <typename T>
std::string csv_of(const char* format, const T& v) {
  return fmt::format(fmt::runtime(format), v);
}
// Text: as is, or quoted as RFC 4180 says when it holds a comma, a quote or a line break
// (e.g. a verdict "DOES NOT FIT (BRAM36 159 > 140, LUT 53272 > 53200)"), so that the row
// keeps its columns.
inline std::string csv_of(const char* format, const std::string& v) {
  const std::string text = fmt::format(fmt::runtime(format), v);
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string q = "\"";
  for (char c : text) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}
template <typename T>
std::string csv_of(const char* format, const std::optional<T>& v) {
  return v ? fmt::format(fmt::runtime(format), *v) : std::string();
}
template <typename T>
std::string csv_of(const char* format, const std::vector<T>& v) {
  std::string out;
  for (const T& x : v) out += (out.empty() ? "" : ";") + fmt::format(fmt::runtime(format), x);
  return out;
}

}  // namespace record_detail

template <typename R>
void record_to_json(const R& r, const Fields<R>& fields, nlohmann::json& j) {
  for (const auto& f : fields) std::visit([&](auto m) { j[f.name] = record_detail::json_of(r.*m); }, f.member);
}

template <typename R>
nlohmann::json record_json(const R& r, const Fields<R>& fields) {
  nlohmann::json j = nlohmann::json::object();
  record_to_json(r, fields, j);
  return j;
}

// A JSON array of records, one object each.
template <typename R>
nlohmann::json records_json(const std::vector<R>& records, const Fields<R>& fields) {
  nlohmann::json a = nlohmann::json::array();
  for (const R& r : records) a.push_back(record_json(r, fields));
  return a;
}

namespace record_detail {

inline bool has_type(const nlohmann::json& v, const double*) { return v.is_number(); }
inline bool has_type(const nlohmann::json& v, const int64_t*) { return v.is_number_integer(); }
inline bool has_type(const nlohmann::json& v, const int*) { return v.is_number_integer(); }
inline bool has_type(const nlohmann::json& v, const uint64_t*) { return v.is_number_unsigned(); }
inline bool has_type(const nlohmann::json& v, const std::string*) { return v.is_string(); }
inline bool has_type(const nlohmann::json& v, const bool*) { return v.is_boolean(); }
template <typename T>
bool has_type(const nlohmann::json& v, const std::optional<T>*) {
  return v.is_null() || has_type(v, static_cast<const T*>(nullptr));
}
template <typename T>
bool has_type(const nlohmann::json& v, const std::vector<T>*) {
  if (!v.is_array()) return false;
  for (const auto& x : v)
    if (!has_type(x, static_cast<const T*>(nullptr))) return false;
  return true;
}
inline const char* type_text(const double*) { return "a number"; }
inline const char* type_text(const int64_t*) { return "an integer"; }
inline const char* type_text(const int*) { return "an integer"; }
inline const char* type_text(const uint64_t*) { return "a count"; }
inline const char* type_text(const std::string*) { return "a string"; }
inline const char* type_text(const bool*) { return "true or false"; }
inline const char* type_text(const std::optional<bool>*) { return "true, false or null"; }
inline const char* type_text(const std::optional<double>*) { return "a number or null"; }
inline const char* type_text(const std::optional<int>*) { return "an integer or null"; }
inline const char* type_text(const std::optional<std::string>*) { return "a string or null"; }
inline const char* type_text(const std::vector<double>*) { return "a list of numbers"; }

template <typename T>
void read(const nlohmann::json& v, T& out) {
  out = v.template get<T>();
}
template <typename T>
void read(const nlohmann::json& v, std::optional<T>& out) {
  out = v.is_null() ? std::nullopt : std::optional<T>(v.get<T>());
}

}  // namespace record_detail

// Every field of `fields` from the JSON object `j` into `r`. A missing or mistyped field is
// a bitsim::Error "SOURCE: WHAT \"NAME\" missing or not a number" (`what`: "field",
// "provenance field", ...).
template <typename R>
void record_from_json(const nlohmann::json& j, const Fields<R>& fields, const std::string& source,
                      const std::string& what, R& r) {
  for (const auto& f : fields)
    std::visit(
        [&](auto m) {
          using T = std::remove_reference_t<decltype(r.*m)>;
          const T* tag = nullptr;
          if (!j.contains(f.name) || !record_detail::has_type(j[f.name], tag))
            throw Error(fmt::format("{}: {} \"{}\" missing or not {}", source, what, f.name,
                                    record_detail::type_text(tag)));
          record_detail::read(j[f.name], r.*m);
        },
        f.member);
}

// The CSV columns of the fields, comma-separated (no leading or trailing comma).
template <typename R>
std::string record_csv_header(const Fields<R>& fields) {
  std::string out;
  for (const auto& f : fields) out += (out.empty() ? "" : ",") + std::string(f.name);
  return out;
}

// One CSV row of `r`: every field in its format, comma-separated.
template <typename R>
std::string record_csv_row(const R& r, const Fields<R>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ",";
    std::visit([&](auto m) { out += record_detail::csv_of(fields[i].csv, r.*m); }, fields[i].member);
  }
  return out;
}

}  // namespace bitsim::study
