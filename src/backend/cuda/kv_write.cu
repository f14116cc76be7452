// Ops::KvWrite and Ops::KvRecodeBlocks on the GPU: one block per record
// (plain stores: KvWritePlainKernel, below). The block stages the token's
// K and V rows (all KV heads) in shared memory, applies the value rotation
// for turbo stores (sign flip, a Walsh-Hadamard transform one butterfly
// stage at a time, the 1/sqrt(d) scale: the reference's operations, each
// butterfly the same two roundings), then each thread encodes whole groups
// with the reference's loop (kv_codec.cuh). Records come out
// byte-identical to EncodeKvRecords'; nothing outside the written slots is
// touched.
#include <mutex>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/env_switch.h"
#include "backend/cuda/kv_codec.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/pdl.cuh"
#include "backend/lloyd_max.h"
#include "core/check.h"

namespace g4::cuda {
namespace {

constexpr int kThreads = 128;

// Lloyd-Max cell boundaries on the device, for value widths 2..8 (index =
// bits), uploaded once per process.
const float* const* DeviceBoundaries() {
  static const float* table[9] = {};
  static std::once_flag once;
  std::call_once(once, [] {
    for (int bits : {2, 3, 4, 5, 8}) {
      const LloydMaxCodebook* book = FindLloydMaxCodebook(bits);
      G4_CHECK(book != nullptr);
      float* d = nullptr;
      const size_t n = static_cast<size_t>(book->levels() - 1);
      G4_CUDA_CHECK(cudaMalloc(&d, n * sizeof(float)));
      G4_CUDA_CHECK(cudaMemcpy(d, book->boundaries, n * sizeof(float), cudaMemcpyHostToDevice));
      table[bits] = d;
    }
  });
  return table;
}

struct DevStore {
  DevKvFormat f;
  uint8_t* records = nullptr;
  int64_t num_blocks = 0;
  const float* centroids = nullptr;
  const float* signs = nullptr;
  const float* boundaries = nullptr;
};

DevStore MakeDevStore(const PagedKvStore& s) {
  DevStore d;
  if (!s.records) return d;
  d.f = MakeDevKvFormat(s.format);
  d.records = s.records;
  d.num_blocks = s.num_blocks;
  d.centroids = s.value_centroids;
  d.signs = s.value_signs;
  if (d.f.kind == kKvTurbo) {
    G4_CHECK_MSG(s.value_signs != nullptr, "[cuda] turbo KV store without its value signs");
    d.boundaries = DeviceBoundaries()[d.f.value_bits];
  }
  return d;
}

// In-place Walsh-Hadamard transform of every head of y (heads x d), by the
// whole block: stage h adds and subtracts pairs (j, j + h) as kvfmt::Fwht.
__device__ void BlockFwht(float* y, int heads, int d) {
  const int pairs = heads * (d / 2);
  for (int h = 1; h < d; h *= 2) {
    for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
      const int head = p / (d / 2), q = p % (d / 2);
      const int i = head * d + (q / h) * 2 * h + q % h, j = i + h;
      const float a = y[i], b = y[j];
      y[i] = a + b;
      y[j] = a - b;
    }
    __syncthreads();
  }
}

// Encodes the K row `k` and V row `v` (shared memory, width floats each;
// v is rotated in place for turbo) into `rec`.
__device__ void EncodeRecord(const DevStore& s, float* k, float* v, uint8_t* rec) {
  const DevKvFormat& f = s.f;
  const int W = f.width();
  if (f.kind == kKvPlain) {
    for (int e = threadIdx.x; e < W; e += blockDim.x) {
      if (f.plain_bytes == 4) {
        reinterpret_cast<float*>(rec + f.k_codes)[e] = k[e];
        reinterpret_cast<float*>(rec + f.v_codes)[e] = v[e];
      } else {
        reinterpret_cast<uint16_t*>(rec + f.k_codes)[e] = f.plain_bf16 ? F32ToBf16(k[e]) : F32ToF16(k[e]);
        reinterpret_cast<uint16_t*>(rec + f.v_codes)[e] = f.plain_bf16 ? F32ToBf16(v[e]) : F32ToF16(v[e]);
      }
    }
    return;
  }
  if (f.kind == kKvAffine) {
    const int groups = W / f.group;
    for (int g = threadIdx.x; g < 2 * groups; g += blockDim.x) {
      const bool is_v = g >= groups;
      const int gi = is_v ? g - groups : g;
      const float* x = (is_v ? v : k) + gi * f.group;
      const int64_t codes = is_v ? f.v_codes : f.k_codes, scales = is_v ? f.v_scales : f.k_scales,
                    biases = is_v ? f.v_biases : f.k_biases;
      AffineEncodeGroup(x, f.group, f.bits, rec + codes + gi * f.group * f.bits / 8, rec + scales + 2 * gi,
                        rec + biases + 2 * gi);
    }
    return;
  }
  // Turbo: rotate V (signs, transform, scale), then groups of 32.
  const int d = f.head_dim;
  for (int e = threadIdx.x; e < W; e += blockDim.x) v[e] = v[e] * s.signs[e % d];
  __syncthreads();
  BlockFwht(v, f.heads, d);
  const float scale = 1.0f / sqrtf(static_cast<float>(d));
  for (int e = threadIdx.x; e < W; e += blockDim.x) v[e] = v[e] * scale;
  __syncthreads();
  const int groups = W / 32;
  for (int g = threadIdx.x; g < 2 * groups; g += blockDim.x) {
    if (g < groups) {
      TurboEncodeKeyGroup(k + 32 * g, f.key_bits, rec + f.k_codes + g * 32 * f.key_bits / 8,
                          rec + f.k_scales + 2 * g, rec + f.k_biases + 2 * g);
    } else {
      const int gi = g - groups;
      TurboEncodeValueGroup(v + 32 * gi, f.value_bits, s.boundaries,
                            rec + f.v_codes + gi * 32 * f.value_bits / 8, rec + f.v_scales + 2 * gi);
    }
  }
}

struct DevRows {
  int64_t num_rows, num_seqs;
  const int32_t* positions;
  const int32_t* row_seq;
  const int32_t* kv_len;
};

// Where row r's record goes, and its store: from the step's uploaded
// arrays only, so the chain of lookups may run before the wait, beside the
// predecessor. Traps on anything out of range.
struct KvDest {
  DevRows rows;
  DevStore s0, s1;
  const int32_t* table;
  int64_t table_stride;
  const uint8_t* seq_store;
  int block_size;
};

__device__ __forceinline__ uint8_t* RowRecord(const KvDest& dst, int64_t r, const DevStore*& store) {
  const int32_t seq = dst.rows.row_seq[r];
  const int32_t pos = dst.rows.positions[r];
  if (seq < 0 || seq >= dst.rows.num_seqs) __trap();
  if (pos < 0 || pos >= dst.rows.kv_len[seq]) __trap();
  const int st = dst.seq_store ? dst.seq_store[seq] : 0;
  store = st == 0 ? &dst.s0 : &dst.s1;
  if ((st != 0 && st != 1) || store->records == nullptr) __trap();
  const int64_t entry = pos / dst.block_size;
  if (entry >= dst.table_stride) __trap();
  const int32_t block = dst.table[seq * dst.table_stride + entry];
  if (block < 0 || block >= store->num_blocks) __trap();
  return store->records + (static_cast<int64_t>(block) * dst.block_size + pos % dst.block_size) * store->f.record_bytes;
}

// One block per row: the rows staged in shared memory, then EncodeRecord.
__global__ __launch_bounds__(kThreads) void KvWriteKernel(KvDest dst, const float* __restrict__ k, int64_t ldk,
                                                          const float* __restrict__ v, int64_t ldv, int width) {
  extern __shared__ float kv_rows[];
  const int64_t r = blockIdx.x;
  const DevStore* s = nullptr;
  uint8_t* rec = RowRecord(dst, r, s);
  FollowPredecessor();  // k and v are this step's (pdl.cuh)
  float* kr = kv_rows;
  float* vr = kv_rows + width;
  for (int e = threadIdx.x; e < width; e += blockDim.x) {
    kr[e] = k[r * ldk + e];
    vr[e] = v[r * ldv + e];
  }
  __syncthreads();
  EncodeRecord(*s, kr, vr, rec);
}

// Steps whose stores are all plain (PlainVec4): no staging, a row's width
// split between blocks, each thread converting 4 consecutive elements of K
// and of V with EncodeRecord's conversions (16-byte loads, 8- or 16-byte
// stores). A decode row's write is a chain of one load and one store.
constexpr int kPlainThreads = 128;

__device__ __forceinline__ void StorePlain4(const DevKvFormat& f, uint8_t* dst, const float4 x) {
  if (f.plain_bytes == 4) {
    *reinterpret_cast<float4*>(dst) = x;
    return;
  }
  const auto code = [&](float a) -> uint32_t { return PlainCode(f, a); };
  *reinterpret_cast<uint2*>(dst) = make_uint2(code(x.x) | code(x.y) << 16, code(x.z) | code(x.w) << 16);
}

__global__ __launch_bounds__(kPlainThreads) void KvWritePlainKernel(KvDest dst, const float* __restrict__ k,
                                                                    int64_t ldk, const float* __restrict__ v,
                                                                    int64_t ldv, int width) {
  const int64_t r = blockIdx.x;
  const DevStore* s = nullptr;
  uint8_t* rec = RowRecord(dst, r, s);
  FollowPredecessor();  // k and v are this step's (pdl.cuh)
  const int e = 4 * (blockIdx.y * kPlainThreads + threadIdx.x);
  if (e >= width) return;
  const float4 kq = *reinterpret_cast<const float4*>(k + r * ldk + e);
  const float4 vq = *reinterpret_cast<const float4*>(v + r * ldv + e);
  const int b = s->f.plain_bytes;
  StorePlain4(s->f, rec + s->f.k_codes + static_cast<int64_t>(e) * b, kq);
  StorePlain4(s->f, rec + s->f.v_codes + static_cast<int64_t>(e) * b, vq);
}

// Record t of block i: decode `from` (values back to the original domain),
// encode into `to`.
__global__ __launch_bounds__(kThreads) void RecodeKernel(DevStore from, DevStore to, int block_size,
                                                         const int32_t* __restrict__ from_blocks,
                                                         const int32_t* __restrict__ to_blocks,
                                                         const int32_t* __restrict__ tokens) {
  extern __shared__ float kv_rows[];
  const int t = blockIdx.x, i = blockIdx.y;
  if (t >= tokens[i]) return;
  const int W = from.f.width();
  float* kr = kv_rows;
  float* vr = kv_rows + W;
  const uint8_t* src =
      from.records + (static_cast<int64_t>(from_blocks[i]) * block_size + t) * from.f.record_bytes;
  for (int e = threadIdx.x; e < W; e += blockDim.x) {
    kr[e] = DecodeKey(from.f, src, e);
    vr[e] = DecodeValue(from.f, src, e, from.centroids);
  }
  __syncthreads();
  if (from.f.kind == kKvTurbo) {  // kvfmt::RotateInverse: transform, then s * sign
    const int d = from.f.head_dim;
    BlockFwht(vr, from.f.heads, d);
    const float s = 1.0f / sqrtf(static_cast<float>(d));
    for (int e = threadIdx.x; e < W; e += blockDim.x) vr[e] = vr[e] * (s * from.signs[e % d]);
    __syncthreads();
  }
  uint8_t* dst = to.records + (static_cast<int64_t>(to_blocks[i]) * block_size + t) * to.f.record_bytes;
  EncodeRecord(to, kr, vr, dst);
}

size_t RowsSmem(int width) { return 2 * static_cast<size_t>(width) * sizeof(float); }

// Raises a kernel's dynamic shared memory limit when needed, once per new
// maximum (never again for the same size: not inside a graph capture).
template <typename Kernel>
void AllowSmem(Kernel kernel, size_t bytes, size_t& allowed) {
  if (bytes <= 48 * 1024 || bytes <= allowed) return;
  G4_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  allowed = bytes;
}

// Whether KvWritePlainKernel takes the step: every store in use plain,
// with its K and V codes at 8-byte (16 for f32) aligned offsets of aligned
// records, and K and V rows of whole, 16-byte aligned float4s.
bool PlainVec4(const DevStore& s0, const DevStore& s1, const float* k, int64_t ldk, const float* v, int64_t ldv,
               int width) {
  const auto aligned = [](const void* p, int64_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; };
  for (const DevStore* s : {&s0, &s1}) {
    if (s->records == nullptr) continue;
    const DevKvFormat& f = s->f;
    const int64_t a = f.plain_bytes == 4 ? 16 : 8;
    if (f.kind != kKvPlain || !aligned(s->records, 16) || f.record_bytes % a || f.k_codes % a || f.v_codes % a)
      return false;
  }
  return width % 4 == 0 && ldk % 4 == 0 && ldv % 4 == 0 && aligned(k, 16) && aligned(v, 16);
}

}  // namespace

void KvWrite(const StepRows& rows, const PagedKv& kv, const TensorView& k, const TensorView& v,
             cudaStream_t stream) {
  KvDest dst;
  dst.rows = DevRows{rows.num_rows, rows.num_seqs, rows.positions, rows.row_seq, rows.kv_len};
  dst.s0 = MakeDevStore(kv.store[0]);
  dst.s1 = MakeDevStore(kv.store[1]);
  dst.table = kv.tables.block_table;
  dst.table_stride = kv.tables.table_stride;
  dst.seq_store = kv.tables.seq_store;
  dst.block_size = kv.block_size;
  const int width = static_cast<int>(k.cols);
  const int64_t ldk = k.pitch(), ldv = v.pitch();
  static const bool plain_kernel = EnvSwitchOn("G4_CUDA_KV_PLAIN");  // measuring switch
  if (plain_kernel && PlainVec4(dst.s0, dst.s1, k.f32(), ldk, v.f32(), ldv, width)) {
    const dim3 grid(static_cast<unsigned>(rows.num_rows),
                    static_cast<unsigned>((width / 4 + kPlainThreads - 1) / kPlainThreads));
    G4_CHECK_MSG(grid.y <= 65535, "[cuda] KvWrite: K/V rows too wide");
    LaunchDependent(KvWritePlainKernel, grid, dim3(kPlainThreads), 0, stream, dst, k.f32(), ldk, v.f32(), ldv,
                    width);
    G4_CUDA_LAUNCHED();
    return;
  }
  const size_t smem = RowsSmem(width);
  G4_CHECK_MSG(smem <= 200 * 1024, "[cuda] KvWrite: K/V rows too wide");
  static size_t allowed = 0;
  AllowSmem(KvWriteKernel, smem, allowed);
  LaunchDependent(KvWriteKernel, dim3(static_cast<unsigned>(rows.num_rows)), dim3(kThreads), smem, stream, dst,
                  k.f32(), ldk, v.f32(), ldv, width);
  G4_CUDA_LAUNCHED();
}

void KvRecodeBlocks(const PagedKvStore& from, const PagedKvStore& to, int block_size,
                    const int32_t* from_blocks, const int32_t* to_blocks, const int32_t* tokens, int64_t n,
                    cudaStream_t stream) {
  G4_CHECK_MSG(n <= 65535, "[cuda] KvRecodeBlocks: too many blocks for one launch");
  const DevStore f = MakeDevStore(from), t = MakeDevStore(to);
  const size_t smem = RowsSmem(f.f.width());
  static size_t allowed = 0;
  AllowSmem(RecodeKernel, smem, allowed);
  const dim3 grid(static_cast<unsigned>(block_size), static_cast<unsigned>(n));
  RecodeKernel<<<grid, kThreads, smem, stream>>>(f, t, block_size, from_blocks, to_blocks, tokens);
  G4_CUDA_LAUNCHED();
}

}  // namespace g4::cuda
