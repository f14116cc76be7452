// g4 quantize -m MODEL OUT_DIR: a Hugging Face checkpoint to an MLX
// affine-quantized one (engine/quantize.h says what is written), with a
// progress bar on a terminal. An output directory that holds anything is
// refused unless --force.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/progress.h"
#include "engine/quantize.h"

namespace g4::cli {
namespace {

// Entries of `dir` (0 when it does not exist); -1 when it is not a directory.
int64_t Entries(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return 0;
  if (!fs::is_directory(dir, ec)) return -1;
  int64_t n = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) ++n;
  return n;
}

}  // namespace

int RunQuantize(int argc, char** argv) {
  CLI::App app{"Write an MLX affine-quantized checkpoint (u32 codes, bf16 scales and biases) from a Hugging Face one",
               "g4 quantize"};
  CommonFlags common;
  std::string positional_model, out_dir, out_opt;
  bool force = false;
  QuantizeOptions o;
  app.add_option("MODEL", positional_model, "the Hugging Face checkpoint to quantize (same as -m)");
  app.add_option("OUT_DIR", out_dir, "output directory (created if missing)");
  AddCommonFlags(app, common, kModelFlag | kThreadsFlag | kJsonFlag);
  app.add_option("-o,--out", out_opt, "output directory (instead of the OUT_DIR argument)");
  app.add_option("--bits", o.bits, "bits per weight")->check(CLI::IsMember({2, 3, 4, 5, 6, 8}))->capture_default_str();
  app.add_option("--group-size", o.group_size, "weights per scale/bias group, along the input axis")
      ->check(CLI::IsMember({32, 64, 128}))
      ->capture_default_str();
  app.add_flag("--force", force, "write into an output directory that is not empty (files of the same name are replaced)");
  if (auto code = ParseCommandLine(app, "quantize", argc, argv)) return *code;
  Status s = FinishCommonFlags(common, {&positional_model, &out_dir});
  if (!s.ok()) return Fail("quantize", s);
  if (!out_opt.empty()) {
    if (!out_dir.empty()) return UsageError("quantize", "give the output directory once: OUT_DIR or -o, not both");
    out_dir = out_opt;
  }
  if (out_dir.empty()) return UsageError("quantize", "no output directory: give OUT_DIR or -o DIR");
  StatusOr<std::string> in_dir = ResolveModel(common);
  if (!in_dir.ok()) return Fail("quantize", in_dir.status().code() == StatusCode::kNotFound
                                                ? UsageStatus(in_dir.status().message())
                                                : in_dir.status());
  const int64_t entries = Entries(out_dir);
  if (entries < 0) return Fail("quantize", InvalidArgument("[quantize] " + out_dir + " is not a directory"));
  if (entries > 0 && !force)
    return Fail("quantize", InvalidArgument("[quantize] " + out_dir + " is not empty (" + std::to_string(entries) +
                                            " entries); choose a new directory or add --force to write into it"));
  Verbose(common, "quantize " + *in_dir + " -> " + out_dir + ": " + std::to_string(o.bits) + "-bit, group " +
                      std::to_string(o.group_size));

  // The total is known once the plan is made: the bar starts at the first call.
  std::unique_ptr<Progress> live;
  o.progress = [&](uint64_t done, uint64_t total) {
    if (!live) live = std::make_unique<Progress>("quantize", total, Progress::Unit::kBytes, !common.quiet);
    live->Update(done);
  };
  const auto start = std::chrono::steady_clock::now();
  StatusOr<QuantizeReport> r = QuantizeCheckpoint(*in_dir, out_dir, o);
  if (live) live->Finish();
  if (!r.ok()) return Fail("quantize", r.status());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (common.json) {
    nlohmann::ordered_json j = {{"model", common.model}, {"out", out_dir}, {"bits", o.bits},
                                {"group_size", o.group_size}, {"quantized", r->quantized}, {"kept", r->kept},
                                {"dropped", r->dropped}, {"input_bytes", r->input_bytes},
                                {"output_bytes", r->output_bytes}, {"seconds", secs}};
    std::printf("%s\n", j.dump().c_str());
    return kExitOk;
  }
  std::printf("%s: %d-bit, group %d\n", out_dir.c_str(), o.bits, o.group_size);
  std::printf("  %d matrices quantized, %d tensors kept, %d dropped (vision/audio towers, tied head, unused K/V)\n",
              r->quantized, r->kept, r->dropped);
  std::printf("  %.2f MB -> %.2f MB in %.1f s\n", r->input_bytes / 1e6, r->output_bytes / 1e6, secs);
  return kExitOk;
}

}  // namespace g4::cli
