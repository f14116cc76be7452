#include "tokenizer/text_pipeline.h"

#include <algorithm>
#include <cstdio>

#include "core/limits.h"

namespace g4 {
namespace {

using json = nlohmann::json;

std::string TypeOf(const json& j) {
  if (!j.is_object()) return "(not an object)";
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) return "(no type)";
  return it->get<std::string>();
}

// Reads {"String": "..."}; Regex patterns are not implemented.
Status ReadPattern(const json& step, const std::string& where, std::string* out) {
  auto it = step.find("pattern");
  if (it == step.end() || !it->is_object()) return Corrupt(where + ": missing \"pattern\" object");
  if (it->contains("Regex")) return Unsupported(where + ": Regex patterns are not supported (only String)");
  auto s = it->find("String");
  if (s == it->end() || !s->is_string()) return Corrupt(where + ": pattern has no \"String\"");
  *out = s->get<std::string>();
  return Status::Ok();
}

Status ReadReplace(const json& step, const std::string& where, std::vector<ReplaceRule>* rules) {
  ReplaceRule r;
  G4_RETURN_IF_ERROR(ReadPattern(step, where, &r.pattern));
  if (r.pattern.empty()) return Unsupported(where + ": empty Replace pattern is not supported");
  auto c = step.find("content");
  if (c == step.end() || !c->is_string()) return Corrupt(where + ": Replace has no string \"content\"");
  r.content = c->get<std::string>();
  rules->push_back(std::move(r));
  return Status::Ok();
}

Status ReadNormalizer(const json& j, const std::string& where, std::vector<ReplaceRule>* rules) {
  if (j.is_null()) return Status::Ok();
  const std::string type = TypeOf(j);
  if (type == "Replace") return ReadReplace(j, where, rules);
  if (type == "Sequence") {
    auto it = j.find("normalizers");
    if (it == j.end() || !it->is_array()) return Corrupt(where + ": Sequence has no \"normalizers\" array");
    for (const json& step : *it) G4_RETURN_IF_ERROR(ReadNormalizer(step, where, rules));
    return Status::Ok();
  }
  return Unsupported(where + ": normalizer type '" + type + "' is not supported");
}

Status ReadPreTokenizer(const json& j, const std::string& where, std::vector<SplitRule>* rules) {
  if (j.is_null()) return Status::Ok();
  const std::string type = TypeOf(j);
  if (type == "Sequence") {
    auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array()) return Corrupt(where + ": Sequence has no \"pretokenizers\" array");
    for (const json& step : *it) G4_RETURN_IF_ERROR(ReadPreTokenizer(step, where, rules));
    return Status::Ok();
  }
  if (type != "Split") return Unsupported(where + ": pre-tokenizer type '" + type + "' is not supported");
  SplitRule r;
  G4_RETURN_IF_ERROR(ReadPattern(j, where, &r.pattern));
  auto b = j.find("behavior");
  if (b == j.end() || !b->is_string()) return Corrupt(where + ": Split has no \"behavior\"");
  const std::string behavior = b->get<std::string>();
  if (behavior == "Removed") r.behavior = SplitBehavior::kRemoved;
  else if (behavior == "Isolated") r.behavior = SplitBehavior::kIsolated;
  else if (behavior == "MergedWithPrevious") r.behavior = SplitBehavior::kMergedWithPrevious;
  else if (behavior == "MergedWithNext") r.behavior = SplitBehavior::kMergedWithNext;
  else if (behavior == "Contiguous") r.behavior = SplitBehavior::kContiguous;
  else return Corrupt(where + ": unknown Split behavior '" + behavior + "'");
  auto inv = j.find("invert");
  if (inv != j.end()) {
    if (!inv->is_boolean()) return Corrupt(where + ": Split \"invert\" is not a boolean");
    r.invert = inv->get<bool>();
  }
  rules->push_back(std::move(r));
  return Status::Ok();
}

// Flattens the decoder into a list of steps, checking each type.
Status CollectDecoder(const json& j, const std::string& where, std::vector<const json*>* steps) {
  const std::string type = TypeOf(j);
  if (type == "Sequence") {
    auto it = j.find("decoders");
    if (it == j.end() || !it->is_array()) return Corrupt(where + ": Sequence has no \"decoders\" array");
    for (const json& step : *it) G4_RETURN_IF_ERROR(CollectDecoder(step, where, steps));
    return Status::Ok();
  }
  if (type == "Replace" || type == "ByteFallback" || type == "Fuse") {
    steps->push_back(&j);
    return Status::Ok();
  }
  return Unsupported(where + ": decoder type '" + type + "' is not supported");
}

// One split step on one piece, following NormalizedString::split in HF.
void SplitPiece(const SplitRule& rule, std::string_view s, std::vector<std::string_view>* out) {
  struct Part {
    size_t begin, end;
    bool match;
  };
  std::vector<Part> parts;
  if (rule.pattern.empty() || s.empty()) {
    parts.push_back({0, s.size(), false});
  } else {
    size_t prev = 0;
    for (size_t at = s.find(rule.pattern); at != std::string_view::npos; at = s.find(rule.pattern, prev)) {
      if (at != prev) parts.push_back({prev, at, false});
      prev = at + rule.pattern.size();
      parts.push_back({at, prev, true});
    }
    if (prev != s.size()) parts.push_back({prev, s.size(), false});
  }
  if (rule.invert)
    for (Part& p : parts) p.match = !p.match;

  // (begin, end, removed) after applying the behaviour.
  std::vector<Part> kept;
  bool previous_match = false;
  switch (rule.behavior) {
    case SplitBehavior::kIsolated:
      for (const Part& p : parts) kept.push_back({p.begin, p.end, false});
      break;
    case SplitBehavior::kRemoved:
      kept = parts;
      break;
    case SplitBehavior::kContiguous:
      for (const Part& p : parts) {
        if (p.match == previous_match && !kept.empty()) kept.back().end = p.end;
        else kept.push_back({p.begin, p.end, false});
        previous_match = p.match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Part& p : parts) {
        if (p.match && !previous_match && !kept.empty()) kept.back().end = p.end;
        else kept.push_back({p.begin, p.end, false});
        previous_match = p.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (size_t i = parts.size(); i-- > 0;) {
        const Part& p = parts[i];
        if (p.match && !previous_match && !kept.empty()) kept.back().begin = p.begin;
        else kept.push_back({p.begin, p.end, false});
        previous_match = p.match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  for (const Part& p : kept)
    if (!p.match && p.end > p.begin) out->push_back(s.substr(p.begin, p.end - p.begin));
}

// The most a chain of Replace rules can multiply a text's length by: a rule
// replacing non-overlapping occurrences of P bytes by C bytes turns L bytes
// into at most L * max(1, C / P).
double WorstCaseGrowth(const std::vector<ReplaceRule>& rules) {
  double growth = 1.0;
  for (const ReplaceRule& r : rules)
    growth *= std::max(1.0, static_cast<double>(r.content.size()) / static_cast<double>(r.pattern.size()));
  return growth;
}

// Eight chained rules that each grow text ten-fold would turn a prompt into
// 10^8 times its size; such a pipeline is refused at load instead.
Status CheckGrowth(const std::vector<ReplaceRule>& rules, const std::string& prefix, const char* stage) {
  const double growth = WorstCaseGrowth(rules);
  if (growth <= static_cast<double>(kMaxNormalizeGrowth)) return Status::Ok();
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", growth);
  return OutOfRange(prefix + ": " + stage + " Replace rules can grow text " + text + "-fold, over the limit of " +
                    std::to_string(kMaxNormalizeGrowth) + " (kMaxNormalizeGrowth)");
}

}  // namespace

std::string ApplyReplaceRules(const std::vector<ReplaceRule>& rules, std::string_view s) {
  std::string cur(s);
  for (const ReplaceRule& r : rules) {
    size_t at = cur.find(r.pattern);
    if (at == std::string::npos) continue;
    std::string next;
    next.reserve(cur.size() + cur.size() / 4);
    size_t prev = 0;
    for (; at != std::string::npos; at = cur.find(r.pattern, prev)) {
      next.append(cur, prev, at - prev);
      next += r.content;
      prev = at + r.pattern.size();
    }
    next.append(cur, prev, std::string::npos);
    cur = std::move(next);
  }
  return cur;
}

int ByteFallbackValue(std::string_view t) {
  if (t.size() != 6 || t[0] != '<' || t[1] != '0' || t[2] != 'x' || t[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

StatusOr<TextPipeline> TextPipeline::FromJson(const json& doc, const std::string& name) {
  TextPipeline p;
  const std::string prefix = "[tokenizer] " + name;
  if (auto it = doc.find("normalizer"); it != doc.end())
    G4_RETURN_IF_ERROR(ReadNormalizer(*it, prefix, &p.normalizer_));
  G4_RETURN_IF_ERROR(CheckGrowth(p.normalizer_, prefix, "normalizer"));
  if (auto it = doc.find("pre_tokenizer"); it != doc.end())
    G4_RETURN_IF_ERROR(ReadPreTokenizer(*it, prefix, &p.splits_));

  auto dec = doc.find("decoder");
  if (dec == doc.end() || dec->is_null()) return p;
  std::vector<const json*> steps;
  G4_RETURN_IF_ERROR(CollectDecoder(*dec, prefix, &steps));
  p.has_decoder_ = true;
  // Per-token Replace steps must come before ByteFallback and Fuse: after
  // those, a pattern could span token boundaries, which this decoder (and
  // the streaming one built on it) does not model.
  bool seen_join = false;
  for (const json* step : steps) {
    const std::string type = TypeOf(*step);
    if (type == "Replace") {
      if (seen_join)
        return Unsupported(prefix + ": decoder Replace after ByteFallback/Fuse is not supported");
      G4_RETURN_IF_ERROR(ReadReplace(*step, prefix, &p.decode_rules_));
    } else if (type == "ByteFallback") {
      if (p.byte_fallback_) return Unsupported(prefix + ": decoder with two ByteFallback steps is not supported");
      if (seen_join) return Unsupported(prefix + ": decoder ByteFallback after Fuse is not supported");
      p.byte_fallback_ = true;
      seen_join = true;
    } else {  // Fuse: the final join is a concatenation either way
      seen_join = true;
    }
  }
  G4_RETURN_IF_ERROR(CheckGrowth(p.decode_rules_, prefix, "decoder"));
  return p;
}

void TextPipeline::PreTokenize(std::string_view s, std::vector<std::string_view>* out) const {
  if (s.empty()) return;
  if (splits_.empty()) {
    out->push_back(s);
    return;
  }
  std::vector<std::string_view> cur{s}, next;
  for (const SplitRule& rule : splits_) {
    next.clear();
    for (std::string_view piece : cur) SplitPiece(rule, piece, &next);
    cur.swap(next);
  }
  out->insert(out->end(), cur.begin(), cur.end());
}

}  // namespace g4
