#pragma once
// sc_start for bitsim: every simulation that runs an SC_THREAD (the PS, the timing oracle's
// host) starts the SystemC kernel through here.
//
// Why not sc_core::sc_start directly: libsystemc 2.3.4 (Debian's) announces its QuickThreads
// stack switches to AddressSanitizer only in part. A switch back to the caller's stack names
// an empty stack (0, 0), and a thread that returns leaves without announcing the switch at
// all, so ASan keeps the ended thread's stack, freed with it, as the current one. After such
// a simulation, ASan skips cleaning the stack when an exception is thrown (its "false positive
// error reports may follow" warning) and LeakSanitizer, at exit, scans the freed stack (a
// fatal error instead of a leak check). In an ASan build these functions name the caller's
// real stack again when sc_start returns or throws, and clear what is below it; in every other
// build they are sc_start.
#include <systemc>

namespace bitsim::hw {

// sc_start(): until sc_stop or no event is left.
void start_simulation();
// sc_start(duration): for that much simulated time at most.
void start_simulation(const sc_core::sc_time& duration);

}  // namespace bitsim::hw
