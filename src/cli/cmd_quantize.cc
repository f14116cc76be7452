// g4 quantize IN_DIR OUT_DIR: a Hugging Face checkpoint to an MLX
// affine-quantized one (engine/quantize.h says what is written).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "engine/quantize.h"

namespace g4::cli {

int RunQuantize(int argc, char** argv) {
  CLI::App app{"Write an MLX affine-quantized checkpoint (u32 codes, bf16 scales and biases) from a Hugging Face one",
               "g4 quantize"};
  std::string in_dir, out_dir;
  QuantizeOptions o;
  app.add_option("IN_DIR", in_dir, "Hugging Face checkpoint directory (config.json + safetensors)")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("OUT_DIR", out_dir, "output directory (created if missing)")->required();
  app.add_option("--bits", o.bits, "bits per weight")
      ->check(CLI::IsMember({2, 3, 4, 5, 6, 8}))
      ->capture_default_str();
  app.add_option("--group-size", o.group_size, "weights per scale/bias group, along the input axis")
      ->check(CLI::IsMember({32, 64, 128}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  const auto start = std::chrono::steady_clock::now();
  StatusOr<QuantizeReport> r = QuantizeCheckpoint(in_dir, out_dir, o);
  if (!r.ok()) return Fail("quantize", r.status());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %d-bit, group %d\n", out_dir.c_str(), o.bits, o.group_size);
  std::printf("  %d matrices quantized, %d tensors kept, %d dropped\n", r->quantized, r->kept, r->dropped);
  std::printf("  %.2f MB -> %.2f MB in %.1f s\n", r->input_bytes / 1e6, r->output_bytes / 1e6, secs);
  return 0;
}

}  // namespace g4::cli
