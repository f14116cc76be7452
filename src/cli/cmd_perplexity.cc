#include <cstdio>

#include "cli/commands.h"

namespace g4::cli {

int RunPerplexity(int argc, char** argv) {
  std::fprintf(stderr, "g4 perplexity: not built yet\n");
  return 1;
}

}  // namespace g4::cli
