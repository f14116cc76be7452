#include "tokenizer/tokenizer.h"

#include <cstdio>
#include <exception>

#include <nlohmann/json.hpp>

#include "core/file_read.h"
#include "core/json.h"
#include "core/limits.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/text_pipeline.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/utf8.h"

namespace g4 {
namespace {

using json = nlohmann::json;

std::string JoinPath(const std::string& dir, const std::string& name) {
  return !dir.empty() && dir.back() == '/' ? dir + name : dir + "/" + name;
}

struct AddedToken {
  std::string content;
  int64_t id = -1;
  bool special = false;
};

Status ReadAddedTokens(const json& doc, const std::string& prefix, std::vector<AddedToken>* out) {
  auto it = doc.find("added_tokens");
  if (it == doc.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) return Corrupt(prefix + ": \"added_tokens\" is not an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const std::string where = prefix + ": added_tokens[" + std::to_string(i) + "]";
    if (!t.is_object()) return Corrupt(where + " is not an object");
    auto content = t.find("content");
    auto id = t.find("id");
    if (content == t.end() || !content->is_string()) return Corrupt(where + " has no string \"content\"");
    if (id == t.end() || !id->is_number_unsigned()) return Corrupt(where + " has no non-negative integer \"id\"");
    AddedToken token{content->get<std::string>(), id->get<int64_t>(), false};
    for (const char* flag : {"special", "lstrip", "rstrip", "single_word", "normalized"}) {
      auto f = t.find(flag);
      if (f == t.end() || f->is_null()) continue;
      if (!f->is_boolean()) return Corrupt(where + " \"" + flag + "\" is not a boolean");
      if (std::string_view(flag) == "special") {
        token.special = f->get<bool>();
      } else if (f->get<bool>()) {
        return Unsupported(where + " ('" + token.content + "'): added tokens with " + flag + "=true are not supported");
      }
    }
    out->push_back(std::move(token));
  }
  return Status::Ok();
}

// tokenizer_config.json names tokens either as a string or as an
// AddedToken object {"content": ...}.
std::optional<std::string> TokenName(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  return std::nullopt;
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

StatusOr<Tokenizer> Tokenizer::Load(const std::string& path) {
  // Paths go through core/file_read only: std::filesystem's throwing calls
  // once let a symlink loop escape as an exception.
  auto tagged = [](const Status& st) { return Status(st.code(), "[tokenizer] " + st.message()); };
  StatusOr<PathType> type = StatPath(path);
  if (!type.ok()) return tagged(type.status());
  const bool is_dir = *type == PathType::kDirectory;
  const std::string file = is_dir ? JoinPath(path, "tokenizer.json") : path;
  StatusOr<std::string> text = ReadFileToString(file, kMaxTokenizerBytes, "kMaxTokenizerBytes");
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound)
      return NotFound("[tokenizer] " + file + ": no such file" + (is_dir ? " (model directory has no tokenizer.json)" : ""));
    return tagged(text.status());
  }
  G4_ASSIGN_OR_RETURN(Tokenizer tok, FromJson(*text, file));
  if (is_dir) {
    const std::string config = JoinPath(path, "tokenizer_config.json");
    StatusOr<PathType> config_type = StatPath(config);
    if (!config_type.ok()) return tagged(config_type.status());
    if (*config_type != PathType::kMissing) G4_RETURN_IF_ERROR(tok.ReadConfig(config));
  }
  return tok;
}

StatusOr<Tokenizer> Tokenizer::FromJson(std::string_view json_text, const std::string& name) {
  const std::string prefix = "[tokenizer] " + name;
  G4_ASSIGN_OR_RETURN(TokenizerJson parsed, ParseTokenizerJson(json_text, name));
  Tokenizer tok;
  try {
    G4_ASSIGN_OR_RETURN(tok.model_, BpeModel::Build(&parsed, name));
    G4_ASSIGN_OR_RETURN(TextPipeline pipeline, TextPipeline::FromJson(parsed.doc, name));
    tok.pipeline_ = std::make_unique<TextPipeline>(std::move(pipeline));

    std::vector<AddedToken> added;
    G4_RETURN_IF_ERROR(ReadAddedTokens(parsed.doc, prefix, &added));
    tok.added_ = std::make_unique<AddedTokenMatcher>();
    std::vector<std::pair<int32_t, bool>> specials;
    for (const AddedToken& t : added) {
      // As in HF: a token already in the model vocabulary keeps that id;
      // others get the next ids past it, which the file must agree with.
      int32_t id = tok.model_->Find(t.content);
      if (id < 0) {
        const int64_t next = tok.model_->size() + static_cast<int64_t>(tok.extra_pieces_.size());
        if (t.id != next)
          return Corrupt(prefix + ": added token '" + t.content + "' has id " + std::to_string(t.id) +
                         " but is not in the vocab and the next free id is " + std::to_string(next));
        id = static_cast<int32_t>(next);
        tok.extra_pieces_.push_back(t.content);
      } else if (id != t.id) {
        return Corrupt(prefix + ": added token '" + t.content + "' has id " + std::to_string(t.id) +
                       " but the vocab gives it id " + std::to_string(id));
      }
      tok.added_->Add(t.content, id);
      specials.emplace_back(id, t.special);
    }
    tok.added_->Build();
    tok.special_.assign(tok.vocab_size(), 0);
    for (auto [id, special] : specials) tok.special_[id] = special;
  } catch (const std::exception& e) {  // nlohmann type errors on odd documents
    return Corrupt(prefix + ": " + e.what());
  }
  auto default_id = [&tok](std::string_view piece) { return tok.PieceToId(piece).value_or(-1); };
  tok.bos_id_ = default_id("<bos>");
  tok.eos_id_ = default_id("<eos>");
  tok.pad_id_ = default_id("<pad>");
  return tok;
}

Status Tokenizer::ReadConfig(const std::string& path) {
  auto text = ReadFileToString(path, kMaxConfigBytes, "kMaxConfigBytes");
  if (!text.ok()) return Status(text.status().code(), "[tokenizer] " + text.status().message());
  G4_ASSIGN_OR_RETURN(json config, ParseJsonBounded<json>(*text, "tokenizer", path, StatusCode::kCorrupt));
  if (!config.is_object()) return Corrupt("[tokenizer] " + path + ": top level is not a JSON object");
  for (auto [key, field] : {std::pair{"add_bos_token", &add_bos_token_}, std::pair{"add_eos_token", &add_eos_token_}}) {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) continue;
    if (!it->is_boolean()) return Corrupt("[tokenizer] " + path + ": \"" + key + "\" is not a boolean");
    *field = it->get<bool>();
  }
  for (auto [key, field] : {std::pair{"bos_token", &bos_id_}, std::pair{"eos_token", &eos_id_}, std::pair{"pad_token", &pad_id_}}) {
    auto name = TokenName(config, key);
    if (!name) continue;
    auto id = PieceToId(*name);
    if (!id) return Corrupt("[tokenizer] " + path + ": " + key + " '" + *name + "' is not in the vocab");
    *field = *id;
  }
  return Status::Ok();
}

StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text) const {
  if (const size_t bad = utf8::FindInvalid(text); bad != utf8::kValid) {
    char byte[8];
    std::snprintf(byte, sizeof(byte), "0x%02X", static_cast<uint8_t>(text[bad]));
    return InvalidArgument("[tokenizer] input is not valid UTF-8: byte " + std::string(byte) + " at offset " +
                           std::to_string(bad) + " of " + std::to_string(text.size()));
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  size_t pos = 0;
  for (const AddedTokenMatcher::Match& m : added_->FindAll(text)) {
    EncodeSegment(text.substr(pos, m.begin - pos), &ids);
    ids.push_back(m.id);
    pos = m.end;
  }
  EncodeSegment(text.substr(pos), &ids);
  return ids;
}

void Tokenizer::EncodeSegment(std::string_view text, std::vector<int32_t>* ids) const {
  if (text.empty()) return;
  const std::string normalized = pipeline_->Normalize(text);
  std::vector<std::string_view> words;
  pipeline_->PreTokenize(normalized, &words);
  for (std::string_view w : words) model_->Tokenize(w, ids);
}

std::string Tokenizer::DecodePiece(std::string_view piece) const {
  const auto& rules = pipeline_->decode_rules();
  if (rules.empty()) return std::string(piece);
  return ApplyReplaceRules(rules, piece);
}

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string out;
  std::string run;  // consecutive byte-fallback bytes, resolved as a whole like HF
  auto flush = [&] {
    if (run.empty()) return;
    if (utf8::FindInvalid(run) == utf8::kValid) {
      out += run;
    } else {
      for (size_t i = 0; i < run.size(); ++i) out += utf8::kReplacement;
    }
    run.clear();
  };
  bool first = true;
  for (int32_t id : ids) {
    auto piece = IdToPiece(id);
    if (!piece) continue;
    if (!pipeline_->has_decoder()) {
      if (!first) out += ' ';
      out += *piece;
      first = false;
      continue;
    }
    const std::string text = DecodePiece(*piece);
    const int byte = pipeline_->byte_fallback() ? ByteFallbackValue(text) : -1;
    if (byte >= 0) {
      run.push_back(static_cast<char>(byte));
    } else {
      flush();
      out += text;
    }
  }
  flush();
  return out;
}

std::optional<Tokenizer::DecodedToken> Tokenizer::DecodeToken(int32_t id) const {
  auto piece = IdToPiece(id);
  if (!piece) return std::nullopt;
  if (!pipeline_->has_decoder()) return DecodedToken{std::string(*piece), -1};
  DecodedToken t{DecodePiece(*piece), -1};
  if (pipeline_->byte_fallback()) t.byte = ByteFallbackValue(t.text);
  return t;
}

bool Tokenizer::joins_with_space() const { return !pipeline_->has_decoder(); }

int32_t Tokenizer::vocab_size() const { return model_->size() + static_cast<int32_t>(extra_pieces_.size()); }

std::optional<std::string_view> Tokenizer::IdToPiece(int32_t id) const {
  if (id >= 0 && id < model_->size()) return model_->Piece(id);
  const int64_t extra = static_cast<int64_t>(id) - model_->size();
  if (extra >= 0 && extra < static_cast<int64_t>(extra_pieces_.size())) return std::string_view(extra_pieces_[extra]);
  return std::nullopt;
}

std::optional<int32_t> Tokenizer::PieceToId(std::string_view piece) const {
  const int32_t id = model_->Find(piece);
  if (id >= 0) return id;
  return AddedTokenId(piece);
}

std::optional<int32_t> Tokenizer::AddedTokenId(std::string_view content) const {
  const int32_t id = added_->Lookup(content);
  if (id < 0) return std::nullopt;
  return id;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && id < static_cast<int32_t>(special_.size()) && special_[id];
}

}  // namespace g4
