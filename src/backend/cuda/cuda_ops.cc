// CudaOps: the Ops implementation for the GPU. Checks what the host can
// check (shapes, dtypes, formats; ids and positions live on the device and
// are the graph's responsibility, as ops.h says) and queues the kernels of
// launch.h on the backend's stream. Nothing here waits for the device except
// SampleRows, which reads the sampling parameters back to hand non-greedy
// rows to the host reference sampler (see SampleRows below).
#include "backend/cuda/cuda_ops.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/env_switch.h"
#include "backend/cuda/launch.h"
#include "backend/sampler.h"
#include "core/check.h"

namespace g4::cuda {
namespace {

void CheckF32(const TensorView& v, const char* what) {
  G4_CHECK_MSG(v.dtype == DType::kF32, what);
  G4_CHECK_MSG(v.rows >= 0 && v.cols >= 0 && (v.rows <= 1 || v.stride >= v.cols), what);
  G4_CHECK_MSG(v.elements() == 0 || v.data != nullptr, what);
}

void CheckSameShape(const TensorView& a, const TensorView& b, const char* what) {
  CheckF32(a, what);
  CheckF32(b, what);
  G4_CHECK_MSG(a.rows == b.rows && a.cols == b.cols, what);
}

void CheckWeight(const WeightMatrix& w) {
  G4_CHECK_MSG(SupportedWeight(w), "[cuda] unsupported weight format");
  if (w.rows > 0 && w.cols > 0) G4_CHECK(w.is_affine() ? (w.codes && w.scales && w.biases) : w.data != nullptr);
}

// Device scratch per slot, grown on demand (never during a capture). The
// KV pool's default margin covers it (engine.cc); when it does not, the
// failed growth stops the process with what ran out and what to change.
constexpr const char* kSlotNames[] = {"MoE experts", "attention", "KV recode", "quantized inputs", "sampling",
                                       "counters"};
static_assert(std::size(kSlotNames) == Scratch::kNumSlots, "a name per Scratch::Slot, in its order");

[[noreturn]] void OutOfMemory(Scratch::Slot slot, size_t want) {
  size_t free = 0, total = 0;
  (void)cudaGetLastError();  // the failed allocation, reported here
  (void)cudaMemGetInfo(&free, &total);
  std::fprintf(stderr,
               "g4: [cuda] out of device memory: the step's scratch (%s) needs %zu MiB and %zu MiB are free beside "
               "the KV pool; give the pool less (--gpu-memory or --kv-memory) or take smaller prefill chunks "
               "(--chunk)\n",
               kSlotNames[slot], want >> 20, free >> 20);
  std::fflush(stderr);
  std::_Exit(EXIT_FAILURE);  // no destructors: other threads may still hold the device
}

class ScratchBuffers final : public Scratch {
 public:
  ScratchBuffers(cudaStream_t stream, std::function<void()> moved) : stream_(stream), moved_(std::move(moved)) {}
  ~ScratchBuffers() override {
    for (Buffer& b : buffers_)
      if (b.data) cudaFree(b.data);
  }
  void* Get(Slot slot, size_t bytes) override {
    Buffer& b = buffers_[slot];
    if (b.bytes < bytes || b.data == nullptr) {
      const size_t want = std::max<size_t>({bytes + bytes / 4, b.bytes * 2, size_t{1} << 16});
      if (b.data) {
        G4_CUDA_CHECK(cudaStreamSynchronize(stream_));
        if (moved_) moved_();
        G4_CUDA_CHECK(cudaFree(b.data));
        b.data = nullptr;
      }
      if (cudaMalloc(&b.data, want) != cudaSuccess) OutOfMemory(slot, want);
      b.bytes = want;
      if (slot == kCounters) G4_CUDA_CHECK(cudaMemsetAsync(b.data, 0, want, stream_));
    }
    return b.data;
  }

 private:
  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
  };
  cudaStream_t stream_;
  std::function<void()> moved_;
  Buffer buffers_[kNumSlots];
};

// G4_CUDA_PROFILE=1: every op waits for the device before and after, and
// the time between is summed per op (and MatMul shape class); the table
// goes to stderr when the ops are destroyed. For finding slow kernels, not
// for measuring end-to-end speed.
class Profile {
 public:
  Profile() : enabled_(std::getenv("G4_CUDA_PROFILE") != nullptr) {}
  ~Profile() {
    if (!enabled_ || totals_.empty()) return;
    std::vector<std::pair<double, std::string>> rows;
    double all = 0;
    for (const auto& [name, t] : totals_) {
      rows.push_back({t.seconds, name});
      all += t.seconds;
    }
    std::sort(rows.rbegin(), rows.rend());
    std::fprintf(stderr, "[cuda profile] %.3f s in ops\n", all);
    for (const auto& [sec, name] : rows)
      std::fprintf(stderr, "[cuda profile] %-28s %9.3f ms %7lld calls %8.1f us/call\n", name.c_str(), sec * 1e3,
                   static_cast<long long>(totals_[name].calls), sec * 1e6 / totals_[name].calls);
  }
  bool enabled() const { return enabled_; }
  void Add(const std::string& name, double seconds) {
    Total& t = totals_[name];
    t.seconds += seconds;
    ++t.calls;
  }

 private:
  struct Total {
    double seconds = 0;
    int64_t calls = 0;
  };
  bool enabled_;
  std::map<std::string, Total> totals_;
};

class ProfileScope {
 public:
  ProfileScope(Profile& p, cudaStream_t s, const char* name, const std::string& detail = "")
      : p_(p), s_(s) {
    if (!p_.enabled()) return;
    name_ = detail.empty() ? name : std::string(name) + "[" + detail + "]";
    G4_CUDA_CHECK(cudaStreamSynchronize(s_));
    t0_ = std::chrono::steady_clock::now();
  }
  ~ProfileScope() {
    if (!p_.enabled()) return;
    G4_CUDA_CHECK(cudaStreamSynchronize(s_));
    p_.Add(name_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
  }

 private:
  Profile& p_;
  cudaStream_t s_;
  std::string name_;
  std::chrono::steady_clock::time_point t0_;
};

std::string MatMulClass(const TensorView& x, const WeightMatrix& w) {
  const int64_t m = x.rows;
  const char* rows = m == 1 ? "1" : m <= 8 ? "2-8" : m <= 64 ? "9-64" : "65+";
  const std::string fmt = w.is_affine() ? "a" + std::to_string(w.bits) : std::string(DTypeName(w.dtype));
  const double mb = static_cast<double>(w.StoredBytes()) / 1e6;
  const char* size = mb < 4 ? "<4MB" : mb < 32 ? "<32MB" : ">32MB";
  return fmt + ",m=" + rows + "," + size;
}

std::string RowsClass(int64_t rows) { return rows == 1 ? "1 row" : rows <= 64 ? "2-64 rows" : ">64 rows"; }

class CudaOps final : public Ops {
 public:
  CudaOps(Backend& backend, cudaStream_t stream, std::function<void()> scratch_moved)
      : backend_(backend), stream_(stream), scratch_(stream, std::move(scratch_moved)) {}

  void MatMul(const TensorView& x, const WeightMatrix& w, const TensorView& y) override {
    CheckF32(x, "[cuda] MatMul: x must be an F32 view");
    CheckF32(y, "[cuda] MatMul: y must be an F32 view");
    G4_CHECK_MSG(x.cols == w.cols && y.cols == w.rows && x.rows == y.rows, "[cuda] MatMul: shapes do not match W");
    CheckWeight(w);
    const bool quantized = TakePrepared(x, w);
    if (x.rows == 0 || w.rows == 0) return;
    if (w.cols == 0) {  // an empty sum: zeros
      G4_CUDA_CHECK(cudaMemset2DAsync(y.data, y.pitch() * 4, 0, y.cols * 4, y.rows, stream_));
      return;
    }
    ProfileScope prof(profile_, stream_, "MatMul", profile_.enabled() ? MatMulClass(x, w) : std::string());
    cuda::MatMul(x, w, y, scratch_, stream_, quantized);
  }

  void MatMuls(const TensorView& x, std::span<const WeightMatrix* const> ws,
               std::span<const TensorView> ys) override {
    G4_CHECK_MSG(!ws.empty() && ws.size() == ys.size() && ws.size() <= static_cast<size_t>(kMaxSharedInputProducts),
                 "[cuda] MatMuls: 1 to kMaxSharedInputProducts weights, one output each");
    CheckF32(x, "[cuda] MatMuls: x must be an F32 view");
    for (size_t i = 0; i < ws.size(); ++i) {
      CheckF32(ys[i], "[cuda] MatMuls: y must be an F32 view");
      G4_CHECK_MSG(x.cols == ws[i]->cols && ys[i].cols == ws[i]->rows && x.rows == ys[i].rows,
                   "[cuda] MatMuls: shapes do not match W");
      CheckWeight(*ws[i]);
    }
    const bool quantized = TakePrepared(x, *ws[0]);
    if (x.rows == 0) return;
    if (profile_.enabled() || ws.size() == 1 || x.cols == 0) {  // per product (the profile keeps its classes)
      for (size_t i = 0; i < ws.size(); ++i) MatMul(x, *ws[i], ys[i]);
      return;
    }
    cuda::MatMuls(x, ws, ys, scratch_, stream_, quantized);
  }

  void GatedMatMul(const TensorView& g, const TensorView& u, const WeightMatrix& w, const TensorView& y) override {
    prepared_ = {};
    CheckSameShape(g, u, "[cuda] GatedMatMul: g and u must be F32 views of one shape");
    CheckF32(y, "[cuda] GatedMatMul: y must be an F32 view");
    G4_CHECK_MSG(g.cols == w.cols && y.cols == w.rows && g.rows == y.rows, "[cuda] GatedMatMul: shapes do not match W");
    G4_CHECK_MSG(y.data != g.data && y.data != u.data, "[cuda] GatedMatMul: y may not alias g or u");
    CheckWeight(w);
    if (g.rows == 0) return;
    if (profile_.enabled() || w.rows == 0 || w.cols == 0) {  // apart (the profile keeps MatMul's classes)
      GeluMul(g, u, g);
      MatMul(g, w, y);
      return;
    }
    cuda::GatedMatMul(g, u, w, y, scratch_, stream_);
  }

  void Embed(const WeightMatrix& table, const int32_t* ids, float scale, const TensorView& out) override {
    prepared_ = {};
    CheckWeight(table);
    CheckF32(out, "[cuda] Embed: out must be an F32 view");
    G4_CHECK_MSG(out.cols == table.cols, "[cuda] Embed: out width differs from the table's");
    if (out.rows == 0 || out.cols == 0) return;
    ProfileScope prof(profile_, stream_, "Embed");
    cuda::Embed(table, ids, scale, out, stream_);
  }

  void RmsNorm(const TensorView& x, const float* weight, float eps, const TensorView& y) override {
    prepared_ = {};
    CheckSameShape(x, y, "[cuda] RmsNorm: x and y must be F32 views of one shape");
    G4_CHECK_MSG(x.cols > 0, "[cuda] RmsNorm: shapes");
    G4_CHECK_MSG(x.data != y.data || x.stride == y.stride || x.rows <= 1, "[cuda] RmsNorm: in place needs one layout");
    if (x.rows == 0) return;
    ProfileScope prof(profile_, stream_, "RmsNorm");
    cuda::RmsNorm(x, weight, eps, y, stream_);
  }

  void Rope(const TensorView& x, int heads, int head_dim, const int32_t* positions,
            const float* inv_freq) override {
    prepared_ = {};
    CheckF32(x, "[cuda] Rope: x must be an F32 view");
    G4_CHECK_MSG(head_dim > 0 && head_dim % 2 == 0, "[cuda] Rope: head_dim must be even");
    G4_CHECK_MSG(heads >= 0 && x.cols == static_cast<int64_t>(heads) * head_dim,
                 "[cuda] Rope: x width is not heads * head_dim");
    if (x.rows == 0 || heads == 0) return;
    ProfileScope prof(profile_, stream_, "Rope");
    cuda::Rope(x, heads, head_dim, positions, inv_freq, stream_);
  }

  void GeluMul(const TensorView& g, const TensorView& u, const TensorView& out) override {
    prepared_ = {};
    CheckSameShape(g, u, "[cuda] GeluMul: operand shapes differ");
    CheckSameShape(g, out, "[cuda] GeluMul: operand shapes differ");
    ProfileScope prof(profile_, stream_, "GeluMul");
    cuda::GeluMul(g, u, out, stream_);
  }
  void Add(const TensorView& a, const TensorView& b, const TensorView& y) override {
    prepared_ = {};
    CheckSameShape(a, b, "[cuda] Add: operand shapes differ");
    CheckSameShape(a, y, "[cuda] Add: operand shapes differ");
    ProfileScope prof(profile_, stream_, "Add");
    cuda::Add(a, b, y, stream_);
  }
  void AddNorm(const AddNormArgs& a) override {
    CheckSameShape(a.x, a.o, "[cuda] AddNorm: x and o must be F32 views of one shape");
    if (a.next_out.data) CheckSameShape(a.x, a.next_out, "[cuda] AddNorm: next_out differs from x");
    G4_CHECK_MSG(a.x.cols > 0, "[cuda] AddNorm: shapes");
    G4_CHECK_MSG(a.x.data != a.o.data && a.x.data != a.next_out.data && a.o.data != a.next_out.data,
                 "[cuda] AddNorm: x, o and next_out may not alias");
    prepared_ = {};
    if (a.next_product) CheckWeight(*a.next_product);
    if (a.x.rows == 0) return;
    ProfileScope prof(profile_, stream_, "AddNorm");
    // Opt-in (G4_CUDA_NORM_QUANT=1): on an H100 (2026-12-07) the one block
    // of a row quantizing all its groups was slower than QuantizeRows' many
    // blocks (batch 1 at 512: e4b 317.0 -> 312.7, 12b 213.1 -> 208.6 tok/s).
    static const bool prepare = EnvSwitch("G4_CUDA_NORM_QUANT", false);
    AddNormArgs args = a;
    if (!prepare) args.next_product = nullptr;
    if (cuda::AddNorm(args, scratch_, stream_)) Prepared(a.product_of_x ? a.x : a.next_out, *a.next_product);
  }
  void HeadNormRope(const HeadNormRopeArgs& a) override {
    prepared_ = {};
    const int64_t T = a.q.rows, D = a.head_dim;
    const auto check = [&](const TensorView& x, int heads, const char* what) {
      CheckF32(x, what);
      G4_CHECK_MSG(x.rows == T && heads >= 0 && x.cols == heads * D && x.contiguous(), what);
    };
    G4_CHECK_MSG(D > 0 && D % 2 == 0, "[cuda] HeadNormRope: head_dim must be even");
    check(a.q, a.q_heads, "[cuda] HeadNormRope: q is not a contiguous F32 [T, q_heads * head_dim]");
    if (a.k.data) check(a.k, a.kv_heads, "[cuda] HeadNormRope: k is not a contiguous F32 [T, kv_heads * head_dim]");
    if (a.v.data) check(a.v, a.kv_heads, "[cuda] HeadNormRope: v is not a contiguous F32 [T, kv_heads * head_dim]");
    if (T == 0) return;
    ProfileScope prof(profile_, stream_, "HeadNormRope");
    cuda::HeadNormRope(a, stream_);
  }
  void Scale(const TensorView& x, float s) override {
    prepared_ = {};
    CheckF32(x, "[cuda] Scale: x must be F32");
    ProfileScope prof(profile_, stream_, "Scale");
    cuda::Scale(x, s, stream_);
  }
  void ScaleColumns(const TensorView& x, const float* col, float s, const TensorView& y) override {
    prepared_ = {};
    CheckSameShape(x, y, "[cuda] ScaleColumns: operand shapes differ");
    ProfileScope prof(profile_, stream_, "ScaleColumns");
    cuda::ScaleColumns(x, col, s, y, stream_);
  }
  void Softcap(const TensorView& x, float cap) override {
    prepared_ = {};
    CheckF32(x, "[cuda] Softcap: x must be F32");
    ProfileScope prof(profile_, stream_, "Softcap");
    cuda::Softcap(x, cap, stream_);
  }

  void Copy(const TensorView& src, const TensorView& dst) override {
    prepared_ = {};
    G4_CHECK_MSG(src.dtype == dst.dtype && src.rows == dst.rows && src.cols == dst.cols,
                 "[cuda] Copy: shapes or dtypes differ");
    if (src.elements() == 0) return;
    const size_t e = src.element_bytes(), row = src.cols * e;
    const size_t sp = src.pitch() * e, dp = dst.pitch() * e;
    G4_CUDA_CHECK(cudaMemcpy2DAsync(dst.data, dp, src.data, sp, row, src.rows, cudaMemcpyDeviceToDevice, stream_));
  }

  void GatherRows(const TensorView& src, const int32_t* rows, const TensorView& dst) override {
    prepared_ = {};
    G4_CHECK_MSG(src.dtype == dst.dtype && src.cols == dst.cols, "[cuda] GatherRows: widths or dtypes differ");
    if (dst.rows == 0 || dst.cols == 0) return;
    ProfileScope prof(profile_, stream_, "GatherRows");
    cuda::GatherRows(src, rows, dst, stream_);
  }

  void MoeRoute(const TensorView& logits, int top_k, const float* per_expert_scale, const TensorView& ids,
                const TensorView& weights) override {
    prepared_ = {};
    CheckF32(logits, "[cuda] MoeRoute: logits must be an F32 view");
    CheckF32(weights, "[cuda] MoeRoute: weights must be an F32 view");
    G4_CHECK_MSG(ids.dtype == DType::kI32, "[cuda] MoeRoute: ids must be I32");
    const int experts = static_cast<int>(logits.cols);
    G4_CHECK_MSG(top_k >= 1 && top_k <= experts && top_k <= 64, "[cuda] MoeRoute: top_k outside [1, experts]");
    G4_CHECK_MSG(experts <= 1024, "[cuda] MoeRoute: more than 1024 experts");
    G4_CHECK_MSG(ids.rows == logits.rows && weights.rows == logits.rows && ids.cols == top_k &&
                     weights.cols == top_k,
                 "[cuda] MoeRoute: ids and weights must be [T, top_k]");
    if (logits.rows == 0) return;
    ProfileScope prof(profile_, stream_, "MoeRoute");
    cuda::MoeRoute(logits, top_k, per_expert_scale, ids, weights, stream_);
  }

  void MoeExperts(const MoeExpertsArgs& a) override {
    prepared_ = {};
    const int64_t rows = a.x.rows, hidden = a.x.cols;
    CheckF32(a.x, "[cuda] MoeExperts: x must be F32");
    CheckF32(a.out, "[cuda] MoeExperts: out must be F32");
    G4_CHECK_MSG(a.out.rows == rows && a.out.cols == hidden, "[cuda] MoeExperts: out shape differs from x");
    G4_CHECK_MSG(a.ids.dtype == DType::kI32 && a.weights.dtype == DType::kF32, "[cuda] MoeExperts: ids I32, weights F32");
    G4_CHECK_MSG(a.ids.rows == rows && a.weights.rows == rows && a.weights.cols == a.ids.cols,
                 "[cuda] MoeExperts: ids / weights shape");
    G4_CHECK_MSG(a.up.size() == a.gate.size() && a.down.size() == a.gate.size() && !a.gate.empty(),
                 "[cuda] MoeExperts: gate, up and down must list the same experts");
    G4_CHECK_MSG(a.ids.cols >= 1 && a.ids.cols <= 64, "[cuda] MoeExperts: top_k out of range");
    G4_CHECK_MSG(a.out.data != a.x.data || rows == 0, "[cuda] MoeExperts: out may not alias x");
    const int64_t width = a.gate[0].rows;
    for (size_t e = 0; e < a.gate.size(); ++e) {
      G4_CHECK_MSG(a.gate[e].rows == width && a.gate[e].cols == hidden && a.up[e].rows == width &&
                       a.up[e].cols == hidden && a.down[e].rows == hidden && a.down[e].cols == width,
                   "[cuda] MoeExperts: expert matrix shapes");
      CheckWeight(a.gate[e]);
      CheckWeight(a.up[e]);
      CheckWeight(a.down[e]);
    }
    if (rows == 0) return;
    ProfileScope prof(profile_, stream_, "MoeExperts");
    cuda::MoeExperts(a, scratch_, stream_);
  }

  void KvWrite(const StepRows& rows, const PagedKv& kv, const TensorView& k, const TensorView& v) override {
    prepared_ = {};
    if (rows.num_rows == 0) return;
    G4_CHECK_MSG(kv.block_size > 0, "[cuda] KvWrite: block size");
    for (int st = 0; st < 2; ++st) {
      const PagedKvStore& s = kv.store[st];
      if (s.records) G4_CHECK_MSG(s.format.record_bytes > 0, "[cuda] KvWrite: store without a record format");
    }
    const int64_t width = (kv.store[0].records ? kv.store[0] : kv.store[1]).format.width();
    G4_CHECK_MSG(k.dtype == DType::kF32 && v.dtype == DType::kF32 && k.cols == width && v.cols == width &&
                     k.rows >= rows.num_rows && v.rows >= rows.num_rows,
                 "[cuda] KvWrite: k/v must be F32 [rows, num_kv_heads * head_dim]");
    ProfileScope prof(profile_, stream_, "KvWrite");
    cuda::KvWrite(rows, kv, k, v, stream_);
  }

  void PagedAttention(const PagedAttentionArgs& a) override {
    prepared_ = {};
    G4_CHECK(a.num_heads > 0 && a.num_kv_heads > 0 && a.head_dim > 0 && a.window >= 0);
    G4_CHECK_MSG(a.num_heads % a.num_kv_heads == 0, "[cuda] PagedAttention: heads not a multiple of KV heads");
    const int64_t width = static_cast<int64_t>(a.num_heads) * a.head_dim;
    G4_CHECK_MSG(a.q.dtype == DType::kF32 && a.out.dtype == DType::kF32 && a.q.cols == width &&
                     a.out.cols == width && a.q.rows >= a.rows.num_rows && a.out.rows >= a.rows.num_rows,
                 "[cuda] PagedAttention: q/out shape");
    G4_CHECK_MSG(a.q.data != a.out.data || a.rows.num_rows == 0, "[cuda] PagedAttention: out aliases q");
    G4_CHECK_MSG(a.kv.block_size > 0, "[cuda] PagedAttention: block size");
    for (int st = 0; st < 2; ++st) {
      const PagedKvStore& s = a.kv.store[st];
      if (!s.records) continue;
      G4_CHECK_MSG(s.format.num_kv_heads == a.num_kv_heads && s.format.head_dim == a.head_dim,
                   "[cuda] PagedAttention: store geometry differs from the attention's");
      G4_CHECK_MSG(!s.format.rotates_values() || (s.value_centroids && s.value_signs),
                   "[cuda] PagedAttention: turbo store without its codebook and signs");
    }
    if (a.rows.num_rows == 0) return;
    if (a.next_product) CheckWeight(*a.next_product);
    ProfileScope prof(profile_, stream_, "PagedAttention", profile_.enabled() ? RowsClass(a.rows.num_rows) : "");
    // G4_CUDA_ATTN_QUANT=0: the hint ignored (measuring switch).
    static const bool prepare = EnvSwitchOn("G4_CUDA_ATTN_QUANT");
    PagedAttentionArgs args = a;
    if (!prepare || a.out.rows != a.rows.num_rows) args.next_product = nullptr;  // the product reads all of out
    if (cuda::PagedAttention(args, scratch_, stream_)) Prepared(a.out, *a.next_product);
  }

  void KvRecodeBlocks(const PagedKvStore& from, const PagedKvStore& to, int block_size,
                      std::span<const int32_t> from_blocks, std::span<const int32_t> to_blocks,
                      std::span<const int32_t> tokens) override {
    prepared_ = {};
    G4_CHECK_MSG(from_blocks.size() == to_blocks.size() && tokens.size() == to_blocks.size(),
                 "[cuda] KvRecodeBlocks: block lists differ in length");
    G4_CHECK_MSG(block_size > 0 && from.format.record_bytes > 0 && to.format.record_bytes > 0,
                 "[cuda] KvRecodeBlocks: block size or formats");
    G4_CHECK_MSG(from.format.width() == to.format.width(), "[cuda] KvRecodeBlocks: stores of different geometry");
    G4_CHECK_MSG(from.records != to.records, "[cuda] KvRecodeBlocks: recoding a store into itself");
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (n == 0) return;
    for (int64_t i = 0; i < n; ++i) {
      G4_CHECK_MSG(from_blocks[i] >= 0 && from_blocks[i] < from.num_blocks && to_blocks[i] >= 0 &&
                       to_blocks[i] < to.num_blocks,
                   "[cuda] KvRecodeBlocks: block id out of range");
      G4_CHECK_MSG(tokens[i] >= 0 && tokens[i] <= block_size, "[cuda] KvRecodeBlocks: token count");
    }
    // The lists are host memory: one upload of the three, in a scratch slot.
    std::vector<int32_t> host(3 * n);
    std::copy(from_blocks.begin(), from_blocks.end(), host.begin());
    std::copy(to_blocks.begin(), to_blocks.end(), host.begin() + n);
    std::copy(tokens.begin(), tokens.end(), host.begin() + 2 * n);
    int32_t* dev = static_cast<int32_t*>(scratch_.Get(Scratch::kRecode, host.size() * sizeof(int32_t)));
    backend_.CopyToDevice(dev, host.data(), host.size() * sizeof(int32_t));
    ProfileScope prof(profile_, stream_, "KvRecodeBlocks");
    cuda::KvRecodeBlocks(from, to, block_size, dev, dev + n, dev + 2 * n, n, stream_);
  }

  void SampleRows(const SampleArgs& args) override;

 private:
  // The input the last op (AddNorm or PagedAttention) quantized into
  // scratch kQuant for the product it named (ops.h next_product).
  struct PreparedInput {
    const void* data = nullptr;
    int64_t rows = 0, cols = 0, ld = 0;
    int bits = 0, group = 0;
  };

  void Prepared(const TensorView& in, const WeightMatrix& w) {
    prepared_ = {in.data, in.rows, in.cols, in.pitch(), w.bits, w.group_size};
  }
  // Whether x is the prepared input, quantized for w's format; either way
  // the preparation is used up.
  bool TakePrepared(const TensorView& x, const WeightMatrix& w) {
    const PreparedInput p = std::exchange(prepared_, PreparedInput{});
    return p.data != nullptr && p.data == x.data && p.rows == x.rows && p.cols == x.cols &&
           p.ld == x.pitch() && w.is_affine() && p.bits == w.bits && p.group == w.group_size;
  }

  Backend& backend_;
  cudaStream_t stream_;
  ScratchBuffers scratch_;
  Profile profile_;
  PreparedInput prepared_;  // void after any op but the product it was for
};

// ------------------------------------------------------------ SampleRows
//
// Greedy rows (temperature 0, or 1/T not finite) run entirely on the
// device: steps 1-4, the argmax and the logprobs (sample.cu). A row that
// draws at random runs the reference Sampler (backend/sampler.h) on the
// host, so its token follows the reference exactly: its logits row and
// its sampling arrays are read back, sampled, and the results written to
// the device. The parameters are read back first to tell the two apart
// (one small copy and a wait per call; the engine reads the ids right after).

bool GreedyOnDevice(const SampleRowParams& p) {
  const float t = p.temperature > 0 ? p.temperature : 0.0f;  // Sampler's normalization
  return t <= 0 || !std::isfinite(1.0f / t);
}

template <typename T>
std::vector<T> Fetch(Backend& b, const T* device, int64_t n) {
  std::vector<T> host(static_cast<size_t>(std::max<int64_t>(n, 0)));
  if (n > 0 && device) b.CopyToHost(host.data(), device, host.size() * sizeof(T));
  return host;
}

void CudaOps::SampleRows(const SampleArgs& a) {
  prepared_ = {};
  const int64_t rows = a.logits.rows;
  const int vocab = static_cast<int>(a.logits.cols);
  G4_CHECK_MSG(a.logits.dtype == DType::kF32, "[cuda] SampleRows: logits must be F32");
  G4_CHECK_MSG(a.out_ids.dtype == DType::kI32 && a.out_ids.rows == rows && a.out_ids.cols >= 1,
               "[cuda] SampleRows: out_ids must be I32 [R, 1]");
  const bool logprobs = a.top_logprobs >= 0 && a.logprob_ids.data != nullptr && a.logprob_values.data != nullptr;
  if (logprobs) {
    G4_CHECK_MSG(a.logprob_ids.dtype == DType::kI32 && a.logprob_values.dtype == DType::kF32 &&
                     a.logprob_ids.rows == rows && a.logprob_values.rows == rows &&
                     a.logprob_ids.cols == 1 + a.top_logprobs && a.logprob_values.cols == 1 + a.top_logprobs,
                 "[cuda] SampleRows: logprob outputs must be [R, 1 + top_logprobs]");
  }
  if (rows == 0) return;
  G4_CHECK_MSG(a.params != nullptr && vocab > 0, "[cuda] SampleRows: no params or empty vocabulary");
  ProfileScope prof(profile_, stream_, "SampleRows");

  // The host's copy when the caller passes it; else read back, a wait for
  // every kernel before this one.
  std::vector<SampleRowParams> fetched;
  std::span<const SampleRowParams> params = a.host_params;
  if (static_cast<int64_t>(params.size()) != rows) {
    fetched = Fetch(backend_, a.params, rows);
    backend_.Sync();
    params = fetched;
  }
  std::vector<int64_t> host_rows;
  int32_t bias_end = 0, exempt_end = 0, history_end = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const SampleRowParams& p = params[r];
    G4_CHECK_MSG(p.bias_count >= 0 && p.exempt_count >= 0 && p.history_count >= 0,
                 "[cuda] SampleRows: negative range");
    G4_CHECK_MSG((p.bias_count == 0 || (a.bias_ids && a.bias_values)) && (p.exempt_count == 0 || a.exempt_ids) &&
                     (p.history_count == 0 || a.history),
                 "[cuda] SampleRows: a range points into a missing array");
    if (GreedyOnDevice(p)) continue;
    host_rows.push_back(r);
    bias_end = std::max(bias_end, p.bias_begin + p.bias_count);
    exempt_end = std::max(exempt_end, p.exempt_begin + p.exempt_count);
    history_end = std::max(history_end, p.history_begin + p.history_count);
  }
  SampleGreedyRows(a, scratch_, stream_);
  if (host_rows.empty()) return;

  // The host rows: their arrays and raw logits (untouched by the kernel).
  const std::vector<int32_t> bias_ids = Fetch(backend_, a.bias_ids, bias_end);
  const std::vector<float> bias_values = Fetch(backend_, a.bias_values, bias_end);
  const std::vector<int32_t> exempt = Fetch(backend_, a.exempt_ids, exempt_end);
  const std::vector<int32_t> history = Fetch(backend_, a.history, history_end);
  const size_t nh = host_rows.size();
  std::vector<float> logits(nh * vocab);
  for (size_t i = 0; i < nh; ++i)
    backend_.CopyToHost(logits.data() + i * vocab, a.logits.at(host_rows[i], 0), vocab * sizeof(float));
  backend_.Sync();

  const int top = logprobs ? a.top_logprobs : 0;
  std::vector<int32_t> ids(nh), lp_ids(nh * (1 + top));
  std::vector<float> lp_values(nh * (1 + top));
#pragma omp parallel for schedule(dynamic, 1) if (nh > 1)
  for (size_t i = 0; i < nh; ++i) {
    const SampleRowParams& rp = params[host_rows[i]];
    SamplingParams p;
    CopyScalarParams(rp, &p);
    for (int32_t j = 0; j < rp.bias_count; ++j) p.logit_bias[bias_ids[rp.bias_begin + j]] = bias_values[rp.bias_begin + j];
    p.xtc_exempt_tokens.assign(exempt.begin() + rp.exempt_begin, exempt.begin() + rp.exempt_begin + rp.exempt_count);
    p.top_logprobs = top;
    Sampler sampler(p, vocab);
    const std::span<const int> hist(history.data() + rp.history_begin, static_cast<size_t>(rp.history_count));
    LogProbs lp;
    // A NaN logit: kNonFiniteLogits, as the CPU backend reports it.
    const float* row = logits.data() + i * vocab;
    const bool nan = std::any_of(row, row + vocab, [](float v) { return std::isnan(v); });
    ids[i] = nan ? kNonFiniteLogits
                 : sampler.Sample(logits.data() + i * vocab, hist, rp.seed, rp.step, logprobs ? &lp : nullptr);
    if (logprobs) {
      lp_ids[i * (1 + top)] = ids[i];
      lp_values[i * (1 + top)] = lp.logprob;
      for (int j = 0; j < top; ++j) {
        const bool have = static_cast<size_t>(j) < lp.top.size();
        lp_ids[i * (1 + top) + 1 + j] = have ? lp.top[j].id : -1;
        lp_values[i * (1 + top) + 1 + j] = have ? lp.top[j].logprob : -std::numeric_limits<float>::infinity();
      }
    }
  }
  for (size_t i = 0; i < nh; ++i) {
    const int64_t r = host_rows[i];
    backend_.CopyToDevice(a.logits.at(r, 0), logits.data() + i * vocab, vocab * sizeof(float));
    backend_.CopyToDevice(a.out_ids.at(r, 0), &ids[i], sizeof(int32_t));
    if (logprobs) {
      backend_.CopyToDevice(a.logprob_ids.at(r, 0), lp_ids.data() + i * (1 + top), (1 + top) * sizeof(int32_t));
      backend_.CopyToDevice(a.logprob_values.at(r, 0), lp_values.data() + i * (1 + top), (1 + top) * sizeof(float));
    }
  }
  backend_.Sync();  // the host vectors die here
}

}  // namespace

std::unique_ptr<Ops> MakeCudaOps(Backend& backend, cudaStream_t stream, std::function<void()> scratch_moved) {
  return std::make_unique<CudaOps>(backend, stream, std::move(scratch_moved));
}

}  // namespace g4::cuda
