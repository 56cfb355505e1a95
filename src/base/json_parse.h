#pragma once
// JSON text read strictly: nlohmann's parser keeps the last of two equal keys of one object
// and drops the other silently (RFC 8259 leaves duplicates to the reader); every JSON file
// bitsim reads (config.json, a safetensors header, campaign files, regress baselines) goes
// through here and refuses them.
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace bitsim::io {

// Parses `text` as Json::parse does (its exceptions, parse_error among them, escape as
// they do); an object holding one key twice is a bitsim::Error "SOURCE: the key 'K' appears
// twice in one object (in "A"."B")" (no "SOURCE: " when `source` is empty).
template <class Json = nlohmann::json>
Json parse_json_unique_keys(std::string_view text, const std::string& source) {
  struct Level {
    std::set<std::string> keys;
    std::string last;  // the key being read, for the path of the objects inside it
  };
  std::vector<Level> objects;
  const typename Json::parser_callback_t check = [&](int, typename Json::parse_event_t event, Json& parsed) {
    using E = typename Json::parse_event_t;
    if (event == E::object_start) {
      objects.emplace_back();
    } else if (event == E::object_end) {
      if (!objects.empty()) objects.pop_back();
    } else if (event == E::key && !objects.empty()) {
      std::string k = parsed.template get<std::string>();
      if (!objects.back().keys.insert(k).second) {
        std::string path;
        for (size_t i = 0; i + 1 < objects.size(); ++i)
          path += (path.empty() ? "" : ".") + Json(objects[i].last).dump();
        throw Error(fmt::format("{}the key {} appears twice in one object ({}): one of the two would be ignored",
                                source.empty() ? "" : source + ": ", Json(k).dump(),
                                path.empty() ? "the top level" : "in " + path));
      }
      objects.back().last = std::move(k);
    }
    return true;
  };
  return Json::parse(text, check);
}

}  // namespace bitsim::io
