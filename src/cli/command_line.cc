#include "cli/command_line.h"

#include <cstdio>
#include <cstring>
#include <string_view>

#include "cli/foreign_flags.h"

namespace g4::cli {
namespace {

constexpr std::string_view kUsageMarker = "[usage] ";

// True when `app` defines an option spelled `flag` ("-x" or "--name").
bool Defines(const CLI::App& app, std::string_view flag) {
  const size_t eq = flag.find('=');
  const std::string name(flag.substr(0, eq));
  for (const CLI::Option* opt : app.get_options())
    if (opt->check_name(name)) return true;
  return false;
}

}  // namespace

std::optional<int> ParseCommandLine(CLI::App& app, const char* command, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-' || Defines(app, arg)) continue;
    if (auto hint = ForeignFlagHint(arg)) {
      const std::string name(arg.substr(0, arg.find('=')));
      return UsageError(command, name + " is not a g4 flag; " + *hint);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return UsageError(command, std::string(e.what()) + " (g4 " + command + " --help lists the options)");
  }
  return std::nullopt;
}

int UsageError(const char* command, const std::string& message) {
  std::fprintf(stderr, "g4 %s: %s\n", command, message.c_str());
  return kExitUsage;
}

Status UsageStatus(std::string message) {
  return InvalidArgument(std::string(kUsageMarker) + std::move(message));
}

bool IsUsageStatus(const Status& status) {
  return status.code() == StatusCode::kInvalidArgument && status.message().rfind(kUsageMarker, 0) == 0;
}

int Fail(const char* command, const Status& status) {
  if (IsUsageStatus(status)) return UsageError(command, status.message().substr(kUsageMarker.size()));
  std::fprintf(stderr, "g4 %s: %s\n", command, status.ToString().c_str());
  return kExitError;
}

}  // namespace g4::cli
