#pragma once
// The persistent timing cache: the fast board's batch timings (hw::FastBoard's timing
// cache: each batch shape's register timeline, taken from one run of the clocked board)
// kept in the start-up cache (sim/cache_store.h) as a "timing" entry, so that a run with a
// board config and a bitsim build seen before replays every shape seen before without
// running the clocked board again (the first token, and every new context T of the
// attention unit, are what cost time otherwise).
//
//   "timing" entry  key = H(kCacheVersion, "timing", this executable's content hash,
//                   every field of the hw::BoardConfig by key)
//
// The executable's content hash (memoized under its path and stat identity like a
// checkpoint's) keys the entries to the build: a rebuilt bitsim, whose clocked modules may
// time differently, never reads another build's timings. Within one build the batch key
// already holds all a batch's timing depends on besides the board config (FastBoard).
// A run that timed new shapes stores the union of what it read and what it timed.
#include <functional>
#include <string>

#include "hw/board.h"
#include "hw/fast/fast_board.h"
#include "sim/cache_store.h"

namespace bitsim::sim {

// The content hash of the running executable (/proc/self/exe), or of the shared object that
// holds bitsim's code when that is another file (the Python module), memoized in `store`.
std::string executable_identity(CacheStore* store);

// The key of the timing entry for `board` built by the executable `executable`.
std::string timing_cache_key(const hw::BoardConfig& board, const std::string& executable);

// Loads the entry into `fast` (a miss loads nothing). An entry that does not import (it
// cannot happen unless the file was damaged after its checksum) is warned about and
// ignored. Returns the entries loaded.
size_t load_timing_cache(hw::FastBoard& fast, CacheStore& store, const std::string& key,
                         const std::function<void(const std::string&)>& warn);

// Stores `fast`'s entries if it timed any shape that it did not load; returns whether it
// stored.
bool save_timing_cache(const hw::FastBoard& fast, CacheStore& store, const std::string& key);

}  // namespace bitsim::sim
