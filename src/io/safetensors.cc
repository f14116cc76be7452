// safetensors reading: header validation (SafetensorsFile::Parse), mapping
// (Open) and sharded checkpoint directories (Checkpoint). The writers live in
// safetensors_writer.cc.
#include "io/safetensors.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/file_read.h"
#include "core/json.h"
#include "core/limits.h"
#include "io/safetensors_header.h"

namespace g4 {
namespace {

using json = nlohmann::json;
using safetensors_internal::RawEntry;

constexpr char kIndexName[] = "model.safetensors.index.json";
constexpr char kSingleName[] = "model.safetensors";

std::string Prefix(const std::string& label) { return "[safetensors] " + label + ": "; }

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// Describes a JSON value's type for error messages ("string", "array", ...).
std::string TypeName(const json& j) { return j.type_name(); }

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
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
  if (header_len > kMaxSafetensorsHeaderBytes && header_len > avail)
    return Corrupt(Prefix(label) + "header length " + std::to_string(header_len) + " past end of file (size " +
                   std::to_string(size) + ")");
  if (header_len > kMaxSafetensorsHeaderBytes)
    return Corrupt(Prefix(label) + "header length " + std::to_string(header_len) + " is over the " +
                   std::to_string(kMaxSafetensorsHeaderBytes) + "-byte limit (kMaxSafetensorsHeaderBytes)");
  if (header_len > avail)
    return Corrupt(Prefix(label) + "header length " + std::to_string(header_len) + " past end of file (size " +
                   std::to_string(size) + ")");

  const char* hbegin = reinterpret_cast<const char*>(data + 8);
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  std::vector<RawEntry> entries;
  G4_RETURN_IF_ERROR(
      safetensors_internal::ParseHeader(hbegin, hbegin + header_len, label, &entries, &file->metadata_));
  file->label_ = std::move(label);
  file->size_ = size;
  const std::string& lbl = file->label_;
  const uint8_t* data_start = data + 8 + header_len;
  const uint64_t data_size = avail - header_len;

  for (const RawEntry& e : entries) {
    if (e.end > data_size)
      return Corrupt(Prefix(lbl) + "tensor '" + e.name + "': data_offsets [" + std::to_string(e.begin) + ", " +
                     std::to_string(e.end) + "] past end of data section (" + std::to_string(data_size) +
                     " bytes)");
    if (e.end - e.begin != e.nbytes)
      return Corrupt(Prefix(lbl) + "tensor '" + e.name + "': shape " + ShapeString(e.shape) + " " +
                     std::string(DTypeName(e.dtype)) + " needs " + std::to_string(e.nbytes) +
                     " bytes but data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                     "] span " + std::to_string(e.end - e.begin));
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
    if (!file->index_.emplace(t.name, file->tensors_.size()).second)
      return Corrupt(Prefix(lbl) + "header names '" + t.name + "' twice");
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
  // Every path check goes through core/file_read (no std::filesystem, whose
  // throwing overloads turned a symlink loop into an uncaught exception).
  if (Status d = RequireDirectory(dir); !d.ok()) return Status(d.code(), "[safetensors] " + d.message());
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = dir;
  const std::string index_path = JoinPath(dir, kIndexName);
  const std::string single_path = JoinPath(dir, kSingleName);

  auto tagged = [](const Status& s) { return Status(s.code(), "[safetensors] " + s.message()); };
  StatusOr<PathType> index_type = StatPath(index_path);
  if (!index_type.ok()) return tagged(index_type.status());
  if (*index_type == PathType::kMissing) {
    StatusOr<PathType> single_type = StatPath(single_path);
    if (!single_type.ok()) return tagged(single_type.status());
    if (*single_type == PathType::kMissing)
      return NotFound("[safetensors] " + dir + ": neither " + kIndexName + " nor " + kSingleName + " found");
    G4_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(single_path));
    ckpt->total_file_bytes_ = file->size();
    for (const TensorInfo& t : file->tensors()) ckpt->index_.emplace(t.name, &t);
    ckpt->shards_.push_back(std::move(file));
    return ckpt;
  }

  StatusOr<std::string> text = ReadFileToString(index_path, kMaxSafetensorsIndexBytes, "kMaxSafetensorsIndexBytes");
  if (!text.ok()) return tagged(text.status());
  const std::string where = Prefix(index_path);
  G4_ASSIGN_OR_RETURN(json index, ParseJsonBounded<json>(*text, "safetensors", index_path, StatusCode::kCorrupt));
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
      const std::string shard_path = JoinPath(dir, shard);
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
