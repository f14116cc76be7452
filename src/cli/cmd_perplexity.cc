// g4 perplexity: perplexity of a model on a text file, as llama.cpp's
// perplexity tool computes it (engine/perplexity.h), optionally with a KV
// cache mode and its KL divergence from the plain cache.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "core/mapped_file.h"
#include "cli/engine_flags.h"
#include "engine/model_bundle.h"
#include "engine/perplexity.h"
#include "kv/kv_scheme.h"

namespace g4::cli {
namespace {

struct PerplexityCliOptions {
  CommonFlags common;
  std::string file;
  int64_t ctx = 512, max_windows = 0;
  bool kl = false, no_bos = false;
  EngineFlags engine;
};

Status RunPerplexityImpl(const PerplexityCliOptions& o) {
  G4_ASSIGN_OR_RETURN(KvScheme scheme, KvScheme::Parse(o.engine.kv));
  StatusOr<std::string> text = ReadFileToString(o.file);
  if (!text.ok()) return text.status().WithContext("[perplexity] --file");
  G4_ASSIGN_OR_RETURN(std::unique_ptr<ModelBundle> bundle, LoadBundle(o.common, o.engine.backend));
  EngineOptions eo = ToEngineOptions(o.engine);
  eo.max_outputs = eo.max_step_tokens;  // every scored row of a chunk is an output
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(*bundle->model, eo));
  std::unique_ptr<Engine> reference;
  if (o.kl) {
    EngineOptions ro = eo;
    ro.kv = "plain";
    G4_ASSIGN_OR_RETURN(reference, Engine::Create(*bundle->model, ro));
  }
  const auto t0 = std::chrono::steady_clock::now();
  StatusOr<std::vector<int32_t>> encoded = bundle->tokenizer->Encode(*text);
  if (!encoded.ok()) return encoded.status().WithContext("[perplexity] " + o.file);
  std::vector<int32_t> tokens;
  const int32_t bos = o.no_bos ? -1 : bundle->tokenizer->bos_id();
  if (bos >= 0) tokens.push_back(bos);
  tokens.insert(tokens.end(), encoded->begin(), encoded->end());

  PerplexityOptions po;
  po.ctx = o.ctx;
  po.max_windows = o.max_windows;
  po.bos_id = bos;
  const int64_t windows = PerplexityWindows(static_cast<int64_t>(tokens.size()), po);
  if (!o.common.quiet)
    std::fprintf(stderr, "perplexity: %zu tokens, %lld windows of %lld (scoring %lld tokens each), kv %s\n",
                 tokens.size(), static_cast<long long>(windows), static_cast<long long>(o.ctx),
                 static_cast<long long>(o.ctx - 1 - o.ctx / 2), scheme.signature().c_str());
  // On a terminal a bar; in a log llama.cpp's "[1]12.3456," running list.
  Progress bar("perplexity", static_cast<uint64_t>(windows), Progress::Unit::kItems, !o.common.quiet);
  auto progress = [&](int64_t w, const PerplexityStats& s) {
    char note[64];
    std::snprintf(note, sizeof note, "window %lld/%lld, ppl %.4f", static_cast<long long>(w + 1),
                  static_cast<long long>(windows), s.Ppl());
    if (bar.enabled()) bar.Update(static_cast<uint64_t>(w + 1), note);
    else if (!o.common.quiet) std::fprintf(stderr, "[%lld]%.4f,", static_cast<long long>(w + 1), s.Ppl());
  };
  G4_ASSIGN_OR_RETURN(PerplexityStats st, ComputePerplexity(*engine, reference.get(), tokens, po, progress));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (bar.enabled()) bar.Finish();
  else if (!o.common.quiet) std::fprintf(stderr, "\n");

  if (o.common.json) {
    nlohmann::ordered_json j = {{"model", o.common.model}, {"file", o.file}, {"kv", o.engine.kv},
                                {"kv_signature", scheme.signature()}, {"ctx", o.ctx},
                                {"tokens", tokens.size()}, {"windows", st.windows}, {"scored", st.count},
                                {"ppl", st.Ppl()}, {"ppl_error", st.PplError()}, {"mean_nll", st.MeanNll()},
                                {"seconds", secs}};
    if (o.kl) {
      j["plain_ppl"] = st.RefPpl();
      j["plain_ppl_error"] = st.RefPplError();
      j["kl_vs_plain"] = st.MeanKl();
      j["kl_error"] = st.KlError();
      j["top1_agreement"] = st.Top1Agreement();
    }
    std::printf("%s\n", j.dump().c_str());
    return Status::Ok();
  }
  std::printf("Final estimate: PPL = %.4f +/- %.5f\n", st.Ppl(), st.PplError());
  std::printf("  %lld tokens scored in %lld windows of %lld, mean NLL %.5f, kv %s, %.1f s\n",
              static_cast<long long>(st.count), static_cast<long long>(st.windows),
              static_cast<long long>(o.ctx), st.MeanNll(), o.engine.kv.c_str(), secs);
  if (o.kl) {
    std::printf("  plain cache: PPL = %.4f +/- %.5f\n", st.RefPpl(), st.RefPplError());
    std::printf("  KL(plain || %s) = %.6f +/- %.6f, top-1 agreement %.2f%%\n", o.engine.kv.c_str(), st.MeanKl(),
                st.KlError(), 100.0 * st.Top1Agreement());
  }
  return Status::Ok();
}

}  // namespace

int RunPerplexity(int argc, char** argv) {
  CLI::App app{"Perplexity of a model on a text file (llama.cpp's method: windows of -c tokens starting with "
               "BOS, the second half of each window scored)",
               "g4 perplexity"};
  PerplexityCliOptions o;
  std::string positional_model;
  app.add_option("MODEL", positional_model, "the model (same as -m)");
  AddCommonFlags(app, o.common, kModelFlag | kThreadsFlag | kJsonFlag);
  app.add_option("-f,--file", o.file, "UTF-8 text file")->required()->check(ReadableFile());
  app.add_option("-c,--ctx-size,--ctx", o.ctx, "tokens per window")->check(CLI::Range(4, 1 << 20))->capture_default_str();
  AddEngineFlags(app, o.engine, "plain", /*batch=*/true);
  app.add_option("--chunks", o.max_windows, "score at most this many windows (0 = all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_flag("--kl", o.kl, "also run the plain cache and report KL(plain || --kv) and top-1 agreement");
  app.add_flag("--no-bos", o.no_bos, "do not start windows with <bos>");
  if (auto code = ParseCommandLine(app, "perplexity", argc, argv)) return *code;
  Status s = FinishCommonFlags(o.common, {&positional_model});
  if (s.ok()) s = RunPerplexityImpl(o);
  return s.ok() ? kExitOk : Fail("perplexity", s);
}

}  // namespace g4::cli
