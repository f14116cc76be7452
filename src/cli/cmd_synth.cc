// g4 synth: writes a random checkpoint at a real model's shapes (for
// benchmarks and demos), with a progress bar on a terminal; the generator
// lives in engine/synth_checkpoint.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/progress.h"
#include "engine/synth_checkpoint.h"

namespace g4::cli {

int RunSynth(int argc, char** argv) {
  CLI::App app{"Write a random checkpoint with a real Gemma 4 geometry (weights are noise)", "g4 synth"};
  SynthOptions o;
  CommonFlags common;
  app.add_option("--preset", o.preset, "model geometry")->required()->check(CLI::IsMember(SynthPresetNames()));
  app.add_option("--quant", o.quant, "f32 / bf16 (Hugging Face layout) or q4 / q8 (MLX affine, group 64)")
      ->check(CLI::IsMember({"f32", "bf16", "q4", "q8"}))
      ->capture_default_str();
  app.add_option("--tokenizer", o.tokenizer_path, "tokenizer.json to copy into the checkpoint")
      ->check(ReadableFile());
  app.add_option("--seed", o.seed, "seed of the weight values")->capture_default_str();
  app.add_option("-o,--out", o.out_dir, "output directory (created if missing)")->required();
  AddCommonFlags(app, common, kThreadsFlag | kJsonFlag);
  if (auto code = ParseCommandLine(app, "synth", argc, argv)) return *code;
  Status s = FinishCommonFlags(common, {}, /*model_required=*/false);
  if (!s.ok()) return Fail("synth", s);
  Verbose(common, "synth " + o.preset + " " + o.quant + ", seed " + std::to_string(o.seed) + " -> " + o.out_dir +
                      (o.tokenizer_path.empty() ? "" : ", tokenizer " + o.tokenizer_path));
  std::unique_ptr<Progress> bar;
  o.progress = [&](uint64_t done, uint64_t total) {
    if (!bar) bar = std::make_unique<Progress>("synth", total, Progress::Unit::kBytes, !common.quiet);
    bar->Update(done);
  };
  const auto start = std::chrono::steady_clock::now();
  StatusOr<SynthSummary> sum = SynthesizeCheckpoint(o);
  if (bar) bar->Finish();
  if (!sum.ok()) return Fail("synth", sum.status());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (common.json) {
    nlohmann::ordered_json j = {{"dir", sum->dir},
                                {"preset", o.preset},
                                {"quant", o.quant},
                                {"seed", o.seed},
                                {"tensors", sum->num_tensors},
                                {"parameters", sum->num_params},
                                {"total_bytes", sum->total_bytes},
                                {"safetensors_bytes", sum->safetensors_bytes},
                                {"seconds", secs}};
    std::printf("%s\n", j.dump().c_str());
    return kExitOk;
  }
  std::printf("%s\n", sum->dir.c_str());
  std::printf("  preset %s, %s, seed %llu\n", o.preset.c_str(), o.quant.c_str(),
              static_cast<unsigned long long>(o.seed));
  std::printf("  %zu tensors, %.3f B parameters\n", sum->num_tensors, sum->num_params / 1e9);
  std::printf("  %llu bytes total (%.2f GB; model.safetensors %llu bytes)\n",
              static_cast<unsigned long long>(sum->total_bytes), sum->total_bytes / 1e9,
              static_cast<unsigned long long>(sum->safetensors_bytes));
  std::printf("  written in %.1f s (%.2f GB/s)\n", secs, secs > 0 ? sum->total_bytes / 1e9 / secs : 0.0);
  return kExitOk;
}

}  // namespace g4::cli
