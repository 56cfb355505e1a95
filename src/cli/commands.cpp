#include "cli/commands.h"
namespace bitsim::cli { int main(int, char**) { return 0; } }
