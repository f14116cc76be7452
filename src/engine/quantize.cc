// g4 quantize: see quantize.h for the output layout and the quantization rule.
#include "engine/quantize.h"


#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <unistd.h>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/file_write.h"
#include "core/float16.h"
#include "io/config.h"
#include "io/safetensors.h"

namespace g4 {
namespace {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

constexpr const char* kOutPrefix = "language_model.model.";
constexpr const char* kOutLmHead = "language_model.lm_head";  // an untied head, MLX layout

// The untied LM head under any of the names checkpoints give it.
bool IsLmHead(const std::string& name) {
  return name == "lm_head.weight" || name == "language_model.lm_head.weight" ||
         name == "model.language_model.lm_head.weight" || name == "model.lm_head.weight";
}
constexpr const char* kTextPrefixes[] = {"model.language_model.", "language_model.model.", "model."};
constexpr const char* kTowers[] = {"vision_tower", "embed_vision", "audio_tower", "embed_audio", "vision_embedder",
                                   "multi_modal_projector"};
constexpr const char* kCopiedFiles[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json",
                                        "chat_template.jinja", "special_tokens_map.json"};

Status Err(const std::string& what) { return InvalidArgument("[quantize] " + what); }

// One output tensor and where its values come from.
struct OutTensor {
  enum class Kind { kCodes, kScales, kBiases, kCopy };
  Kind kind = Kind::kCopy;
  TensorDecl decl;
  const TensorInfo* src = nullptr;
  // Row mapping for split experts: logical row i reads source row
  // (i / rows_per) * src_rows_per + row_offset + i % rows_per.
  int64_t rows = 0, cols = 0, rows_per = 0, src_rows_per = 0, row_offset = 0;
  int bits = 0, group_size = 0;

  int64_t SourceRow(int64_t i) const { return (i / rows_per) * src_rows_per + row_offset + i % rows_per; }
};

float LoadElement(const TensorInfo& t, int64_t index) {
  switch (t.dtype) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, t.data + index * 4, 4);
      return v;
    }
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, t.data + index * 2, 2);
      return Bf16ToF32(h);
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, t.data + index * 2, 2);
      return F16ToF32(h);
    }
    default:
      G4_CHECK(false);
      return 0.0f;
  }
}

bool IsFloatMatrixDType(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// "layers.12.self_attn.k_proj.weight" -> 12, or -1.
int LayerIndex(std::string_view short_name) {
  if (short_name.rfind("layers.", 0) != 0) return -1;
  int value = 0;
  size_t i = 7;
  if (i >= short_name.size() || !std::isdigit(static_cast<unsigned char>(short_name[i]))) return -1;
  for (; i < short_name.size() && std::isdigit(static_cast<unsigned char>(short_name[i])); ++i)
    value = value * 10 + (short_name[i] - '0');
  return value;
}

// Why a tensor is dropped, or nullopt to keep it.
std::optional<std::string> DropReason(std::string_view short_name, const Gemma4Config& config) {
  if (short_name.find("rotary_emb") != std::string_view::npos) return "rotary buffer";
  const int layer = LayerIndex(short_name);
  if (layer >= 0 && layer < config.num_hidden_layers && config.layers[layer].kv_shared) {
    for (const char* part : {".self_attn.k_proj.", ".self_attn.v_proj.", ".self_attn.k_norm.", ".self_attn.v_norm."})
      if (short_name.find(part) != std::string_view::npos) return "K/V of a KV-shared layer";
  }
  return std::nullopt;
}

// A Linear / Embedding / stacked-expert weight (as opposed to norms and scalars).
bool IsMatrix(std::string_view short_name, const TensorInfo& t) {
  if (t.shape.size() < 2 || !IsFloatMatrixDType(t.dtype)) return false;
  if (short_name.find("norm") != std::string_view::npos) return false;
  return EndsWith(short_name, ".weight") || short_name.find(".experts.") != std::string_view::npos;
}

// Module path of a matrix: its tensor name without ".weight".
std::string ModulePath(std::string_view short_name) {
  std::string s(short_name);
  if (EndsWith(s, ".weight")) s.resize(s.size() - 7);
  return s;
}

class Planner {
 public:
  Planner(const QuantizeOptions& o, ordered_json* quant) : options_(o), quant_(quant) {}

  // Adds the outputs for one logical matrix (maybe a row subset of `src`);
  // `module` is its full output path without ".weight".
  void AddMatrix(const std::string& module, const TensorInfo* src, std::vector<int64_t> shape, int64_t rows_per,
                 int64_t src_rows_per, int64_t row_offset) {
    const int64_t cols = shape.back();
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
    int bits = options_.bits, gs = options_.group_size;
    if (EndsWith(module, "router.proj") && cols % 64 == 0) {
      // MLX-LM's Gemma 4 predicate keeps the router at 8 bits, group 64.
      bits = 8;
      gs = 64;
      (*quant_)[module] = {{"group_size", 64}, {"bits", 8}};
    }
    OutTensor base;
    base.src = src;
    base.rows = rows;
    base.cols = cols;
    base.rows_per = rows_per;
    base.src_rows_per = src_rows_per;
    base.row_offset = row_offset;
    base.bits = bits;
    base.group_size = gs;
    if (cols % gs != 0) {
      base.kind = OutTensor::Kind::kCopy;
      base.decl = {module + ".weight", src->dtype, shape};
      ++report.kept;
      out.push_back(base);
      return;
    }
    const std::string& name = module;
    std::vector<int64_t> code_shape = shape, group_shape = shape;
    code_shape.back() = cols * bits / 32;
    group_shape.back() = cols / gs;
    OutTensor t = base;
    t.kind = OutTensor::Kind::kCodes;
    t.decl = {name + ".weight", DType::kU32, code_shape};
    out.push_back(t);
    t.kind = OutTensor::Kind::kScales;
    t.decl = {name + ".scales", DType::kBF16, group_shape};
    out.push_back(t);
    t.kind = OutTensor::Kind::kBiases;
    t.decl = {name + ".biases", DType::kBF16, group_shape};
    out.push_back(t);
    ++report.quantized;
  }

  void AddCopy(const std::string& short_name, const TensorInfo* src) {
    OutTensor t;
    t.kind = OutTensor::Kind::kCopy;
    t.src = src;
    t.decl = {kOutPrefix + short_name, src->dtype, src->shape};
    out.push_back(t);
    ++report.kept;
  }

  std::vector<OutTensor> out;
  QuantizeReport report;

 private:
  const QuantizeOptions& options_;
  ordered_json* quant_;
};

// Fills output tensors in declaration order; codes compute scales and biases
// too, which the next two tensors copy.
class Filler {
 public:
  explicit Filler(const std::vector<OutTensor>& out) : out_(out) {}

  void Fill(size_t index, uint8_t* dst, size_t nbytes) {
    const OutTensor& t = out_[index];
    switch (t.kind) {
      case OutTensor::Kind::kCopy:
        CopyRows(t, dst);
        break;
      case OutTensor::Kind::kCodes:
        Quantize(t, reinterpret_cast<uint32_t*>(dst));
        break;
      case OutTensor::Kind::kScales:
        std::memcpy(dst, scales_.data(), std::min(nbytes, scales_.size() * 2));
        break;
      case OutTensor::Kind::kBiases:
        std::memcpy(dst, biases_.data(), std::min(nbytes, biases_.size() * 2));
        break;
    }
  }

  // The first tensor with a non-finite weight, if any.
  const std::string& bad_tensor() const { return bad_tensor_; }

 private:
  void CopyRows(const OutTensor& t, uint8_t* dst) {
    if (t.rows_per == 0) {  // whole tensor as stored
      std::memcpy(dst, t.src->data, t.src->nbytes);
      return;
    }
    const size_t row_bytes = t.cols * DTypeSize(t.src->dtype);
    for (int64_t i = 0; i < t.rows; ++i)
      std::memcpy(dst + i * row_bytes, t.src->data + t.SourceRow(i) * row_bytes, row_bytes);
  }

  void Quantize(const OutTensor& t, uint32_t* codes) {
    const int64_t groups = t.cols / t.group_size;
    const int64_t words = t.cols * t.bits / 32;
    scales_.assign(t.rows * groups, 0);
    biases_.assign(t.rows * groups, 0);
    bool finite = true;
#pragma omp parallel
    {
      std::vector<float> row(t.cols);
#pragma omp for schedule(static) reduction(&& : finite)
      for (int64_t i = 0; i < t.rows; ++i) {
        const int64_t base = t.SourceRow(i) * t.cols;
        for (int64_t c = 0; c < t.cols; ++c) {
          row[c] = LoadElement(*t.src, base + c);
          finite = finite && std::isfinite(row[c]);
        }
        AffineQuantizeRow(row.data(), t.cols, t.bits, t.group_size, codes + i * words, &scales_[i * groups],
                          &biases_[i * groups]);
      }
    }
    if (!finite && bad_tensor_.empty()) bad_tensor_ = t.src->name;
  }

  const std::vector<OutTensor>& out_;
  std::vector<uint16_t> scales_, biases_;
  std::string bad_tensor_;
};

StatusOr<ordered_json> ReadJson(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return NotFound("[quantize] cannot read " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return ordered_json::parse(ss.str());
  } catch (const std::exception& e) {
    return Err(path.string() + ": not JSON: " + e.what());
  }
}

Status WriteText(const fs::path& path, const std::string& text) {
  const Status s = WriteFileAtomic(path.string(), text.data(), text.size());  // the write policy
  return s.ok() ? s : Status(s.code(), "[quantize] " + s.message());
}

// The input config in the multimodal layout, with the quantization block.
ordered_json OutputConfig(const ordered_json& in, const ordered_json& quant) {
  ordered_json out;
  if (in.contains("text_config")) {
    out = in;
    out.erase("vision_config");  // the towers are not written
    out.erase("audio_config");
  } else {
    ordered_json text = in;
    text.erase("architectures");
    text.erase("quantization");
    text.erase("quantization_config");
    if (!text.contains("model_type")) text["model_type"] = "gemma4_text";
    out["architectures"] = {"Gemma4ForConditionalGeneration"};
    out["model_type"] = "gemma4";
    out["text_config"] = text;
    if (text.contains("vocab_size")) out["vocab_size"] = text["vocab_size"];
    out["tie_word_embeddings"] = text.value("tie_word_embeddings", true);
    if (text.contains("eos_token_id")) out["eos_token_id"] = text["eos_token_id"];
  }
  out["quantization"] = quant;
  out["quantization_config"] = quant;
  return out;
}

}  // namespace

void AffineQuantizeRow(const float* w, int64_t cols, int bits, int group_size, uint32_t* codes, uint16_t* scales,
                       uint16_t* biases) {
  G4_CHECK(group_size % 32 == 0 && cols % group_size == 0 && bits >= 1 && bits <= 8);
  const float n_bins = static_cast<float>((1 << bits) - 1);
  std::memset(codes, 0, static_cast<size_t>(cols * bits / 32) * 4);
  for (int64_t g = 0; g < cols / group_size; ++g) {
    const float* x = w + g * group_size;
    float lo = x[0], hi = x[0];
    for (int i = 1; i < group_size; ++i) {
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
    }
    // MLX's affine_quantize: the larger-magnitude extreme is exact and zero
    // falls on a code.
    float scale = std::max((hi - lo) / n_bins, 1e-7f);
    const bool low_side = std::fabs(lo) > std::fabs(hi);
    if (!low_side) scale = -scale;
    const float edge = low_side ? lo : hi;
    const float q0 = std::nearbyint(edge / scale);
    float bias = 0.0f;
    if (q0 != 0.0f) {
      scale = edge / q0;
      bias = edge;
    }
    scales[g] = F32ToBf16(scale);
    biases[g] = F32ToBf16(bias);
    const float s = Bf16ToF32(scales[g]), b = Bf16ToF32(biases[g]);
    for (int i = 0; i < group_size; ++i) {
      const float q = std::clamp(std::nearbyint((x[i] - b) / s), 0.0f, n_bins);
      const uint32_t code = static_cast<uint32_t>(q);
      const int64_t bit = (g * group_size + i) * bits;
      const int64_t word = bit >> 5;
      const int shift = static_cast<int>(bit & 31);
      codes[word] |= code << shift;
      if (shift + bits > 32) codes[word + 1] |= code >> (32 - shift);
    }
  }
}

StatusOr<QuantizeReport> QuantizeCheckpoint(const std::string& in_dir, const std::string& out_dir,
                                            const QuantizeOptions& options) {
  if (options.bits < 2 || options.bits > 8 || options.bits == 7)
    return Err("--bits must be 2, 3, 4, 5, 6 or 8 (got " + std::to_string(options.bits) + ")");
  if (options.group_size != 32 && options.group_size != 64 && options.group_size != 128)
    return Err("--group-size must be 32, 64 or 128 (got " + std::to_string(options.group_size) + ")");
  std::error_code ec;
  if (fs::exists(out_dir, ec) && fs::equivalent(in_dir, out_dir, ec))
    return Err("the output folder must differ from the input folder");

  G4_ASSIGN_OR_RETURN(Gemma4Config config, LoadGemma4Config(in_dir));
  if (config.quantization.present) return Unsupported("[quantize] " + in_dir + " is already quantized");
  G4_ASSIGN_OR_RETURN(ordered_json in_config, ReadJson(fs::path(in_dir) / "config.json"));
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ckpt, Checkpoint::Open(in_dir));

  std::string prefix;
  for (const char* p : kTextPrefixes) {
    if (ckpt->Find(std::string(p) + "embed_tokens.weight")) {
      prefix = p;
      break;
    }
  }
  if (prefix.empty()) return Err(in_dir + ": no embed_tokens.weight under any Gemma 4 text prefix");

  ordered_json quant = {{"group_size", options.group_size}, {"bits", options.bits}, {"mode", "affine"}};
  Planner plan(options, &quant);
  for (const std::string& name : ckpt->Names()) {
    const TensorInfo* t = ckpt->Find(name);
    plan.report.input_bytes += static_cast<int64_t>(t->nbytes);
    if (EndsWith(name, ".scales") || EndsWith(name, ".biases") || t->dtype == DType::kU32)
      return Unsupported("[quantize] " + name + ": the input is already quantized");
    if (IsLmHead(name)) {
      if (config.tie_word_embeddings) {
        ++plan.report.dropped;  // a tied head is the embedding again
      } else {
        const std::vector<int64_t>& shape = t->shape;
        if (shape.size() != 2) return Err(name + ": expected [V, H], got " + t->Describe());
        plan.AddMatrix(kOutLmHead, t, shape, shape[0], shape[0], 0);  // untied: kept, quantized
      }
      continue;
    }
    if (name.rfind(prefix, 0) != 0) {
      ++plan.report.dropped;  // towers and anything outside the text model
      continue;
    }
    const std::string short_name = name.substr(prefix.size());
    bool tower = false;
    for (const char* tw : kTowers) tower = tower || short_name.rfind(tw, 0) == 0;
    if (tower || DropReason(short_name, config)) {
      ++plan.report.dropped;
      continue;
    }
    if (!IsMatrix(short_name, *t)) {
      plan.AddCopy(short_name, t);
      continue;
    }
    const std::vector<int64_t>& shape = t->shape;
    if (EndsWith(short_name, "experts.gate_up_proj")) {
      if (shape.size() != 3 || shape[1] % 2 != 0) return Err(name + ": expected [E, 2*Ie, H], got " + t->Describe());
      const std::string base = short_name.substr(0, short_name.size() - 12) + "switch_glu.";
      const int64_t half = shape[1] / 2;
      plan.AddMatrix(kOutPrefix + base + "gate_proj", t, {shape[0], half, shape[2]}, half, shape[1], 0);
      plan.AddMatrix(kOutPrefix + base + "up_proj", t, {shape[0], half, shape[2]}, half, shape[1], half);
    } else if (EndsWith(short_name, "experts.down_proj")) {
      const std::string module = short_name.substr(0, short_name.size() - 9) + "switch_glu.down_proj";
      plan.AddMatrix(kOutPrefix + module, t, shape, shape[shape.size() - 2], shape[shape.size() - 2], 0);
    } else {
      plan.AddMatrix(kOutPrefix + ModulePath(short_name), t, shape, shape[shape.size() - 2], shape[shape.size() - 2],
                     0);
    }
  }

  fs::create_directories(out_dir, ec);
  if (ec) return IoError("[quantize] cannot create " + out_dir + ": " + ec.message());
  // A stale index would make the loader read old shards instead of ours.
  fs::remove(fs::path(out_dir) / "model.safetensors.index.json", ec);
  std::vector<TensorDecl> decls;
  for (const OutTensor& t : plan.out) decls.push_back(t.decl);
  Filler filler(plan.out);
  const std::string model_path = (fs::path(out_dir) / "model.safetensors").string();
  G4_RETURN_IF_ERROR(WriteSafetensorsStreaming(
      model_path, decls, [&](size_t i, uint8_t* dst, size_t n) { filler.Fill(i, dst, n); }, {{"format", "mlx"}},
      options.progress));
  if (!filler.bad_tensor().empty()) {
    fs::remove(model_path, ec);
    return Err(filler.bad_tensor() + ": holds NaN or infinite weights");
  }

  G4_RETURN_IF_ERROR(WriteText(fs::path(out_dir) / "config.json", OutputConfig(in_config, quant).dump(2) + "\n"));
  for (const char* f : kCopiedFiles) {
    const fs::path src = fs::path(in_dir) / f;
    if (!fs::exists(src, ec)) continue;
    fs::copy_file(src, fs::path(out_dir) / f, fs::copy_options::overwrite_existing, ec);
    if (ec) return IoError("[quantize] cannot copy " + src.string() + ": " + ec.message());
  }
  QuantizeReport report = plan.report;
  report.output_bytes = static_cast<int64_t>(fs::file_size(model_path, ec));
  return report;
}

}  // namespace g4
