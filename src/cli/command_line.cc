#include "cli/command_line.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "cli/foreign_flags.h"
#include "core/file_write.h"

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

// Length of the valid UTF-8 sequence at the start of `s` (1-4), or 0.
size_t Utf8SequenceLength(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07;
  else return 0;
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i) & 0x3F);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

// The checks CLI11 leaves out (see the header): "" when `text` is a number
// CLI11 converts faithfully, else what is wrong with it.
std::string CheckIntegerText(const std::string& text, bool is_unsigned) {
  const size_t i = !text.empty() && text[0] == '-' ? 1 : 0;
  if (i == text.size() || text.find_first_not_of("0123456789", i) != std::string::npos)
    return text + " is not a decimal integer";
  if (text.size() > i + 1 && text[i] == '0')
    return text + ": write the number without leading zeros";  // CLI11 would read it as octal
  if (is_unsigned && i == 1) return text + " is negative; a value >= 0 is needed";
  errno = 0;
  char* end = nullptr;
  if (is_unsigned) (void)std::strtoull(text.c_str(), &end, 10);
  else (void)std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE) return text + " is out of range (the most is " +
                              (is_unsigned ? std::string("18446744073709551615") : std::string("9223372036854775807")) +
                              ")";
  return "";
}

std::string CheckFloatText(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) return text + " is not a number";
  if (!std::isfinite(v) || (errno == ERANGE && std::fabs(v) >= 1.0))
    return text + " is not a finite number";
  return "";
}

// Adds the number checks to every option that takes integers or floats
// (CLI11 names their types INT, UINT and FLOAT).
void CheckNumbers(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_size_max() == 0) continue;  // a flag: no value to check
    const std::string type = opt->get_type_name();
    if (type.rfind("UINT", 0) == 0) {
      opt->check(CLI::Validator([](std::string& v) { return CheckIntegerText(v, true); }, ""));
    } else if (type.rfind("INT", 0) == 0) {
      opt->check(CLI::Validator([](std::string& v) { return CheckIntegerText(v, false); }, ""));
    } else if (type.rfind("FLOAT", 0) == 0) {
      opt->check(CLI::Validator([](std::string& v) { return CheckFloatText(v); }, ""));
    }
  }
}

}  // namespace

std::string EscapeForTerminal(std::string_view text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  auto escape_byte = [&](unsigned char c) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const size_t n = Utf8SequenceLength(text.substr(i));
    if (n == 0 || c < 0x20 || c == 0x7F) {
      escape_byte(c);
      ++i;
      continue;
    }
    // C1 controls (U+0080..U+009F: 0xC2 0x80..0x9F) can drive terminals too.
    if (n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) <= 0x9F) {
      escape_byte(c);
      escape_byte(static_cast<unsigned char>(text[i + 1]));
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

CLI::Validator ReadableFile() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        StatusOr<OpenedFile> f = OpenRegularFile(path);
        return f.ok() ? "" : f.status().message();
      },
      "FILE");
}

int FinishStdout(const char* command, int code) {
  const Status s = FlushAndCheck(stdout, "stdout");
  if (s.ok() || code != kExitOk) return code;
  std::fprintf(stderr, "g4 %s: %s\n", command, s.ToString().c_str());
  return kExitError;
}

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
  CheckNumbers(app);
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
  std::fprintf(stderr, "g4 %s: %s\n", command, EscapeForTerminal(message).c_str());
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
  std::fprintf(stderr, "g4 %s: %s\n", command, EscapeForTerminal(status.ToString()).c_str());
  return kExitError;
}

}  // namespace g4::cli
