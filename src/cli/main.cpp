#include "cli/commands.h"
int main(int argc, char** argv) { return bitsim::cli::main(argc, argv); }
