#include "engine/kv_disk_cache.h"


#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/file_write.h"
#include "kv/checksum.h"

namespace g4 {
namespace fs = std::filesystem;

namespace {

constexpr char kIdxMagic[8] = {'G', '4', 'K', 'V', 'I', 'D', 'X', '1'};
constexpr size_t kIdxPreamble = 16;

void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

int64_t FileTimeNs(const fs::path& p) {
  std::error_code ec;
  const auto t = fs::last_write_time(p, ec);
  if (ec) return 0;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

void Touch(const fs::path& p) {
  std::error_code ec;
  fs::last_write_time(p, fs::file_time_type::clock::now(), ec);
}

}  // namespace

Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  // The write policy (core/file_write.h): never renamed over a symlink,
  // directory, FIFO or device.
  const Status s = WriteFileAtomic(path, bytes.data(), bytes.size());
  return s.ok() ? s : Status(s.code(), "[kv-cache] " + s.message());
}

StatusOr<std::unique_ptr<KvDiskCache>> KvDiskCache::Open(KvDiskCacheOptions options) {
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) return IoError("[kv-cache] " + options.dir + ": " + ec.message());
  auto c = std::unique_ptr<KvDiskCache>(new KvDiskCache(std::move(options)));
  G4_RETURN_IF_ERROR(c->Scan());
  c->EnforceLimit();
  return c;
}

void KvDiskCache::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

std::string KvDiskCache::PathOf(const std::string& name, const char* ext) const {
  return (fs::path(options_.dir) / (name + ext)).string();
}

std::string KvDiskCache::NameOf(std::span<const int32_t> tokens) const {
  Fnv1a64 h;
  h.Add(options_.identity.model_fingerprint);
  h.Add(options_.identity.tokenizer_hash);
  h.Add(options_.scheme);
  h.Add(tokens.data(), tokens.size() * sizeof(int32_t));
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h.h));
  return buf;
}

Status KvDiskCache::Scan() {
  std::error_code ec;
  std::vector<fs::path> idx, kv;
  for (const auto& e : fs::directory_iterator(options_.dir, ec)) {
    const fs::path p = e.path();
    const std::string file = p.filename().string();
    if (file.find(".tmp.") != std::string::npos) {  // a write cut short
      fs::remove(p, ec);
      Log("removed unfinished write " + file);
      continue;
    }
    if (p.extension() == ".idx") idx.push_back(p);
    if (p.extension() == ".g4kv") kv.push_back(p);
  }
  if (ec) return IoError("[kv-cache] " + options_.dir + ": " + ec.message());
  for (const fs::path& p : idx) {
    const std::string name = p.stem().string();
    const fs::path kv_path = PathOf(name, ".g4kv");
    std::ifstream in(p, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string problem;
    nlohmann::json j;
    if (bytes.size() < kIdxPreamble || std::memcmp(bytes.data(), kIdxMagic, 8) != 0) {
      problem = "bad index header";
    } else if (GetU32(bytes.data() + 8) != bytes.size() - kIdxPreamble) {
      problem = "truncated index";
    } else if (GetU32(bytes.data() + 12) != Crc32c(bytes.data() + kIdxPreamble, bytes.size() - kIdxPreamble)) {
      problem = "index checksum mismatch";
    } else {
      j = nlohmann::json::parse(bytes.begin() + kIdxPreamble, bytes.end(), nullptr, false);
      if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array()) problem = "index is not an entry";
    }
    if (problem.empty() && !fs::exists(kv_path)) problem = "its .g4kv is missing";
    if (!problem.empty()) {
      Log("skipped corrupt entry " + name + ": " + problem);
      fs::remove(p, ec);
      fs::remove(kv_path, ec);
      continue;
    }
    if (j.value("model", "") != options_.identity.model_fingerprint ||
        j.value("tokenizer", "") != options_.identity.tokenizer_hash || j.value("scheme", "") != options_.scheme)
      continue;  // another model's entry: not ours to judge
    Entry e;
    e.name = name;
    for (const auto& t : j["tokens"]) {
      if (!t.is_number_integer()) {
        e.tokens.clear();
        break;
      }
      e.tokens.push_back(t.get<int32_t>());
    }
    if (e.tokens.empty()) {
      Log("skipped corrupt entry " + name + ": bad token list");
      fs::remove(p, ec);
      fs::remove(kv_path, ec);
      continue;
    }
    e.bytes = fs::file_size(kv_path, ec) + bytes.size();
    e.last_use = FileTimeNs(p);
    index_.push_back(std::move(e));
  }
  // A .g4kv without its .idx: a crash between the two renames.
  for (const fs::path& p : kv) {
    if (fs::exists(PathOf(p.stem().string(), ".idx"))) continue;
    fs::remove(p, ec);
    Log("removed orphan " + p.filename().string());
  }
  return Status::Ok();
}

bool KvDiskCache::Contains(const std::string& name) const {
  return std::any_of(index_.begin(), index_.end(), [&](const Entry& e) { return e.name == name; });
}

uint64_t KvDiskCache::bytes() const {
  uint64_t b = 0;
  for (const Entry& e : index_) b += e.bytes;
  return b;
}

KvDiskCache::Candidate KvDiskCache::Best(std::span<const int32_t> tokens) const {
  Candidate best;
  for (const Entry& e : index_) {
    const size_t n = std::min(e.tokens.size(), tokens.size());
    const auto mismatch = std::mismatch(e.tokens.begin(), e.tokens.begin() + n, tokens.begin());
    const int64_t common = mismatch.first - e.tokens.begin();
    if (common > best.common) best = {e.name, common};
  }
  return best;
}

void KvDiskCache::Remove(size_t i, bool delete_files) {
  if (delete_files) {
    std::error_code ec;
    fs::remove(PathOf(index_[i].name, ".idx"), ec);  // the .idx first: no entry without its KV
    fs::remove(PathOf(index_[i].name, ".g4kv"), ec);
  }
  index_.erase(index_.begin() + static_cast<int64_t>(i));
}

StatusOr<LoadedKv> KvDiskCache::Load(const std::string& name, KvPool& pool) {
  size_t i = 0;
  while (i < index_.size() && index_[i].name != name) ++i;
  if (i == index_.size()) return NotFound("[kv-cache] no entry " + name);
  auto loaded = LoadKvFile(PathOf(name, ".g4kv"), pool, options_.identity);
  if (!loaded.ok()) {
    if (loaded.status().code() == StatusCode::kResourceExhausted) return loaded.status();
    Log("skipped corrupt entry " + name + ": " + loaded.status().message());
    Remove(i, /*delete_files=*/true);
    return loaded.status();
  }
  if (loaded->tokens != index_[i].tokens) {
    Log("skipped corrupt entry " + name + ": its index and KV file disagree");
    Remove(i, /*delete_files=*/true);
    return Corrupt("[kv-cache] entry " + name + ": index and KV file disagree");
  }
  Touch(PathOf(name, ".idx"));
  index_[i].last_use = FileTimeNs(PathOf(name, ".idx"));
  return loaded;
}

Status KvDiskCache::Save(const KvPool& pool, const KvSeq& seq, const std::vector<int32_t>& tokens) {
  const std::string name = NameOf(tokens);
  if (Contains(name)) return Status::Ok();
  const std::string kv_path = PathOf(name, ".g4kv");
  G4_RETURN_IF_ERROR(SaveKvFile(kv_path, pool, seq, options_.identity, tokens));
  nlohmann::json j = {{"version", 1},
                      {"model", options_.identity.model_fingerprint},
                      {"tokenizer", options_.identity.tokenizer_hash},
                      {"scheme", options_.scheme},
                      {"tokens", tokens}};
  const std::string payload = j.dump();
  std::string bytes(kIdxPreamble, '\0');
  std::memcpy(bytes.data(), kIdxMagic, 8);
  PutU32(bytes.data() + 8, static_cast<uint32_t>(payload.size()));
  PutU32(bytes.data() + 12, Crc32c(payload.data(), payload.size()));
  bytes += payload;
  Status s = WriteFileAtomically(PathOf(name, ".idx"), bytes);
  if (!s.ok()) {
    std::error_code ec;
    fs::remove(kv_path, ec);
    return s;
  }
  std::error_code ec;
  Entry e;
  e.name = name;
  e.tokens = tokens;
  e.bytes = fs::file_size(kv_path, ec) + bytes.size();
  e.last_use = FileTimeNs(PathOf(name, ".idx"));
  index_.push_back(std::move(e));
  EnforceLimit();
  return Status::Ok();
}

void KvDiskCache::EnforceLimit() {
  if (options_.max_bytes == 0) return;
  uint64_t total = bytes();
  while (total > options_.max_bytes && !index_.empty()) {
    size_t oldest = 0;
    for (size_t i = 1; i < index_.size(); ++i)
      if (index_[i].last_use < index_[oldest].last_use) oldest = i;
    total -= index_[oldest].bytes;
    Log("evicted " + index_[oldest].name + " from disk (over the size limit)");
    Remove(oldest, /*delete_files=*/true);
  }
}

}  // namespace g4
