// g4 models: the Gemma 4 checkpoints g4 can find: those in the local
// Hugging Face cache (engine/model_locator.h says where it looks), and any
// directories given as arguments. For each: the name to pass to -m, size on
// disk, format, quantization, and whether it loads.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "engine/model_catalog.h"
#include "engine/model_locator.h"

namespace g4::cli {
namespace {

std::string Size(uint64_t bytes) {
  char buf[32];
  if (bytes >= 1000000000ull) std::snprintf(buf, sizeof buf, "%.1f GB", bytes / 1e9);
  else std::snprintf(buf, sizeof buf, "%.0f MB", bytes / 1e6);
  return buf;
}

std::string Format(const ModelInfo& m) {
  if (m.format == "mlx") return "mlx";
  return m.dtype.empty() ? "hf" : "hf " + (m.dtype == "bfloat16" ? std::string("bf16")
                                           : m.dtype == "float32" ? std::string("f32")
                                           : m.dtype == "float16" ? std::string("f16")
                                                                  : m.dtype);
}

// The name that selects this snapshot with -m: ORG/NAME for refs/main,
// ORG/NAME@REV otherwise, the directory for a local checkpoint.
std::string Selector(const ModelInfo& m) {
  if (m.commit.empty()) return m.name;
  return m.revision == "main" ? m.name : m.name + "@" + m.revision;
}

}  // namespace

int RunModels(int argc, char** argv) {
  CLI::App app{"List the Gemma 4 checkpoints in the local Hugging Face cache (and in DIRs given)", "g4 models"};
  CommonFlags common;
  std::vector<std::string> dirs;
  bool all = false;
  app.add_option("DIR", dirs, "also inspect these checkpoint directories");
  AddCommonFlags(app, common, kJsonFlag);
  app.add_flag("-a,--all", all, "also list cached repos that are not Gemma 4");
  app.footer(
      "Cache roots searched, in order: $HF_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub, "
      "~/.cache/huggingface/hub. docs/models.md lists the repos that work and how to download them.");
  if (auto code = ParseCommandLine(app, "models", argc, argv)) return *code;
  const std::vector<std::string> roots = HfCacheRoots();
  std::vector<ModelInfo> models = ListCachedModels(roots);
  for (const std::string& d : dirs) models.push_back(InspectCheckpoint(d));
  std::vector<ModelInfo> shown;
  for (ModelInfo& m : models)
    if (m.gemma4 || all) shown.push_back(std::move(m));
  if (common.verbose) {
    for (const std::string& r : roots) Verbose(common, "cache root " + r);
    if (roots.empty()) Verbose(common, "no Hugging Face cache found");
  }
  if (common.json) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const ModelInfo& m : shown)
      list.push_back({{"name", Selector(m)},  {"repo", m.commit.empty() ? "" : m.name},
                      {"revision", m.revision}, {"commit", m.commit},
                      {"dir", m.dir},           {"gemma4", m.gemma4},
                      {"format", m.format},     {"dtype", m.dtype},
                      {"quantization", m.quantization}, {"bytes", m.bytes},
                      {"layers", m.layers},     {"hidden_size", m.hidden},
                      {"experts", m.experts},   {"status", m.status}});
    nlohmann::ordered_json j = {{"cache_roots", roots}, {"models", list}};
    std::printf("%s\n", j.dump().c_str());
    return kExitOk;
  }
  if (shown.empty()) {
    std::printf("No Gemma 4 checkpoints found (cache: %s).\n", roots.empty() ? "none" : roots.front().c_str());
    std::printf("Download one with the Hugging Face CLI, e.g.\n  hf download google/gemma-4-E2B-it\n"
                "then run it with: g4 chat -m google/gemma-4-E2B-it (docs/models.md)\n");
    return kExitOk;
  }
  size_t width = 5;
  for (const ModelInfo& m : shown) width = std::max(width, Selector(m).size());
  std::printf("%-*s  %9s  %-7s  %-24s  %s\n", static_cast<int>(width), "MODEL", "SIZE", "FORMAT", "QUANTIZATION",
              "STATUS");
  for (const ModelInfo& m : shown)
    std::printf("%-*s  %9s  %-7s  %-24s  %s\n", static_cast<int>(width), Selector(m).c_str(), Size(m.bytes).c_str(),
                Format(m).c_str(), m.quantization.c_str(), m.status.c_str());
  if (common.verbose)
    for (const ModelInfo& m : shown) Verbose(common, Selector(m) + ": " + m.dir);
  return kExitOk;
}

}  // namespace g4::cli
