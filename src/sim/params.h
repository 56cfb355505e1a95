#pragma once
// ParamSet: the board config as typed, documented, range-checked keys ("ddr.read_latency_ns").
// Every key is declared once (ParamSpec) with its type, default, range, unit, evidence
// label and meaning; a TOML file may set any of them, `set("key=value")` overrides, and
// `dump_toml()` prints the effective config with each key's documentation. An unknown key,
// a wrong type or a value out of range is a bitsim::Error naming the key (and the file).
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace bitsim::sim {

enum class ParamType { Real, Integer, Boolean, Text };

// Where a parameter's value comes from (printed next to it):
//   board      - measured on the real board or fixed by its datasheets/IP documentation
//   calibrated - fitted to a board measurement (CIRCUITS.md 6)
//   simulated  - a modelling choice of bitsim with no board measurement behind it
using ParamValue = std::variant<double, int64_t, bool, std::string>;

struct ParamSpec {
  std::string key;
  ParamType type = ParamType::Real;
  ParamValue value;                 // the default
  double min = 0, max = 0;          // inclusive range for Real and Integer (ignored when min > max)
  std::vector<std::string> choices; // allowed values for Text (empty: any)
  std::string unit;
  std::string evidence;             // board | calibrated | simulated
  std::string doc;                  // meaning and source, one line
};

class ParamSet {
 public:
  explicit ParamSet(std::vector<ParamSpec> specs);

  // Reads a TOML file; every key must be declared. Tables nest ("[ddr] read_latency_ns = 90").
  void load_toml(const std::filesystem::path& file);
  void load_toml_string(const std::string& text, const std::string& source);
  // "key=value"; the value is parsed as the key's type. Errors begin with `origin`, where
  // the assignment came from.
  // Booleans take true / false / 1 / 0, integers an integer ("16", not "16.0"), the same in
  // --set, a TOML file and the Python module (docs/errors.md, "Spellings of a value").
  void set(const std::string& assignment, const std::string& origin = "setting");
  void set_value(const std::string& key, const ParamValue& value, const std::string& source);

  double real(const std::string& key) const;
  int64_t integer(const std::string& key) const;
  bool boolean(const std::string& key) const;
  const std::string& text(const std::string& key) const;
  std::string to_string(const std::string& key) const;

  bool has(const std::string& key) const { return index_.count(key) != 0; }
  const ParamSpec& spec(const std::string& key) const;
  const std::vector<ParamSpec>& specs() const { return specs_; }
  std::vector<std::string> keys() const;
  // Keys whose values differ from their defaults.
  std::vector<std::string> changed() const;

  std::string dump_toml() const;              // effective config, documented
  std::string toml_value(const std::string& key) const;  // the key's value as TOML text ("125.0", "\"c\"")
  // `text` (a TOML config file as its author wrote it) with this set's values of `keys` in
  // place: each key's line keeps its place, its key spelling and its comment, and every other
  // line stays as it was; a key the text does not set is added after the last line of its
  // table, or in a new table at the end. Throws bitsim::Error naming `source` and the key when
  // the result would not read back as the text with those values (a key the text sets in a
  // form this cannot rewrite).
  std::string with_values_in(const std::string& text, const std::vector<std::string>& keys,
                             const std::string& source) const;
  std::map<std::string, std::string> flat() const;  // key -> value text

 private:
  ParamSpec& mut(const std::string& key, const std::string& source);
  // with_values_in's check: `after` reads back as `before` with this set's values of `keys`.
  void check_rewrite(const std::string& before, const std::string& after, const std::vector<std::string>& keys,
                     const std::string& source) const;
  // A TOML real: refused for an integer key (as --set refuses "16.0"), else set_value.
  void set_toml_real(const std::string& key, double value, const std::string& where);
  std::vector<ParamSpec> specs_;
  std::vector<ParamValue> defaults_;
  std::map<std::string, size_t> index_;
};

}  // namespace bitsim::sim
