// Model catalog: what `g4 models` shows. Inspects checkpoint directories
// (config.json and the weight files, never the weights' contents) and lists
// the Gemma 4 checkpoints in the local Hugging Face cache
// (engine/model_locator.h says where that is).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace g4 {

struct ModelInfo {
  std::string name;      // ORG/NAME for a cached repo, else the directory
  std::string revision;  // the ref naming the snapshot ("main"), or its commit when no ref does
  std::string commit;    // snapshot folder name (cache only)
  std::string dir;
  bool gemma4 = false;   // config.json's model_type is a Gemma 4 one
  std::string model_type;
  // "hf" (Hugging Face safetensors, dtype in `dtype`) or "mlx" (MLX affine).
  std::string format;
  std::string dtype;         // torch_dtype / dtype of config.json ("bfloat16"), may be empty
  std::string quantization;  // "none", "4-bit g64", "4-bit g64 + 8-bit overrides", "nvfp4"...
  int layers = 0, hidden = 0, experts = 0;
  uint64_t bytes = 0;        // weight files on disk (what loading maps)
  // "ok" when g4 can load it as far as the files tell; otherwise why not
  // ("incomplete download: model-00002-of-00004.safetensors missing",
  // "unsupported: ...").
  std::string status;
};

// Inspects one checkpoint directory. Never fails: problems end up in
// `status` (a directory without config.json has gemma4 = false).
ModelInfo InspectCheckpoint(const std::string& dir);

// Every snapshot that a ref points at (or the only snapshot) of every
// models--*--* folder under `roots`, inspected; sorted by name. Repos that
// are not Gemma 4 are included with gemma4 = false (callers filter).
std::vector<ModelInfo> ListCachedModels(const std::vector<std::string>& roots);

}  // namespace g4
