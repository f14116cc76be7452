// The table of g4 subcommands. A command gets argv starting at its own name
// and returns the process exit code (0 ok, 1 runtime error, 2 usage error).
#pragma once

#include <vector>

namespace g4::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);
};

const std::vector<Command>& Commands();

// Defined in cmd_*.cc.
int RunLogits(int argc, char** argv);
int RunSynth(int argc, char** argv);
int RunBench(int argc, char** argv);
int RunTokenize(int argc, char** argv);
int RunKvEval(int argc, char** argv);
int RunGenerate(int argc, char** argv);
int RunChat(int argc, char** argv);
int RunServe(int argc, char** argv);
int RunQuantize(int argc, char** argv);
int RunPerplexity(int argc, char** argv);
int RunDetokenize(int argc, char** argv);
int RunModels(int argc, char** argv);

}  // namespace g4::cli
