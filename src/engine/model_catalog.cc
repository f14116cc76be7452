#include "engine/model_catalog.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/mapped_file.h"
#include "engine/model_locator.h"
#include "io/config.h"

namespace g4 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool IsGemma4Type(const std::string& t) {
  return t == "gemma4" || t == "gemma4_text" || t == "gemma4_unified" || t == "gemma4_unified_text";
}

std::string StringField(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// Bytes of a file (symlinks followed); false when it is missing or dangling.
bool FileBytes(const fs::path& p, uint64_t* bytes) {
  std::error_code ec;
  const auto n = fs::file_size(p, ec);
  if (ec) return false;
  *bytes += static_cast<uint64_t>(n);
  return true;
}

// "4-bit g64", plus a note on overrides that differ from the default.
std::string DescribeQuantization(const QuantizationConfig& q) {
  if (!q.present) return "none";
  if (q.defaults.mode != "affine") return q.defaults.mode;
  std::string s = std::to_string(q.defaults.bits) + "-bit g" + std::to_string(q.defaults.group_size);
  std::set<int> other_bits;
  int unquantized = 0;
  for (const auto& [module, spec] : q.overrides) {
    if (!spec.quantized) ++unquantized;
    else if (spec.bits != q.defaults.bits) other_bits.insert(spec.bits);
  }
  for (int b : other_bits) s += " + " + std::to_string(b) + "-bit";
  if (!other_bits.empty()) s += " overrides";
  if (unquantized > 0) s += " (" + std::to_string(unquantized) + " modules dense)";
  return s;
}

// Weight files: the index's shards, else model.safetensors, else every
// *.safetensors. Sets `missing` to the first absent shard.
uint64_t WeightBytes(const fs::path& dir, std::string* missing, bool* any) {
  uint64_t bytes = 0;
  std::error_code ec;
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index, ec)) {
    *any = true;
    auto text = ReadFileToString(index.string());
    const json j = text.ok() ? json::parse(*text, nullptr, false) : json();
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
      *missing = "model.safetensors.index.json (unreadable)";
      return 0;
    }
    std::set<std::string> shards;
    for (const auto& [name, file] : j["weight_map"].items())
      if (file.is_string()) shards.insert(file.get<std::string>());
    for (const std::string& f : shards)
      if (!FileBytes(dir / f, &bytes) && missing->empty()) *missing = f;
    return bytes;
  }
  if (FileBytes(dir / "model.safetensors", &bytes)) {
    *any = true;
    return bytes;
  }
  if (fs::is_symlink(dir / "model.safetensors", ec)) {
    *any = true;
    *missing = "model.safetensors";
    return 0;
  }
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".safetensors") continue;
    *any = true;
    if (!FileBytes(it->path(), &bytes) && missing->empty()) *missing = it->path().filename().string();
  }
  return bytes;
}

// The refs naming each commit of a cached repo ("main" first).
std::map<std::string, std::vector<std::string>> RefsByCommit(const fs::path& repo) {
  std::map<std::string, std::vector<std::string>> out;
  std::error_code ec;
  const fs::path refs = repo / "refs";
  for (fs::recursive_directory_iterator it(refs, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    auto text = ReadFileToString(it->path().string());
    if (!text.ok()) continue;
    std::string commit = *text;
    while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
    const std::string name = fs::relative(it->path(), refs, ec).string();
    auto& names = out[commit];
    if (name == "main") names.insert(names.begin(), name);
    else names.push_back(name);
  }
  return out;
}

}  // namespace

ModelInfo InspectCheckpoint(const std::string& dir) {
  ModelInfo m;
  m.name = dir;
  m.dir = dir;
  const fs::path d(dir);
  auto text = ReadFileToString((d / "config.json").string());
  if (!text.ok()) {
    m.status = "no config.json";
    return m;
  }
  const json j = json::parse(*text, nullptr, false);
  if (!j.is_object()) {
    m.status = "config.json is not a JSON object";
    return m;
  }
  m.model_type = StringField(j, "model_type");
  const json text_config = j.contains("text_config") ? j["text_config"] : json();
  const std::string inner = StringField(text_config, "model_type");
  m.gemma4 = IsGemma4Type(m.model_type) || IsGemma4Type(inner);
  if (!m.gemma4) {
    m.status = "not Gemma 4 (model_type " + (m.model_type.empty() ? std::string("missing") : m.model_type) + ")";
    return m;
  }
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (m.dtype.empty()) m.dtype = StringField(text_config, key);
    if (m.dtype.empty()) m.dtype = StringField(j, key);
  }
  const bool quantized = j.contains("quantization") || j.contains("quantization_config") ||
                         (text_config.is_object() && (text_config.contains("quantization") ||
                                                      text_config.contains("quantization_config")));
  m.format = quantized ? "mlx" : "hf";
  m.quantization = quantized ? "?" : "none";
  std::string missing;
  bool any = false;
  m.bytes = WeightBytes(d, &missing, &any);
  StatusOr<Gemma4Config> config = ParseGemma4Config(*text);
  if (config.ok()) {
    m.layers = config->num_hidden_layers;
    m.hidden = config->hidden_size;
    m.experts = config->num_experts;
    m.quantization = DescribeQuantization(config->quantization);
  }
  if (!config.ok()) {
    m.status = (config.status().code() == StatusCode::kUnsupported ? "unsupported: " : "bad config.json: ") +
               config.status().message();
  } else if (!any) {
    m.status = "no weights (*.safetensors)";
  } else if (!missing.empty()) {
    m.status = "incomplete download: " + missing + " missing";
  } else if (!fs::exists(d / "tokenizer.json")) {
    m.status = "no tokenizer.json (logits and bench only)";
  } else {
    m.status = "ok";
  }
  return m;
}

std::vector<ModelInfo> ListCachedModels(const std::vector<std::string>& roots) {
  std::vector<ModelInfo> out;
  std::set<std::string> seen_dirs;
  for (const std::string& root : roots) {
    std::error_code ec;
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string repo_id = RepoIdFromCacheFolder(it->path().filename().string());
      if (repo_id.empty() || !it->is_directory(ec)) continue;
      const auto refs = RefsByCommit(it->path());
      std::vector<std::string> snaps;
      std::error_code sec;
      for (fs::directory_iterator s(it->path() / "snapshots", sec), send; !sec && s != send; s.increment(sec))
        if (s->is_directory(sec)) snaps.push_back(s->path().filename().string());
      std::sort(snaps.begin(), snaps.end());
      for (const std::string& commit : snaps) {
        const auto named = refs.find(commit);
        // Snapshots no ref points at are old revisions; list them only
        // when nothing else is there.
        if (named == refs.end() && !(refs.empty() && snaps.size() == 1)) continue;
        const std::string dir = (it->path() / "snapshots" / commit).string();
        if (!seen_dirs.insert(dir).second) continue;
        ModelInfo m = InspectCheckpoint(dir);
        m.name = repo_id;
        m.commit = commit;
        m.revision = named == refs.end() ? commit : named->second.front();
        out.push_back(std::move(m));
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const ModelInfo& a, const ModelInfo& b) {
    return a.name != b.name ? a.name < b.name : a.revision < b.revision;
  });
  return out;
}

}  // namespace g4
