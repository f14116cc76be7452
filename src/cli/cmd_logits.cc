// g4 logits: the parity tool. Runs a prompt (and optionally greedy or
// teacher-forced decode steps) and writes every logit row to safetensors.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "backend/ops.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "io/safetensors.h"
#include "kv/kv_scheme.h"
#include "model/gemma4_model.h"

namespace g4::cli {
namespace {

struct LogitsOptions {
  std::string model_dir, ids_text, decode_text, out, kv_spec = "plain";
  int greedy = 0;
  int64_t chunk = 512;
};

Status RunLogitsImpl(const LogitsOptions& o) {
  G4_ASSIGN_OR_RETURN(std::vector<int32_t> ids, ParseIdList(o.ids_text));
  std::vector<int32_t> decode_ids;
  if (!o.decode_text.empty()) {
    G4_ASSIGN_OR_RETURN(decode_ids, ParseIdList(o.decode_text));
  }
  if (o.greedy < 0) return InvalidArgument("--greedy must be >= 0");
  G4_ASSIGN_OR_RETURN(KvScheme scheme, KvScheme::Parse(o.kv_spec));
  auto ops = MakeCpuOps();
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Gemma4Model> model, Gemma4Model::Load(o.model_dir, ops.get()));
  const int64_t V = model->vocab_size();
  for (int32_t id : decode_ids)
    if (id < 0 || id >= V)
      return InvalidArgument("--decode-ids: token id " + std::to_string(id) + " is outside the vocabulary (size " +
                             std::to_string(V) + ")");

  SafetensorsWriter out;
  std::vector<float> logits(ids.size() * V);
  G4_ASSIGN_OR_RETURN(std::unique_ptr<SequenceKv> kv, SequenceKv::Make(model->config(), scheme));
  out.SetMetadata("kv", scheme.signature());
  G4_RETURN_IF_ERROR(model->ForwardChunked(ids.data(), ids.size(), o.chunk, *kv, logits.data(), true));
  out.AddF32("logits", {static_cast<int64_t>(ids.size()), V}, logits.data());
  out.AddI32("ids", {static_cast<int64_t>(ids.size())}, ids.data());

  if (o.greedy > 0) {
    // Row 0 is the last prompt position; each step feeds the previous argmax.
    std::vector<float> rows(o.greedy * V);
    std::vector<int32_t> chosen(o.greedy);
    std::copy(logits.end() - V, logits.end(), rows.begin());
    for (int step = 0; step < o.greedy; ++step) {
      float* row = &rows[step * V];
      chosen[step] = static_cast<int32_t>(std::max_element(row, row + V) - row);
      if (step + 1 < o.greedy) G4_RETURN_IF_ERROR(model->Forward(&chosen[step], 1, *kv, row + V, false));
    }
    out.AddI32("greedy_ids", {o.greedy}, chosen.data());
    out.AddF32("greedy_logits", {o.greedy, V}, rows.data());
  }
  if (!decode_ids.empty()) {
    // Teacher forcing from the prompt's cache state.
    G4_ASSIGN_OR_RETURN(std::unique_ptr<SequenceKv> dkv, SequenceKv::Make(model->config(), scheme));
    std::vector<float> last(V);
    G4_RETURN_IF_ERROR(model->ForwardChunked(ids.data(), ids.size(), o.chunk, *dkv, last.data(), false));
    std::vector<float> rows(decode_ids.size() * V);
    for (size_t i = 0; i < decode_ids.size(); ++i)
      G4_RETURN_IF_ERROR(model->Forward(&decode_ids[i], 1, *dkv, &rows[i * V], false));
    out.AddF32("decode_logits", {static_cast<int64_t>(decode_ids.size()), V}, rows.data());
  }
  return out.Write(o.out);
}

}  // namespace

int RunLogits(int argc, char** argv) {
  CLI::App app{"Write logits for a prompt (and greedy / teacher-forced decode) to a safetensors file", "g4 logits"};
  LogitsOptions o;
  app.add_option("--model", o.model_dir, "checkpoint directory (config.json + safetensors)")->required();
  app.add_option("--ids", o.ids_text, "prompt token ids, comma separated")->required();
  app.add_option("--greedy", o.greedy, "greedy steps: writes greedy_ids [N] and greedy_logits [N, V]");
  app.add_option("--decode-ids", o.decode_text, "ids fed one by one after the prompt: writes decode_logits [K, V]");
  app.add_option("--chunk", o.chunk, "prefill chunk size")->check(CLI::PositiveNumber);
  app.add_option("--kv", o.kv_spec,
                 "KV cache scheme (docs/kv-cache.md): plain, affine:8, affine:4, affine:4:32, turbo:k8v3, "
                 "turbo:k4v3, ..., each optionally @N (plain until N tokens, then convert), or "
                 "full=SPEC,sliding=SPEC")
      ->capture_default_str();
  app.add_option("--out", o.out, "output safetensors file")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  Status s = RunLogitsImpl(o);
  if (!s.ok()) return Fail("logits", s);
  return 0;
}

}  // namespace g4::cli
