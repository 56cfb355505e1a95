#pragma once
// DerivedStore: layouts derived from one model's trits alone (the golden reference's 2-bit
// codes, the packed weights image of a memory map), kept between runs so that a warm start
// maps them instead of rebuilding them from the 926 MB of int8 trits. The start-up cache
// implements it (sim/startup.h, `derived_store`), keyed by the model's identity and the
// layout's name; a name carries every parameter the layout depends on besides the model.
// A layout read back is the bytes that were stored (the cache verifies them), so a user of
// the store builds the same arrays either way.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/model_file.h"

namespace bitsim::model {

class DerivedStore {
 public:
  struct Blob {
    std::shared_ptr<void> keep;  // keeps `data` mapped
    const uint8_t* data = nullptr;
    size_t bytes = 0;
  };
  virtual ~DerivedStore() = default;
  // The layout stored under `name`, or nullopt.
  virtual std::optional<Blob> get(const std::string& name) = 0;
  // Stores the concatenated parts under `name` (a failure to store is not an error: the
  // next run builds the layout again). The store may write them later, beside the run:
  // `keep` keeps the parts' memory alive until it has.
  virtual void put(const std::string& name, const std::vector<ImagePart>& parts, std::shared_ptr<const void> keep) = 0;
};

}  // namespace bitsim::model
