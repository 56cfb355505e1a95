// The bitsim command. main() is ours (so that SystemC's banner is off before any
// simulation context exists); sc_main exists because libsystemc requires it, and runs the
// same command when SystemC's own main is used.
#include <cstdlib>

#include "cli/commands.h"

extern "C" int sc_main(int argc, char** argv) { return bitsim::cli::main(argc, argv); }

int main(int argc, char** argv) {
  ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  return bitsim::cli::main(argc, argv);
}
