#include "kv/kv_file.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/file_write.h"
#include "core/mapped_file.h"
#include "kv/checksum.h"

namespace g4 {
namespace {

constexpr char kMagic[8] = {'G', '4', 'K', 'V', 'S', 'E', 'Q', '\0'};
constexpr size_t kPreambleBytes = 64;
constexpr uint64_t kAlign = 4096;

void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// AtomicFileWriter's errors carry no module tag.
Status Kv(const Status& s) { return s.ok() ? s : Status(s.code(), "[kv] " + s.message()); }

std::string Hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

}  // namespace

Status SaveKvFile(const std::string& path, const KvPool& pool, const KvSeq& seq, const KvFileIdentity& identity,
                  const std::vector<int32_t>& tokens) {
  const int64_t length = pool.length(seq);
  if (static_cast<int64_t>(tokens.size()) != length)
    return InvalidArgument("[kv] saving " + std::to_string(tokens.size()) + " token ids for a sequence of " +
                           std::to_string(length) + " tokens");
  const std::vector<KvPool::LayerRecords> layers = pool.Export(seq);
  // The write policy (core/file_write.h): a temporary file renamed over a new
  // path or a regular file only, never over a symlink, FIFO or device.
  StatusOr<AtomicFileWriter> opened = AtomicFileWriter::Create(path);
  if (!opened.ok()) return Kv(opened.status());
  AtomicFileWriter* w = &*opened;
  const std::vector<uint8_t> preamble(kPreambleBytes, 0);
  G4_RETURN_IF_ERROR(Kv(w->Write(preamble.data(), preamble.size())));
  nlohmann::json header;
  header["format"] = "g4-kv";
  header["version"] = kKvFileVersion;
  header["model_fingerprint"] = identity.model_fingerprint;
  header["tokenizer_hash"] = identity.tokenizer_hash;
  header["scheme"] = pool.scheme().signature();
  header["length"] = length;
  header["tokens"] = tokens;
  header["converted_at"] = {pool.converted_at(seq, KvGroup::kFull), pool.converted_at(seq, KvGroup::kSliding)};
  nlohmann::json lj = nlohmann::json::array();
  for (const KvPool::LayerRecords& rec : layers) {
    const int64_t n = length - rec.first_token;
    const uint64_t record_bytes = n > 0 ? rec.records.size() / static_cast<uint64_t>(n) : 0;
    G4_RETURN_IF_ERROR(Kv(w->PadTo(kAlign)));
    lj.push_back({{"layer", rec.layer},
                  {"signature", rec.signature},
                  {"first_token", rec.first_token},
                  {"record_bytes", record_bytes},
                  {"offset", w->size()},
                  {"bytes", rec.records.size()},
                  {"crc32c", Hex32(Crc32c(rec.records.data(), rec.records.size()))}});
    G4_RETURN_IF_ERROR(Kv(w->Write(rec.records.data(), rec.records.size())));
  }
  header["layers"] = std::move(lj);
  G4_RETURN_IF_ERROR(Kv(w->PadTo(kAlign)));
  const std::string text = header.dump();
  const uint64_t header_offset = w->size();
  G4_RETURN_IF_ERROR(Kv(w->Write(text.data(), text.size())));
  uint8_t pre[kPreambleBytes] = {};
  std::memcpy(pre, kMagic, 8);
  PutU32(pre + 8, kKvFileVersion);
  PutU32(pre + 12, 0);
  PutU64(pre + 16, header_offset);
  PutU64(pre + 24, text.size());
  PutU32(pre + 32, Crc32c(text.data(), text.size()));
  PutU32(pre + 36, 0);
  PutU32(pre + 40, Crc32c(pre, 40));
  G4_RETURN_IF_ERROR(Kv(w->WriteAt(0, pre, sizeof pre)));
  return Kv(w->Commit());
}

namespace {

// Everything LoadKvFile checks in the file itself, with errors unprefixed
// by the path; on success `layers`, `length`, `converted_at` and `tokens`
// are what Import needs.
struct Parsed {
  std::vector<KvPool::LayerRecords> layers;
  int64_t length = 0;
  std::array<int64_t, kNumKvGroups> converted_at = {-1, -1};
  std::vector<int32_t> tokens;
};

StatusOr<Parsed> Parse(const MappedFile& file, const KvPool& pool, const KvFileIdentity& identity) {
  const uint8_t* data = file.data();
  const uint64_t size = file.size();
  if (size < kPreambleBytes)
    return Corrupt("truncated: " + std::to_string(size) + " bytes, shorter than the " +
                   std::to_string(kPreambleBytes) + "-byte preamble");
  if (std::memcmp(data, kMagic, 8) != 0) return Corrupt("not a g4 KV cache file (bad magic)");
  if (Crc32c(data, 40) != GetU32(data + 40)) return Corrupt("preamble checksum mismatch");
  const uint32_t version = GetU32(data + 8);
  if (version != kKvFileVersion)
    return Unsupported("format version " + std::to_string(version) + ", this build reads version " +
                       std::to_string(kKvFileVersion));
  const uint64_t header_offset = GetU64(data + 16), header_bytes = GetU64(data + 24);
  if (header_offset < kPreambleBytes || header_offset > size || header_bytes > size - header_offset)
    return Corrupt("truncated: header at " + std::to_string(header_offset) + "+" + std::to_string(header_bytes) +
                   " past the end of the file (" + std::to_string(size) + " bytes)");
  if (header_offset + header_bytes != size)
    return Corrupt("file is " + std::to_string(size) + " bytes, its header says " +
                   std::to_string(header_offset + header_bytes));
  const char* text = reinterpret_cast<const char*>(data + header_offset);
  if (Crc32c(text, header_bytes) != GetU32(data + 32)) return Corrupt("header checksum mismatch");

  nlohmann::json h = nlohmann::json::parse(text, text + header_bytes, nullptr, false);
  if (h.is_discarded() || !h.is_object()) return Corrupt("header is not a JSON object");
  try {
    if (h.at("format").get<std::string>() != "g4-kv" || h.at("version").get<uint32_t>() != version)
      return Corrupt("header format/version disagree with the preamble");
    const std::string fp = h.at("model_fingerprint").get<std::string>();
    if (fp != identity.model_fingerprint)
      return InvalidArgument("saved for model " + fp + ", this model is " + identity.model_fingerprint);
    const std::string tok = h.at("tokenizer_hash").get<std::string>();
    if (tok != identity.tokenizer_hash)
      return InvalidArgument("saved with tokenizer '" + tok + "', this tokenizer is '" + identity.tokenizer_hash + "'");
    const std::string sch = h.at("scheme").get<std::string>();
    if (sch != pool.scheme().signature())
      return InvalidArgument("saved with KV scheme " + sch + ", this pool uses " + pool.scheme().signature());
    Parsed out;
    out.tokens = h.at("tokens").get<std::vector<int32_t>>();
    out.length = h.at("length").get<int64_t>();
    if (out.length != static_cast<int64_t>(out.tokens.size()))
      return Corrupt("length " + std::to_string(out.length) + " but " + std::to_string(out.tokens.size()) +
                     " token ids");
    for (int32_t t : out.tokens)
      if (t < 0 || t >= pool.config().vocab_size)
        return Corrupt("token id " + std::to_string(t) + " outside the vocabulary");
    const auto converted = h.at("converted_at").get<std::vector<int64_t>>();
    if (converted.size() != kNumKvGroups) return Corrupt("converted_at needs one entry per layer group");
    for (int g = 0; g < kNumKvGroups; ++g) out.converted_at[g] = converted[g];
    const nlohmann::json& layers = h.at("layers");
    if (!layers.is_array()) return Corrupt("layers is not an array");
    uint64_t next_free = kAlign;  // tensors in increasing, non-overlapping ranges
    for (const nlohmann::json& lj : layers) {
      KvPool::LayerRecords rec;
      rec.layer = lj.at("layer").get<int>();
      rec.signature = lj.at("signature").get<std::string>();
      rec.first_token = lj.at("first_token").get<int64_t>();
      const std::string where = "layer " + std::to_string(rec.layer) + ": ";
      const uint64_t record_bytes = lj.at("record_bytes").get<uint64_t>();
      const uint64_t off = lj.at("offset").get<uint64_t>(), n = lj.at("bytes").get<uint64_t>();
      if (rec.first_token < 0 || rec.first_token > out.length)
        return Corrupt(where + "first token " + std::to_string(rec.first_token) + " outside the sequence");
      const uint64_t tokens = static_cast<uint64_t>(out.length - rec.first_token);
      if (record_bytes > (uint64_t{1} << 32) || n != tokens * record_bytes)
        return Corrupt(where + std::to_string(n) + " bytes for " + std::to_string(tokens) + " records of " +
                       std::to_string(record_bytes) + " bytes");
      if (off % kAlign != 0 || off < next_free || off > header_offset || n > header_offset - off)
        return Corrupt(where + "records at " + std::to_string(off) + "+" + std::to_string(n) + " are misplaced");
      next_free = off + n;
      if (Hex32(Crc32c(data + off, n)) != lj.at("crc32c").get<std::string>())
        return Corrupt(where + "records checksum mismatch");
      rec.records.assign(data + off, data + off + n);
      out.layers.push_back(std::move(rec));
    }
    return out;
  } catch (const nlohmann::json::exception& e) {
    return Corrupt(std::string("header: ") + e.what());
  }
}

Status InFile(const std::string& path, const Status& s) {
  std::string m = s.message();
  if (m.rfind("[kv] ", 0) == 0) m = m.substr(5);
  return Status(s.code(), "[kv] " + path + ": " + m);
}

}  // namespace

StatusOr<LoadedKv> LoadKvFile(const std::string& path, KvPool& pool, const KvFileIdentity& identity) {
  auto file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  auto parsed = Parse(**file, pool, identity);
  if (!parsed.ok()) return InFile(path, parsed.status());
  // Import checks the records against the pool (layers, signatures,
  // coverage, free blocks) before it allocates anything.
  auto seq = pool.Import(parsed->layers, parsed->length, parsed->converted_at);
  if (!seq.ok()) return InFile(path, seq.status());
  LoadedKv out;
  out.seq = std::move(seq).value();
  out.tokens = std::move(parsed->tokens);
  return out;
}

}  // namespace g4
