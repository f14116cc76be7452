#include "cli/engine_flags.h"

#include "backend/cpu/thread_pool.h"

#include <omp.h>

#include <cstdio>

#include "cli/cli_util.h"
#include "cli/command_line.h"
#include "cli/warm_checkpoint.h"
#include "engine/model_locator.h"

namespace g4::cli {

void AddCommonFlags(CLI::App& app, CommonFlags& f, unsigned which) {
  if (which & kModelFlag) {
    app.add_option("-m,--model", f.model,
                   "the model: a checkpoint directory, or a Hugging Face repo id ORG/NAME[@REV] from the local "
                   "cache (docs/models.md; g4 models lists them). The first argument may name it instead");
  }
  if (which & kThreadsFlag) {
    app.add_option("-t,--threads", f.threads,
                   "CPU threads (default: " + std::to_string(omp_get_max_threads()) +
                       ", from OMP_NUM_THREADS or the cores)")
        ->check(CLI::Range(1, 4096));
  }
  CLI::Option* verbose = app.add_flag("-v,--verbose", f.verbose, "print the settings in use to stderr");
  CLI::Option* quiet = app.add_flag("-q,--quiet", f.quiet, "print nothing to stderr but errors");
  verbose->excludes(quiet);
  if (which & kJsonFlag) app.add_flag("--json", f.json, "print the result as JSON on stdout");
}

Status FinishCommonFlags(CommonFlags& f, const std::vector<std::string*>& positionals, bool model_required) {
  if (!positionals.empty()) {
    if (f.model.empty()) {
      f.model = *positionals[0];
      positionals[0]->clear();
    } else {
      G4_RETURN_IF_ERROR(ShiftPositionals(positionals));
    }
  }
  if (model_required && f.model.empty())
    return UsageStatus("no model: give -m MODEL (a directory or a Hugging Face repo id; g4 models lists them)");
  if (f.threads > 0) {
    omp_set_num_threads(f.threads);  // what OpenMP still runs (host-side loops)
    cpu::SetTeamSize(f.threads);     // the CPU kernels' own worker team
  }
  return Status::Ok();
}

Status ShiftPositionals(const std::vector<std::string*>& slots) {
  std::vector<std::string> values;
  for (std::string* p : slots)
    if (!p->empty()) values.push_back(*p);
  if (values.size() + 1 > slots.size())
    return UsageStatus("too many arguments: the model is given already ('" + values.back() + "' is one too many)");
  for (size_t i = 0; i < slots.size(); ++i) *slots[i] = i >= 1 && i - 1 < values.size() ? values[i - 1] : "";
  return Status::Ok();
}

void AddEngineFlags(CLI::App& app, EngineFlags& flags, const std::string& default_kv, bool batch) {
  flags.kv = default_kv;
  AddBackendFlag(app, flags.backend);
  app.add_option("--kv", flags.kv,
                 "KV cache scheme (docs/kv-cache.md): plain (f32), plain:bf16, plain:f16, affine:8, affine:4, "
                 "affine:4:32, turbo:k8v3, turbo:k4v3, ..., each optionally @N (plain until N tokens, then "
                 "convert), or full=SPEC,sliding=SPEC")
      ->capture_default_str();
  app.add_option("--chunk", flags.chunk, "tokens per step (the prefill chunk)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  AddGpuMemoryFlag(app, flags.gpu_memory);
  if (batch)
    app.add_option("--max-seqs", flags.max_seqs, "sequences running at once")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
}

void AddBackendFlag(CLI::App& app, std::string& backend) {
  app.add_option("--backend", backend, "where to run: cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
}

void AddContextFlag(CLI::App& app, int64_t& ctx, const std::string& what) {
  app.add_option("-c,--ctx-size", ctx, what)->check(CLI::Range(int64_t{0}, int64_t{1} << 30))->capture_default_str();
}

void AddGpuMemoryFlag(CLI::App& app, uint64_t& bytes) {
  app.add_option_function<std::string>(
      "--gpu-memory",
      [&bytes](const std::string& text) {
        StatusOr<uint64_t> v = ParseBytes(text, "--gpu-memory");
        if (!v.ok()) throw CLI::ValidationError(v.status().message());
        bytes = *v;
      },
      "the most device memory g4 may hold in all (weights, KV pool, step buffers), e.g. 40G; the KV pool gets "
      "what the weights leave less a sixteenth for step buffers (default: no cap; on a GPU the pool takes what is "
      "free less the step buffers and a margin, on the CPU half the free memory)");
}

EngineOptions ToEngineOptions(const EngineFlags& flags) {
  EngineOptions o;
  o.memory_cap_bytes = flags.gpu_memory;
  o.kv = flags.kv;
  o.max_step_tokens = flags.chunk;
  o.max_seqs = flags.max_seqs;
  return o;
}

StatusOr<std::string> ResolveModel(const CommonFlags& flags) {
  G4_ASSIGN_OR_RETURN(LocatedModel m, LocateModel(flags.model));
  if (!m.repo_id.empty())
    Verbose(flags, "model " + flags.model + ": " + m.repo_id + " at " + m.revision +
                       (m.revision == m.commit ? "" : " (" + m.commit + ")") + " in " + m.cache_root);
  Verbose(flags, "model directory " + m.dir);
  return m.dir;
}

StatusOr<std::unique_ptr<ModelBundle>> LoadBundle(const CommonFlags& flags, const std::string& backend,
                                                  std::string* dir_out) {
  G4_ASSIGN_OR_RETURN(std::string dir, ResolveModel(flags));
  if (dir_out) *dir_out = dir;
  WarmCheckpoint(dir, !flags.quiet);
  G4_ASSIGN_OR_RETURN(std::unique_ptr<ModelBundle> bundle, LoadModelBundle(dir, backend));
  if (flags.verbose) {
    const Gemma4Config& c = bundle->model->config();
    char line[256];
    std::snprintf(line, sizeof line, "loaded in %.2f s: %d layers, hidden %d, vocabulary %d%s", bundle->load_seconds,
                  c.num_hidden_layers, c.hidden_size, c.vocab_size,
                  c.quantization.present ? (", " + std::to_string(c.quantization.defaults.bits) + "-bit").c_str() : "");
    Verbose(flags, line);
    Verbose(flags, "backend " + bundle->backend->Describe() + " (OpenMP threads " + std::to_string(omp_get_max_threads()) + ")");
  }
  return bundle;
}

void Verbose(const CommonFlags& flags, const std::string& text) {
  if (flags.verbose) std::fprintf(stderr, "[g4] %s\n", text.c_str());
}

}  // namespace g4::cli
