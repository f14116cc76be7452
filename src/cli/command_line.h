// How every g4 command reads its command line and reports failure, so all
// commands behave alike:
//  - exit 0 on success and after --help (help on stdout);
//  - exit 2 on a usage error: one line on stderr, "g4 CMD: MESSAGE";
//  - exit 1 on a runtime error: one line on stderr, "g4 CMD: STATUS".
// Flags of other tools (llama.cpp's -ngl, ...) are refused with a hint
// (cli/foreign_flags.h) before the parser can misread them.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "core/status.h"

namespace g4::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

// Parses argv (argv[0] is the command's name) into `app`. nullopt: go on;
// otherwise the command must return the exit code given (help was printed,
// or a usage error was reported).
std::optional<int> ParseCommandLine(CLI::App& app, const char* command, int argc, char** argv);

// Prints "g4 CMD: MESSAGE" to stderr; returns kExitUsage.
int UsageError(const char* command, const std::string& message);

// A Status that Fail reports as a usage error (exit 2), for checks that need
// the model first (a --logit-bias id outside the vocabulary).
Status UsageStatus(std::string message);
bool IsUsageStatus(const Status& status);

// Prints "g4 CMD: <status>" to stderr (a usage status without its marker);
// returns kExitUsage for a usage status, kExitError otherwise.
int Fail(const char* command, const Status& status);

}  // namespace g4::cli
