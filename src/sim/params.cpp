#include "sim/params.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "base/error.h"
#include "base/file_io.h"
#include "base/parse_number.h"

namespace bitsim::sim {

namespace {

const char* type_name(ParamType t) {
  switch (t) {
    case ParamType::Real: return "a number";
    case ParamType::Integer: return "an integer";
    case ParamType::Boolean: return "true or false";
    case ParamType::Text: return "a string";
  }
  return "?";
}

std::string near_keys(const std::vector<ParamSpec>& specs, const std::string& key) {
  // Suggest the keys of the same table, or every table name.
  const auto dot = key.rfind('.');
  const std::string table = dot == std::string::npos ? "" : key.substr(0, dot + 1);
  std::vector<std::string> same;
  for (const auto& s : specs)
    if (!table.empty() && s.key.rfind(table, 0) == 0) same.push_back(s.key);
  if (same.empty()) {
    std::vector<std::string> tables;
    for (const auto& s : specs) {
      const auto d = s.key.find('.');
      const std::string t = d == std::string::npos ? s.key : s.key.substr(0, d);
      if (std::find(tables.begin(), tables.end(), t) == tables.end()) tables.push_back(t);
    }
    return fmt::format("valid tables: {}", fmt::join(tables, ", "));
  }
  return fmt::format("valid keys: {}", fmt::join(same, ", "));
}

std::string value_text(const ParamValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, double>) return fmt::format("{}", x);
        else if constexpr (std::is_same_v<T, int64_t>) return fmt::format("{}", x);
        else if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
        else return x;
      },
      v);
}

// "0..10000 ns", "c | python"; empty for a flag.
std::string range_text(const ParamSpec& s) {
  if (s.type == ParamType::Text) return fmt::format("{}", fmt::join(s.choices, " | "));
  if (s.type == ParamType::Boolean || s.min > s.max) return s.unit;
  return fmt::format("{}..{}{}", s.min, s.max, s.unit.empty() ? "" : " " + s.unit);
}

}  // namespace

ParamSet::ParamSet(std::vector<ParamSpec> specs) : specs_(std::move(specs)) {
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (!index_.emplace(specs_[i].key, i).second)
      throw Error(fmt::format("config: key '{}' declared twice", specs_[i].key));
    defaults_.push_back(specs_[i].value);
  }
}

const ParamSpec& ParamSet::spec(const std::string& key) const {
  auto it = index_.find(key);
  if (it == index_.end())
    throw Error(fmt::format("config: unknown key '{}' ({})", key, near_keys(specs_, key)));
  return specs_[it->second];
}

ParamSpec& ParamSet::mut(const std::string& key, const std::string& source) {
  auto it = index_.find(key);
  if (it == index_.end())
    throw Error(fmt::format("{}: unknown config key '{}' ({})", source, key, near_keys(specs_, key)));
  return specs_[it->second];
}

void ParamSet::set_value(const std::string& key, const ParamValue& value, const std::string& source) {
  ParamSpec& s = mut(key, source);
  ParamValue v = value;
  // Integers are accepted where reals are expected, and 1 and 0 where a flag is (as --set
  // takes "1" and "0"; docs/errors.md, "Spellings of a value").
  if (s.type == ParamType::Real && std::holds_alternative<int64_t>(v)) v = double(std::get<int64_t>(v));
  if (s.type == ParamType::Boolean && std::holds_alternative<int64_t>(v) &&
      (std::get<int64_t>(v) == 0 || std::get<int64_t>(v) == 1))
    v = std::get<int64_t>(v) == 1;
  if (s.type == ParamType::Integer && std::holds_alternative<double>(v)) {
    const double d = std::get<double>(v);
    if (d != std::floor(d) || std::fabs(d) > 9e15)
      throw Error(fmt::format("{}: config key '{}' must be {}, got {}", source, key, type_name(s.type), d));
    v = int64_t(d);
  }
  const bool ok = (s.type == ParamType::Real && std::holds_alternative<double>(v)) ||
                  (s.type == ParamType::Integer && std::holds_alternative<int64_t>(v)) ||
                  (s.type == ParamType::Boolean && std::holds_alternative<bool>(v)) ||
                  (s.type == ParamType::Text && std::holds_alternative<std::string>(v));
  if (!ok)
    throw Error(fmt::format("{}: config key '{}' must be {}, got '{}'", source, key, type_name(s.type), value_text(value)));
  if (s.min <= s.max && (s.type == ParamType::Real || s.type == ParamType::Integer)) {
    const double d = s.type == ParamType::Real ? std::get<double>(v) : double(std::get<int64_t>(v));
    if (!(d >= s.min && d <= s.max))
      throw Error(fmt::format("{}: config key '{}' = {} is out of range [{}, {}]{}", source, key,
                              value_text(v), s.min, s.max, s.unit.empty() ? "" : " " + s.unit));
  }
  if (s.type == ParamType::Text && !s.choices.empty() &&
      std::find(s.choices.begin(), s.choices.end(), std::get<std::string>(v)) == s.choices.end())
    throw Error(fmt::format("{}: config key '{}' = '{}' is not one of: {}", source, key,
                            std::get<std::string>(v), fmt::join(s.choices, ", ")));
  s.value = v;
}

void ParamSet::set_toml_real(const std::string& key, double value, const std::string& where) {
  // The spellings of --set: an integer key takes an integer ("100", not "100.0").
  if (mut(key, where).type == ParamType::Integer) {
    const bool whole = value == std::floor(value) && std::fabs(value) < 1e15;
    throw Error(fmt::format("{}: config key '{}' must be an integer, got {} (write it without a decimal point, as "
                            "a KEY=VALUE setting takes it)",
                            where, key, whole ? fmt::format("{:.1f}", value) : fmt::format("{}", value)));
  }
  set_value(key, value, where);
}

void ParamSet::set(const std::string& assignment, const std::string& origin) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error(fmt::format("{} '{}': expected KEY=VALUE", origin, assignment));
  const std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  const ParamSpec& s = mut(key, origin);
  const std::string source = origin + " " + key;
  switch (s.type) {
    case ParamType::Real:
      set_value(key, parse_real(text, source), source);
      break;
    case ParamType::Integer:
      set_value(key, parse_integer(text, source), source);
      break;
    case ParamType::Boolean:
      if (text == "true" || text == "1") set_value(key, true, source);
      else if (text == "false" || text == "0") set_value(key, false, source);
      else throw Error(fmt::format("{}: '{}' is not true or false", source, text));
      break;
    case ParamType::Text:
      set_value(key, text, source);
      break;
  }
}

void ParamSet::load_toml_string(const std::string& text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw Error(fmt::format("{}:{}:{}: TOML syntax error: {}", source, e.source().begin.line,
                            e.source().begin.column, e.description()));
  }
  // Where each key was set: TOML refuses a key twice in one table, but a quoted dotted key
  // ("clock.mhz" = 100 at the top) and a key of a table ([clock] mhz = 125) are two TOML
  // keys that name one config key.
  std::map<std::string, std::string> set_at;
  std::function<void(const toml::table&, const std::string&)> walk = [&](const toml::table& t, const std::string& prefix) {
    for (const auto& [k, node] : t) {
      const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
      const std::string where = fmt::format("{}:{}", source, node.source().begin.line);
      if (const auto* sub = node.as_table()) {
        walk(*sub, key);
        continue;
      }
      if (!has(key))
        throw Error(fmt::format("{}: unknown config key '{}' ({})", where, key, near_keys(specs_, key)));
      if (const auto [it, fresh] = set_at.emplace(key, where); !fresh)
        throw Error(fmt::format("{}: config key '{}' is set twice in one file: here and at {} (set it once)", where,
                                key, it->second));
      if (auto v = node.value_exact<double>()) set_toml_real(key, *v, where);
      else if (auto i = node.value_exact<int64_t>()) set_value(key, *i, where);
      else if (auto b = node.value_exact<bool>()) set_value(key, *b, where);
      else if (auto s = node.value_exact<std::string>()) set_value(key, *s, where);
      else throw Error(fmt::format("{}: config key '{}' has an unsupported TOML type", where, key));
    }
  };
  walk(root, "");
}

void ParamSet::load_toml(const std::filesystem::path& file) {
  load_toml_string(io::read_file(file, "config file", io::kMaxSmallFileBytes), file.string());
}

double ParamSet::real(const std::string& key) const { return std::get<double>(spec(key).value); }
int64_t ParamSet::integer(const std::string& key) const { return std::get<int64_t>(spec(key).value); }
bool ParamSet::boolean(const std::string& key) const { return std::get<bool>(spec(key).value); }
const std::string& ParamSet::text(const std::string& key) const { return std::get<std::string>(spec(key).value); }
std::string ParamSet::to_string(const std::string& key) const { return value_text(spec(key).value); }

std::vector<std::string> ParamSet::keys() const {
  std::vector<std::string> k;
  for (const auto& s : specs_) k.push_back(s.key);
  return k;
}

std::vector<std::string> ParamSet::changed() const {
  std::vector<std::string> k;
  for (size_t i = 0; i < specs_.size(); ++i)
    if (!(specs_[i].value == defaults_[i])) k.push_back(specs_[i].key);
  return k;
}

std::map<std::string, std::string> ParamSet::flat() const {
  std::map<std::string, std::string> m;
  for (const auto& s : specs_) m[s.key] = value_text(s.value);
  return m;
}

std::string ParamSet::dump_toml() const {
  // Keys grouped by table, tables in order of first appearance (TOML forbids reopening one).
  std::vector<std::string> tables;
  std::map<std::string, std::vector<const ParamSpec*>> by_table;
  for (const auto& s : specs_) {
    const auto dot = s.key.rfind('.');
    const std::string t = dot == std::string::npos ? "" : s.key.substr(0, dot);
    if (!by_table.count(t)) tables.push_back(t);
    by_table[t].push_back(&s);
  }
  std::string out;
  for (const auto& t : tables) {
    if (!t.empty()) out += fmt::format("\n[{}]\n", t);
    for (const ParamSpec* s : by_table[t]) {
      const auto dot = s->key.rfind('.');
      const std::string leaf = dot == std::string::npos ? s->key : s->key.substr(dot + 1);
      const std::string range = range_text(*s);
      out += fmt::format("# {} [{}{}]\n", s->doc, range.empty() ? "" : range + "; ", s->evidence);
      out += fmt::format("{} = {}\n", leaf, toml_value(s->key));
    }
  }
  return out;
}

std::string ParamSet::toml_value(const std::string& key) const {
  const ParamSpec& s = spec(key);
  std::string v = value_text(s.value);
  if (s.type == ParamType::Text) v = "\"" + v + "\"";
  if (s.type == ParamType::Real && v.find_first_of(".eE") == std::string::npos && v.find("inf") == std::string::npos &&
      v.find("nan") == std::string::npos)
    v += ".0";
  return v;
}

namespace {

std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}
// A name as TOML spells it, without quotes and blanks ("\"clock.mhz\"" -> clock.mhz).
std::string bare(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != '"' && c != '\'' && c != ' ' && c != '\t') out += c;
  return out;
}
// The table a header line opens ("[driver.c]" -> driver.c), or nothing.
std::optional<std::string> header_table(const std::string& line) {
  const std::string t = trimmed(line);
  if (t.size() < 2 || t[0] != '[' || t[1] == '[' || t.find(']') == std::string::npos) return std::nullopt;
  return bare(t.substr(1, t.find(']') - 1));
}
// The config key a line sets under `table`, or "" (a blank, a comment, a header).
std::string line_key(const std::string& line, const std::string& table) {
  const std::string t = trimmed(line);
  const auto eq = t.find('=');
  if (t.empty() || t[0] == '#' || t[0] == '[' || eq == std::string::npos) return "";
  const std::string key = bare(t.substr(0, eq));
  return table.empty() ? key : table + "." + key;
}
// The line with its value replaced, its key, its spacing and its comment kept.
std::string with_value(const std::string& line, const std::string& value) {
  const auto eq = line.find('=');
  size_t end = eq + 1;
  char quote = 0;
  for (; end < line.size(); ++end) {
    const char c = line[end];
    if (quote) quote = c == quote ? 0 : quote;
    else if (c == '"' || c == '\'') quote = c;
    else if (c == '#') break;
  }
  const auto last = line.find_last_not_of(" \t", end - 1);  // the value's end, before the comment
  return line.substr(0, eq + 1) + " " + value + line.substr(last + 1);
}

}  // namespace

std::string ParamSet::with_values_in(const std::string& text, const std::vector<std::string>& keys,
                                     const std::string& source) const {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::set<std::string> pending(keys.begin(), keys.end());  // keys not yet written into the text
  std::map<std::string, size_t> table_end;  // each table's last line
  std::string table;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (const auto t = header_table(lines[i])) {
      table = *t;
      table_end[table] = i;
    } else if (const std::string key = line_key(lines[i], table); !key.empty()) {
      table_end[table] = i;
      if (pending.erase(key)) lines[i] = with_value(lines[i], toml_value(key));
    }
  }
  for (const std::string& key : pending) {
    const auto dot = key.rfind('.');
    const std::string t = key.substr(0, dot), line = key.substr(dot + 1) + " = " + toml_value(key);
    if (const auto it = table_end.find(t); it != table_end.end()) {
      const size_t at = it->second + 1;
      lines.insert(lines.begin() + long(at), line);
      for (auto& [name, end] : table_end) end += end >= at ? 1 : 0;
      it->second = at;
    } else {
      lines.insert(lines.end(), {"", "[" + t + "]", line});
      table_end[t] = lines.size() - 1;
    }
  }
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  check_rewrite(text, out, keys, source);
  return out;
}

void ParamSet::check_rewrite(const std::string& before, const std::string& after, const std::vector<std::string>& keys,
                             const std::string& source) const {
  ParamSet was = *this, now = *this;
  was.load_toml_string(before, source);
  try {
    now.load_toml_string(after, source);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: the file with the new values would not read back ({}); set them by hand", source,
                            e.what()));
  }
  for (const std::string& key : this->keys()) {
    const bool ours = std::find(keys.begin(), keys.end(), key) != keys.end();
    if (now.to_string(key) != (ours ? to_string(key) : was.to_string(key)))
      throw Error(fmt::format("{}: config key '{}' is set in a form that cannot be rewritten in place; set it to {} "
                              "by hand",
                              source, key, ours ? to_string(key) : was.to_string(key)));
  }
}

}  // namespace bitsim::sim
