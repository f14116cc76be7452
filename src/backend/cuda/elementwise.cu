// Elementwise ops over 2-D F32 views (any strides): GELU-gated product, add,
// scale, column scale, softcap, and the row gather. Each output element is a
// function of the elements at its own (row, column) alone, computed by one
// thread with the same formula whatever the shape, so rows never depend on
// their neighbours. Outputs may alias inputs of the same layout (each
// element is read before its own slot is written).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_common.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/pdl.cuh"
#include "core/check.h"

namespace g4::cuda {
namespace {

struct View2 {
  float* p;
  int64_t stride;
};
View2 V(const TensorView& t) { return {t.f32(), t.pitch()}; }

constexpr int kThreads = 256;

// Calls f(r, c) for every element; r and c from a flat index.
template <typename F>
__global__ void ForEachKernel(int64_t rows, int64_t cols, F f) {
  FollowPredecessor();  // launched as a dependent (pdl.cuh)
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    f(i / cols, i % cols);
  }
}

template <typename F>
void ForEach(int64_t rows, int64_t cols, F f, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t{1} << 20);
  LaunchDependent(ForEachKernel<F>, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream, rows,
                  cols, f);
  G4_CUDA_LAUNCHED();
}

struct GeluMulOp {
  View2 g, u, o;
  __device__ void operator()(int64_t r, int64_t c) const {
    const float gv = g.p[r * g.stride + c], uv = u.p[r * u.stride + c];
    o.p[r * o.stride + c] = GeluTanh(gv) * uv;
  }
};
struct AddOp {
  View2 a, b, y;
  __device__ void operator()(int64_t r, int64_t c) const {
    y.p[r * y.stride + c] = a.p[r * a.stride + c] + b.p[r * b.stride + c];
  }
};
struct ScaleOp {
  View2 x;
  float s;
  __device__ void operator()(int64_t r, int64_t c) const {
    x.p[r * x.stride + c] = x.p[r * x.stride + c] * s;
  }
};
struct ScaleColumnsOp {
  View2 x, y;
  const float* col;
  float s;
  // (x * col) * s: two roundings, in this order.
  __device__ void operator()(int64_t r, int64_t c) const {
    y.p[r * y.stride + c] = (x.p[r * x.stride + c] * col[c]) * s;
  }
};
struct SoftcapOp {
  View2 x;
  float cap;
  __device__ void operator()(int64_t r, int64_t c) const {
    float& v = x.p[r * x.stride + c];
    v = cap * tanhf(v / cap);
  }
};

template <typename T>
__global__ void GatherKernel(const uint8_t* src, int64_t src_stride_bytes, int64_t src_rows,
                             const int32_t* rows, uint8_t* dst, int64_t dst_stride_bytes, int64_t cols) {
  FollowPredecessor();  // launched as a dependent (pdl.cuh)
  const int64_t i = blockIdx.y;
  const int32_t r = rows[i];
  if (r < 0 || r >= src_rows) __trap();  // ops.h: row indices in range
  const T* s = reinterpret_cast<const T*>(src + r * src_stride_bytes);
  T* d = reinterpret_cast<T*>(dst + i * dst_stride_bytes);
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < cols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x)
    d[c] = s[c];
}

}  // namespace

void GeluMul(const TensorView& g, const TensorView& u, const TensorView& out, cudaStream_t stream) {
  ForEach(g.rows, g.cols, GeluMulOp{V(g), V(u), V(out)}, stream);
}
void Add(const TensorView& a, const TensorView& b, const TensorView& y, cudaStream_t stream) {
  ForEach(a.rows, a.cols, AddOp{V(a), V(b), V(y)}, stream);
}
void Scale(const TensorView& x, float s, cudaStream_t stream) {
  ForEach(x.rows, x.cols, ScaleOp{V(x), s}, stream);
}
void ScaleColumns(const TensorView& x, const float* col, float s, const TensorView& y, cudaStream_t stream) {
  ForEach(x.rows, x.cols, ScaleColumnsOp{V(x), V(y), col, s}, stream);
}
void Softcap(const TensorView& x, float cap, cudaStream_t stream) {
  ForEach(x.rows, x.cols, SoftcapOp{V(x), cap}, stream);
}

void GatherRows(const TensorView& src, const int32_t* rows, const TensorView& dst, cudaStream_t stream) {
  const int64_t e = static_cast<int64_t>(src.element_bytes());
  const int64_t ss = src.pitch() * e, ds = dst.pitch() * e;
  G4_CHECK_MSG(dst.rows <= 65535, "[cuda] GatherRows: too many rows");
  const int64_t cols = dst.cols;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((cols + 255) / 256, 1024)),
                  static_cast<unsigned>(dst.rows));
  const uint8_t* s = static_cast<const uint8_t*>(src.data);
  uint8_t* d = static_cast<uint8_t*>(dst.data);
  const auto launch = [&](auto kernel) {
    LaunchDependent(kernel, grid, dim3(256), 0, stream, s, ss, src.rows, rows, d, ds, cols);
  };
  switch (e) {
    case 1: launch(GatherKernel<uint8_t>); break;
    case 2: launch(GatherKernel<uint16_t>); break;
    case 4: launch(GatherKernel<uint32_t>); break;
    default:
      G4_CHECK_MSG(e == 8, "[cuda] GatherRows: element size");
      launch(GatherKernel<uint64_t>);
  }
  G4_CUDA_LAUNCHED();
}

}  // namespace g4::cuda
