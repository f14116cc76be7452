// g4: the command-line entry point. Each subcommand lives in its own file
// (cmd_*.cc) and registers itself in the table below.
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/command_line.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
  const auto& commands = g4::cli::Commands();
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::printf("g4: Gemma 4 inference engine\n\nusage: g4 COMMAND [options]\n\ncommands:\n");
    for (const auto& c : commands) std::printf("  %-10s %s\n", c.name, c.summary);
    std::printf("\nRun 'g4 COMMAND --help' for a command's options.\n");
    return g4::cli::FinishStdout("--help", argc < 2 ? 2 : 0);
  }
  // Every command's output ends here: a write error on stdout (a full disk,
  // `> /dev/full`) turns success into exit 1 rather than passing unnoticed.
  for (const auto& c : commands)
    if (argv[1] == std::string(c.name)) return g4::cli::FinishStdout(c.name, c.run(argc - 1, argv + 1));
  std::fprintf(stderr, "g4: unknown command '%s' (try 'g4 --help')\n", g4::cli::EscapeForTerminal(argv[1]).c_str());
  return 2;
}
