// The device half of SampleRows (cuda_ops.cc has the host half): for every
// row whose parameters make it greedy, the reference chain's steps 1-4 in
// place (logit bias; repetition, presence and frequency penalties over the
// distinct ids of each window, the same float operations as
// backend/sampler.cc, including the fused multiply-add the reference build
// makes of the frequency penalty), NaN to -inf and +inf to the largest
// float, the argmax (lowest id on ties), and the logprobs: log-softmax over
// the whole vocabulary, top_logprobs best by (logit desc, id asc). One block
// per row; rows that draw at random are skipped (the host samples them).
// Rows whose chain is the argmax alone (no bias, no penalty, no logprobs:
// the usual greedy decode) are first scanned by kSliceLogits-logit slices,
// a block each (GreedyPartialKernel), and the row's block only combines
// the slices' best: one block reading the whole vocabulary, 1 MB at
// 262144 words, was latency-bound at about 70 us. The argmax is the same
// (higher value, then lower id, is a total order; +inf is counted as the
// largest float there too).
#include <cfloat>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/pdl.cuh"

namespace g4::cuda {
namespace {

constexpr int kThreads = 1024;

struct Best {
  float v;
  int i;
};
// Better: higher value, then lower index (indices < 0 are empty).
__device__ __forceinline__ bool Better(const Best& a, const Best& b) {
  if (b.i < 0) return a.i >= 0;
  if (a.i < 0) return false;
  return a.v > b.v || (a.v == b.v && a.i < b.i);
}

__device__ Best BlockBest(Best b, Best* shared) {
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) {
    Best other{__shfl_xor_sync(0xffffffffu, b.v, o), __shfl_xor_sync(0xffffffffu, b.i, o)};
    if (Better(other, b)) b = other;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) shared[warp] = b;
  __syncthreads();
  if (warp == 0) {
    b = lane < static_cast<int>(blockDim.x >> 5) ? shared[lane] : Best{0.0f, -1};
#pragma unroll
    for (int o = 16; o >= 1; o >>= 1) {
      Best other{__shfl_xor_sync(0xffffffffu, b.v, o), __shfl_xor_sync(0xffffffffu, b.i, o)};
      if (Better(other, b)) b = other;
    }
    if (lane == 0) shared[0] = b;
  }
  __syncthreads();
  const Best r = shared[0];
  __syncthreads();
  return r;
}

__device__ double BlockSum(double v, double* shared) {
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total += shared[w];
  __syncthreads();
  return total;
}

// Whether window position i (of [begin, end)) holds the first occurrence
// of its id in that window; its id in *id.
__device__ __forceinline__ bool FirstInWindow(const int32_t* h, int begin, int i, int vocab, int* id) {
  *id = h[i];
  if (*id < 0 || *id >= vocab) return false;
  for (int j = begin; j < i; ++j)
    if (h[j] == *id) return false;
  return true;
}

__device__ __forceinline__ int WindowBegin(int begin, int count, int size) {
  return size > 0 && size < count ? begin + count - size : begin;
}

// f(i, l[i]) for i = threadIdx.x, + blockDim.x, ... < V, in that order per
// thread; the loads of kUnroll consecutive i go out together (a thread walks
// 256 elements of a 262144-word vocabulary: one load at a time would leave
// the walk bound by load latency).
template <typename F>
__device__ __forceinline__ void ForEachLogit(const float* l, int V, F f) {
  constexpr int kUnroll = 8;
  const int step = static_cast<int>(blockDim.x);
  for (int i0 = threadIdx.x; i0 < V; i0 += kUnroll * step) {
    float v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = i0 + u * step < V ? l[i0 + u * step] : 0.0f;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (i0 + u * step < V) f(i0 + u * step, v[u]);
  }
}

// The best of one slice of a row, and whether it holds a NaN or a +inf.
struct SlicePartial {
  float v;
  int i;
  int nan, inf;
};
constexpr int kSliceLogits = 8 * kThreads;  // one load batch of ForEachLogit per thread

struct SampleParamsDev {
  float* logits;
  int64_t ldl;
  int vocab;
  const SampleRowParams* params;
  const int32_t* bias_ids;
  const float* bias_values;
  const int32_t* history;
  int32_t* out_ids;
  int64_t ld_out;
  int top;  // -1: no logprobs
  int32_t* lp_ids;
  int64_t ld_lp_ids;
  float* lp_values;
  int64_t ld_lp_values;
  SlicePartial* partial;  // [rows][slices]
  int slices;
};

__device__ __forceinline__ bool GreedyRow(const SampleRowParams& p) {
  const float t = p.temperature > 0 ? p.temperature : 0.0f;
  return t <= 0 || !isfinite(1.0f / t);
}

// Whether steps 1-4 and the logprobs leave the row as it is (the
// conditions under which GreedyKernel's steps do nothing).
__device__ __forceinline__ bool ArgmaxOnly(const SampleParamsDev& a, const SampleRowParams& p) {
  const float rep = p.repetition_penalty > 0 ? p.repetition_penalty : 1.0f;
  return a.top < 0 && p.bias_count == 0 &&
         (p.history_count <= 0 || (rep == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f));
}

// One block per (slice, row) of the argmax-only rows: the slice's best with
// NaN as -inf and +inf as the largest float, and its NaN and +inf flags.
__global__ __launch_bounds__(kThreads) void GreedyPartialKernel(SampleParamsDev a) {
  FollowPredecessor();  // launched as a dependent (pdl.cuh)
  __shared__ Best best_shared[32];
  const int64_t r = blockIdx.y;
  const SampleRowParams p = a.params[r];
  if (!GreedyRow(p) || !ArgmaxOnly(a, p)) return;  // the whole block
  const float* l = a.logits + r * a.ldl;
  const int begin = static_cast<int>(blockIdx.x) * kSliceLogits;
  const int n = min(kSliceLogits, a.vocab - begin);
  Best b{0.0f, -1};
  bool nan = false, inf = false;
  ForEachLogit(l + begin, n, [&](int i, float v) {
    nan |= isnan(v);
    inf |= v == INFINITY;
    const Best c{isnan(v) ? -INFINITY : v == INFINITY ? FLT_MAX : v, begin + i};
    if (Better(c, b)) b = c;
  });
  b = BlockBest(b, best_shared);
  const bool any_nan = __syncthreads_or(nan), any_inf = __syncthreads_or(inf);
  if (threadIdx.x == 0) a.partial[r * a.slices + blockIdx.x] = SlicePartial{b.v, b.i, any_nan, any_inf};
}

__global__ __launch_bounds__(kThreads) void GreedyKernel(SampleParamsDev a) {
  FollowPredecessor();  // launched as a dependent (pdl.cuh)
  __shared__ Best best_shared[32];
  __shared__ double sum_shared[32];
  const int64_t r = blockIdx.x;
  const SampleRowParams p = a.params[r];
  if (!GreedyRow(p)) return;  // drawn at random: the host's
  float* l = a.logits + r * a.ldl;
  const int V = a.vocab;
  // A NaN logit (a broken model): the row reports kNonFiniteLogits, its
  // logits untouched, logprobs as the reference leaves them (0, then none).
  bool nan = false;
  const bool argmax_only = ArgmaxOnly(a, p);
  Best slices{0.0f, -1};
  bool inf = false;
  if (argmax_only) {  // the slices' results (GreedyPartialKernel)
    for (int s = threadIdx.x; s < a.slices; s += blockDim.x) {
      const SlicePartial sp = a.partial[r * a.slices + s];
      const Best c{sp.v, sp.i};
      if (Better(c, slices)) slices = c;
      nan |= sp.nan != 0;
      inf |= sp.inf != 0;
    }
    slices = BlockBest(slices, best_shared);
  } else {
    ForEachLogit(l, V, [&](int, float v) { nan |= isnan(v); });
  }
  if (__syncthreads_or(nan)) {
    if (threadIdx.x == 0) {
      a.out_ids[r * a.ld_out] = kNonFiniteLogits;
      if (a.top >= 0) {
        a.lp_ids[r * a.ld_lp_ids] = kNonFiniteLogits;
        a.lp_values[r * a.ld_lp_values] = 0.0f;
        for (int j = 0; j < a.top; ++j) {
          a.lp_ids[r * a.ld_lp_ids + 1 + j] = -1;
          a.lp_values[r * a.ld_lp_values + 1 + j] = -INFINITY;
        }
      }
    }
    return;
  }
  if (argmax_only) {  // +inf as the largest float in place (rare), the token
    if (__syncthreads_or(inf))
      ForEachLogit(l, V, [&](int i, float v) {
        if (v == INFINITY) l[i] = FLT_MAX;
      });
    if (threadIdx.x == 0) a.out_ids[r * a.ld_out] = slices.v > -INFINITY ? slices.i : 0;
    return;
  }
  // 1. Logit bias (distinct ids).
  for (int i = threadIdx.x; i < p.bias_count; i += blockDim.x) {
    const int id = a.bias_ids[p.bias_begin + i];
    if (id >= 0 && id < V) l[id] += a.bias_values[p.bias_begin + i];
  }
  __syncthreads();
  const int hb = p.history_begin, hc = p.history_count;
  // 2. Repetition penalty over the distinct ids of its window.
  float rep = p.repetition_penalty;
  if (!(rep > 0)) rep = 1.0f;
  if (rep != 1.0f && hc > 0) {
    const int begin = WindowBegin(hb, hc, p.repetition_context);
    for (int i = begin + threadIdx.x; i < hb + hc; i += blockDim.x) {
      int id;
      if (FirstInWindow(a.history, begin, i, V, &id)) l[id] = l[id] > 0 ? l[id] / rep : l[id] * rep;
    }
  }
  __syncthreads();
  // 3. Presence penalty.
  if (p.presence_penalty != 0.0f && hc > 0) {
    const int begin = WindowBegin(hb, hc, p.presence_context);
    for (int i = begin + threadIdx.x; i < hb + hc; i += blockDim.x) {
      int id;
      if (FirstInWindow(a.history, begin, i, V, &id)) l[id] -= p.presence_penalty;
    }
  }
  __syncthreads();
  // 4. Frequency penalty: l - frequency * count, one rounding (as built).
  if (p.frequency_penalty != 0.0f && hc > 0) {
    const int begin = WindowBegin(hb, hc, p.frequency_context);
    for (int i = begin + threadIdx.x; i < hb + hc; i += blockDim.x) {
      int id;
      if (!FirstInWindow(a.history, begin, i, V, &id)) continue;
      int count = 0;
      for (int j = begin; j < hb + hc; ++j) count += a.history[j] == id;
      l[id] = __fmaf_rn(-p.frequency_penalty, static_cast<float>(count), l[id]);
    }
  }
  __syncthreads();
  // NaN as -inf, +inf as the largest float; then the argmax.
  Best b{0.0f, -1};
  ForEachLogit(l, V, [&](int i, float v) {
    if (isnan(v) || v == INFINITY) l[i] = v = isnan(v) ? -INFINITY : FLT_MAX;
    const Best c{v, i};
    if (Better(c, b)) b = c;
  });
  b = BlockBest(b, best_shared);
  const float max = b.v;
  const int token = max > -INFINITY ? b.i : 0;
  if (threadIdx.x == 0) a.out_ids[r * a.ld_out] = token;
  if (a.top < 0) return;
  // Logprobs: lse = max + log(sum exp(l - max)).
  double s = 0;
  ForEachLogit(l, V, [&](int, float v) { s += exp(static_cast<double>(v) - max); });
  s = BlockSum(s, sum_shared);
  const bool finite = max > -INFINITY;
  const double lse = finite ? static_cast<double>(max) + log(s) : -HUGE_VAL;
  if (threadIdx.x == 0) {
    a.lp_ids[r * a.ld_lp_ids] = token;
    a.lp_values[r * a.ld_lp_values] = static_cast<float>(l[token] - lse);
  }
  // The top alternatives: rounds of "best after the previous one".
  Best prev{0.0f, -1};
  for (int j = 0; j < a.top; ++j) {
    Best c{0.0f, -1};
    if (j < V) {
      ForEachLogit(l, V, [&](int i, float v) {
        const Best e{v, i};
        const bool after = prev.i < 0 || prev.v > e.v || (prev.v == e.v && e.i > prev.i);
        if (after && Better(e, c)) c = e;
      });
    }
    c = BlockBest(c, best_shared);
    if (threadIdx.x == 0) {
      a.lp_ids[r * a.ld_lp_ids + 1 + j] = c.i >= 0 ? c.i : -1;
      a.lp_values[r * a.ld_lp_values + 1 + j] = c.i >= 0 ? static_cast<float>(c.v - lse) : -INFINITY;
    }
    prev = c;
  }
}

}  // namespace

void SampleGreedyRows(const SampleArgs& args, Scratch& scratch, cudaStream_t stream) {
  SampleParamsDev a{};
  a.logits = args.logits.f32();
  a.ldl = args.logits.pitch();
  a.vocab = static_cast<int>(args.logits.cols);
  a.params = args.params;
  a.bias_ids = args.bias_ids;
  a.bias_values = args.bias_values;
  a.history = args.history;
  a.out_ids = args.out_ids.i32();
  a.ld_out = args.out_ids.pitch();
  const bool logprobs = args.top_logprobs >= 0 && args.logprob_ids.data && args.logprob_values.data;
  a.top = logprobs ? args.top_logprobs : -1;
  if (logprobs) {
    a.lp_ids = args.logprob_ids.i32();
    a.ld_lp_ids = args.logprob_ids.pitch();
    a.lp_values = args.logprob_values.f32();
    a.ld_lp_values = args.logprob_values.pitch();
  }
  const int64_t rows = args.logits.rows;
  a.slices = (a.vocab + kSliceLogits - 1) / kSliceLogits;
  G4_CHECK_MSG(rows <= 65535, "[cuda] SampleRows: too many rows");
  a.partial = static_cast<SlicePartial*>(
      scratch.Get(Scratch::kSample, static_cast<size_t>(rows) * a.slices * sizeof(SlicePartial)));
  LaunchDependent(GreedyPartialKernel, dim3(static_cast<unsigned>(a.slices), static_cast<unsigned>(rows)),
                  dim3(kThreads), 0, stream, a);
  G4_CUDA_LAUNCHED();
  LaunchDependent(GreedyKernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, stream, a);
  G4_CUDA_LAUNCHED();
}

}  // namespace g4::cuda
