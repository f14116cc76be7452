#include <cstdio>

#include "cli/commands.h"

namespace g4::cli {

int RunBench(int argc, char** argv) {
  std::fprintf(stderr, "g4 bench: not built yet\n");
  return 1;
}

}  // namespace g4::cli
