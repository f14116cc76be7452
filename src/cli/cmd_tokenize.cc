// g4 tokenize: text (the TEXT argument, or all of stdin) -> token ids, one
// line per token with its text (or its vocabulary piece with --pieces), or
// only the ids (--ids-only), or JSON (--json). With --json-array, stdin is a
// JSON array of strings and the output a JSON array of {"ids", "decoded"},
// one entry per string: for comparing g4's tokenizer with other
// implementations from scripts.
#include <cstdio>
#include <exception>
#include <iostream>
#include <iterator>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/tokenizer_source.h"

namespace g4::cli {
namespace {

struct TokenizeFlags {
  CommonFlags common;
  TokenizerSource source;
  std::string text;
  bool pieces = false, ids_only = false, json_array = false, bos = false;
};

int JsonArrayMode(const Tokenizer& tok, const std::string& input) {
  nlohmann::json texts = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (texts.is_discarded()) return Fail("tokenize", InvalidArgument("stdin is not valid JSON"));
  if (!texts.is_array()) return Fail("tokenize", InvalidArgument("stdin must be a JSON array of strings"));
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < texts.size(); ++i) {
    if (!texts[i].is_string())
      return Fail("tokenize", InvalidArgument("stdin item " + std::to_string(i) + " is not a string"));
    StatusOr<std::vector<int32_t>> ids = tok.Encode(texts[i].get_ref<const std::string&>());
    if (!ids.ok()) return Fail("tokenize", ids.status().WithContext("stdin item " + std::to_string(i)));
    nlohmann::ordered_json entry;
    entry["ids"] = *ids;
    entry["decoded"] = tok.Decode(*ids);
    out.push_back(std::move(entry));
  }
  return PrintJson(out) ? kExitOk : Fail("tokenize", IoError("cannot write stdout"));
}

int TextMode(const TokenizeFlags& f, const Tokenizer& tok, const std::string& text) {
  StatusOr<std::vector<int32_t>> encoded = tok.Encode(text);
  if (!encoded.ok()) return Fail("tokenize", encoded.status());
  std::vector<int32_t> ids;
  if (f.bos && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  ids.insert(ids.end(), encoded->begin(), encoded->end());
  auto piece = [&](int32_t id) { return std::string(tok.IdToPiece(id).value_or("")); };
  auto token_text = [&](int32_t id) { return tok.Decode(std::vector<int32_t>{id}); };
  if (f.common.json) {
    nlohmann::ordered_json tokens = nlohmann::ordered_json::array();
    for (int32_t id : ids) tokens.push_back({{"id", id}, {"text", token_text(id)}, {"piece", piece(id)}});
    nlohmann::ordered_json j = {{"count", ids.size()}, {"ids", ids}, {"tokens", tokens}};
    return PrintJson(j) ? kExitOk : Fail("tokenize", IoError("cannot write stdout"));
  }
  if (f.ids_only) {
    std::string line = "[";
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? ", " : "") + std::to_string(ids[i]);
    std::printf("%s]\n", line.c_str());
  } else {
    for (int32_t id : ids) {
      // As a JSON string: spaces, newlines and stray bytes stay visible.
      const std::string shown = nlohmann::json(f.pieces ? piece(id) : token_text(id))
                                    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      std::printf("%8d  %s\n", id, shown.c_str());
    }
  }
  if (!f.common.quiet) std::fprintf(stderr, "[g4] %zu tokens\n", ids.size());
  return std::fflush(stdout) == 0 ? kExitOk : Fail("tokenize", IoError("cannot write stdout"));
}

}  // namespace

int RunTokenize(int argc, char** argv) {
  CLI::App app{"Token ids of a text (the TEXT argument, or stdin)", "g4 tokenize"};
  TokenizeFlags f;
  std::string positional_model;
  app.add_option("MODEL", positional_model, "the model whose tokenizer to use (same as -m)");
  app.add_option("TEXT", f.text, "the text (default: all of stdin)");
  AddCommonFlags(app, f.common, kModelFlag | kJsonFlag);
  AddTokenizerFlag(app, f.source);
  CLI::Option* pieces = app.add_flag("--pieces", f.pieces, "show each token's vocabulary piece (\u2581the, <0x0A>)");
  CLI::Option* ids_only = app.add_flag("--ids-only", f.ids_only, "print only the ids, as [1, 2, 3]");
  pieces->excludes(ids_only);
  app.add_flag("--bos", f.bos, "start with the BOS token, as a raw prompt does");
  app.add_flag("--json-array", f.json_array,
               "stdin is a JSON array of strings; print a JSON array of {\"ids\", \"decoded\"}");
  if (auto code = ParseCommandLine(app, "tokenize", argc, argv)) return *code;
  StatusOr<Tokenizer> tok = LoadTokenizer("tokenize", f.common, f.source, {&positional_model, &f.text});
  if (!tok.ok()) return Fail("tokenize", tok.status());
  if (f.json_array && !f.text.empty()) return UsageError("tokenize", "--json-array reads stdin; drop TEXT");
  const std::string input =
      f.text.empty() ? std::string((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>())
                     : f.text;
  return f.json_array ? JsonArrayMode(*tok, input) : TextMode(f, *tok, input);
}

}  // namespace g4::cli
