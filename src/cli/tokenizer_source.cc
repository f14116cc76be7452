#include "cli/tokenizer_source.h"

#include <cstdio>

#include "cli/command_line.h"

namespace g4::cli {

void AddTokenizerFlag(CLI::App& app, TokenizerSource& source) {
  app.add_option("--tokenizer", source.file, "a tokenizer.json file (instead of a model)");
}

StatusOr<Tokenizer> LoadTokenizer(const char* command, CommonFlags& common, const TokenizerSource& source,
                                  const std::vector<std::string*>& positionals) {
  if (!source.file.empty()) {
    if (!common.model.empty()) return UsageStatus("give a model or --tokenizer FILE, not both");
    G4_RETURN_IF_ERROR(ShiftPositionals(positionals));
    G4_RETURN_IF_ERROR(FinishCommonFlags(common, {}, /*model_required=*/false));
    return Tokenizer::Load(source.file);
  }
  G4_RETURN_IF_ERROR(FinishCommonFlags(common, positionals, /*model_required=*/false));
  if (common.model.empty()) return UsageStatus("no tokenizer: give a model (-m MODEL) or --tokenizer FILE");
  G4_ASSIGN_OR_RETURN(std::string dir, ResolveModel(common));
  return Tokenizer::Load(dir);
}

bool PrintJson(const nlohmann::ordered_json& j) {
  const std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  return std::fflush(stdout) == 0 && !std::ferror(stdout);
}

}  // namespace g4::cli
