#include "engine/model_bundle.h"

#include <algorithm>
#include <chrono>

#include "core/file_read.h"
#include "core/mapped_file.h"
#include "engine/backend_factory.h"
#include "tokenizer/chat_format.h"

namespace g4 {

StatusOr<std::unique_ptr<ModelBundle>> LoadModelBundle(const std::string& dir, const std::string& backend) {
  const auto start = std::chrono::steady_clock::now();
  {
    auto type = StatPath(dir);  // never throws: loops and permissions are Status errors
    if (!type.ok()) return type.status().WithContext("[model] " + dir);
    if (*type != PathType::kDirectory) return NotFound("[model] " + dir + ": no such model directory");
  }
  auto b = std::make_unique<ModelBundle>();
  G4_ASSIGN_OR_RETURN(b->backend, MakeBackend(backend));
  G4_ASSIGN_OR_RETURN(b->model, Gemma4Model::Load(dir, *b->backend));
  const std::string tok_path = dir + "/tokenizer.json";
  auto tok_type = StatPath(tok_path);
  if (!tok_type.ok()) return tok_type.status().WithContext("[model] " + tok_path);
  if (*tok_type == PathType::kMissing)
    return NotFound("[model] " + dir + " has no tokenizer.json (g4 synth --tokenizer FILE adds one)");
  G4_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::Load(dir));
  b->tokenizer = std::make_unique<Tokenizer>(std::move(tok));
  if (b->tokenizer->vocab_size() > b->model->vocab_size())
    return InvalidArgument("[model] tokenizer has " + std::to_string(b->tokenizer->vocab_size()) +
                           " ids but the model's vocabulary is " + std::to_string(b->model->vocab_size()));
  G4_ASSIGN_OR_RETURN(b->generation, LoadGenerationConfig(dir));
  // The template decides the thought-channel variant; without one, the large
  // (non-PLE) models close it, as their released templates do.
  b->empty_thought_channel = !b->model->config().has_ple();
  for (const char* name : {"chat_template.jinja", "tokenizer_config.json"}) {
    auto text = ReadFileToString(dir + "/" + name);
    if (text.ok() && text->find("<|turn>") != std::string::npos) {
      b->empty_thought_channel = TemplateClosesThoughtChannel(*text);
      break;
    }
  }
  b->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return b;
}

std::vector<int> ModelBundle::RawStopIds() const {
  std::vector<int> ids = generation.eos_token_ids;
  if (ids.empty()) ids = model->config().eos_token_ids;
  if (ids.empty() && tokenizer->eos_id() >= 0) ids.push_back(tokenizer->eos_id());
  return ids;
}

std::vector<int> ModelBundle::ChatStopIds() const {
  std::vector<int> ids = RawStopIds();
  if (auto turn_end = tokenizer->AddedTokenId("<turn|>")) {
    if (std::find(ids.begin(), ids.end(), *turn_end) == ids.end()) ids.push_back(*turn_end);
  }
  return ids;
}

}  // namespace g4
