// config.json -> Gemma4Config: locating the text config, scalar fields and
// their validation. Layer geometry is in config_layers.cc, the MLX
// quantization block in config_quant.cc, generation_config.json in
// config_generation.cc.
#include "io/config.h"

#include <algorithm>
#include <climits>
#include <exception>
#include <new>

#include "core/file_read.h"
#include "core/json.h"
#include "core/limits.h"
#include "io/config_internal.h"

namespace g4 {
namespace {

using config_internal::FieldReader;
using config_internal::Json;

// Upper bounds far above any Gemma 4 size; they keep products such as
// vocab * hidden or heads * head_dim * hidden well inside int64.
constexpr int64_t kMaxDim = int64_t{1} << 20;
constexpr int64_t kMaxHeads = int64_t{1} << 16;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxExperts = int64_t{1} << 16;

bool IsTextType(const std::string& t) { return t == "gemma4_text" || t == "gemma4_unified_text"; }
bool IsWrapperType(const std::string& t) { return t == "gemma4" || t == "gemma4_unified"; }

StatusOr<std::string> ResolveModelType(const FieldReader& top, const FieldReader* nested_text) {
  G4_ASSIGN_OR_RETURN(std::optional<std::string> top_type, top.String("model_type"));
  if (top_type && !IsTextType(*top_type) && !IsWrapperType(*top_type)) {
    return top.Error("model_type",
                     "'" + *top_type +
                         "' is not a Gemma 4 model (expected gemma4, gemma4_unified, gemma4_text or "
                         "gemma4_unified_text)",
                     StatusCode::kUnsupported);
  }
  if (nested_text != nullptr) {
    G4_ASSIGN_OR_RETURN(std::optional<std::string> text_type, nested_text->String("model_type"));
    if (text_type) {
      if (!IsTextType(*text_type)) {
        return config_internal::FieldError(
            "config", "text_config.model_type",
            "'" + *text_type + "' is not a Gemma 4 text model (expected gemma4_text or gemma4_unified_text)",
            StatusCode::kUnsupported);
      }
      return *text_type;
    }
  }
  if (!top_type) return top.Error("model_type", "missing");
  if (*top_type == "gemma4") return std::string("gemma4_text");
  if (*top_type == "gemma4_unified") return std::string("gemma4_unified_text");
  return *top_type;
}

// Fields that change the computation in ways g4 does not implement.
Status CheckUnsupportedFeatures(const FieldReader& f) {
  G4_ASSIGN_OR_RETURN(std::optional<std::string> act, f.String("hidden_activation"));
  if (act && *act != "gelu_pytorch_tanh") {
    return f.Error("hidden_activation", "'" + *act + "' is not supported (only gelu_pytorch_tanh)",
                   StatusCode::kUnsupported);
  }
  G4_ASSIGN_OR_RETURN(std::optional<bool> bias, f.Bool("attention_bias"));
  if (bias.value_or(false)) {
    return f.Error("attention_bias", "true is not supported (Gemma 4 attention has no biases)",
                   StatusCode::kUnsupported);
  }
  G4_ASSIGN_OR_RETURN(std::optional<std::string> bidi, f.String("use_bidirectional_attention"));
  if (bidi && *bidi != "vision") {
    if (*bidi == "all") {
      return f.Error("use_bidirectional_attention", "'all' (non-causal attention) is not supported",
                     StatusCode::kUnsupported);
    }
    return f.Error("use_bidirectional_attention", "unknown value '" + *bidi + "' (expected vision, all or null)");
  }
  return Status::Ok();
}

// Reads every scalar field. `fallback` is the top level of a nested config:
// it supplies vocab_size, tie_word_embeddings and the token ids the text
// config lacks.
Status ReadScalars(const FieldReader& f, const FieldReader* fallback, Gemma4Config& cfg) {
  auto pick = [&](std::string_view key) -> const FieldReader& {
    return (fallback != nullptr && f.Find(key) == nullptr) ? *fallback : f;
  };
  G4_ASSIGN_OR_RETURN(cfg.vocab_size, pick("vocab_size").RequiredInt("vocab_size", 1, kMaxVocab));
  G4_ASSIGN_OR_RETURN(cfg.hidden_size, f.RequiredInt("hidden_size", 1, kMaxDim));
  G4_ASSIGN_OR_RETURN(cfg.intermediate_size, f.RequiredInt("intermediate_size", 1, kMaxDim));
  G4_ASSIGN_OR_RETURN(cfg.num_hidden_layers, f.RequiredInt("num_hidden_layers", 1, kMaxLayers));
  G4_ASSIGN_OR_RETURN(cfg.num_attention_heads, f.RequiredInt("num_attention_heads", 1, kMaxHeads));
  G4_ASSIGN_OR_RETURN(cfg.num_key_value_heads, f.RequiredInt("num_key_value_heads", 1, kMaxHeads));
  G4_ASSIGN_OR_RETURN(cfg.head_dim, f.RequiredInt("head_dim", 1, kMaxDim));
  if (cfg.head_dim % 2 != 0) {
    return f.Error("head_dim", "must be even (RoPE rotates pairs), got " + std::to_string(cfg.head_dim));
  }
  G4_ASSIGN_OR_RETURN(std::optional<int64_t> global_head_dim, f.Int("global_head_dim", 1, kMaxDim));
  cfg.global_head_dim = static_cast<int>(global_head_dim.value_or(0));
  if (cfg.global_head_dim % 2 != 0) {
    return f.Error("global_head_dim", "must be even (RoPE rotates pairs), got " + std::to_string(cfg.global_head_dim));
  }
  G4_ASSIGN_OR_RETURN(std::optional<int64_t> global_kv, f.Int("num_global_key_value_heads", 0, kMaxHeads));
  cfg.num_global_key_value_heads = static_cast<int>(global_kv.value_or(0));
  G4_ASSIGN_OR_RETURN(std::optional<bool> k_eq_v, f.Bool("attention_k_eq_v"));
  cfg.attention_k_eq_v = k_eq_v.value_or(false);

  G4_ASSIGN_OR_RETURN(std::optional<double> eps, f.Double("rms_norm_eps"));
  if (eps) {
    if (*eps <= 0) return f.Error("rms_norm_eps", "must be positive, got " + config_internal::FormatDouble(*eps));
    G4_RETURN_IF_ERROR(config_internal::CheckRange(f, "rms_norm_eps", *eps, config_internal::kRmsNormEpsRange));
    cfg.rms_norm_eps = *eps;
  }
  G4_ASSIGN_OR_RETURN(std::optional<int64_t> window, f.Int("sliding_window", 1, INT_MAX));
  cfg.sliding_window = static_cast<int>(window.value_or(0));
  G4_ASSIGN_OR_RETURN(std::optional<double> softcap, f.Double("final_logit_softcapping"));
  if (softcap && *softcap < 0) {
    return f.Error("final_logit_softcapping",
                   "must not be negative, got " + config_internal::FormatDouble(*softcap));
  }
  if (softcap && *softcap != 0) {
    G4_RETURN_IF_ERROR(config_internal::CheckRange(f, "final_logit_softcapping", *softcap,
                                                   config_internal::kSoftcapRange, " (or 0 for none)"));
  }
  cfg.final_logit_softcapping = softcap.value_or(0.0);
  G4_ASSIGN_OR_RETURN(std::optional<bool> tie, pick("tie_word_embeddings").Bool("tie_word_embeddings"));
  cfg.tie_word_embeddings = tie.value_or(true);

  G4_ASSIGN_OR_RETURN(std::optional<int64_t> ple, f.Int("hidden_size_per_layer_input", 0, kMaxDim));
  cfg.hidden_size_per_layer_input = static_cast<int>(ple.value_or(0));
  if (cfg.hidden_size_per_layer_input > 0) {
    G4_ASSIGN_OR_RETURN(cfg.vocab_size_per_layer_input,
                        f.RequiredInt("vocab_size_per_layer_input", 1, kMaxVocab));
  }

  G4_ASSIGN_OR_RETURN(std::optional<int64_t> shared, f.Int("num_kv_shared_layers", 0, kMaxLayers));
  cfg.num_kv_shared_layers = static_cast<int>(shared.value_or(0));
  if (cfg.num_kv_shared_layers > cfg.num_hidden_layers) {
    return InvalidArgument("[config] num_kv_shared_layers (" + std::to_string(cfg.num_kv_shared_layers) +
                           ") is larger than num_hidden_layers (" + std::to_string(cfg.num_hidden_layers) + ")");
  }
  G4_ASSIGN_OR_RETURN(std::optional<bool> double_wide, f.Bool("use_double_wide_mlp"));
  cfg.use_double_wide_mlp = double_wide.value_or(false);

  G4_ASSIGN_OR_RETURN(std::optional<bool> moe, f.Bool("enable_moe_block"));
  cfg.enable_moe_block = moe.value_or(false);
  if (cfg.enable_moe_block) {
    G4_ASSIGN_OR_RETURN(cfg.num_experts, f.RequiredInt("num_experts", 1, kMaxExperts));
    G4_ASSIGN_OR_RETURN(cfg.top_k_experts, f.RequiredInt("top_k_experts", 1, kMaxExperts));
    G4_ASSIGN_OR_RETURN(cfg.moe_intermediate_size, f.RequiredInt("moe_intermediate_size", 1, kMaxDim));
    if (cfg.top_k_experts > cfg.num_experts) {
      return InvalidArgument("[config] top_k_experts (" + std::to_string(cfg.top_k_experts) +
                             ") is larger than num_experts (" + std::to_string(cfg.num_experts) + ")");
    }
  }

  G4_ASSIGN_OR_RETURN(std::optional<int64_t> max_pos, f.Int("max_position_embeddings", 0, INT_MAX));
  cfg.max_position_embeddings = static_cast<int>(max_pos.value_or(0));
  G4_ASSIGN_OR_RETURN(std::optional<std::string> act, f.String("hidden_activation"));
  if (act) cfg.hidden_activation = *act;
  G4_RETURN_IF_ERROR(CheckUnsupportedFeatures(f));

  // Token ids. pad is never looked up by inference, so any int is kept.
  G4_ASSIGN_OR_RETURN(std::optional<int64_t> pad, pick("pad_token_id").Int("pad_token_id", INT_MIN, INT_MAX));
  cfg.pad_token_id = static_cast<int>(pad.value_or(0));
  const int64_t max_id = cfg.vocab_size - 1;
  G4_ASSIGN_OR_RETURN(std::optional<int64_t> bos, pick("bos_token_id").Int("bos_token_id", 0, max_id));
  cfg.bos_token_id = static_cast<int>(bos.value_or(2));
  // eos: the union of the text config's and the top level's. Released IT
  // configs say 1 in text_config but [1, 106] at the top, and stopping at
  // <turn|> (106) is what HF generation does (it reads the top level first).
  G4_ASSIGN_OR_RETURN(cfg.eos_token_ids, f.IntOrIntList("eos_token_id", 0, max_id));
  if (fallback != nullptr) {
    G4_ASSIGN_OR_RETURN(std::vector<int> top_eos, fallback->IntOrIntList("eos_token_id", 0, max_id));
    for (int id : top_eos) {
      if (std::find(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end(), id) == cfg.eos_token_ids.end()) {
        cfg.eos_token_ids.push_back(id);
      }
    }
  }
  return Status::Ok();
}

StatusOr<Gemma4Config> ParseConfigImpl(std::string_view json_text) {
  // Bounded: depth, value count and duplicate keys (a repeated key would let
  // one of two disagreeing values win silently).
  G4_ASSIGN_OR_RETURN(Json root, ParseJsonBounded<Json>(json_text, "config", ""));
  if (!root.is_object()) {
    return InvalidArgument(std::string("[config] expected a JSON object at the top level, got ") + root.type_name());
  }
  const FieldReader top(root, "config");
  const Json* nested = top.Find("text_config");
  if (nested != nullptr && !nested->is_object()) {
    return top.Error("text_config", std::string("expected an object, got ") + nested->type_name());
  }
  // Nested-config errors still name bare fields ("hidden_size"): the text
  // config is the only place they can be.
  const FieldReader text(nested != nullptr ? *nested : root, "config");

  Gemma4Config cfg;
  G4_ASSIGN_OR_RETURN(cfg.model_type, ResolveModelType(top, nested != nullptr ? &text : nullptr));
  G4_RETURN_IF_ERROR(ReadScalars(text, nested != nullptr ? &top : nullptr, cfg));
  G4_RETURN_IF_ERROR(config_internal::ParseLayerTypes(text, cfg));
  const bool has_sliding =
      std::find(cfg.layer_types.begin(), cfg.layer_types.end(), AttentionType::kSliding) != cfg.layer_types.end();
  if (has_sliding && cfg.sliding_window == 0) return text.Error("sliding_window", "missing");
  G4_RETURN_IF_ERROR(config_internal::ParseRope(text, cfg));
  G4_RETURN_IF_ERROR(config_internal::DeriveLayerGeometry(text, cfg));
  G4_RETURN_IF_ERROR(
      config_internal::ParseQuantization(top, nested != nullptr ? &text : nullptr, cfg.quantization));
  return cfg;
}

}  // namespace

StatusOr<Gemma4Config> ParseGemma4Config(std::string_view json_text) {
  // nlohmann reports type errors and allocation failures by throwing; none
  // may escape. The readers check types first, so these are a backstop.
  try {
    return ParseConfigImpl(json_text);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("[config] out of memory while parsing");
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("[config] ") + e.what());
  }
}

StatusOr<Gemma4Config> LoadGemma4Config(const std::string& dir) {
  const std::string path = config_internal::JoinPath(dir, "config.json");
  StatusOr<std::string> text = ReadFileToString(path, kMaxConfigBytes, "kMaxConfigBytes");
  if (!text.ok()) return Status(text.status().code(), "[config] " + text.status().message());
  StatusOr<Gemma4Config> cfg = ParseGemma4Config(*text);
  if (!cfg.ok()) return config_internal::WithFilePath(cfg.status(), "config", path);
  return cfg;
}

}  // namespace g4
