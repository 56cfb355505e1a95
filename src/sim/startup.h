#pragma once
// Start-up: the model as the board runs it (ternarized, model/model_loader.h) and its K/V
// scales (the 144-token calibration pass, golden/board_reference.h), through the start-up
// cache (sim/cache_store.h) when one is given. Both depend only on the model's bytes and
// the calibration tokens, so both are content-addressed:
//
//   model identity  synthetic:SHAPE:SEED  -> ("synthetic", shape, seed, kSyntheticGeneratorVersion)
//                   a checkpoint folder   -> ContentHash of config.json and of model.safetensors
//                                            (the safetensors hash is itself memoized in the
//                                            cache under the file's path, size, mtime, device
//                                            and inode, so a warm start does not reread 2.9 GB)
//   "model" entry   key = H(kCacheVersion, "model", identity): the ternary model image
//                   (model/model_file.h), mapped on a hit
//   "kvscales"      key = H(kCacheVersion, "kvscales", identity, the calibration token ids):
//                   the K and V scales, one float each per (layer, head)
//   "layout"        key = H(kCacheVersion, "layout", identity, the layout's name): a form of
//                   the weights derived from the trits (model/derived_store.h, derived_store)
// The board config does not enter these keys: neither the model nor the scales depend on it
// (a layout that depends on the memory map names its parameters in its name).
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "golden/board_reference.h"
#include "model/derived_store.h"
#include "model/model_loader.h"
#include "model/tensor_source.h"
#include "sim/cache_store.h"

namespace bitsim::sim {

// The content identity of a model source (hex), see above. `store` (may be null) memoizes
// a checkpoint file's hash.
std::string model_identity(const model::TensorSource& source, CacheStore* store);

// The content hash of a file, memoized in `store` (may be null) under the file's absolute
// path, size, mtime (ns), device and inode: an unchanged file is not reread. Error naming
// the file if it cannot be read.
std::string file_content_hash(const std::filesystem::path& file, CacheStore* store);

struct StartupTimes {
  double load_s = 0, calibration_s = 0;
  bool model_cached = false, scales_cached = false;  // taken from the cache
};

class BackgroundStore;
// The ternary model of `source`: from the cache on a hit, else loaded and stored: at once,
// or with `background` on a helper thread that *background holds (its image views the
// returned model's arrays, which a move keeps in place: keep the model until it is joined).
// `identity` is model_identity(source); empty: not cached.
model::TernaryModel load_model(const model::TensorSource& source, const std::string& identity, int threads,
                               CacheStore* store, bool* cached = nullptr, BackgroundStore* background = nullptr);

// The K/V scales of `m` over `tokens`: from the cache on a hit, else computed by the
// calibration pass on the fast kernels (calibrate_kv_scales_fast, sim/fast_matvec.h: bit for
// bit the plain loop's scales) and stored. `identity` is model_identity() of m's source.
model::KvScales load_kv_scales(const model::TernaryModel& m, const std::string& identity,
                                const std::vector<int>& tokens, int threads, CacheStore* store,
                                bool* cached = nullptr);

// A cache entry written on a helper thread: the model image (926 MB for bitnet-large) is
// stored while start-up goes on with the calibration and the board. wait() or the
// destructor joins it; a SIGINT / SIGTERM abandons the write (CacheStore::put).
class BackgroundStore {
 public:
  BackgroundStore() = default;
  // Stores `image` (whose parts view memory the caller keeps alive until the join) as
  // entry (kind, key) of `store`.
  BackgroundStore(CacheStore& store, std::string kind, std::string key, model::ModelImage image);
  BackgroundStore(BackgroundStore&& o) noexcept = default;
  BackgroundStore& operator=(BackgroundStore&& o) noexcept;
  BackgroundStore(const BackgroundStore&) = delete;
  BackgroundStore& operator=(const BackgroundStore&) = delete;
  ~BackgroundStore() { wait(); }
  void wait();

 private:
  std::thread thread_;
};

// The start-up cache as the store of the layouts derived from one model
// (model/derived_store.h): entry kind "layout", key H(kCacheVersion, "layout", identity, the
// layout's name). Null if there is no store or no identity (a model that is not cached).
std::unique_ptr<model::DerivedStore> derived_store(CacheStore* store, const std::string& identity);

// Both, with status lines and times.
struct PreparedModel {
  model::TernaryModel model;
  model::KvScales scales;
  StartupTimes times;
  // The layouts derived from the model, kept in the start-up cache (null without one).
  std::unique_ptr<model::DerivedStore> derived;
  // The model's cache entry while it is written; its image views `model`'s arrays, so it
  // is declared after the model and joined before the model goes.
  BackgroundStore model_store;
};
PreparedModel prepare_model(const model::TensorSource& source, const std::vector<int>& calibration_tokens, int threads,
                       CacheStore* store, const std::function<void(const std::string&)>& status = {});

}  // namespace bitsim::sim
