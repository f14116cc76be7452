// safetensors reading: header validation (SafetensorsFile::Parse), mapping
// (Open) and sharded checkpoint directories (Checkpoint). The writers live in
// safetensors_writer.cc.
#include "io/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_set>

namespace g4 {
namespace {

using json = nlohmann::json;

// Far beyond any real header (a 100k-tensor checkpoint needs ~10 MB) and small
// enough that a lying length cannot make us allocate or parse gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

constexpr char kIndexName[] = "model.safetensors.index.json";
constexpr char kSingleName[] = "model.safetensors";

std::string Prefix(const std::string& label) { return "[safetensors] " + label + ": "; }

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// A JSON value for an error message, cut short: a hostile header can make
// any value arbitrarily long.
std::string Snippet(const json& j) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// Describes a JSON value's type for error messages ("string", "array", ...).
std::string TypeName(const json& j) { return j.type_name(); }

// A JSON integer as uint64; false for negatives, floats and non-numbers.
// ("-0" parses as a signed zero, hence the signed branch.)
bool GetNonNegative(const json& j, uint64_t* out) {
  if (j.is_number_unsigned()) {
    *out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer() && j.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(j.get<int64_t>());
    return true;
  }
  return false;
}

// One header entry after field-level validation, before range checks.
struct RawEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end, nbytes;
};

// Validates one tensor entry's fields. Errors name the tensor.
Status ParseEntry(const std::string& label, const std::string& name, const json& v, RawEntry* out) {
  const std::string where = Prefix(label) + "tensor '" + name + "': ";
  if (!v.is_object()) return Corrupt(where + "entry is a " + TypeName(v) + ", not an object");
  out->name = name;

  auto dt = v.find("dtype");
  if (dt == v.end()) return Corrupt(where + "missing \"dtype\"");
  if (!dt->is_string()) return Corrupt(where + "\"dtype\" is a " + TypeName(*dt) + ", not a string");
  const std::string& dtype_name = dt->get_ref<const std::string&>();
  std::optional<DType> dtype = ParseDType(dtype_name);
  if (!dtype) return Unsupported(where + "unknown dtype '" + dtype_name + "'");
  out->dtype = *dtype;

  auto sh = v.find("shape");
  if (sh == v.end()) return Corrupt(where + "missing \"shape\"");
  if (!sh->is_array()) return Corrupt(where + "\"shape\" is a " + TypeName(*sh) + ", not an array");
  uint64_t numel = 1;
  for (const json& d : *sh) {
    uint64_t dim = 0;
    if (!GetNonNegative(d, &dim)) {
      if (d.is_number_integer()) return Corrupt(where + "negative dimension " + Snippet(d) + " in shape");
      return Corrupt(where + "shape dimension " + Snippet(d) + " is not an integer");
    }
    if (dim > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, dim, &numel))
      return Corrupt(where + "shape " + Snippet(*sh) + " overflows 64 bits");
    out->shape.push_back(static_cast<int64_t>(dim));
  }
  if (numel > static_cast<uint64_t>(INT64_MAX) ||
      __builtin_mul_overflow(numel, static_cast<uint64_t>(DTypeSize(*dtype)), &out->nbytes))
    return Corrupt(where + "shape " + Snippet(*sh) + " x " + dtype_name + " overflows 64 bits");

  auto off = v.find("data_offsets");
  if (off == v.end()) return Corrupt(where + "missing \"data_offsets\"");
  if (!off->is_array() || off->size() != 2 || !GetNonNegative((*off)[0], &out->begin) ||
      !GetNonNegative((*off)[1], &out->end))
    return Corrupt(where + "\"data_offsets\" " + Snippet(*off) + " is not [begin, end] of non-negative integers");
  if (out->begin > out->end)
    return Corrupt(where + "data_offsets [" + std::to_string(out->begin) + ", " + std::to_string(out->end) +
                   "]: begin > end");
  return Status::Ok();
}

Status ParseMetadata(const std::string& label, const json& v, std::map<std::string, std::string>* out) {
  if (!v.is_object()) return Corrupt(Prefix(label) + "__metadata__ is a " + TypeName(v) + ", not an object");
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!it.value().is_string())
      return Corrupt(Prefix(label) + "__metadata__ value for '" + it.key() + "' is a " + TypeName(it.value()) +
                     ", not a string");
    (*out)[it.key()] = it.value().get<std::string>();
  }
  return Status::Ok();
}

// Parses the header JSON, rejecting duplicate top-level keys (nlohmann would
// silently keep the last one, hiding the other entry).
Status ParseHeaderJson(const std::string& label, const char* begin, const char* end, json* out) {
  std::string duplicate;
  std::unordered_set<std::string> seen;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!seen.insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  try {
    *out = json::parse(begin, end, cb);
  } catch (const json::exception& e) {
    return Corrupt(Prefix(label) + "header is not valid JSON: " + e.what());
  }
  if (!out->is_object()) return Corrupt(Prefix(label) + "header is a JSON " + TypeName(*out) + ", not an object");
  if (!duplicate.empty()) return Corrupt(Prefix(label) + "header names '" + duplicate + "' twice");
  return Status::Ok();
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::Describe() const { return ShapeString(shape) + " " + std::string(DTypeName(dtype)); }

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Parse(const uint8_t* data, size_t size,
                                                                  std::string label) {
  if (size < 8)
    return Corrupt(Prefix(label) + "file is " + std::to_string(size) +
                   " bytes, shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
  const uint64_t avail = size - 8;
  if (header_len > kMaxHeaderBytes && header_len > avail)
    return Corrupt(Prefix(label) + "header length " + std::to_string(header_len) + " past end of file (size " +
                   std::to_string(size) + ")");
  if (header_len > kMaxHeaderBytes)
    return Corrupt(Prefix(label) + "header length " + std::to_string(header_len) + " is absurd (limit " +
                   std::to_string(kMaxHeaderBytes) + ")");
  if (header_len > avail)
    return Corrupt(Prefix(label) + "header length " + std::to_string(header_len) + " past end of file (size " +
                   std::to_string(size) + ")");

  const char* hbegin = reinterpret_cast<const char*>(data + 8);
  json header;
  G4_RETURN_IF_ERROR(ParseHeaderJson(label, hbegin, hbegin + header_len, &header));

  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->label_ = std::move(label);
  file->size_ = size;
  const std::string& lbl = file->label_;
  const uint8_t* data_start = data + 8 + header_len;
  const uint64_t data_size = avail - header_len;

  std::vector<RawEntry> entries;
  try {
    entries.reserve(header.size());
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") {
        G4_RETURN_IF_ERROR(ParseMetadata(lbl, it.value(), &file->metadata_));
        continue;
      }
      RawEntry e;
      G4_RETURN_IF_ERROR(ParseEntry(lbl, it.key(), it.value(), &e));
      if (e.end > data_size)
        return Corrupt(Prefix(lbl) + "tensor '" + e.name + "': data_offsets [" + std::to_string(e.begin) + ", " +
                       std::to_string(e.end) + "] past end of data section (" + std::to_string(data_size) +
                       " bytes)");
      if (e.end - e.begin != e.nbytes)
        return Corrupt(Prefix(lbl) + "tensor '" + e.name + "': shape " + ShapeString(e.shape) + " " +
                       std::string(DTypeName(e.dtype)) + " needs " + std::to_string(e.nbytes) +
                       " bytes but data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                       "] span " + std::to_string(e.end - e.begin));
      entries.push_back(std::move(e));
    }
  } catch (const json::exception& e) {  // defensive: every access above is type-checked first
    return Corrupt(Prefix(lbl) + "malformed header: " + e.what());
  }

  // Overlap check over non-empty ranges in offset order. Holes are allowed.
  std::stable_sort(entries.begin(), entries.end(), [](const RawEntry& a, const RawEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const RawEntry* furthest = nullptr;  // the non-empty range reaching furthest so far
  for (const RawEntry& e : entries) {
    if (e.begin == e.end) continue;
    if (furthest && e.begin < furthest->end)
      return Corrupt(Prefix(lbl) + "tensors '" + furthest->name + "' [" + std::to_string(furthest->begin) + ", " +
                     std::to_string(furthest->end) + ") and '" + e.name + "' [" + std::to_string(e.begin) + ", " +
                     std::to_string(e.end) + ") overlap");
    if (!furthest || e.end > furthest->end) furthest = &e;
  }

  file->tensors_.reserve(entries.size());
  for (RawEntry& e : entries) {
    TensorInfo t;
    t.name = std::move(e.name);
    t.dtype = e.dtype;
    t.shape = std::move(e.shape);
    t.data = data_start + e.begin;
    t.nbytes = static_cast<size_t>(e.nbytes);
    file->index_.emplace(t.name, file->tensors_.size());
    file->tensors_.push_back(std::move(t));
  }
  return file;
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  auto mapped = MappedFile::Open(path);
  if (!mapped.ok()) return Status(mapped.status().code(), "[safetensors] " + mapped.status().message());
  std::unique_ptr<MappedFile> mapping = std::move(mapped).value();
  G4_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file,
                      Parse(mapping->data(), mapping->size(), path));
  file->mapping_ = std::move(mapping);
  return file;
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) return NotFound("[safetensors] " + dir + ": no such directory");
  if (!fs::is_directory(st)) return InvalidArgument("[safetensors] " + dir + ": not a directory");

  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = dir;
  const std::string index_path = (fs::path(dir) / kIndexName).string();
  const std::string single_path = (fs::path(dir) / kSingleName).string();

  if (!fs::exists(index_path, ec)) {
    if (!fs::exists(single_path, ec))
      return NotFound("[safetensors] " + dir + ": neither " + kIndexName + " nor " + kSingleName + " found");
    G4_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(single_path));
    ckpt->total_file_bytes_ = file->size();
    for (const TensorInfo& t : file->tensors()) ckpt->index_.emplace(t.name, &t);
    ckpt->shards_.push_back(std::move(file));
    return ckpt;
  }

  G4_ASSIGN_OR_RETURN(std::string text, ReadFileToString(index_path));
  const std::string where = Prefix(index_path);
  json index = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded()) return Corrupt(where + "not valid JSON");
  if (!index.is_object()) return Corrupt(where + "is a JSON " + TypeName(index) + ", not an object");
  auto wm = index.find("weight_map");
  if (wm == index.end()) return Corrupt(where + "missing \"weight_map\"");
  if (!wm->is_object()) return Corrupt(where + "\"weight_map\" is a " + TypeName(*wm) + ", not an object");

  std::map<std::string, size_t> shard_slot;  // shard file name -> index in shards_
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    const std::string& name = it.key();
    if (!it.value().is_string())
      return Corrupt(where + "weight_map entry for '" + name + "' is a " + TypeName(it.value()) +
                     ", not a shard file name");
    const std::string& shard = it.value().get_ref<const std::string&>();
    if (shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos ||
        shard.find('\\') != std::string::npos)
      return Corrupt(where + "weight_map assigns '" + name + "' to '" + shard + "', not a file name in " + dir);
    auto slot = shard_slot.find(shard);
    if (slot == shard_slot.end()) {
      const std::string shard_path = (fs::path(dir) / shard).string();
      auto opened = SafetensorsFile::Open(shard_path);
      if (!opened.ok()) {
        if (opened.status().code() == StatusCode::kNotFound)
          return NotFound(where + "shard '" + shard + "' (holding '" + name + "') is missing: " + shard_path);
        return opened.status();
      }
      ckpt->total_file_bytes_ += opened.value()->size();
      ckpt->shards_.push_back(std::move(opened).value());
      slot = shard_slot.emplace(shard, ckpt->shards_.size() - 1).first;
    }
    const TensorInfo* t = ckpt->shards_[slot->second]->Find(name);
    if (!t)
      return Corrupt(where + "index assigns tensor '" + name + "' to shard '" + shard +
                     "', which does not contain it");
    ckpt->index_.emplace(name, t);
  }
  return ckpt;
}

const TensorInfo* Checkpoint::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

std::vector<std::string> Checkpoint::Names() const {
  std::vector<std::string> names;
  names.reserve(index_.size());
  for (const auto& [name, info] : index_) names.push_back(name);
  return names;
}

}  // namespace g4
