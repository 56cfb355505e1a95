// Memory (hw/memory/memory.h) and the memory model's fast-side part (hw/memory/memory_model.h): make_memory
// builds the model ddr.model names, a model name outside the key's choices is refused naming
// the key, and the shipped models carry no state across an idle gap (an empty carried state,
// a refused non-empty one, nothing added to a batch key).
#include "hw/memory/memory.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "hw/memory/ddr.h"
#include "hw/parts/sim_context.h"
#include "support/error_of.h"

namespace bitsim::hw {
namespace {

using test::error_of;

// Calls f(model name, its memory, its config) for each shipped model, each in a fresh
// simulation context.
template <typename F>
void for_each_model(F f) {
  for (const char* model : {"wall", "latency-bandwidth"}) {
    FreshSimContext ctx;
    Clock clock("clock", ClockConfig{125.0});
    DdrConfig c;
    c.model = model;
    const std::unique_ptr<Memory> m = make_memory("ddr", clock, c);
    f(std::string(model), *m, c);
  }
}

TEST(Memory, MakeMemoryBuildsTheModelTheConfigNames) {
  for_each_model([](const std::string& model, Memory& m, const DdrConfig&) {
    EXPECT_EQ(m.config().model, model);
    EXPECT_NE(dynamic_cast<Ddr*>(&m), nullptr) << model;
    EXPECT_EQ(m.stats().ports.size(), 2u);
    m.write64(0x1000, 0x1122334455667788ull);  // the backdoor is the model's storage
    EXPECT_EQ(m.read64(0x1000), 0x1122334455667788ull);
  });
}

TEST(Memory, AModelOutsideTheChoicesIsRefusedNamingTheKey) {
  DdrConfig c;
  c.model = "ddr5";
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{125.0});
  const std::string e = error_of([&] { make_memory("ddr", clock, c); });
  EXPECT_NE(e.find("ddr.model"), std::string::npos) << e;
  EXPECT_NE(e.find("ddr5"), std::string::npos) << e;
  EXPECT_NE(e.find("latency-bandwidth"), std::string::npos) << e;  // the choices
  EXPECT_NE(error_of([&] { make_memory_timing(c, 8000); }).find("ddr.model"), std::string::npos);
}

TEST(Memory, ShippedModelsCarryNoStateAcrossAnIdleGap) {
  for_each_model([](const std::string& model, Memory& m, const DdrConfig& c) {
    EXPECT_TRUE(m.carried_state(1000).empty()) << model;
    m.restore_state(MemoryState{});  // an empty state is every shipped model's
    const std::string refused = error_of([&] { m.restore_state(MemoryState{{42}}); });
    EXPECT_NE(refused.find(model), std::string::npos) << model << ": " << refused;
    const std::unique_ptr<MemoryTiming> t = make_memory_timing(c, 8000);
    std::string key;
    t->key_facts(0x1234'5678, 4096, key);
    t->key_state(t->advance(MemoryState{}, 1'000'000), key);
    EXPECT_EQ(key, "") << model << ": the shipped models add nothing to a batch key";
  });
}

TEST(Memory, ACarriedStateEntersTheBatchKey) {
  // The base MemoryTiming puts any non-empty carried state in the key, so that two batches
  // that open on different memory states never share a timing record.
  const std::unique_ptr<MemoryTiming> t = make_memory_timing(DdrConfig{}, 8000);
  std::string a, b;
  t->key_state(MemoryState{{1, 2}}, a);
  t->key_state(MemoryState{{1, 3}}, b);
  EXPECT_FALSE(a.empty());
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace bitsim::hw
