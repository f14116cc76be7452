// Per-layer parts of config.json: layer types, RoPE per layer type, and the
// derived geometry of spec section 2.4 / 2.5 (head dim, KV heads, K=V, KV
// sharing with donors, MLP width).
#include <string>
#include <vector>

#include "io/config_internal.h"

namespace g4::config_internal {
namespace {

constexpr int64_t kMaxDim = int64_t{1} << 20;
constexpr int64_t kMaxHeads = int64_t{1} << 16;
constexpr int kDefaultSlidingPattern = 6;  // HF: five sliding layers, then one full

const char* LayerTypeName(AttentionType t) {
  return t == AttentionType::kFull ? "full_attention" : "sliding_attention";
}

Status ParseRopeEntry(const FieldReader& r, RopeParams& out) {
  G4_ASSIGN_OR_RETURN(std::optional<std::string> type, r.String("rope_type"));
  const std::string type_name = type.value_or("default");
  if (type_name == "default") {
    out.type = RopeParams::Type::kDefault;
  } else if (type_name == "proportional") {
    out.type = RopeParams::Type::kProportional;
  } else {
    return r.Error("rope_type", "'" + type_name + "' is not supported (expected default or proportional)",
                   StatusCode::kUnsupported);
  }
  G4_ASSIGN_OR_RETURN(std::optional<double> theta, r.Double("rope_theta"));
  if (!theta) return r.Error("rope_theta", "missing");
  if (*theta <= 0) return r.Error("rope_theta", "must be positive, got " + FormatDouble(*theta));
  G4_RETURN_IF_ERROR(CheckRange(r, "rope_theta", *theta, kRopeThetaRange));
  out.theta = *theta;

  G4_ASSIGN_OR_RETURN(std::optional<double> partial, r.Double("partial_rotary_factor"));
  if (partial && (*partial <= 0 || *partial > 1)) {
    return r.Error("partial_rotary_factor", "must be in (0, 1], got " + FormatDouble(*partial));
  }
  out.partial_rotary_factor = partial.value_or(1.0);
  if (out.type == RopeParams::Type::kDefault && out.partial_rotary_factor != 1.0) {
    return r.Error("partial_rotary_factor", "partial rotation with rope_type default is not supported",
                   StatusCode::kUnsupported);
  }
  G4_ASSIGN_OR_RETURN(std::optional<double> factor, r.Double("factor"));
  if (factor && *factor <= 0) return r.Error("factor", "must be positive, got " + FormatDouble(*factor));
  if (factor) G4_RETURN_IF_ERROR(CheckRange(r, "factor", *factor, kRopeFactorRange));
  // HF's default RoPE ignores `factor`; only proportional divides by it.
  out.factor = out.type == RopeParams::Type::kProportional ? factor.value_or(1.0) : 1.0;
  G4_ASSIGN_OR_RETURN(std::optional<double> attention_factor, r.Double("attention_factor"));
  if (attention_factor && *attention_factor != 1.0) {
    return r.Error("attention_factor", "values other than 1.0 are not supported", StatusCode::kUnsupported);
  }
  return Status::Ok();
}

// Gemma-3-style flat fields, used only when rope_parameters is absent.
Status ParseLegacyRope(const FieldReader& f, Gemma4Config& cfg) {
  if (f.Find("rope_scaling") != nullptr) {
    return f.Error("rope_scaling", "not supported (Gemma 4 uses rope_parameters)", StatusCode::kUnsupported);
  }
  G4_ASSIGN_OR_RETURN(std::optional<double> local_theta, f.Double("rope_local_base_freq"));
  G4_ASSIGN_OR_RETURN(std::optional<double> global_theta, f.Double("rope_theta"));
  const char* partial_key = f.Find("global_partial_rotary_factor") ? "global_partial_rotary_factor"
                                                                   : "partial_rotary_factor";
  G4_ASSIGN_OR_RETURN(std::optional<double> partial, f.Double(partial_key));
  if (local_theta && *local_theta <= 0) {
    return f.Error("rope_local_base_freq", "must be positive, got " + FormatDouble(*local_theta));
  }
  if (global_theta && *global_theta <= 0) {
    return f.Error("rope_theta", "must be positive, got " + FormatDouble(*global_theta));
  }
  if (local_theta) G4_RETURN_IF_ERROR(CheckRange(f, "rope_local_base_freq", *local_theta, kRopeThetaRange));
  if (global_theta) G4_RETURN_IF_ERROR(CheckRange(f, "rope_theta", *global_theta, kRopeThetaRange));
  if (partial && (*partial <= 0 || *partial > 1)) {
    return f.Error(partial_key, "must be in (0, 1], got " + FormatDouble(*partial));
  }
  cfg.rope_sliding = RopeParams{RopeParams::Type::kDefault, local_theta.value_or(10000.0), 1.0, 1.0};
  cfg.rope_full =
      RopeParams{RopeParams::Type::kProportional, global_theta.value_or(1000000.0), partial.value_or(0.25), 1.0};
  return Status::Ok();
}

// Reads per_layer_config (an object keyed by layer index, or a list of N
// entries) into one entry pointer per layer; null where a layer has none.
StatusOr<std::vector<const Json*>> CollectLayerOverrides(const FieldReader& f, const Json& plc, int n) {
  std::vector<const Json*> out(n, nullptr);
  auto take = [&](int layer, const Json& entry, const std::string& name) -> Status {
    if (entry.is_null()) return Status::Ok();
    if (!entry.is_object()) {
      return FieldError(f.module(), name, std::string("expected an object, got ") + entry.type_name());
    }
    if (out[layer] != nullptr) return FieldError(f.module(), name, "layer " + std::to_string(layer) + " listed twice");
    out[layer] = &entry;
    return Status::Ok();
  };
  if (plc.is_array()) {
    if (plc.size() != static_cast<size_t>(n)) {
      return f.Error("per_layer_config", "has " + std::to_string(plc.size()) + " entries but num_hidden_layers is " +
                                             std::to_string(n));
    }
    for (int l = 0; l < n; ++l) {
      G4_RETURN_IF_ERROR(take(l, plc[l], f.Name("per_layer_config." + std::to_string(l))));
    }
    return out;
  }
  if (!plc.is_object()) {
    return f.Error("per_layer_config", std::string("expected an object keyed by layer index, got ") + plc.type_name());
  }
  for (auto it = plc.begin(); it != plc.end(); ++it) {
    const std::string& key = it.key();
    const std::string name = f.Name("per_layer_config." + key);
    bool digits = !key.empty() && key.size() <= 9;
    for (char c : key) digits = digits && c >= '0' && c <= '9';
    if (!digits) return f.Error("per_layer_config", "key '" + key + "' is not a layer index");
    const long layer = std::stol(key);
    if (layer >= n) {
      return FieldError(f.module(), name, "layer index out of range (num_hidden_layers is " + std::to_string(n) + ")");
    }
    G4_RETURN_IF_ERROR(take(static_cast<int>(layer), it.value(), name));
  }
  return out;
}

// Applies one per_layer_config entry. Keys other than the head geometry are
// accepted only when they repeat the global value: anything else would be a
// per-layer variation g4 does not model.
Status ApplyLayerOverride(const FieldReader& f, const Json& entry, int layer, const Gemma4Config& cfg,
                          LayerGeometry& g, std::string& dim_src, std::string& kv_src) {
  const FieldReader o(entry, f.module(), f.Name("per_layer_config." + std::to_string(layer) + "."));
  G4_ASSIGN_OR_RETURN(std::optional<int64_t> head_dim, o.Int("head_dim", 1, kMaxDim));
  if (head_dim) {
    g.head_dim = static_cast<int>(*head_dim);
    dim_src = o.Name("head_dim");
  }
  G4_ASSIGN_OR_RETURN(std::optional<int64_t> kv, o.Int("num_key_value_heads", 1, kMaxHeads));
  if (kv) {
    g.num_kv_heads = static_cast<int>(*kv);
    kv_src = o.Name("num_key_value_heads");
  }
  G4_ASSIGN_OR_RETURN(std::optional<int64_t> heads, o.Int("num_attention_heads", 1, kMaxHeads));
  if (heads && *heads != cfg.num_attention_heads) {
    return o.Error("num_attention_heads",
                   std::to_string(*heads) + " differs from num_attention_heads (" +
                       std::to_string(cfg.num_attention_heads) + "); per-layer query head counts are not supported",
                   StatusCode::kUnsupported);
  }
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    const std::string& key = it.key();
    if (key == "head_dim" || key == "num_key_value_heads" || key == "num_attention_heads") continue;
    if (it->is_null()) continue;
    const Json* global = f.Find(key);
    // Only scalars are compared: comparing nested values recurses.
    if (global != nullptr && it->is_primitive() && global->is_primitive() && *global == *it) continue;
    return o.Error(key, "per-layer override is not supported", StatusCode::kUnsupported);
  }
  return Status::Ok();
}

}  // namespace

Status ParseLayerTypes(const FieldReader& f, Gemma4Config& cfg) {
  const int n = cfg.num_hidden_layers;
  cfg.layer_types.clear();
  const Json* types = f.Find("layer_types");
  if (types != nullptr) {
    if (!types->is_array()) {
      return f.Error("layer_types", std::string("expected a list of strings, got ") + types->type_name());
    }
    if (types->size() != static_cast<size_t>(n)) {
      return f.Error("layer_types", "has " + std::to_string(types->size()) + " entries but num_hidden_layers is " +
                                        std::to_string(n));
    }
    for (int l = 0; l < n; ++l) {
      const Json& e = (*types)[l];
      const std::string name = f.Name("layer_types[" + std::to_string(l) + "]");
      if (!e.is_string()) {
        return FieldError(f.module(), name, std::string("expected a layer type string, got ") + e.type_name());
      }
      const std::string& s = e.get_ref<const std::string&>();
      if (s == "sliding_attention") {
        cfg.layer_types.push_back(AttentionType::kSliding);
      } else if (s == "full_attention") {
        cfg.layer_types.push_back(AttentionType::kFull);
      } else {
        return FieldError(f.module(), name,
                          "unknown layer type '" + s + "' (expected sliding_attention or full_attention)");
      }
    }
  } else {
    G4_ASSIGN_OR_RETURN(std::optional<int64_t> pattern, f.Int("sliding_window_pattern", 1, INT32_MAX));
    const int64_t p = pattern.value_or(kDefaultSlidingPattern);
    for (int l = 0; l < n; ++l) {
      cfg.layer_types.push_back((l + 1) % p != 0 ? AttentionType::kSliding : AttentionType::kFull);
    }
  }
  // HF's Gemma4TextConfig forces the last layer to full attention (with a
  // warning) whatever layer_types says; the reference logits follow that.
  cfg.layer_types.back() = AttentionType::kFull;
  return Status::Ok();
}

Status ParseRope(const FieldReader& f, Gemma4Config& cfg) {
  // HF defaults, kept for a layer type the model does not use.
  cfg.rope_sliding = RopeParams{RopeParams::Type::kDefault, 10000.0, 1.0, 1.0};
  cfg.rope_full = RopeParams{RopeParams::Type::kProportional, 1000000.0, 0.25, 1.0};
  const Json* rp = f.Find("rope_parameters");
  if (rp == nullptr) return ParseLegacyRope(f, cfg);
  if (!rp->is_object()) {
    return f.Error("rope_parameters", std::string("expected an object, got ") + rp->type_name());
  }
  const FieldReader r(*rp, f.module(), f.Name("rope_parameters."));
  for (AttentionType t : {AttentionType::kSliding, AttentionType::kFull}) {
    const char* key = LayerTypeName(t);
    const Json* entry = r.Find(key);
    bool used = false;
    for (AttentionType lt : cfg.layer_types) used = used || lt == t;
    if (entry == nullptr) {
      if (!used) continue;
      if (r.Find("rope_type") != nullptr || r.Find("rope_theta") != nullptr) {
        return f.Error("rope_parameters",
                       "expected one entry per layer type (sliding_attention, full_attention), got a single "
                       "rope_type/rope_theta");
      }
      return r.Error(key, "missing");
    }
    if (!entry->is_object()) return r.Error(key, std::string("expected an object, got ") + entry->type_name());
    G4_RETURN_IF_ERROR(ParseRopeEntry(FieldReader(*entry, f.module(), r.Name(std::string(key) + ".")),
                                      t == AttentionType::kFull ? cfg.rope_full : cfg.rope_sliding));
  }
  return Status::Ok();
}

Status DeriveLayerGeometry(const FieldReader& f, Gemma4Config& cfg) {
  const int n = cfg.num_hidden_layers;
  const Json* plc = f.Find("per_layer_config");
  std::vector<const Json*> overrides(n, nullptr);
  if (plc != nullptr) {
    G4_ASSIGN_OR_RETURN(overrides, CollectLayerOverrides(f, *plc, n));
  } else {
    for (AttentionType t : cfg.layer_types) {
      if (t == AttentionType::kFull && cfg.global_head_dim == 0) {
        return f.Error("global_head_dim", "missing (full_attention layers need it when there is no per_layer_config)");
      }
    }
  }

  cfg.layers.assign(n, LayerGeometry{});
  for (int l = 0; l < n; ++l) {
    LayerGeometry& g = cfg.layers[l];
    g.type = cfg.layer_types[l];
    const bool full = g.type == AttentionType::kFull;
    g.head_dim = cfg.head_dim;
    g.num_kv_heads = cfg.num_key_value_heads;
    std::string dim_src = "head_dim";
    std::string kv_src = "num_key_value_heads";
    if (plc == nullptr) {
      // HF: the global KV head count applies only to K=V models.
      if (full) {
        g.head_dim = cfg.global_head_dim;
        dim_src = "global_head_dim";
        if (cfg.attention_k_eq_v && cfg.num_global_key_value_heads > 0) {
          g.num_kv_heads = cfg.num_global_key_value_heads;
          kv_src = "num_global_key_value_heads";
        }
      }
    } else if (overrides[l] != nullptr) {
      G4_RETURN_IF_ERROR(ApplyLayerOverride(f, *overrides[l], l, cfg, g, dim_src, kv_src));
    }
    if (g.head_dim % 2 != 0) {
      return FieldError(f.module(), dim_src, "must be even (RoPE rotates pairs), got " + std::to_string(g.head_dim));
    }
    if (cfg.num_attention_heads % g.num_kv_heads != 0) {
      return InvalidArgument("[" + f.module() + "] num_attention_heads (" + std::to_string(cfg.num_attention_heads) +
                             ") is not a multiple of " + kv_src + " (" + std::to_string(g.num_kv_heads) + ")");
    }
    g.k_eq_v = cfg.attention_k_eq_v && full;
  }

  // KV sharing (section 2.5): the last S layers read the K/V of the last
  // layer of their own type that still computes K/V.
  const int first_shared = cfg.first_kv_shared_layer();
  for (int l = 0; l < n; ++l) {
    LayerGeometry& g = cfg.layers[l];
    if (cfg.num_kv_shared_layers > 0 && l >= first_shared) {
      g.kv_shared = true;
      for (int j = first_shared - 1; j >= 0 && g.donor < 0; --j) {
        if (cfg.layers[j].type == g.type) g.donor = j;
      }
      if (g.donor < 0) {
        return InvalidArgument("[" + f.module() + "] num_kv_shared_layers: layer " + std::to_string(l) + " (" +
                               LayerTypeName(g.type) + ") shares K/V, but no layer before " +
                               std::to_string(first_shared) + " is " + LayerTypeName(g.type) +
                               ", so it has no donor");
      }
      const LayerGeometry& d = cfg.layers[g.donor];
      if (d.head_dim != g.head_dim || d.num_kv_heads != g.num_kv_heads) {
        return InvalidArgument("[" + f.module() + "] per_layer_config: layer " + std::to_string(l) +
                               " reads the K/V of layer " + std::to_string(g.donor) +
                               " but their head_dim / num_key_value_heads differ (" + std::to_string(g.head_dim) +
                               "/" + std::to_string(g.num_kv_heads) + " vs " + std::to_string(d.head_dim) + "/" +
                               std::to_string(d.num_kv_heads) + ")");
      }
    }
    g.mlp_width = (cfg.use_double_wide_mlp && g.kv_shared) ? 2 * cfg.intermediate_size : cfg.intermediate_size;
  }

  // Keep the informational global_* fields meaningful for per_layer_config
  // files (transformers >= 5.15 no longer writes them).
  for (const LayerGeometry& g : cfg.layers) {
    if (g.type != AttentionType::kFull) continue;
    if (cfg.global_head_dim == 0) cfg.global_head_dim = g.head_dim;
    if (cfg.num_global_key_value_heads == 0 && cfg.attention_k_eq_v && g.num_kv_heads != cfg.num_key_value_heads) {
      cfg.num_global_key_value_heads = g.num_kv_heads;
    }
    break;
  }
  return Status::Ok();
}

}  // namespace g4::config_internal
