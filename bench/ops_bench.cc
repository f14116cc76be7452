// Microbenchmarks of the CPU backend's hot ops, with the machine's memory
// bandwidth alongside for scale:
//   - Memory/*: memcpy and a read-only sum over a 1 GiB buffer (1 and all threads);
//   - DecodeMatMul/*: 1 x 2048 times [8192 x 2048] weights (bytes/s = weight
//     bytes streamed). "cold" rotates over ~1 GiB of distinct weight copies so
//     they come from DRAM as in a real forward pass; "hot" reuses one copy;
//   - PrefillMatMul/*: 512 x 2048 times [8192 x 2048] (FLOP/s);
//   - Attention*: 8 heads x 256 dims, decode over 4096 keys and a 512-token prefill;
//   - Team/*: one empty parallel op on the backend's worker team (its fork/join cost).
// All timings are wall-clock (the work runs on the backend's worker team, as
// many threads as OMP_NUM_THREADS says). The kernels are the ones the backend
// picks (G4_CPU=avx512|avx2|baseline forces a variant); the first line of the
// output names them.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/thread_pool.h"
#include "backend/kv_record.h"
#include "backend/ops.h"
#include "io/weight_matrix.h"

namespace g4 {
namespace {

constexpr size_t kPoolBytes = size_t{1} << 30;
constexpr int64_t kRows = 8192, kCols = 2048;

// 1 GiB of u16 values that are small normal numbers as F16, BF16 and (in
// pairs) F32, so any weight format can view any offset of it without NaN or
// denormal slow paths.
const uint16_t* Pool() {
  static const std::vector<uint16_t>* pool = [] {
    auto* p = new std::vector<uint16_t>(kPoolBytes / 2);
#pragma omp parallel
    {
      std::mt19937 rng(omp_get_thread_num());
#pragma omp for schedule(static)
      for (size_t i = 0; i < p->size(); ++i)
        (*p)[i] = static_cast<uint16_t>(0x2000 + rng() % 0x1c00) | static_cast<uint16_t>((rng() & 1) << 15);
    }
    return p;
  }();
  return pool->data();
}

enum class Kind { kF32, kBF16, kQ2, kQ3, kQ4, kQ5, kQ6, kQ8 };

WeightMatrix MakeWeights(Kind kind, size_t byte_offset, int64_t rows = kRows, int64_t cols = kCols) {
  const uint8_t* base = reinterpret_cast<const uint8_t*>(Pool()) + byte_offset;
  WeightMatrix w;
  w.rows = rows;
  w.cols = cols;
  if (kind == Kind::kF32 || kind == Kind::kBF16) {
    w.format = WeightMatrix::Format::kDense;
    w.dtype = kind == Kind::kF32 ? DType::kF32 : DType::kBF16;
    w.data = base;
    return w;
  }
  w.format = WeightMatrix::Format::kAffine;
  w.bits = kind == Kind::kQ2   ? 2
           : kind == Kind::kQ3 ? 3
           : kind == Kind::kQ4 ? 4
           : kind == Kind::kQ5 ? 5
           : kind == Kind::kQ6 ? 6
                               : 8;
  w.group_size = 64;
  w.scale_dtype = DType::kBF16;
  w.codes = reinterpret_cast<const uint32_t*>(base);
  const size_t code_bytes = rows * w.words_per_row() * 4;
  w.scales = base + code_bytes;
  w.biases = base + code_bytes + rows * w.groups_per_row() * 2;
  return w;
}

void BM_Memcpy(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const char* src = reinterpret_cast<const char*>(Pool());
  static std::vector<char>* dst = new std::vector<char>(kPoolBytes, 1);
  for (auto _ : state) {
#pragma omp parallel num_threads(threads)
    {
      const size_t piece = kPoolBytes / omp_get_num_threads();
      const size_t off = piece * omp_get_thread_num();
      std::memcpy(dst->data() + off, src + off, piece);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kPoolBytes);  // bytes copied (read + write = 2x)
}
BENCHMARK(BM_Memcpy)->Name("Memory/memcpy_1GiB/threads")->Arg(1)->Arg(2)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

void BM_ReadSum(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const uint64_t* p = reinterpret_cast<const uint64_t*>(Pool());
  const size_t n = kPoolBytes / 8;
  for (auto _ : state) {
    uint64_t total = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
    for (size_t i = 0; i < n; ++i) total += p[i];
    benchmark::DoNotOptimize(total);
  }
  state.SetBytesProcessed(state.iterations() * kPoolBytes);
}
BENCHMARK(BM_ReadSum)->Name("Memory/read_1GiB/threads")->Arg(1)->Arg(2)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

Backend& CpuBackend() {
  static std::unique_ptr<Backend> backend = [] {
    auto b = MakeCpuBackend();
    std::fprintf(stderr, "%s\n", b->Describe().c_str());
    return b;
  }();
  return *backend;
}

Ops& CpuOps() { return CpuBackend().ops(); }

void BM_TeamDispatch(benchmark::State& state) {
  CpuBackend();
  for (auto _ : state) {
    cpu::RunTeam(cpu::TeamSize(), [](int t, int n) { benchmark::DoNotOptimize(t + n); });
  }
}
BENCHMARK(BM_TeamDispatch)->Name("Team/empty_op")->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_DecodeMatMul(benchmark::State& state, Kind kind, bool cold, int64_t m_rows) {
  Ops& ops = CpuOps();
  const size_t bytes = MakeWeights(kind, 0).StoredBytes();
  const size_t copies = cold ? kPoolBytes / bytes : 1;
  std::vector<WeightMatrix> views;
  for (size_t c = 0; c < copies; ++c) views.push_back(MakeWeights(kind, c * bytes));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> x(m_rows * kCols), y(m_rows * kRows);
  for (float& v : x) v = d(rng);
  size_t i = 0;
  for (auto _ : state) {
    ops.MatMul(TensorView::F32(x.data(), m_rows, kCols, MemorySpace::kHost), views[i++ % copies],
               TensorView::F32(y.data(), m_rows, kRows, MemorySpace::kHost));
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * m_rows * kRows * kCols * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
}
// Decode over the shapes of E2B's matrices (rows x cols: q 2048x1536,
// o 1536x2048, gate/up 12288x1536, down 1536x12288), 4-bit g64, cold: a step
// streams a different copy each time, as decode streams the layers. (Rows
// longer than the kernel's 32 KiB tile holds at once, like down's, ran at
// two thirds of the bandwidth of short ones on 2026-12-01: docs/cpu-kernels.md.)
void BM_DecodeShape(benchmark::State& state) {
  Ops& ops = CpuOps();
  const int64_t rows = state.range(0), cols = state.range(1);
  const size_t bytes = MakeWeights(Kind::kQ4, 0, rows, cols).StoredBytes();
  const size_t copies = kPoolBytes / bytes;
  std::vector<WeightMatrix> views;
  for (size_t c = 0; c < copies; ++c) views.push_back(MakeWeights(Kind::kQ4, c * bytes, rows, cols));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> x(cols), y(rows);
  for (float& v : x) v = d(rng);
  size_t i = 0;
  for (auto _ : state) {
    ops.MatMul(TensorView::F32(x.data(), 1, cols, MemorySpace::kHost), views[i++ % copies],
               TensorView::F32(y.data(), 1, rows, MemorySpace::kHost));
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}
BENCHMARK(BM_DecodeShape)->Name("DecodeShape/q4g64_cold/rows/cols")->Args({2048, 1536})->Args({1536, 2048})
    ->Args({12288, 1536})->Args({1536, 12288})->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);

BENCHMARK_CAPTURE(BM_DecodeMatMul, f32_cold, Kind::kF32, true, 1)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeMatMul, bf16_cold, Kind::kBF16, true, 1)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeMatMul, q4g64_cold, Kind::kQ4, true, 1)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeMatMul, q8g64_cold, Kind::kQ8, true, 1)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeMatMul, f32_hot, Kind::kF32, false, 1)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeMatMul, bf16_hot, Kind::kBF16, false, 1)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeMatMul, q4g64_hot, Kind::kQ4, false, 1)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeMatMul, q8g64_hot, Kind::kQ8, false, 1)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);
// The byte-straddling widths take a shuffle-based unpack.
BENCHMARK_CAPTURE(BM_DecodeMatMul, q2g64_hot, Kind::kQ2, false, 1)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeMatMul, q3g64_hot, Kind::kQ3, false, 1)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeMatMul, q5g64_hot, Kind::kQ5, false, 1)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeMatMul, q6g64_hot, Kind::kQ6, false, 1)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);
// A few input rows (speculative decoding, short prompts): GEMV up to 4 rows, GEMM above.
BENCHMARK_CAPTURE(BM_DecodeMatMul, q4g64_m4, Kind::kQ4, true, 4)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeMatMul, q4g64_m8, Kind::kQ4, true, 8)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeMatMul, q4g64_m16, Kind::kQ4, true, 16)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeMatMul, q4g64_m64, Kind::kQ4, true, 64)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);

void BM_PrefillMatMul(benchmark::State& state, Kind kind) {
  constexpr int64_t kM = 512;
  Ops& ops = CpuOps();
  const WeightMatrix w = MakeWeights(kind, 0);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> x(kM * kCols), y(kM * kRows);
  for (float& v : x) v = d(rng);
  for (auto _ : state) {
    ops.MatMul(TensorView::F32(x.data(), kM, kCols, MemorySpace::kHost), w,
               TensorView::F32(y.data(), kM, kRows, MemorySpace::kHost));
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * kM * kRows * kCols * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_PrefillMatMul, f32, Kind::kF32)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PrefillMatMul, bf16, Kind::kBF16)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PrefillMatMul, q4g64, Kind::kQ4)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PrefillMatMul, q3g64, Kind::kQ3)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PrefillMatMul, q8g64, Kind::kQ8)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

// One sequence of `keys` tokens in a paged store (consecutive blocks of 16)
// in codec `spec`, and `queries` rows at its last positions.
struct AttentionData {
  KvRecordFormat format;
  std::vector<uint8_t> records;
  std::vector<float> q, out;
  std::vector<int32_t> table, positions, row_seq, query_start, kv_len;
  PagedAttentionArgs args;
};

std::unique_ptr<AttentionData> MakeAttention(const KvCodecSpec& spec, int64_t queries, int64_t keys, int heads,
                                             int kv_heads, int dim) {
  constexpr int kBlock = 16;
  auto a = std::make_unique<AttentionData>();
  a->format = KvRecordFormat::Make(spec, kv_heads, dim).value();
  const int64_t blocks = (keys + kBlock - 1) / kBlock;
  a->records.resize((blocks + 1) * kBlock * a->format.record_bytes);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> k(kBlock * a->format.width()), v(k.size());
  for (int64_t b = 1; b <= blocks; ++b) {
    for (float& x : k) x = d(rng);
    for (float& x : v) x = d(rng);
    EncodeKvRecords(a->format, k.data(), v.data(), kBlock, a->records.data() + b * kBlock * a->format.record_bytes);
    a->table.push_back(static_cast<int32_t>(b));
  }
  a->q.resize(queries * heads * dim);
  for (float& x : a->q) x = d(rng);
  a->out.resize(a->q.size());
  for (int64_t i = 0; i < queries; ++i) {
    a->positions.push_back(static_cast<int32_t>(keys - queries + i));
    a->row_seq.push_back(0);
  }
  a->query_start = {0, static_cast<int32_t>(queries)};
  a->kv_len = {static_cast<int32_t>(keys)};
  PagedAttentionArgs& g = a->args;
  g.rows.num_rows = queries;
  g.rows.num_seqs = 1;
  g.rows.positions = a->positions.data();
  g.rows.row_seq = a->row_seq.data();
  g.rows.query_start = a->query_start.data();
  g.rows.kv_len = a->kv_len.data();
  g.rows.max_query_rows = queries;
  g.rows.max_kv_len = keys;
  g.kv.store[0].format = a->format;
  g.kv.store[0].records = a->records.data();
  g.kv.store[0].num_blocks = blocks + 1;
  if (a->format.rotates_values()) {
    g.kv.store[0].value_centroids = TurboValueCentroids(spec.value_bits);
    g.kv.store[0].value_signs = TurboValueSigns(dim);
  }
  g.kv.tables.block_table = a->table.data();
  g.kv.tables.table_stride = blocks;
  g.kv.block_size = kBlock;
  g.q = TensorView::F32(a->q.data(), queries, heads * dim, MemorySpace::kHost);
  g.out = TensorView::F32(a->out.data(), queries, heads * dim, MemorySpace::kHost);
  g.num_heads = heads;
  g.num_kv_heads = kv_heads;
  g.head_dim = dim;
  g.scale = 1.0f / 16;
  return a;
}

KvCodecSpec Codec(int64_t i) {
  switch (i) {
    case 0: return KvCodecSpec::Plain();
    case 1: return KvCodecSpec::Plain(DType::kBF16);
    case 2: return KvCodecSpec::Affine(8, 64);
    default: return KvCodecSpec::Turbo(8, 3);
  }
}

// Arg 0: codec (0 plain f32, 1 plain bf16, 2 affine:8, 3 turbo:k8v3); arg 1: keys.
void BM_AttentionDecode(benchmark::State& state) {
  Ops& ops = CpuOps();
  auto a = MakeAttention(Codec(state.range(0)), 1, state.range(1), 8, 2, 256);
  for (auto _ : state) {
    ops.PagedAttention(a->args);
    benchmark::DoNotOptimize(a->out.data());
  }
  state.SetBytesProcessed(state.iterations() * state.range(1) * a->format.record_bytes);
}
BENCHMARK(BM_AttentionDecode)->Name("AttentionDecode/8h_2kvh_256d/codec/keys")
    ->ArgsProduct({{0, 1, 2, 3}, {4096, 32768}})->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMicrosecond);

void BM_AttentionPrefill(benchmark::State& state) {
  Ops& ops = CpuOps();
  auto a = MakeAttention(Codec(state.range(0)), 512, 512, 8, 2, 256);
  for (auto _ : state) {
    ops.PagedAttention(a->args);
    benchmark::DoNotOptimize(a->out.data());
  }
  // Causal: about half of the 512 x 512 score matrix, QK and PV, 8 heads.
  state.counters["GFLOP/s"] = benchmark::Counter(
      4.0 * 256 * 8 * (512.0 * 513 / 2) * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionPrefill)->Name("AttentionPrefill/8h_2kvh_256d_512tokens/codec")->Arg(0)->Arg(1)
    ->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace g4

BENCHMARK_MAIN();
