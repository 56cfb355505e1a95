// main() of every test binary. libsystemc requires an sc_main symbol; tests never call it:
// a SystemC test builds its modules inside a FreshSimContext and calls sc_start.
#include <gtest/gtest.h>

#include <cstdlib>

#include <systemc>

int sc_main(int, char**) { return 0; }

int main(int argc, char** argv) {
  ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  sc_core::sc_report_handler::set_actions("/IEEE_Std_1666/deprecated", sc_core::SC_DO_NOTHING);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
