// g4 synth's generator: presets -> config.json + a tensor plan -> values from a
// counter-based RNG, streamed to model.safetensors.
#include "engine/synth_checkpoint.h"

#include "core/file_read.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>

#include "core/dtype.h"
#include "core/float16.h"
#include "core/mapped_file.h"
#include "io/config.h"
#include "io/safetensors.h"

namespace g4 {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr int kVocab = 262144;
constexpr int kGroupSize = 64;

// Published text-config values (the released config.json files of each
// size). Layer l is full attention iff (l + 1) % period == 0; the last layer
// is always full.
struct Preset {
  const char* name;
  const char* top_type;
  const char* text_type;
  int hidden, layers, period, heads, kv_heads, head_dim, global_head_dim;
  int global_kv_heads;  // 0 = null (only set with attention_k_eq_v)
  bool k_eq_v;
  int intermediate;
  bool double_wide;
  int ple;        // hidden_size_per_layer_input
  int kv_shared;  // num_kv_shared_layers
  int window;
  int max_positions;
  int experts, top_k, moe_intermediate;
  const char* bidirectional;  // nullptr = null
};

// tiny: E2B-like but small, with a full layer before the shared ones so both
// shared layers (4 sliding, 5 full) have a donor (3 and 2).
constexpr Preset kPresets[] = {
    {"tiny", "gemma4", "gemma4_text", 256, 6, 3, 4, 2, 64, 128, 0, false, 512, true, 32, 2, 64, 131072, 0, 0, 0,
     nullptr},
    // tiny-moe: 26B-like (MoE + dense branch, K=V full layers), small.
    {"tiny-moe", "gemma4", "gemma4_text", 256, 6, 3, 4, 2, 64, 128, 1, true, 256, false, 0, 0, 64, 262144, 8, 2,
     128, "vision"},
    {"e2b", "gemma4", "gemma4_text", 1536, 35, 5, 8, 1, 256, 512, 0, false, 6144, true, 256, 20, 512, 131072, 0, 0,
     0, nullptr},
    {"e4b", "gemma4", "gemma4_text", 2560, 42, 6, 8, 2, 256, 512, 0, false, 10240, false, 256, 18, 512, 131072, 0,
     0, 0, nullptr},
    {"26b-a4b", "gemma4", "gemma4_text", 2816, 30, 6, 16, 8, 256, 512, 2, true, 2112, false, 0, 0, 1024, 262144,
     128, 8, 704, "vision"},
    {"31b", "gemma4", "gemma4_text", 5376, 60, 6, 32, 16, 256, 512, 4, true, 21504, false, 0, 0, 1024, 262144, 0,
     0, 0, "vision"},
    {"12b", "gemma4_unified", "gemma4_unified_text", 3840, 48, 6, 16, 8, 256, 512, 1, true, 15360, false, 0, 0,
     1024, 262144, 0, 0, 0, "vision"},
};

const Preset* FindPreset(const std::string& name) {
  for (const Preset& p : kPresets)
    if (name == p.name) return &p;
  return nullptr;
}

struct Quant {
  std::string name;
  bool affine = false;
  int bits = 0;
  DType float_dtype = DType::kBF16;  // of everything not affine-packed
};

StatusOr<Quant> ParseQuant(const std::string& name) {
  if (name == "f32") return Quant{name, false, 0, DType::kF32};
  if (name == "bf16") return Quant{name, false, 0, DType::kBF16};
  if (name == "q4") return Quant{name, true, 4, DType::kBF16};
  if (name == "q8") return Quant{name, true, 8, DType::kBF16};
  return InvalidArgument("[synth] unknown quantization '" + name + "' (expected f32, bf16, q4 or q8)");
}

StatusOr<const Preset*> RequirePreset(const std::string& name) {
  const Preset* p = FindPreset(name);
  if (p) return p;
  std::string names;
  for (const Preset& q : kPresets) names += (names.empty() ? "" : ", ") + std::string(q.name);
  return InvalidArgument("[synth] unknown preset '" + name + "' (expected one of " + names + ")");
}

// Per-layer geometry (KV sharing, K=V, double-wide MLP) derived here from
// the preset on its own, so it cross-checks the config parser's derivation.
struct LayerPlan {
  bool full = false;
  int head_dim = 0;
  int kv_heads = 0;
  bool k_eq_v = false;
  bool shared = false;
  int mlp_width = 0;
};

std::vector<LayerPlan> PlanLayers(const Preset& p) {
  std::vector<LayerPlan> out(p.layers);
  for (int l = 0; l < p.layers; ++l) {
    LayerPlan& g = out[l];
    g.full = (l + 1) % p.period == 0 || l == p.layers - 1;
    g.head_dim = g.full ? p.global_head_dim : p.head_dim;
    g.k_eq_v = g.full && p.k_eq_v;
    g.kv_heads = g.k_eq_v && p.global_kv_heads > 0 ? p.global_kv_heads : p.kv_heads;
    g.shared = l >= p.layers - p.kv_shared;
    g.mlp_width = g.shared && p.double_wide ? 2 * p.intermediate : p.intermediate;
  }
  return out;
}

std::string Prefix(const Quant& q) { return q.affine ? "language_model.model." : "model.language_model."; }

ordered_json QuantBlock(const Preset& p, const Quant& q) {
  ordered_json b = ordered_json::object();
  b["group_size"] = kGroupSize;
  b["bits"] = q.bits;
  b["mode"] = "affine";
  // mlx-lm's Gemma 4 quantization predicate keeps routers at 8 bits.
  if (p.experts > 0)
    for (int l = 0; l < p.layers; ++l)
      b[Prefix(q) + "layers." + std::to_string(l) + ".router.proj"] = {{"group_size", kGroupSize}, {"bits", 8}};
  return b;
}

ordered_json BuildConfig(const Preset& p, const Quant& q) {
  const std::vector<LayerPlan> plan = PlanLayers(p);
  const bool moe = p.experts > 0;
  ordered_json t = ordered_json::object();
  t["attention_bias"] = false;
  t["attention_dropout"] = 0.0;
  t["attention_k_eq_v"] = p.k_eq_v;
  t["bos_token_id"] = 2;
  t["dtype"] = "bfloat16";
  t["enable_moe_block"] = moe;
  t["eos_token_id"] = 1;
  t["final_logit_softcapping"] = 30.0;
  t["global_head_dim"] = p.global_head_dim;
  t["head_dim"] = p.head_dim;
  t["hidden_activation"] = "gelu_pytorch_tanh";
  t["hidden_size"] = p.hidden;
  t["hidden_size_per_layer_input"] = p.ple;
  t["initializer_range"] = 0.02;
  t["intermediate_size"] = p.intermediate;
  ordered_json types = ordered_json::array();
  for (const LayerPlan& g : plan) types.push_back(g.full ? "full_attention" : "sliding_attention");
  t["layer_types"] = std::move(types);
  t["max_position_embeddings"] = p.max_positions;
  t["model_type"] = p.text_type;
  t["moe_intermediate_size"] = moe ? ordered_json(p.moe_intermediate) : ordered_json();
  t["num_attention_heads"] = p.heads;
  t["num_experts"] = moe ? ordered_json(p.experts) : ordered_json();
  t["num_global_key_value_heads"] = p.global_kv_heads > 0 ? ordered_json(p.global_kv_heads) : ordered_json();
  t["num_hidden_layers"] = p.layers;
  t["num_key_value_heads"] = p.kv_heads;
  t["num_kv_shared_layers"] = p.kv_shared;
  t["pad_token_id"] = 0;
  t["rms_norm_eps"] = 1e-6;
  t["rope_parameters"] = {
      {"full_attention", {{"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}, {"rope_type", "proportional"}}},
      {"sliding_attention", {{"rope_theta", 10000.0}, {"rope_type", "default"}}}};
  t["sliding_window"] = p.window;
  t["tie_word_embeddings"] = true;
  t["top_k_experts"] = moe ? ordered_json(p.top_k) : ordered_json();
  t["use_bidirectional_attention"] = p.bidirectional ? ordered_json(p.bidirectional) : ordered_json();
  t["use_cache"] = true;
  t["use_double_wide_mlp"] = p.double_wide;
  t["vocab_size"] = kVocab;
  t["vocab_size_per_layer_input"] = kVocab;

  ordered_json c = ordered_json::object();
  if (std::string(p.top_type) == "gemma4") c["architectures"] = {"Gemma4ForConditionalGeneration"};
  c["model_type"] = p.top_type;
  c["text_config"] = std::move(t);
  c["vocab_size"] = kVocab;
  c["tie_word_embeddings"] = true;
  c["bos_token_id"] = 2;
  c["eos_token_id"] = {1, 106};
  c["pad_token_id"] = 0;
  c["dtype"] = q.float_dtype == DType::kF32 ? "float32" : "bfloat16";
  c["g4_synthetic"] = true;  // random weights: outputs are meaningless text
  if (q.affine) {
    c["quantization"] = QuantBlock(p, q);
    c["quantization_config"] = QuantBlock(p, q);
  }
  return c;
}

// The parser's view of the config must agree with the preset's own
// derivation; a disagreement means one of them is wrong about the spec.
Status CheckParsedConfig(const Gemma4Config& c, const Preset& p) {
  const std::vector<LayerPlan> plan = PlanLayers(p);
  auto mismatch = [&](const std::string& what) {
    return Internal("[synth] preset " + std::string(p.name) + ": config parser disagrees on " + what);
  };
  if (c.vocab_size != kVocab || c.hidden_size != p.hidden || c.num_hidden_layers != p.layers ||
      static_cast<int>(c.layers.size()) != p.layers)
    return mismatch("vocab/hidden/layers");
  if (c.hidden_size_per_layer_input != p.ple || c.num_kv_shared_layers != p.kv_shared ||
      c.sliding_window != p.window || c.enable_moe_block != (p.experts > 0))
    return mismatch("PLE/KV sharing/window/MoE");
  for (int l = 0; l < p.layers; ++l) {
    const LayerGeometry& g = c.layers[l];
    const LayerPlan& want = plan[l];
    if ((g.type == AttentionType::kFull) != want.full || g.head_dim != want.head_dim ||
        g.num_kv_heads != want.kv_heads || g.k_eq_v != want.k_eq_v || g.kv_shared != want.shared ||
        g.mlp_width != want.mlp_width)
      return mismatch("layer " + std::to_string(l) + " geometry");
  }
  return Status::Ok();
}

// ---- Tensor plan ----

enum class Fill : uint8_t { kWeight, kNorm, kOne, kCodes, kScales, kBiases };

struct SynthTensor {
  Fill fill = Fill::kWeight;
  int bits = 0;         // kCodes / kScales / kBiases
  size_t key = 0;       // RNG stream: own index, or the scales tensor's for kBiases
  uint64_t params = 0;  // logical parameters this tensor stands for
};

class TensorPlan {
 public:
  TensorPlan(const Quant& q, std::string prefix) : q_(q), prefix_(std::move(prefix)) {}

  // A norm weight, scalar or router scale: never quantized.
  void Vector(const std::string& rel, int64_t n, Fill fill = Fill::kNorm) {
    Push(rel, q_.float_dtype, {n}, {fill, 0, 0, static_cast<uint64_t>(n)});
  }

  // A logical lead x [rows, cols] matrix. `bits_override` is an 8-bit router.
  void Matrix(const std::string& rel, std::vector<int64_t> lead, int64_t rows, int64_t cols,
              const std::string& suffix = ".weight", int bits_override = 0) {
    uint64_t params = static_cast<uint64_t>(rows) * cols;
    for (int64_t d : lead) params *= d;
    std::vector<int64_t> shape = lead;
    shape.push_back(rows);
    if (!q_.affine || cols % kGroupSize != 0) {
      shape.push_back(cols);
      Push(rel + suffix, q_.float_dtype, shape, {Fill::kWeight, 0, 0, params});
      return;
    }
    const int bits = bits_override ? bits_override : q_.bits;
    std::vector<int64_t> codes = shape, groups = shape;
    codes.push_back(cols * bits / 32);
    groups.push_back(cols / kGroupSize);
    Push(rel + ".weight", DType::kU32, codes, {Fill::kCodes, bits, 0, params});
    const size_t scales_index = decls_.size();
    Push(rel + ".scales", DType::kBF16, groups, {Fill::kScales, bits, 0, 0});
    Push(rel + ".biases", DType::kBF16, groups, {Fill::kBiases, bits, scales_index, 0});
  }

  const std::vector<TensorDecl>& decls() const { return decls_; }
  const std::vector<SynthTensor>& tensors() const { return tensors_; }

 private:
  void Push(const std::string& rel, DType dtype, std::vector<int64_t> shape, SynthTensor t) {
    if (t.fill != Fill::kBiases) t.key = decls_.size();
    decls_.push_back({prefix_ + rel, dtype, std::move(shape)});
    tensors_.push_back(t);
  }

  Quant q_;
  std::string prefix_;
  std::vector<TensorDecl> decls_;
  std::vector<SynthTensor> tensors_;
};

TensorPlan BuildTensorPlan(const Preset& p, const Quant& q) {
  TensorPlan t(q, Prefix(q));
  const int64_t H = p.hidden, V = kVocab, N = p.layers, P = p.ple;
  t.Matrix("embed_tokens", {}, V, H);
  if (P > 0) {
    t.Matrix("embed_tokens_per_layer", {}, V, N * P);
    t.Matrix("per_layer_model_projection", {}, N * P, H);
    t.Vector("per_layer_projection_norm.weight", P);
  }
  const std::vector<LayerPlan> plan = PlanLayers(p);
  for (int l = 0; l < N; ++l) {
    const LayerPlan& g = plan[l];
    const std::string s = "layers." + std::to_string(l) + ".";
    const int64_t D = g.head_dim;
    t.Vector(s + "input_layernorm.weight", H);
    t.Matrix(s + "self_attn.q_proj", {}, p.heads * D, H);
    t.Vector(s + "self_attn.q_norm.weight", D);
    if (!g.shared) {
      t.Matrix(s + "self_attn.k_proj", {}, g.kv_heads * D, H);
      t.Vector(s + "self_attn.k_norm.weight", D);
      if (!g.k_eq_v) t.Matrix(s + "self_attn.v_proj", {}, g.kv_heads * D, H);
    }
    t.Matrix(s + "self_attn.o_proj", {}, H, p.heads * D);
    t.Vector(s + "post_attention_layernorm.weight", H);
    t.Vector(s + "pre_feedforward_layernorm.weight", H);
    t.Matrix(s + "mlp.gate_proj", {}, g.mlp_width, H);
    t.Matrix(s + "mlp.up_proj", {}, g.mlp_width, H);
    t.Matrix(s + "mlp.down_proj", {}, H, g.mlp_width);
    if (p.experts > 0) {
      const int64_t E = p.experts, Ie = p.moe_intermediate;
      t.Matrix(s + "router.proj", {}, E, H, ".weight", 8);
      t.Vector(s + "router.scale", H);
      t.Vector(s + "router.per_expert_scale", E);
      if (q.affine) {
        t.Matrix(s + "experts.switch_glu.gate_proj", {E}, Ie, H);
        t.Matrix(s + "experts.switch_glu.up_proj", {E}, Ie, H);
        t.Matrix(s + "experts.switch_glu.down_proj", {E}, H, Ie);
      } else {
        t.Matrix(s + "experts.gate_up_proj", {E}, 2 * Ie, H, "");
        t.Matrix(s + "experts.down_proj", {E}, H, Ie, "");
      }
      t.Vector(s + "pre_feedforward_layernorm_2.weight", H);
      t.Vector(s + "post_feedforward_layernorm_1.weight", H);
      t.Vector(s + "post_feedforward_layernorm_2.weight", H);
    }
    t.Vector(s + "post_feedforward_layernorm.weight", H);
    if (P > 0) {
      t.Matrix(s + "per_layer_input_gate", {}, P, H);
      t.Matrix(s + "per_layer_projection", {}, H, P);
      t.Vector(s + "post_per_layer_input_norm.weight", H);
    }
    t.Vector(s + "layer_scalar", 1, Fill::kOne);
  }
  t.Vector("norm.weight", H);
  return t;
}

// ---- Values ----

// splitmix64's output function: a bijective, well-avalanching mix.
inline uint64_t Mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t StreamKey(uint64_t seed, size_t tensor) { return Mix64(Mix64(seed) ^ Mix64(tensor + 0x5eed)); }

// Element j of a stream: splitmix64's j-th output from state `key`.
inline uint64_t Draw(uint64_t key, uint64_t j) { return Mix64(key + j * 0x9e3779b97f4a7c15ull); }

// Uniform in [0, 1) from the top 24 bits.
inline float Unit(uint64_t r) { return static_cast<float>(r >> 40) * 0x1p-24f; }

// Scale of group j: dequantized values s * (q - 2^(bits-1)) with q uniform on
// [0, 2^bits) have std s * sqrt((4^bits - 1) / 12); aim for ~0.02 with +-25%
// per-group spread, rounded to bf16 as stored.
inline float GroupScale(uint64_t key, uint64_t j, int bits) {
  const double levels = std::ldexp(1.0, bits);
  const float base = static_cast<float>(0.02 / std::sqrt((levels * levels - 1.0) / 12.0));
  return RoundBf16(base * (0.75f + 0.5f * Unit(Draw(key, j))));
}

constexpr float kWeightHalfRange = 0.034641f;  // uniform +-a has std a / sqrt(3) = 0.02

void FillTensor(const SynthTensor& t, const TensorDecl& d, uint64_t seed, uint8_t* out, size_t nbytes) {
  const uint64_t key = StreamKey(seed, t.key);
  const int64_t n = static_cast<int64_t>(nbytes / DTypeSize(d.dtype));
  const bool parallel = n > (1 << 16);
  if (t.fill == Fill::kCodes) {
    // Every bit random: all codes uniform. One draw fills two words.
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t w = 0; w < (n + 1) / 2; ++w) {
      const uint64_t r = Draw(key, w);
      const uint32_t lo = static_cast<uint32_t>(r), hi = static_cast<uint32_t>(r >> 32);
      std::memcpy(out + 8 * w, &lo, 4);
      if (2 * w + 1 < n) std::memcpy(out + 8 * w + 4, &hi, 4);
    }
    return;
  }
  const bool f32 = d.dtype == DType::kF32;
  const float bias_mult = -std::ldexp(1.0f, t.bits - 1);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t j = 0; j < n; ++j) {
    float v = 0;
    switch (t.fill) {
      case Fill::kWeight: v = kWeightHalfRange * (2.0f * Unit(Draw(key, j)) - 1.0f); break;
      case Fill::kNorm: v = 1.0f + 0.1f * (Unit(Draw(key, j)) - 0.5f); break;
      case Fill::kOne: v = 1.0f; break;
      case Fill::kScales: v = GroupScale(key, j, t.bits); break;
      case Fill::kBiases: v = bias_mult * GroupScale(key, j, t.bits); break;  // exact in bf16
      case Fill::kCodes: break;
    }
    if (f32) {
      std::memcpy(out + 4 * j, &v, 4);
    } else {
      const uint16_t h = F32ToBf16(v);
      std::memcpy(out + 2 * j, &h, 2);
    }
  }
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

Status WriteText(const std::string& path, const std::string& text) {
  Status s = WriteFileAtomic(path, text.data(), text.size());
  if (!s.ok()) return Status(s.code(), "[synth] " + s.message());
  return s;
}

uint64_t FileSize(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<uint64_t>(n);
}

StatusOr<SynthSummary> SynthesizeImpl(const SynthOptions& o) {
  G4_ASSIGN_OR_RETURN(const Preset* preset, RequirePreset(o.preset));
  G4_ASSIGN_OR_RETURN(Quant quant, ParseQuant(o.quant));
  if (o.out_dir.empty()) return InvalidArgument("[synth] no output directory given");
  if (!o.tokenizer_path.empty()) {
    auto type = StatPath(o.tokenizer_path);
    if (!type.ok()) return type.status().WithContext("[synth] tokenizer");
    if (*type != PathType::kRegular)
      return NotFound("[synth] tokenizer file " + o.tokenizer_path + " does not exist or is not a regular file");
  }

  const std::string config_text = BuildConfig(*preset, quant).dump(2);
  G4_ASSIGN_OR_RETURN(Gemma4Config parsed, ParseGemma4Config(config_text));
  G4_RETURN_IF_ERROR(CheckParsedConfig(parsed, *preset));

  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) return IoError("[synth] cannot create " + o.out_dir + ": " + ec.message());

  SynthSummary sum;
  sum.dir = o.out_dir;
  const std::string config_path = JoinPath(o.out_dir, "config.json");
  G4_RETURN_IF_ERROR(WriteText(config_path, config_text + "\n"));
  ordered_json gen = {{"bos_token_id", 2}, {"pad_token_id", 0}, {"eos_token_id", {1, 106, 50}},
                      {"do_sample", true}, {"temperature", 1.0}, {"top_p", 0.95}, {"top_k", 64}};
  const std::string gen_path = JoinPath(o.out_dir, "generation_config.json");
  G4_RETURN_IF_ERROR(WriteText(gen_path, gen.dump(2) + "\n"));
  sum.total_bytes += FileSize(config_path) + FileSize(gen_path);

  // A stale index would make the loader read old shards instead of ours.
  std::filesystem::remove(JoinPath(o.out_dir, "model.safetensors.index.json"), ec);

  const TensorPlan plan = BuildTensorPlan(*preset, quant);
  const auto& decls = plan.decls();
  const auto& tensors = plan.tensors();
  const std::string st_path = JoinPath(o.out_dir, "model.safetensors");
  G4_RETURN_IF_ERROR(WriteSafetensorsStreaming(
      st_path, decls,
      [&](size_t i, uint8_t* out, size_t nbytes) { FillTensor(tensors[i], decls[i], o.seed, out, nbytes); },
      {{"format", "pt"}, {"g4_synth", std::string(preset->name) + " " + quant.name}}, o.progress));
  sum.safetensors_bytes = FileSize(st_path);
  sum.total_bytes += sum.safetensors_bytes;
  sum.num_tensors = decls.size();
  for (const SynthTensor& t : tensors) sum.num_params += t.params;

  if (!o.tokenizer_path.empty()) {
    const std::string tok_path = JoinPath(o.out_dir, "tokenizer.json");
    std::filesystem::copy_file(o.tokenizer_path, tok_path, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return IoError("[synth] cannot copy " + o.tokenizer_path + " to " + tok_path + ": " + ec.message());
    sum.total_bytes += FileSize(tok_path);
  }
  return sum;
}

}  // namespace

std::vector<std::string> SynthPresetNames() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.push_back(p.name);
  return names;
}

StatusOr<std::string> SynthConfigJson(const std::string& preset, const std::string& quant) {
  G4_ASSIGN_OR_RETURN(const Preset* p, RequirePreset(preset));
  G4_ASSIGN_OR_RETURN(Quant q, ParseQuant(quant));
  return BuildConfig(*p, q).dump(2);
}

StatusOr<SynthSummary> SynthesizeCheckpoint(const SynthOptions& options) {
  // std::filesystem and nlohmann report some failures by throwing.
  try {
    return SynthesizeImpl(options);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("[synth] out of memory");
  } catch (const std::exception& e) {
    return IoError(std::string("[synth] ") + e.what());
  }
}

}  // namespace g4
