// ModelBundle: everything `g4 generate`, `g4 chat` and the server need from a
// model directory: the backend, the model, its tokenizer, generation
// defaults, and the chat-format variant of its template.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "io/config.h"
#include "model/gemma4_model.h"
#include "tokenizer/tokenizer.h"

namespace g4 {

struct ModelBundle {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Gemma4Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  GenerationConfig generation;
  // The template follows the generation prompt with an empty thought
  // channel (12B/26B/31B) when thinking is off.
  bool empty_thought_channel = false;
  double load_seconds = 0;

  // Stop ids for chat: generation_config's eos ids (else config.json's), plus
  // <turn|> when the tokenizer has it.
  std::vector<int> ChatStopIds() const;
  // Stop ids for raw completion: the eos ids only.
  std::vector<int> RawStopIds() const;
};

// Loads DIR: config.json, safetensors, tokenizer.json (required: a model
// without a tokenizer cannot take text), generation_config.json (optional),
// on the named backend (engine/backend_factory.h).
StatusOr<std::unique_ptr<ModelBundle>> LoadModelBundle(const std::string& dir, const std::string& backend = "auto");

}  // namespace g4
