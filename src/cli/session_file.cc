#include "cli/session_file.h"

#include <cstdio>

#include "core/mapped_file.h"
#include "kv/checksum.h"
#include "kv/model_fingerprint.h"

namespace g4::cli {

KvFileIdentity SessionIdentity(const ModelBundle& bundle, const std::string& model_dir) {
  KvFileIdentity id;
  id.model_fingerprint = ModelFingerprint(bundle.model->config(), bundle.model->weights());
  auto text = ReadFileToString(model_dir + "/tokenizer.json");
  if (text.ok()) {
    Fnv1a64 h;
    h.Add(text->data(), text->size());
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h.h));
    id.tokenizer_hash = hex;
  }
  return id;
}

Status SaveSession(const std::string& path, Engine& engine, const Generator& gen, const KvFileIdentity& identity) {
  if (!gen.kv().valid() || gen.cached_tokens().empty()) return InvalidArgument("nothing to save yet");
  return SaveKvFile(path, engine.pool(), gen.kv(), identity, gen.cached_tokens());
}

StatusOr<LoadedKv> LoadSession(const std::string& path, Engine& engine, const KvFileIdentity& identity) {
  return LoadKvFile(path, engine.pool(), identity);
}

}  // namespace g4::cli
