// Memory (hw/memory.h) and the memory model's fast-side part (hw/memory_model.h): make_memory
// builds the model ddr.model names, a model name outside the key's choices is refused naming
// the key, and the shipped models carry no state across an idle gap (an empty carried state,
// a refused non-empty one, nothing added to a batch key).
#include "hw/memory.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "hw/ddr.h"
#include "hw/sim_context.h"

namespace bitsim::hw {
namespace {

std::string error_of_memory(const DdrConfig& c) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{125.0});
  try {
    make_memory("ddr", clock, c);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Memory, MakeMemoryBuildsTheModelTheConfigNames) {
  for (const char* model : {"wall", "latency-bandwidth"}) {
    FreshSimContext ctx;
    Clock clock("clock", ClockConfig{125.0});
    DdrConfig c;
    c.model = model;
    const std::unique_ptr<Memory> m = make_memory("ddr", clock, c);
    EXPECT_EQ(m->config().model, model);
    ASSERT_NE(dynamic_cast<Ddr*>(m.get()), nullptr) << model;
    EXPECT_EQ(m->stats().ports.size(), 2u);
    m->write64(0x1000, 0x1122334455667788ull);  // the backdoor is the model's storage
    EXPECT_EQ(m->read64(0x1000), 0x1122334455667788ull);
  }
}

TEST(Memory, AModelOutsideTheChoicesIsRefusedNamingTheKey) {
  DdrConfig c;
  c.model = "ddr5";
  const std::string e = error_of_memory(c);
  EXPECT_NE(e.find("ddr.model"), std::string::npos) << e;
  EXPECT_NE(e.find("ddr5"), std::string::npos) << e;
  EXPECT_NE(e.find("latency-bandwidth"), std::string::npos) << e;  // the choices
  EXPECT_THROW(make_memory_timing(c), Error);
}

TEST(Memory, ShippedModelsCarryNoStateAcrossAnIdleGap) {
  for (const char* model : {"wall", "latency-bandwidth"}) {
    FreshSimContext ctx;
    Clock clock("clock", ClockConfig{125.0});
    DdrConfig c;
    c.model = model;
    const std::unique_ptr<Memory> m = make_memory("ddr", clock, c);
    EXPECT_TRUE(m->carried_state(1000).empty()) << model;
    m->restore_state(MemoryState{});  // an empty state is every shipped model's
    try {
      m->restore_state(MemoryState{{42}});
      ADD_FAILURE() << model << ": a non-empty state was restored";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(model), std::string::npos) << e.what();
    }
    const std::unique_ptr<MemoryTiming> t = make_memory_timing(c);
    std::string key;
    t->key_facts(0x1234'5678, 4096, key);
    t->key_state(t->advance(MemoryState{}, 1'000'000), key);
    EXPECT_EQ(key, "") << model << ": the shipped models add nothing to a batch key";
  }
}

TEST(Memory, ACarriedStateEntersTheBatchKey) {
  // The base MemoryTiming puts any non-empty carried state in the key, so that two batches
  // that open on different memory states never share a timing record.
  const std::unique_ptr<MemoryTiming> t = make_memory_timing(DdrConfig{});
  std::string a, b;
  t->key_state(MemoryState{{1, 2}}, a);
  t->key_state(MemoryState{{1, 3}}, b);
  EXPECT_FALSE(a.empty());
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace bitsim::hw
