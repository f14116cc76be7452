// TensorView: what crosses the op boundary instead of raw pointers. A
// non-owning view of a 2-D array [rows, cols] of one dtype in one memory
// space, rows `stride` elements apart (stride >= cols; a column slice of a
// wider array is a view, not a copy). Higher-rank data is viewed as 2-D:
// q [T, heads, D] is {T, heads * D}, or {T * heads, D} for per-head ops.
//
// Ownership: none. The memory belongs to a DeviceBuffer (backend.h), a
// mapped checkpoint, or the caller, and must outlive every op that reads or
// writes it (for a device backend, until the next Backend::Sync).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/check.h"
#include "core/dtype.h"

namespace g4 {

// Where bytes live. Host memory is readable by the CPU; device memory only
// by the backend that allocated it (for the CPU backend the two coincide).
enum class MemorySpace : uint8_t { kHost, kDevice };

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t stride = 0;  // elements between the starts of consecutive rows
  MemorySpace space = MemorySpace::kHost;

  static TensorView Of(void* data, DType dtype, int64_t rows, int64_t cols, MemorySpace space) {
    return TensorView{data, dtype, rows, cols, cols, space};
  }
  static TensorView F32(float* data, int64_t rows, int64_t cols, MemorySpace space) {
    return Of(data, DType::kF32, rows, cols, space);
  }
  static TensorView I32(int32_t* data, int64_t rows, int64_t cols, MemorySpace space) {
    return Of(data, DType::kI32, rows, cols, space);
  }

  bool contiguous() const { return stride == cols || rows <= 1; }
  // Elements between row starts as a kernel should take them: a single row
  // is contiguous whatever its stride (a row of a wider buffer keeps the
  // buffer's; a new view may leave it 0), so its pitch is its width, the
  // same answer contiguous() gives.
  int64_t pitch() const { return rows > 1 ? stride : cols; }
  int64_t elements() const { return rows * cols; }
  size_t element_bytes() const { return DTypeSize(dtype); }

  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
  float* f32() const {
    G4_DCHECK(dtype == DType::kF32);
    return static_cast<float*>(data);
  }
  int32_t* i32() const {
    G4_DCHECK(dtype == DType::kI32);
    return static_cast<int32_t*>(data);
  }
  // Pointer to element (r, c).
  void* at(int64_t r, int64_t c) const {
    return static_cast<char*>(data) + (r * stride + c) * static_cast<int64_t>(element_bytes());
  }

  // Rows [begin, begin + count).
  TensorView Rows(int64_t begin, int64_t count) const {
    G4_DCHECK(begin >= 0 && count >= 0 && begin + count <= rows);
    TensorView v = *this;
    v.data = at(begin, 0);
    v.rows = count;
    return v;
  }
  // Columns [begin, begin + count) of every row (strided).
  TensorView Cols(int64_t begin, int64_t count) const {
    G4_DCHECK(begin >= 0 && count >= 0 && begin + count <= cols);
    TensorView v = *this;
    v.data = at(0, begin);
    v.cols = count;
    return v;
  }
  // The same contiguous elements as [new_rows, new_cols].
  // REQUIRES: contiguous() and new_rows * new_cols == elements().
  TensorView Reshape(int64_t new_rows, int64_t new_cols) const {
    G4_CHECK(contiguous() && new_rows * new_cols == elements());
    TensorView v = *this;
    v.rows = new_rows;
    v.cols = new_cols;
    v.stride = new_cols;
    return v;
  }
};

}  // namespace g4
