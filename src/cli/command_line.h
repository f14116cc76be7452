// How every g4 command reads its command line and reports failure, so all
// commands behave alike:
//  - exit 0 on success and after --help (help on stdout);
//  - exit 2 on a usage error: one line on stderr, "g4 CMD: MESSAGE";
//  - exit 1 on a runtime error: one line on stderr, "g4 CMD: STATUS";
//  - a command that succeeded but could not write all of stdout (a full
//    disk, `> /dev/full`) exits 1 too (FinishStdout, called by main).
// Error lines never carry raw bytes from the command line or a file: control
// characters and invalid UTF-8 are escaped (\xFF), so a message is one line
// and cannot drive the terminal.
// Numbers on the command line are checked before CLI11 converts them, which
// would otherwise saturate (--seed 2^64 became 2^63-1), read "010" as octal
// and let "nan" or "1e999" through: integers must be decimal and fit 64 bits,
// floating-point values must be finite.
// Flags of other tools (llama.cpp's -ngl, ...) are refused with a hint
// (cli/foreign_flags.h) before the parser can misread them.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace g4::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

// Parses argv (argv[0] is the command's name) into `app`. nullopt: go on;
// otherwise the command must return the exit code given (help was printed,
// or a usage error was reported).
std::optional<int> ParseCommandLine(CLI::App& app, const char* command, int argc, char** argv);

// `text` with control characters (newlines included), DEL, C1 controls and
// bytes that are not valid UTF-8 written as \xNN; valid printable UTF-8 is
// kept as it is.
std::string EscapeForTerminal(std::string_view text);

// Flushes stdout and, when a command that succeeded (`code` 0) could not write
// all of it, reports "g4 CMD: i/o error: stdout: write failed: ..." and
// returns kExitError; otherwise returns `code`.
int FinishStdout(const char* command, int code);

// For options naming a file g4 reads: the read policy (core/file_read.h) at
// parse time, so a missing file, a directory, a FIFO, a device or a symlink
// loop is a usage error with the policy's message ("/dev/zero is a character
// device, not a file"). The file is opened (never blocking) and closed.
CLI::Validator ReadableFile();

// Prints "g4 CMD: MESSAGE" (escaped) to stderr; returns kExitUsage.
int UsageError(const char* command, const std::string& message);

// A Status that Fail reports as a usage error (exit 2), for checks that need
// the model first (a --logit-bias id outside the vocabulary).
Status UsageStatus(std::string message);
bool IsUsageStatus(const Status& status);

// Prints "g4 CMD: <status>" to stderr (a usage status without its marker);
// returns kExitUsage for a usage status, kExitError otherwise.
int Fail(const char* command, const Status& status);

}  // namespace g4::cli
