#include "sim/startup.h"

#include <sys/resource.h>
#include <sys/syscall.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "base/content_hash.h"
#include "base/error.h"
#include "model/model_file.h"
#include "model/synthetic.h"
#include "sim/fast_matvec.h"

namespace bitsim::sim {

namespace fs = std::filesystem;

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ContentHash of a file's bytes; Error naming the file if it cannot be read.
std::string hash_file_bytes(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("{}: cannot open ({})", file.string(), std::strerror(errno)));
  model::ContentHash h;
  std::vector<uint8_t> buf(size_t(8) << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw Error(fmt::format("{}: read failed ({})", file.string(), why));
    }
    if (n == 0) break;
    h.update(buf.data(), size_t(n));
  }
  ::close(fd);
  return h.hex();
}

}  // namespace

std::string file_content_hash(const fs::path& file, CacheStore* store) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) throw Error(fmt::format("{}: cannot stat ({})", file.string(), std::strerror(errno)));
  if (!store) return hash_file_bytes(file);
  std::error_code ec;
  const fs::path abs = fs::absolute(file, ec);
  const std::string key = model::ContentHash()
                              .add(kCacheVersion)
                              .add("filehash")
                              .add((ec ? file : abs).string())
                              .add(uint64_t(st.st_size))
                              .add(int64_t(st.st_mtim.tv_sec))
                              .add(int64_t(st.st_mtim.tv_nsec))
                              .add(uint64_t(st.st_dev))
                              .add(uint64_t(st.st_ino))
                              .hex();
  if (auto p = store->get("filehash", key); p && p->bytes == 32) return std::string(reinterpret_cast<char*>(p->data), 32);
  const std::string hex = hash_file_bytes(file);
  store->put("filehash", key, std::vector<uint8_t>(hex.begin(), hex.end()));
  return hex;
}

namespace {
std::vector<uint8_t> scales_bytes(const model::KvScales& s) {
  // k, v (n each), then the per-channel K maxima (n * 96).
  const uint32_t n = uint32_t(s.k.size());
  std::vector<uint8_t> b(4 + size_t(n) * 8 + s.k_channel.size() * 4);
  std::memcpy(b.data(), &n, 4);
  std::memcpy(b.data() + 4, s.k.data(), size_t(n) * 4);
  std::memcpy(b.data() + 4 + size_t(n) * 4, s.v.data(), size_t(n) * 4);
  std::memcpy(b.data() + 4 + size_t(n) * 8, s.k_channel.data(), s.k_channel.size() * 4);
  return b;
}
}  // namespace

std::string model_identity(const model::TensorSource& source, CacheStore* store) {
  if (const auto* syn = dynamic_cast<const model::SyntheticSource*>(&source))
    return model::ContentHash()
        .add("synthetic")
        .add(model::shape_name(syn->shape()))
        .add(syn->seed())
        .add(model::kSyntheticGeneratorVersion)
        .hex();
  if (const auto* ck = dynamic_cast<const model::CheckpointSource*>(&source))
    return model::ContentHash()
        .add("checkpoint")
        .add(file_content_hash(ck->folder() / "config.json", store))
        .add(file_content_hash(ck->folder() / "model.safetensors", store))
        .hex();
  return {};  // another kind of source: not cached
}

BackgroundStore::BackgroundStore(CacheStore& store, std::string kind, std::string key, model::ModelImage image)
    : thread_([&store, kind = std::move(kind), key = std::move(key), image = std::move(image)] {
        // The lowest priority, for this thread alone (Linux: a thread's nice value is its
        // own): the write's copies into the page cache (about 30% of a cold start's samples)
        // then take a core only when the start-up's own threads leave one idle. A refusal
        // leaves the write at the normal priority, as before (docs/cache.md).
        (void)setpriority(PRIO_PROCESS, id_t(syscall(SYS_gettid)), 19);
        store.put(kind, key, image.parts);  // a failure is a warning: the run goes on without it
      }) {}

BackgroundStore& BackgroundStore::operator=(BackgroundStore&& o) noexcept {
  if (this != &o) {
    wait();
    thread_ = std::move(o.thread_);
  }
  return *this;
}

void BackgroundStore::wait() {
  if (thread_.joinable()) thread_.join();
}

namespace {
std::string model_key(const std::string& id) { return model::ContentHash().add(kCacheVersion).add("model").add(id).hex(); }

// The cached model, if the store has a good entry for it.
std::optional<model::TernaryModel> cached_model(const model::TensorSource& source, const std::string& key,
                                                CacheStore& store) {
  if (auto p = store.get("model", key)) {
    try {
      return model::model_from_image(source.config(), source.describe(), p->keep, p->data, p->bytes);
    } catch (const Error&) {
      // A verified entry of another shape cannot happen under this key; rebuild regardless.
    }
  }
  return std::nullopt;
}
}  // namespace

model::TernaryModel load_model(const model::TensorSource& source, const std::string& id, int threads,
                               CacheStore* store, bool* cached, BackgroundStore* background) {
  if (cached) *cached = false;
  if (!store || id.empty()) return model::load_ternary_model(source, threads);
  const std::string key = model_key(id);
  if (auto m = cached_model(source, key, *store)) {
    if (cached) *cached = true;
    return std::move(*m);
  }
  model::TernaryModel m = model::load_ternary_model(source, threads);
  if (background) *background = BackgroundStore(*store, "model", key, model::model_image(m));
  else store->put("model", key, model::model_image(m).parts);
  return m;
}

model::KvScales load_kv_scales(const model::TernaryModel& m, const std::string& identity,
                                const std::vector<int>& tokens, int threads, CacheStore* store, bool* cached) {
  if (cached) *cached = false;
  if (!store || identity.empty()) return calibrate_kv_scales_fast(m, tokens, threads);
  model::ContentHash h;
  h.add(kCacheVersion).add("kvscales+channels").add(identity).add(uint64_t(tokens.size()));
  h.update(tokens.data(), tokens.size() * sizeof(int));
  const std::string key = h.hex();
  const size_t n = size_t(m.config.num_layers) * size_t(m.config.num_kv_heads);  // per (layer, K/V head)
  const size_t nch = n * size_t(m.config.head_dim());  // per channel of each
  if (auto p = store->get("kvscales", key); p && p->bytes == 4 + n * 8 + nch * 4) {
    uint32_t count = 0;
    std::memcpy(&count, p->data, 4);
    if (count == n) {
      model::KvScales s;
      s.k.resize(n);
      s.v.resize(n);
      std::memcpy(s.k.data(), p->data + 4, n * 4);
      std::memcpy(s.v.data(), p->data + 4 + n * 4, n * 4);
      s.k_channel.resize(nch);
      std::memcpy(s.k_channel.data(), p->data + 4 + n * 8, nch * 4);
      if (cached) *cached = true;
      return s;
    }
  }
  model::KvScales s = calibrate_kv_scales_fast(m, tokens, threads);
  store->put("kvscales", key, scales_bytes(s));
  return s;
}

namespace {
// Each layout is stored on a helper thread beside the run (as the model entry is); the
// destructor joins them, then lets go of the parts' memory.
class CachedLayouts : public model::DerivedStore {
 public:
  CachedLayouts(CacheStore& store, std::string identity) : store_(store), identity_(std::move(identity)) {}
  ~CachedLayouts() override {
    for (auto& w : writes_) w.store.wait();
  }
  std::optional<Blob> get(const std::string& name) override {
    auto p = store_.get("layout", key(name));
    if (!p) return std::nullopt;
    return Blob{std::move(p->keep), p->data, p->bytes};
  }
  void put(const std::string& name, const std::vector<model::ImagePart>& parts, std::shared_ptr<const void> keep) override {
    model::ModelImage image;
    image.parts = parts;
    writes_.push_back({std::move(keep), BackgroundStore(store_, "layout", key(name), std::move(image))});
  }

 private:
  std::string key(const std::string& name) const {
    return model::ContentHash().add(kCacheVersion).add("layout").add(identity_).add(name).hex();
  }
  struct Write {
    std::shared_ptr<const void> keep;  // declared first: released after the write is joined
    BackgroundStore store;
  };
  CacheStore& store_;
  std::string identity_;
  std::vector<Write> writes_;
};
}  // namespace

std::unique_ptr<model::DerivedStore> derived_store(CacheStore* store, const std::string& identity) {
  if (!store || identity.empty()) return nullptr;
  return std::make_unique<CachedLayouts>(*store, identity);
}

PreparedModel prepare_model(const model::TensorSource& source, const std::vector<int>& calibration_tokens, int threads,
                       CacheStore* store, const std::function<void(const std::string&)>& status) {
  auto say = [&](const std::string& s) {
    if (status) status(s);
  };
  PreparedModel p;
  say(fmt::format("loading {} ...", source.describe()));
  auto t0 = Clock::now();
  const std::string id = store ? model_identity(source, store) : std::string();
  // A model built here is stored on a helper thread while the calibration runs.
  p.model = load_model(source, id, threads, store, &p.times.model_cached, &p.model_store);
  p.times.load_s = seconds_since(t0);
  if (p.times.model_cached) say(fmt::format("  the ternary model from the start-up cache ({:.2f} s)", p.times.load_s));
  say(fmt::format("calibrating K/V scales ({} tokens of the calibration text) ...", calibration_tokens.size()));
  t0 = Clock::now();
  p.scales = load_kv_scales(p.model, id, calibration_tokens, threads, store, &p.times.scales_cached);
  p.times.calibration_s = seconds_since(t0);
  if (p.times.scales_cached) say("  the K/V scales from the start-up cache");
  p.derived = derived_store(store, id);
  return p;
}

}  // namespace bitsim::sim
