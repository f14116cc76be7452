// g4 detokenize: token ids -> text. Ids come as arguments or on stdin,
// separated by commas and/or whitespace, optionally in brackets: "[2, 651]",
// "2,651" and "2 651" all work, so `g4 tokenize --ids-only` output pipes
// straight back in.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/tokenizer_source.h"

namespace g4::cli {

int RunDetokenize(int argc, char** argv) {
  CLI::App app{"Text of token ids (the IDS arguments, or stdin)", "g4 detokenize"};
  CommonFlags common;
  TokenizerSource source;
  std::string positional_model;
  std::vector<std::string> ids_args;
  app.add_option("MODEL", positional_model, "the model whose tokenizer to use (same as -m)");
  app.add_option("IDS", ids_args, "token ids: \"2,651\", \"2 651\" or \"[2, 651]\" (default: stdin)");
  AddCommonFlags(app, common, kModelFlag | kJsonFlag);
  AddTokenizerFlag(app, source);
  if (auto code = ParseCommandLine(app, "detokenize", argc, argv)) return *code;
  // The model slot and the ids share the positionals: with -m or
  // --tokenizer, the first one is an id list too.
  if (!common.model.empty() || !source.file.empty()) {
    if (!positional_model.empty()) ids_args.insert(ids_args.begin(), positional_model);
    positional_model.clear();
  }
  StatusOr<Tokenizer> tok = LoadTokenizer("detokenize", common, source, {&positional_model});
  if (!tok.ok()) return Fail("detokenize", tok.status());
  std::string text;
  for (const std::string& a : ids_args) text += a + " ";
  if (ids_args.empty()) text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  // Brackets, commas and whitespace all separate.
  for (char& c : text)
    if (c == '[' || c == ']' || c == ',' || c == '\n' || c == '\t' || c == '\r') c = ' ';
  std::vector<int32_t> ids;
  std::string joined;
  for (size_t i = 0; i < text.size();) {
    const size_t start = text.find_first_not_of(' ', i);
    if (start == std::string::npos) break;
    const size_t end = std::min(text.find(' ', start), text.size());
    joined += (joined.empty() ? "" : ",") + text.substr(start, end - start);
    i = end;
  }
  if (!joined.empty()) {
    StatusOr<std::vector<int32_t>> parsed = ParseIdList(joined);
    if (!parsed.ok()) return Fail("detokenize", UsageStatus(parsed.status().message()));
    ids = *parsed;
  }
  for (int32_t id : ids)
    if (id < 0 || id >= tok->vocab_size())
      return Fail("detokenize", InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                                std::to_string(tok->vocab_size()) + ")"));
  const std::string decoded = tok->Decode(ids);
  if (common.json) {
    nlohmann::ordered_json j = {{"ids", ids}, {"text", decoded}};
    return PrintJson(j) ? kExitOk : Fail("detokenize", IoError("cannot write stdout"));
  }
  std::fwrite(decoded.data(), 1, decoded.size(), stdout);
  std::fputc('\n', stdout);
  return std::fflush(stdout) == 0 ? kExitOk : Fail("detokenize", IoError("cannot write stdout"));
}

}  // namespace g4::cli
