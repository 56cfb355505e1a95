#include "sim/timing_cache.h"

#include <dlfcn.h>
#include <link.h>

#include <filesystem>
#include <type_traits>

#include "base/content_hash.h"
#include "base/error.h"
#include "sim/startup.h"

namespace bitsim::sim {

namespace {

// The file that holds bitsim's code: the running executable, or the shared object bitsim is
// linked into when that is not the executable (the Python module inside python3).
std::filesystem::path code_file() {
  Dl_info info;
  link_map* map = nullptr;
  if (::dladdr1(reinterpret_cast<void*>(&executable_identity), &info, reinterpret_cast<void**>(&map),
                RTLD_DL_LINKMAP) != 0 &&
      map != nullptr && map->l_name != nullptr && map->l_name[0] != '\0')
    return map->l_name;
  return "/proc/self/exe";
}

}  // namespace

std::string executable_identity(CacheStore* store) {
  std::error_code ec;
  const std::filesystem::path code = code_file();
  const std::filesystem::path self = std::filesystem::canonical(code, ec);
  return file_content_hash(ec ? code : self, store);
}

std::string timing_cache_key(const hw::BoardConfig& board, const std::string& executable) {
  model::ContentHash h;
  h.add(kCacheVersion).add("timing").add(executable);
  hw::BoardConfig copy = board;
  hw::BoardConfig::visit(copy, [&](auto& field, const bitsim::FieldInfo& f) {
    using T = std::decay_t<decltype(field)>;
    h.add(f.key);
    if constexpr (std::is_same_v<T, std::string>) {
      h.add(field);
    } else {
      static_assert(std::is_arithmetic_v<T> || std::is_enum_v<T>, "a BoardConfig field the key cannot hash");
      h.add(field);
    }
  });
  return h.hex();
}

size_t load_timing_cache(hw::FastBoard& fast, CacheStore& store, const std::string& key,
                         const std::function<void(const std::string&)>& warn) {
  const auto payload = store.get("timing", key);
  if (!payload) return 0;
  try {
    fast.import_timing(payload->data, payload->bytes);
  } catch (const Error& e) {
    if (warn) warn(fmt::format("start-up cache: the timing entry {} is not usable ({}); timing again", key, e.what()));
    return 0;
  }
  return fast.timing_entries_imported();
}

bool save_timing_cache(const hw::FastBoard& fast, CacheStore& store, const std::string& key) {
  if (fast.timing_entries() == fast.timing_entries_imported()) return false;
  return store.put("timing", key, fast.export_timing());
}

}  // namespace bitsim::sim
