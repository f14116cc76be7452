#include "cli/commands.h"

namespace g4::cli {

const std::vector<Command>& Commands() {
  static const std::vector<Command> kCommands = {
      {"generate", "answer one prompt, streaming text to stdout", RunGenerate},
      {"chat", "interactive chat in the terminal", RunChat},
      {"serve", "serve the OpenAI and Anthropic APIs and a chat page over HTTP", RunServe},
      {"logits", "write prompt/greedy/decode logits to a safetensors file", RunLogits},
      {"synth", "write a random checkpoint at real Gemma 4 shapes", RunSynth},
      {"bench", "measure prefill and decode speed", RunBench},
      {"kv-eval", "compare KV-cache modes: bytes per token, KL and top-1 vs plain", RunKvEval},
      {"quantize", "write an MLX affine-quantized checkpoint from a Hugging Face one", RunQuantize},
      {"perplexity", "perplexity of a model on a text file", RunPerplexity},
      {"tokenize", "token ids of a text (with their text or pieces)", RunTokenize},
      {"detokenize", "text of token ids", RunDetokenize},
      {"models", "list the Gemma 4 checkpoints in the local Hugging Face cache", RunModels},
  };
  return kCommands;
}

}  // namespace g4::cli
