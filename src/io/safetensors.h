// safetensors: reading (memory-mapped, validated) and writing.
//
// Format: u64 little-endian header length N, N bytes of JSON mapping tensor
// names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative
// to the byte after the header) plus an optional "__metadata__" string map,
// then the data. Parse() validates everything a lying file could get wrong:
// header length past the end, non-JSON or wrongly typed header, unknown dtype,
// negative/overflowing shapes, offsets out of bounds, overlapping ranges,
// duplicate names, and shape x dtype disagreeing with the byte range.
//
// Policy choices (the spec is stricter than real files need):
//  - Holes between tensors and trailing bytes after the last one are accepted
//    (nothing reads them); overlapping byte ranges are rejected, since two
//    tensors aliasing one buffer is never what a writer meant. Empty tensors
//    (a zero dim) own no bytes and overlap nothing.
//  - Headers over 100 MB are rejected as absurd before any allocation.
//  - A dtype g4 does not know (e.g. a newer F4/F8_E8M0) is kUnsupported; all
//    other header/data disagreements are kCorrupt. Messages start with
//    "[safetensors] <label>: ".
//  - Tensor data is only as aligned as the file makes it: writers that pad the
//    header to 8 bytes (ours, Hugging Face's) give 8-aligned data starts.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/status.h"

namespace g4 {

// "[2048, 512]": a shape as error messages write it.
std::string ShapeString(const std::vector<int64_t>& shape);

// A view of one stored tensor. `data` points into a mapping owned by the
// SafetensorsFile (or Checkpoint) it came from and lives as long as that.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;

  int64_t numel() const;
  // "[2048, 512] BF16"
  std::string Describe() const;
};

class SafetensorsFile {
 public:
  // Maps and validates `path`. Only the header is read; tensor bytes are
  // paged in by the OS when used.
  static StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // Validates an in-memory image (used by Open, tests and the fuzzer). The
  // returned file borrows `data`, which must outlive it. `label` names the
  // source in error messages.
  static StatusOr<std::unique_ptr<SafetensorsFile>> Parse(const uint8_t* data, size_t size,
                                                          std::string label);

  // nullptr when absent.
  const TensorInfo* Find(std::string_view name) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& label() const { return label_; }
  // Bytes of the whole image (length prefix + header + data).
  size_t size() const { return size_; }

 private:
  SafetensorsFile() = default;
  size_t size_ = 0;
  std::unique_ptr<MappedFile> mapping_;  // null when parsed from borrowed bytes
  std::string label_;
  std::vector<TensorInfo> tensors_;  // in data-offset order
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint directory: `model.safetensors`, or the shards listed by
// `model.safetensors.index.json` (its "weight_map"). Every shard the index
// names must exist and hold the tensors the index says it holds. The index is
// authoritative: tensors a shard holds but the index does not list are not
// visible. Shard names must be plain file names inside `dir` (no '/').
class Checkpoint {
 public:
  static StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& dir);

  const TensorInfo* Find(std::string_view name) const;
  // All tensor names, sorted.
  std::vector<std::string> Names() const;
  // Total bytes of all shard files (for memory accounting).
  size_t total_file_bytes() const { return total_file_bytes_; }
  const std::string& dir() const { return dir_; }

 private:
  Checkpoint() = default;
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, const TensorInfo*, std::less<>> index_;
  size_t total_file_bytes_ = 0;
};

// Collects tensors and writes one safetensors file (atomically). Tensor data
// is copied at Add() time, so callers may free their buffers afterwards.
// Output is deterministic: "__metadata__" first, then tensors in insertion
// order with contiguous data, the header space-padded to a multiple of 8.
// Add() with a duplicate name or with nbytes != shape x dtype size is a caller
// bug (G4_CHECK).
class SafetensorsWriter {
 public:
  void Add(std::string name, DType dtype, std::vector<int64_t> shape, const void* data, size_t nbytes);
  void AddF32(std::string name, std::vector<int64_t> shape, const float* data);
  void AddI32(std::string name, std::vector<int64_t> shape, const int32_t* data);
  void SetMetadata(std::string key, std::string value);
  // The serialized image (header + data), for tests and fuzz seeds.
  std::string Serialize() const;
  Status Write(const std::string& path) const;

 private:
  struct Entry { std::string name; DType dtype; std::vector<int64_t> shape; std::string bytes; };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Streaming writer for files larger than memory (g4 synth): all tensors are
// declared up front, then `fill(i, out, nbytes)` is asked for tensor i's bytes
// in declaration order; the file is written to a temporary path, fsynced and
// renamed. The buffer handed to fill is zeroed first. Bad decls (duplicate
// names, negative or overflowing shapes) are kInvalidArgument. `progress`,
// when set, hears (bytes of tensor data written, their total) after each
// tensor, on the calling thread.
struct TensorDecl {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};
Status WriteSafetensorsStreaming(const std::string& path, const std::vector<TensorDecl>& decls,
                                 const std::function<void(size_t, uint8_t*, size_t)>& fill,
                                 const std::map<std::string, std::string>& metadata = {},
                                 const std::function<void(uint64_t done, uint64_t total)>& progress = {});

}  // namespace g4
