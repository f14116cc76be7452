// g4 generate MODEL_DIR "prompt": one answer, streamed to stdout, then a
// timing line on stderr.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/sampling_flags.h"
#include "engine/generator.h"
#include "tokenizer/chat_format.h"

namespace g4::cli {
namespace {

struct GenerateFlags {
  std::string model_dir, prompt, system;
  bool raw = false, think = false;
  SamplingFlags sampling;
};

Status RunGenerateImpl(const GenerateFlags& f) {
  G4_ASSIGN_OR_RETURN(std::unique_ptr<ModelBundle> bundle, LoadModelBundle(f.model_dir));
  std::vector<int32_t> ids;
  GenerateOptions options;
  options.sampling = ResolveSampling(f.sampling, *bundle);
  options.max_tokens = f.sampling.max_tokens;
  options.stop_strings = f.sampling.stop;
  if (f.raw) {
    // Raw completion: BOS, then the text (spec 6.1: the tokenizer adds none).
    if (bundle->tokenizer->bos_id() >= 0) ids.push_back(bundle->tokenizer->bos_id());
    G4_ASSIGN_OR_RETURN(std::vector<int32_t> text, bundle->tokenizer->Encode(f.prompt));
    ids.insert(ids.end(), text.begin(), text.end());
    options.stop_ids = bundle->RawStopIds();
  } else {
    std::vector<ChatMessage> messages;
    if (!f.system.empty()) messages.push_back({.role = "system", .content = f.system});
    messages.push_back({.role = "user", .content = f.prompt});
    ChatOptions chat;
    chat.enable_thinking = f.think;
    chat.empty_thought_channel = bundle->empty_thought_channel;
    G4_ASSIGN_OR_RETURN(std::string rendered, RenderChat(messages, chat));
    G4_ASSIGN_OR_RETURN(ids, bundle->tokenizer->Encode(rendered));
    options.stop_ids = bundle->ChatStopIds();
  }
  Generator gen(*bundle);
  G4_ASSIGN_OR_RETURN(GenerateResult r, gen.Generate(ids, options, [](std::string_view text) {
                        std::fwrite(text.data(), 1, text.size(), stdout);
                        std::fflush(stdout);
                      }));
  std::printf("\n");
  std::fflush(stdout);
  const double prefill_tps = r.prefill_seconds > 0 ? r.prompt_tokens / r.prefill_seconds : 0;
  const double decode_tps = r.decode_seconds > 0 ? r.tokens.size() / r.decode_seconds : 0;
  std::fprintf(stderr,
               "[g4] prompt %d tokens, %.1f tok/s | decode %zu tokens, %.1f tok/s | time to first token %.0f ms | "
               "finish: %s\n",
               r.prompt_tokens, prefill_tps, r.tokens.size(), decode_tps, r.prefill_seconds * 1000,
               r.finish_reason.c_str());
  return Status::Ok();
}

}  // namespace

int RunGenerate(int argc, char** argv) {
  CLI::App app{"Generate an answer to a prompt, streaming it to stdout", "g4 generate"};
  GenerateFlags f;
  app.add_option("model", f.model_dir, "model directory")->required();
  app.add_option("prompt", f.prompt, "the prompt")->required();
  app.add_flag("--raw", f.raw, "complete the text as is, without the chat format");
  app.add_option("--system", f.system, "system prompt (chat format only)");
  app.add_flag("--think", f.think, "enable thinking (chat format only)");
  AddSamplingFlags(app, f.sampling);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  Status s = RunGenerateImpl(f);
  if (!s.ok()) return Fail("generate", s);
  return 0;
}

}  // namespace g4::cli
