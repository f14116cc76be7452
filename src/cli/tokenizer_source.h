// Where `g4 tokenize` and `g4 detokenize` get a tokenizer: a model (-m
// MODEL, or the first argument; only its tokenizer.json is read) or a
// tokenizer.json file (--tokenizer FILE).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/engine_flags.h"
#include "tokenizer/tokenizer.h"

namespace g4::cli {

struct TokenizerSource {
  std::string file;  // --tokenizer FILE
};

void AddTokenizerFlag(CLI::App& app, TokenizerSource& source);

// Finishes the common flags (`positionals` as FinishCommonFlags takes them;
// with --tokenizer the first one is not a model) and loads the tokenizer.
// A usage status unless exactly one of a model and --tokenizer is given.
StatusOr<Tokenizer> LoadTokenizer(const char* command, CommonFlags& common, const TokenizerSource& source,
                                  const std::vector<std::string*>& positionals);

// Writes `j` and a newline to stdout (invalid UTF-8 replaced); false when
// stdout could not be written.
bool PrintJson(const nlohmann::ordered_json& j);

}  // namespace g4::cli
