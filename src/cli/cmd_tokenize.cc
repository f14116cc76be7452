// g4 tokenize: a JSON array of strings on stdin -> a JSON array of
// {"ids": [...], "decoded": "..."} on stdout, one entry per string. Used to
// compare g4's tokenizer against other implementations from scripts.
#include <cstdio>
#include <exception>
#include <iostream>
#include <iterator>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "tokenizer/tokenizer.h"

namespace g4::cli {

int RunTokenize(int argc, char** argv) {
  CLI::App app{"Encode a JSON array of strings (stdin) to token ids and decoded text (stdout)", "g4 tokenize"};
  std::string tokenizer_file, model_dir;
  auto* file_opt = app.add_option("--tokenizer", tokenizer_file, "a tokenizer.json file");
  auto* dir_opt = app.add_option("--model", model_dir, "a model directory holding tokenizer.json");
  file_opt->excludes(dir_opt);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (tokenizer_file.empty() == model_dir.empty()) {
    std::fprintf(stderr, "g4 tokenize: give exactly one of --tokenizer FILE or --model DIR\n");
    return 2;
  }

  StatusOr<Tokenizer> tok = Tokenizer::Load(tokenizer_file.empty() ? model_dir : tokenizer_file);
  if (!tok.ok()) return Fail("tokenize", tok.status());

  const std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  nlohmann::json texts;
  try {
    texts = nlohmann::json::parse(input);
  } catch (const std::exception& e) {
    return Fail("tokenize", InvalidArgument(std::string("stdin is not valid JSON: ") + e.what()));
  }
  if (!texts.is_array()) return Fail("tokenize", InvalidArgument("stdin must be a JSON array of strings"));

  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < texts.size(); ++i) {
    if (!texts[i].is_string())
      return Fail("tokenize", InvalidArgument("stdin item " + std::to_string(i) + " is not a string"));
    StatusOr<std::vector<int32_t>> ids = tok->Encode(texts[i].get_ref<const std::string&>());
    if (!ids.ok()) return Fail("tokenize", ids.status().WithContext("stdin item " + std::to_string(i)));
    nlohmann::ordered_json entry;
    entry["ids"] = *ids;
    entry["decoded"] = tok->Decode(*ids);
    out.push_back(std::move(entry));
  }
  try {
    const std::string text = out.dump();
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  } catch (const std::exception& e) {
    return Fail("tokenize", Internal(std::string("cannot write JSON: ") + e.what()));
  }
  return std::fflush(stdout) == 0 ? 0 : Fail("tokenize", IoError("cannot write stdout"));
}

}  // namespace g4::cli
