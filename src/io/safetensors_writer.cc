// safetensors writing: the in-memory SafetensorsWriter and the streaming
// writer for files larger than memory. Both share one header builder so their
// output is byte-identical for the same tensors, and both write under the
// write policy of core/file_write.h (temp + fsync + rename, onto a regular
// file or a new path only).
#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <set>

#include "core/check.h"
#include "core/file_write.h"
#include "io/safetensors.h"

namespace g4 {
namespace {

using ordered_json = nlohmann::ordered_json;

struct HeaderEntry {
  const std::string* name;
  DType dtype;
  const std::vector<int64_t>* shape;
  uint64_t nbytes;
};

// numel x dtype size, or false on a negative dim or overflow.
bool ShapeBytes(const std::vector<int64_t>& shape, DType dtype, uint64_t* nbytes) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  }
  return !__builtin_mul_overflow(n, static_cast<uint64_t>(DTypeSize(dtype)), nbytes);
}

// The 8-byte length prefix plus the JSON header, padded with spaces so the
// data section starts 8-byte aligned. Data offsets are contiguous in order.
std::string BuildHeader(const std::vector<HeaderEntry>& entries,
                        const std::map<std::string, std::string>& metadata) {
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json m = ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (const HeaderEntry& e : entries) {
    ordered_json t = ordered_json::object();
    t["dtype"] = std::string(DTypeName(e.dtype));
    t["shape"] = *e.shape;
    t["data_offsets"] = {offset, offset + e.nbytes};
    header[*e.name] = std::move(t);
    offset += e.nbytes;
  }
  // Invalid UTF-8 in a name is replaced rather than thrown on: names come from
  // g4's own code, and a writer has no way to report it.
  std::string text = header.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

}  // namespace

void SafetensorsWriter::Add(std::string name, DType dtype, std::vector<int64_t> shape, const void* data,
                            size_t nbytes) {
  uint64_t expected = 0;
  G4_CHECK_MSG(ShapeBytes(shape, dtype, &expected) && expected == nbytes, "shape x dtype != nbytes");
  G4_CHECK_MSG(name != "__metadata__", "reserved tensor name");
  for (const Entry& e : entries_) G4_CHECK_MSG(e.name != name, "duplicate tensor name");
  Entry e{std::move(name), dtype, std::move(shape), std::string()};
  if (nbytes) e.bytes.assign(static_cast<const char*>(data), nbytes);
  entries_.push_back(std::move(e));
}

void SafetensorsWriter::AddF32(std::string name, std::vector<int64_t> shape, const float* data) {
  uint64_t nbytes = 0;
  G4_CHECK(ShapeBytes(shape, DType::kF32, &nbytes));
  Add(std::move(name), DType::kF32, std::move(shape), data, nbytes);
}

void SafetensorsWriter::AddI32(std::string name, std::vector<int64_t> shape, const int32_t* data) {
  uint64_t nbytes = 0;
  G4_CHECK(ShapeBytes(shape, DType::kI32, &nbytes));
  Add(std::move(name), DType::kI32, std::move(shape), data, nbytes);
}

void SafetensorsWriter::SetMetadata(std::string key, std::string value) {
  metadata_[std::move(key)] = std::move(value);
}

std::string SafetensorsWriter::Serialize() const {
  std::vector<HeaderEntry> decls;
  decls.reserve(entries_.size());
  size_t total = 0;
  for (const Entry& e : entries_) {
    decls.push_back({&e.name, e.dtype, &e.shape, e.bytes.size()});
    total += e.bytes.size();
  }
  std::string out = BuildHeader(decls, metadata_);
  out.reserve(out.size() + total);
  for (const Entry& e : entries_) out += e.bytes;
  return out;
}

Status SafetensorsWriter::Write(const std::string& path) const {
  const std::string image = Serialize();
  Status s = WriteFileAtomic(path, image.data(), image.size());
  if (!s.ok()) return Status(s.code(), "[safetensors] " + s.message());
  return s;
}

Status WriteSafetensorsStreaming(const std::string& path, const std::vector<TensorDecl>& decls,
                                 const std::function<void(size_t, uint8_t*, size_t)>& fill,
                                 const std::map<std::string, std::string>& metadata,
                                 const std::function<void(uint64_t, uint64_t)>& progress) {
  std::vector<HeaderEntry> entries;
  entries.reserve(decls.size());
  std::set<std::string_view> names;
  uint64_t largest = 0, total = 0;
  for (const TensorDecl& d : decls) {
    uint64_t nbytes = 0;
    if (!ShapeBytes(d.shape, d.dtype, &nbytes) || __builtin_add_overflow(total, nbytes, &total))
      return InvalidArgument("[safetensors] " + path + ": tensor '" + d.name +
                             "' has a negative or overflowing shape");
    if (d.name == "__metadata__" || !names.insert(d.name).second)
      return InvalidArgument("[safetensors] " + path + ": tensor name '" + d.name + "' is duplicate or reserved");
    entries.push_back({&d.name, d.dtype, &d.shape, nbytes});
    largest = std::max(largest, nbytes);
  }
  if (largest > SIZE_MAX) return ResourceExhausted("[safetensors] " + path + ": tensor too large for memory");

  // One buffer, sized for the largest tensor, reused for all of them.
  std::unique_ptr<uint8_t[]> buf(new (std::nothrow) uint8_t[std::max<uint64_t>(largest, 1)]);
  if (!buf)
    return ResourceExhausted("[safetensors] " + path + ": cannot allocate " + std::to_string(largest) +
                             " bytes for one tensor");

  auto tagged = [](const Status& st) { return Status(st.code(), "[safetensors] " + st.message()); };
  StatusOr<AtomicFileWriter> writer = AtomicFileWriter::Create(path);
  if (!writer.ok()) return tagged(writer.status());
  const std::string header = BuildHeader(entries, metadata);
  Status s = writer->Write(header.data(), header.size());
  uint64_t done = 0;
  for (size_t i = 0; s.ok() && i < entries.size(); ++i) {
    const size_t n = static_cast<size_t>(entries[i].nbytes);
    std::memset(buf.get(), 0, n);
    fill(i, buf.get(), n);
    s = writer->Write(buf.get(), n);
    done += n;
    if (s.ok() && progress) progress(done, total);
  }
  if (s.ok()) s = writer->Commit();
  return s.ok() ? s : tagged(s);
}

}  // namespace g4
