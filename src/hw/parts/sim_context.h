#pragma once
// A fresh SystemC simulation context. SystemC keeps one kernel per process; bitsim gives
// every simulation (a test, a run, a sweep point) a new one, so nothing carries over
// between two simulations in one process. Create it before any module; destroy every
// module before it goes away.
#include <systemc>

namespace bitsim::hw {

class FreshSimContext {
 public:
  FreshSimContext() {
    previous_ = sc_core::sc_curr_simcontext;
    context_ = new sc_core::sc_simcontext;
    sc_core::sc_curr_simcontext = context_;
    sc_core::sc_default_global_context = context_;
  }
  ~FreshSimContext() {
    delete context_;
    sc_core::sc_curr_simcontext = nullptr;
    sc_core::sc_default_global_context = nullptr;
  }
  FreshSimContext(const FreshSimContext&) = delete;
  FreshSimContext& operator=(const FreshSimContext&) = delete;

 private:
  sc_core::sc_simcontext* context_ = nullptr;
  sc_core::sc_simcontext* previous_ = nullptr;
};

}  // namespace bitsim::hw
