// Ops::PagedAttention on every backend: against a double-precision
// reference for every KV record format (the reference decodes the host
// encoding of the same keys), over random non-contiguous block tables, with
// GQA, sliding windows (-1 table entries for blocks out of reach, keys at
// the window's edge), odd head_dims for plain storage, several sequences of
// different lengths per step mixing prefill runs and decode rows, and
// sequences in two stores of different formats. Then the batching contract,
// bitwise: a sequence's rows do not change with what else runs in the step,
// with the thread count, or with how its prefill was chunked.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backend_test_util.h"
#include "paged_kv_test_util.h"

namespace g4::testing {
namespace {

class PagedAttentionTest : public BackendTest {};

std::vector<KvCodecSpec> AllCodecs() {
  std::vector<KvCodecSpec> specs = {KvCodecSpec::Plain(DType::kF32), KvCodecSpec::Plain(DType::kBF16),
                                    KvCodecSpec::Plain(DType::kF16)};
  for (int bits : {4, 8})
    for (int group : {32, 64, 128}) specs.push_back(KvCodecSpec::Affine(bits, group));
  for (int kb : {2, 4, 5, 8})
    for (int vb : {2, 3, 4, 5, 8}) specs.push_back(KvCodecSpec::Turbo(kb, vb));
  return specs;
}

// Runs `runs` once and checks every row against the reference.
void ExpectMatchesReference(PagedKvHarness& h, const std::vector<KvRun>& runs, const std::string& what) {
  const std::vector<float> got = h.Step(runs, /*write=*/false);
  std::vector<double> want, tol;
  h.Reference(runs, &want, &tol);
  ASSERT_EQ(got.size(), want.size()) << what;
  EXPECT_TRUE(AllWithin(want, got.data(), tol, h.q_width())) << what;
}

TEST_P(PagedAttentionTest, EveryCodecMatchesTheReference) {
  uint32_t seed = 1;
  for (const KvCodecSpec& spec : AllCodecs()) {
    for (int window : {0, 40}) {
      AttentionShape shape;
      shape.num_heads = 4;
      shape.num_kv_heads = 2;
      shape.head_dim = 128;
      shape.window = window;
      const KvRecordFormat f = MakeFormat(spec, shape.num_kv_heads, shape.head_dim);
      PagedKvHarness h(backend(), shape, f, KvRecordFormat{}, /*block_size=*/16, /*blocks=*/128, ++seed);
      // Lengths straddle tiles, splits (1100 keys: three) and blocks.
      const int a = h.AddSequence(1100, 0), b = h.AddSequence(37, 0), c = h.AddSequence(1, 0), d = h.AddSequence(530, 0);
      for (int s : {a, b, c, d}) h.WriteOnHost(s);
      // A decode row, a whole prefill, a first token, a prefill chunk.
      ExpectMatchesReference(h, {{a, 1099, 1}, {b, 0, 37}, {c, 0, 1}, {d, 517, 13}},
                             spec.signature() + " window " + std::to_string(window));
    }
  }
}

TEST_P(PagedAttentionTest, PlainTakesAnyHeadDim) {
  uint32_t seed = 100;
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int head_dim : {40, 72, 100, 8, 1}) {
      AttentionShape shape;
      shape.num_heads = 6;
      shape.num_kv_heads = 2;
      shape.head_dim = head_dim;
      const KvRecordFormat f = MakeFormat(KvCodecSpec::Plain(t), shape.num_kv_heads, head_dim);
      PagedKvHarness h(backend(), shape, f, KvRecordFormat{}, 8, 96, ++seed);
      const int a = h.AddSequence(77, 0), b = h.AddSequence(600, 0);
      h.WriteOnHost(a);
      h.WriteOnHost(b);
      ExpectMatchesReference(h, {{b, 598, 2}, {a, 60, 17}},
                             KvCodecSpec::Plain(t).signature() + " head_dim " + std::to_string(head_dim));
    }
  }
}

TEST_P(PagedAttentionTest, GroupedQueryHeads) {
  uint32_t seed = 200;
  const struct { int heads, kv_heads; } kShapes[] = {{1, 1}, {3, 3}, {8, 1}, {8, 2}, {12, 4}};
  for (const auto& g : kShapes) {
    for (const KvCodecSpec& spec : {KvCodecSpec::Plain(), KvCodecSpec::Affine(4, 32), KvCodecSpec::Turbo(8, 3)}) {
      AttentionShape shape;
      shape.num_heads = g.heads;
      shape.num_kv_heads = g.kv_heads;
      shape.head_dim = 64;
      shape.scale = 0.3f;  // not 1/sqrt(d): the op must use the given scale
      const KvRecordFormat f = MakeFormat(spec, g.kv_heads, 64);
      PagedKvHarness h(backend(), shape, f, KvRecordFormat{}, 16, 64, ++seed);
      const int a = h.AddSequence(300, 0), b = h.AddSequence(5, 0);
      h.WriteOnHost(a);
      h.WriteOnHost(b);
      ExpectMatchesReference(h, {{b, 0, 5}, {a, 299, 1}},
                             spec.signature() + " " + std::to_string(g.heads) + "/" + std::to_string(g.kv_heads));
    }
  }
}

// The model geometries (head_dim 256 with 4 query heads per KV head, 512
// with 16 and 4): decode rows and a prefill run across several splits, in
// the record formats the benchmarks use and one of each other kind.
TEST_P(PagedAttentionTest, ModelHeadShapes) {
  uint32_t seed = 250;
  const struct { int heads, kv_heads, head_dim; } kShapes[] = {{8, 2, 256}, {16, 1, 512}, {4, 1, 512}};
  for (const auto& g : kShapes) {
    for (const KvCodecSpec& spec : {KvCodecSpec::Plain(DType::kBF16), KvCodecSpec::Plain(), KvCodecSpec::Affine(8, 64),
                                    KvCodecSpec::Turbo(8, 3)}) {
      for (int window : {0, 100}) {
        AttentionShape shape;
        shape.num_heads = g.heads;
        shape.num_kv_heads = g.kv_heads;
        shape.head_dim = g.head_dim;
        shape.window = window;
        const KvRecordFormat f = MakeFormat(spec, g.kv_heads, g.head_dim);
        PagedKvHarness h(backend(), shape, f, KvRecordFormat{}, 16, 64, ++seed);
        const int a = h.AddSequence(333, 0), b = h.AddSequence(70, 0), c = h.AddSequence(129, 0);
        for (int sq : {a, b, c}) h.WriteOnHost(sq);
        ExpectMatchesReference(h, {{a, 332, 1}, {b, 60, 10}, {c, 128, 1}},
                               spec.signature() + " " + std::to_string(g.heads) + "/" + std::to_string(g.kv_heads) +
                                   " d" + std::to_string(g.head_dim) + " window " + std::to_string(window));
      }
    }
  }
}

// Keys exactly at the window's edges: the key at p - window + 1 is seen,
// the one at p - window is not. Each test row's query is made to point at
// one edge key with a huge score, so including or dropping that key moves
// the output to (or away from) its value row, far beyond the tolerance.
TEST_P(PagedAttentionTest, WindowEdges) {
  for (const KvCodecSpec& spec : {KvCodecSpec::Plain(), KvCodecSpec::Plain(DType::kBF16), KvCodecSpec::Affine(8, 32),
                                  KvCodecSpec::Turbo(8, 4)}) {
    for (int window : {1, 5, 16, 33}) {
      AttentionShape shape;
      shape.num_heads = 2;
      shape.num_kv_heads = 2;
      shape.head_dim = 32;
      shape.window = window;
      const KvRecordFormat f = MakeFormat(spec, 2, 32);
      PagedKvHarness h(backend(), shape, f, KvRecordFormat{}, 4, 64, 300 + window);
      const int64_t len = 90;
      const int s = h.AddSequence(len, 0);
      const int64_t w = h.width(), qw = h.q_width();
      // Rows p = 0 mod 4 aim at key p - window + 1 (inside), rows p = 2 mod 4
      // at key p - window (outside); no two rows share a target.
      for (int64_t p = 0; p < len; p += 2) {
        const int64_t target = p % 4 == 0 ? p - window + 1 : p - window;
        if (target < 0) continue;
        for (int hd = 0; hd < 2; ++hd)
          for (int x = 0; x < 32; ++x) h.keys(s)[target * w + hd * 32 + x] = 3.0f * h.queries(s)[p * qw + hd * 32 + x];
      }
      h.WriteOnHost(s);
      ExpectMatchesReference(h, {{s, 0, len}}, spec.signature() + " window " + std::to_string(window));
      for (int64_t p : {int64_t{window}, int64_t{window} + 2, len - 2, len - 4})
        if (p < len) ExpectMatchesReference(h, {{s, p, 1}}, spec.signature() + " decode at " + std::to_string(p));
    }
  }
}

// Sequences in store 0 (plain f32: waiting for a delayed conversion) and
// store 1 (the target codec) in one step.
TEST_P(PagedAttentionTest, MixedStores) {
  uint32_t seed = 400;
  for (const KvCodecSpec& spec : {KvCodecSpec::Affine(4, 64), KvCodecSpec::Turbo(8, 3), KvCodecSpec::Plain(DType::kBF16)}) {
    AttentionShape shape;
    shape.num_heads = 4;
    shape.num_kv_heads = 2;
    shape.head_dim = 64;
    const KvRecordFormat f0 = MakeFormat(KvCodecSpec::Plain(), 2, 64), f1 = MakeFormat(spec, 2, 64);
    PagedKvHarness h(backend(), shape, f0, f1, 16, 128, ++seed);
    const int a = h.AddSequence(700, 1), b = h.AddSequence(50, 0), c = h.AddSequence(20, 1), d = h.AddSequence(600, 0);
    for (int s : {a, b, c, d}) h.WriteOnHost(s);
    const std::vector<KvRun> mixed = {{a, 699, 1}, {b, 10, 40}, {c, 0, 20}, {d, 599, 1}};
    ExpectMatchesReference(h, mixed, "mixed stores, " + spec.signature());
    // A store-1 sequence gives the same bits alone as with store-0 ones.
    const std::vector<float> all = h.Step(mixed, false);
    const int64_t qw = h.q_width();
    EXPECT_TRUE(BitwiseEqual(h.Step({{a, 699, 1}}, false), SliceRows(all, qw, 0, 1), qw)) << spec.signature();
    EXPECT_TRUE(BitwiseEqual(h.Step({{c, 0, 20}}, false), SliceRows(all, qw, 41, 20), qw)) << spec.signature();
    EXPECT_TRUE(BitwiseEqual(h.Step({{b, 10, 40}}, false), SliceRows(all, qw, 1, 40), qw)) << spec.signature();
  }
}

const KvCodecSpec kInvarianceCodecs[] = {KvCodecSpec::Plain(), KvCodecSpec::Plain(DType::kBF16),
                                         KvCodecSpec::Affine(8, 64), KvCodecSpec::Affine(4, 32),
                                         KvCodecSpec::Turbo(8, 3), KvCodecSpec::Turbo(4, 3)};

// A sequence's rows alone, in a batch (in several orders), and with one
// thread or all of them: the same bits.
TEST_P(PagedAttentionTest, RowsDoNotDependOnTheBatch) {
  uint32_t seed = 500;
  for (const KvCodecSpec& spec : kInvarianceCodecs) {
    for (int window : {0, 700}) {
      AttentionShape shape;
      shape.num_heads = 4;
      shape.num_kv_heads = 2;
      shape.head_dim = 128;
      shape.window = window;
      const KvRecordFormat f = MakeFormat(spec, 2, 128);
      PagedKvHarness h(backend(), shape, f, KvRecordFormat{}, 16, 160, ++seed);
      const int a = h.AddSequence(1300, 0), b = h.AddSequence(333, 0), c = h.AddSequence(17, 0);
      for (int s : {a, b, c}) h.WriteOnHost(s);
      const int64_t qw = h.q_width();
      const std::string what = spec.signature() + " window " + std::to_string(window);
      // A: a prefill run across the 2-to-3 split boundary, and its last token.
      const KvRun a_run{a, 1000, 60}, b_run{b, 0, 333}, c_run{c, 16, 1};
      const std::vector<float> alone = h.Step({a_run}, false);
      const std::vector<float> first = h.Step({a_run, b_run, c_run}, false);
      const std::vector<float> middle = h.Step({c_run, a_run, b_run}, false);
      EXPECT_TRUE(BitwiseEqual(alone, SliceRows(first, qw, 0, 60), qw)) << what;
      EXPECT_TRUE(BitwiseEqual(alone, SliceRows(middle, qw, 1, 60), qw)) << what;
      const std::vector<float> decode = h.Step({c_run, {a, 1059, 1}}, false);
      EXPECT_TRUE(BitwiseEqual(SliceRows(alone, qw, 59, 1), SliceRows(decode, qw, 1, 1), qw)) << what;
      EXPECT_TRUE(BitwiseEqual(h.Step({b_run}, false), SliceRows(first, qw, 60, 333), qw)) << what;
      EXPECT_TRUE(BitwiseEqual(SliceRows(first, qw, 393, 1), SliceRows(middle, qw, 0, 1), qw)) << what;
      // Threads only decide who computes a split, never how.
      const int threads = omp_get_max_threads();
      omp_set_num_threads(1);
      const std::vector<float> one_thread = h.Step({b_run, a_run, c_run}, false);
      omp_set_num_threads(threads);
      EXPECT_TRUE(BitwiseEqual(alone, SliceRows(one_thread, qw, 333, 60), qw)) << what;
    }
  }
}

// One sequence prefilled in one pass, in chunks beside another sequence's
// runs, and token by token, each step writing its own K/V with KvWrite
// first: the same bits for every position, and within the reference.
void ExpectChunkedPrefillEqualsOnePassEqualsDecode(Backend& backend, const KvCodecSpec& spec,
                                                   const AttentionShape& shape, uint32_t seed) {
  const KvRecordFormat f = MakeFormat(spec, shape.num_kv_heads, shape.head_dim);
  PagedKvHarness h(backend, shape, f, KvRecordFormat{}, 16, 64, seed);
  const int64_t len = 700;
  const int s = h.AddSequence(len, 0), other = h.AddSequence(90, 0);
  const int64_t qw = h.q_width();
  const std::string what = spec.signature() + " d" + std::to_string(shape.head_dim) + " window " +
                           std::to_string(shape.window);
  const std::vector<float> one_pass = h.Step({{s, 0, len}}, /*write=*/true);
  // Chunks of uneven sizes, some sharing their step with another sequence.
  std::vector<float> chunked;
  int64_t pos = 0, other_pos = 0;
  for (int64_t size : {1, 63, 200, 5, 391}) {
    std::vector<KvRun> runs = {{s, pos, size}};
    if (other_pos < 90) runs.push_back({other, other_pos, std::min<int64_t>(30, 90 - other_pos)});
    const std::vector<float> out = h.Step(runs, true);
    chunked.insert(chunked.end(), out.begin(), out.begin() + size * qw);
    pos += size;
    other_pos += 30;
  }
  // The rest token by token.
  for (; pos < len; ++pos) {
    const std::vector<float> out = h.Step({{s, pos, 1}}, true);
    chunked.insert(chunked.end(), out.begin(), out.end());
  }
  ASSERT_EQ(pos, len);
  EXPECT_TRUE(BitwiseEqual(one_pass, chunked, qw)) << what;
  std::vector<double> want, tol;
  h.Reference({{s, 0, len}}, &want, &tol);
  EXPECT_TRUE(AllWithin(want, one_pass.data(), tol, qw)) << what;
}

// Prefill in one pass, in chunks, and token by token. (With one KV head, a
// token-by-token step has a single (row, KV head, split) item, which a team
// of two or more shares out by query heads; the one pass has many items and
// is not sliced: the comparison covers both.)
TEST_P(PagedAttentionTest, ChunkedPrefillEqualsOnePassEqualsDecode) {
  uint32_t seed = 600;
  for (const KvCodecSpec& spec : kInvarianceCodecs) {
    for (int window : {0, 100}) {
      AttentionShape shape;
      shape.num_heads = 2;
      shape.num_kv_heads = 1;
      shape.head_dim = 64;
      shape.window = window;
      ExpectChunkedPrefillEqualsOnePassEqualsDecode(backend(), spec, shape, ++seed);
    }
  }
}

// Sets an environment variable for its lifetime and unsets it after (the
// CUDA backend reads G4_CUDA_ATTN_STREAM, G4_CUDA_ATTN_MMA and
// G4_CUDA_ATTN_LAST_MERGE at every PagedAttention call; other backends
// ignore them).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (value != nullptr) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

// A geometry under test: query heads, KV heads, head size.
struct Heads {
  int heads, kv_heads, head_dim;
};
AttentionShape ShapeOf(const Heads& g, int window) {
  AttentionShape shape;
  shape.num_heads = g.heads;
  shape.num_kv_heads = g.kv_heads;
  shape.head_dim = g.head_dim;
  shape.window = window;
  return shape;
}
std::string Describe(const Heads& g, int window) {
  std::string s = "d";  // appended piece by piece: gcc 12 warns (-Wrestrict) on "d" + std::string
  for (const std::string& piece : {std::to_string(g.head_dim), std::string(" "), std::to_string(g.heads),
                                   std::string("/"), std::to_string(g.kv_heads), std::string(" window "),
                                   std::to_string(window)})
    s += piece;
  return s;
}
// The models' geometries.
constexpr Heads kModelHeads[] = {{8, 2, 256}, {16, 8, 256}, {16, 1, 512}, {8, 2, 512}};

// The step's output with the CUDA backend's switch `var` at `off`, then at
// each of `on` (nullptr: unset): the same bits every time; and within the
// reference.
void ExpectSwitchKeepsBits(PagedKvHarness& h, const std::vector<KvRun>& runs, const std::string& what,
                           const char* var, const char* off, std::initializer_list<const char*> on) {
  std::vector<float> base;
  {
    ScopedEnv e(var, off);
    base = h.Step(runs, false);
  }
  for (const char* v : on) {
    ScopedEnv e(var, v);
    EXPECT_TRUE(BitwiseEqual(base, h.Step(runs, false), h.q_width()))
        << what << ", " << var << "=" << (v != nullptr ? v : "unset");
  }
  ExpectMatchesReference(h, runs, what);
}

// The model geometries with the models' KV format (plain bf16), which the
// CUDA backend can compute on the tensor cores (its run kernel for a
// prefill run, its row kernel for a lone row): every row of a prefill run,
// beside another sequence's run, has the bits of that row decoded alone,
// and is within the reference's tolerance.
void ExpectModelShapesKeepTheContract(Backend& backend, uint32_t seed) {
  for (const Heads& g : kModelHeads) {
    for (int window : {0, 300}) {
      const KvRecordFormat f = MakeFormat(KvCodecSpec::Plain(DType::kBF16), g.kv_heads, g.head_dim);
      PagedKvHarness h(backend, ShapeOf(g, window), f, KvRecordFormat{}, 16, 128, ++seed);
      const int a = h.AddSequence(700, 0), b = h.AddSequence(45, 0);
      for (int sq : {a, b}) h.WriteOnHost(sq);
      const int64_t qw = h.q_width();
      const std::string what = Describe(g, window);
      const std::vector<KvRun> runs = {{b, 5, 40}, {a, 597, 103}};
      const std::vector<float> both = h.Step(runs, false);
      for (int64_t p : {597, 598, 640, 641, 660, 699}) {
        const std::vector<float> alone = h.Step({{a, p, 1}}, false);
        EXPECT_TRUE(BitwiseEqual(alone, SliceRows(both, qw, 40 + (p - 597), 1), qw)) << what << " row " << p;
      }
      EXPECT_TRUE(BitwiseEqual(h.Step({{b, 44, 1}}, false), SliceRows(both, qw, 39, 1), qw)) << what;
      ExpectMatchesReference(h, runs, what);
    }
  }
}

TEST_P(PagedAttentionTest, ModelShapesKeepTheContract) { ExpectModelShapesKeepTheContract(backend(), 650); }

// The CUDA backend's tensor-core kernels (G4_CUDA_ATTN_MMA=1) for plain
// bf16 stores: the model shapes' contract, chunked prefill against decode
// at every head_dim they take, a mixed step with an f32 store (which stays
// on the CUDA-core kernels), all within the reference.
TEST_P(PagedAttentionTest, TensorCoreKernelsKeepTheContract) {
  if (backend().name() != "cuda") GTEST_SKIP() << "G4_CUDA_ATTN_MMA is the CUDA backend's";
  ScopedEnv mma("G4_CUDA_ATTN_MMA", "1");
  ExpectModelShapesKeepTheContract(backend(), 660);
  uint32_t seed = 670;
  for (const Heads& g : {Heads{2, 1, 64}, Heads{6, 2, 128}, Heads{16, 1, 512}})
    for (int window : {0, 100})
      ExpectChunkedPrefillEqualsOnePassEqualsDecode(backend(), KvCodecSpec::Plain(DType::kBF16), ShapeOf(g, window),
                                                    ++seed);
  AttentionShape shape;
  shape.num_heads = 8;
  shape.num_kv_heads = 2;
  shape.head_dim = 256;
  PagedKvHarness h(backend(), shape, MakeFormat(KvCodecSpec::Plain(), 2, 256),
                   MakeFormat(KvCodecSpec::Plain(DType::kBF16), 2, 256), 16, 128, ++seed);
  const int a = h.AddSequence(700, 1), b = h.AddSequence(50, 0), c = h.AddSequence(20, 1);
  for (int sq : {a, b, c}) h.WriteOnHost(sq);
  const std::vector<KvRun> mixed = {{a, 699, 1}, {b, 10, 40}, {c, 0, 20}};
  ExpectMatchesReference(h, mixed, "mixed stores, tensor cores");
  const std::vector<float> all = h.Step(mixed, false);
  const int64_t qw = h.q_width();
  EXPECT_TRUE(BitwiseEqual(h.Step({{a, 699, 1}}, false), SliceRows(all, qw, 0, 1), qw));
  EXPECT_TRUE(BitwiseEqual(h.Step({{c, 19, 1}}, false), SliceRows(all, qw, 60, 1), qw));
}

// The CUDA backend's streaming split kernel (the split's slices copied
// into shared memory first) against its split kernel, at the model head
// sizes it takes, for plain 2-byte and TurboQuant stores: the same bits,
// with one query head per block (a lone decode row) and grouped heads
// (seven rows of a long sequence), beside a prefill run that the
// query-tiled kernel takes, and with two turbo formats in one step; and
// within the reference's tolerance. Other backends have no such switch.
TEST_P(PagedAttentionTest, StreamingSplitKernelGivesTheSplitKernelsBits) {
  if (backend().name() != "cuda") GTEST_SKIP() << "G4_CUDA_ATTN_STREAM is the CUDA backend's";
  ScopedEnv cuda_cores("G4_CUDA_ATTN_MMA", "0");  // plain bf16 stores on the split kernels too
  uint32_t seed = 700;
  // The split kernel's output, then every streaming mode's, for one step.
  auto expect_same_bits = [](PagedKvHarness& h, const std::vector<KvRun>& runs, const std::string& what) {
    ExpectSwitchKeepsBits(h, runs, what, "G4_CUDA_ATTN_STREAM", "0", {"1", "2", nullptr});
  };
  const struct { int heads, kv_heads, head_dim; } kShapes[] = {{8, 2, 256}, {4, 1, 512}, {16, 1, 512}};
  const KvCodecSpec kSpecs[] = {KvCodecSpec::Plain(DType::kBF16), KvCodecSpec::Plain(DType::kF16),
                                // every key width (2, 4, 5, 8) and value width (2, 3, 4, 5, 8):
                                // the lane runs (turbo_lane_codes.cuh) are instantiated per width
                                KvCodecSpec::Turbo(8, 3), KvCodecSpec::Turbo(4, 2), KvCodecSpec::Turbo(5, 8),
                                KvCodecSpec::Turbo(2, 4), KvCodecSpec::Turbo(8, 5)};
  for (const auto& g : kShapes) {
    AttentionShape shape;
    shape.num_heads = g.heads;
    shape.num_kv_heads = g.kv_heads;
    shape.head_dim = g.head_dim;
    const std::string geometry =
        " d" + std::to_string(g.head_dim) + " " + std::to_string(g.heads) + "/" + std::to_string(g.kv_heads);
    for (const KvCodecSpec& spec : kSpecs) {
      for (int window : {0, 300}) {
        shape.window = window;
        const KvRecordFormat f = MakeFormat(spec, g.kv_heads, g.head_dim);
        PagedKvHarness h(backend(), shape, f, KvRecordFormat{}, 16, 300, ++seed);
        const int a = h.AddSequence(2000, 0), b = h.AddSequence(90, 0);
        for (int sq : {a, b}) h.WriteOnHost(sq);
        const std::string what = spec.signature() + geometry + " window " + std::to_string(window);
        expect_same_bits(h, {{a, 1999, 1}}, what + ", one row");
        expect_same_bits(h, {{a, 1993, 7}, {b, 0, 90}}, what + ", seven rows and a prefill run");
        expect_same_bits(h, {{b, 89, 1}}, what + ", a short row");
      }
    }
    // Two turbo formats in one step (the shared-memory parts sized for the larger).
    shape.window = 0;
    PagedKvHarness h(backend(), shape, MakeFormat(KvCodecSpec::Turbo(4, 2), g.kv_heads, g.head_dim),
                     MakeFormat(KvCodecSpec::Turbo(8, 3), g.kv_heads, g.head_dim), 16, 300, ++seed);
    const int a = h.AddSequence(1500, 1), b = h.AddSequence(700, 0);
    for (int sq : {a, b}) h.WriteOnHost(sq);
    expect_same_bits(h, {{a, 1499, 1}, {b, 695, 5}}, "two turbo stores" + geometry);
  }
}

// The CUDA backend's tensor-core row kernel merging a row's splits itself
// (G4_CUDA_ATTN_LAST_MERGE: up to N splits; 0 never) against its merge
// kernel: the same bits for decode steps of one and of several rows at the
// model head shapes, windowed or not, at and past the limit of 16 splits
// that "1" sets, step after step (its counters reset); and within the
// reference.
TEST_P(PagedAttentionTest, RowKernelMergeGivesTheMergeKernelsBits) {
  if (backend().name() != "cuda") GTEST_SKIP() << "G4_CUDA_ATTN_LAST_MERGE is the CUDA backend's";
  uint32_t seed = 800;
  for (const Heads& g : kModelHeads)
    for (int window : {0, 300}) {
      const std::string what = Describe(g, window);
      PagedKvHarness h(backend(), ShapeOf(g, window),
                       MakeFormat(KvCodecSpec::Plain(DType::kBF16), g.kv_heads, g.head_dim), KvRecordFormat{}, 16,
                       180, ++seed);  // 172 blocks of 16 for the three sequences
      const int a = h.AddSequence(2000, 0), b = h.AddSequence(700, 0), c = h.AddSequence(33, 0);
      for (int sq : {a, b, c}) h.WriteOnHost(sq);
      const std::vector<std::vector<KvRun>> steps = {
          {{b, 699, 1}}, {{c, 32, 1}}, {{b, 640, 1}, {c, 0, 1}, {b, 1, 1}}, {{a, 1999, 1}, {b, 699, 1}}};
      for (const auto& step : steps)  // "32" twice: the counters are back at zero after a step
        ExpectSwitchKeepsBits(h, step, what + ", " + std::to_string(step.size()) + " rows", "G4_CUDA_ATTN_LAST_MERGE",
                              "0", {"32", "32", "1"});
    }
}

// The CUDA backend's merge of TurboQuant rows in chunks of the head, whose
// last block rotates the row (G4_CUDA_ATTN_TURBO_CHUNKS: from N splits; 0
// never), against one block per head: the same bits for steps of one and
// of several rows at the model head shapes, windowed or not, with a plain
// bf16 store beside the turbo one (its rows merged in chunks either way),
// step after step (the counters reset); and within the reference.
TEST_P(PagedAttentionTest, ChunkedTurboMergeGivesTheWholeRowMergesBits) {
  if (backend().name() != "cuda") GTEST_SKIP() << "G4_CUDA_ATTN_TURBO_CHUNKS is the CUDA backend's";
  uint32_t seed = 900;
  for (const Heads& g : kModelHeads)
    for (int window : {0, 300}) {
      const std::string what = Describe(g, window) + " turbo k8v3";
      PagedKvHarness h(backend(), ShapeOf(g, window), MakeFormat(KvCodecSpec::Turbo(8, 3), g.kv_heads, g.head_dim),
                       MakeFormat(KvCodecSpec::Plain(DType::kBF16), g.kv_heads, g.head_dim), 16, 180, ++seed);
      const int a = h.AddSequence(2000, 0), b = h.AddSequence(700, 1), c = h.AddSequence(33, 0);
      for (int sq : {a, b, c}) h.WriteOnHost(sq);
      const std::vector<std::vector<KvRun>> steps = {
          {{a, 1999, 1}}, {{c, 32, 1}}, {{a, 1500, 1}, {c, 0, 1}, {b, 699, 1}}, {{b, 699, 1}, {a, 1999, 1}}};
      for (const auto& step : steps)  // "1" twice: the counters are back at zero after a step
        ExpectSwitchKeepsBits(h, step, what + ", " + std::to_string(step.size()) + " rows",
                              "G4_CUDA_ATTN_TURBO_CHUNKS", "0", {"1", "1", nullptr});
    }
}

// PagedAttention naming the product that follows (next_product), then that
// product, against no hint: the same bits of out and of the product, for
// stores the merge prepares (plain) and not (TurboQuant), for a named
// product of another format than the one that follows, and for one or
// several rows.
TEST_P(PagedAttentionTest, NextProductHintKeepsTheBits) {
  uint32_t seed = 900;
  for (const Heads& g : kModelHeads)
    for (const KvCodecSpec& spec : {KvCodecSpec::Plain(DType::kBF16), KvCodecSpec::Plain(DType::kF16),
                                    KvCodecSpec::Turbo(8, 3)}) {
      const std::string what = Describe(g, 0) + " " + spec.signature();
      PagedKvHarness h(backend(), ShapeOf(g, 0), MakeFormat(spec, g.kv_heads, g.head_dim), KvRecordFormat{}, 16, 120,
                       ++seed);
      const int a = h.AddSequence(900, 0), b = h.AddSequence(40, 0);
      for (int sq : {a, b}) h.WriteOnHost(sq);
      const int64_t width = static_cast<int64_t>(g.heads) * g.head_dim;
      const TestWeights w4 = MakeAffine(48, width, 4, 64, DType::kBF16, ++seed);
      const TestWeights w8 = MakeAffine(48, width, 8, 128, DType::kBF16, ++seed);
      const DeviceWeights d4 = UploadWeights(backend(), w4), d8 = UploadWeights(backend(), w8);
      for (const std::vector<KvRun>& step :
           {std::vector<KvRun>{{a, 899, 1}}, std::vector<KvRun>{{a, 500, 1}, {b, 30, 10}}})
        for (const auto& names : {std::pair{&d4.w, &d4.w}, std::pair{&d8.w, &d8.w}, std::pair{&d8.w, &d4.w}}) {
          // (plain pointers, not structured bindings: a lambda below takes them)
          const WeightMatrix* named = names.first;
          const WeightMatrix* used = names.second;
          const int64_t rows = [&] {
            int64_t n = 0;
            for (const KvRun& r : step) n += r.count;
            return n;
          }();
          const auto run = [&](const WeightMatrix* hint, std::vector<float>* y) {
            return h.Step(step, false, true, hint, [&](const TensorView& out) {
              const DeviceTensor dy = AllocTensor(backend(), DType::kF32, rows, used->rows, used->rows + 1);
              backend().ops().MatMul(out, *used, dy.view);
              *y = DownloadF32(backend(), dy.view);
              EXPECT_TRUE(GuardsIntact(backend(), dy));
            });
          };
          std::vector<float> y_plain, y_hinted;
          const std::vector<float> out_plain = run(nullptr, &y_plain), out_hinted = run(named, &y_hinted);
          const std::string which = what + ", " + std::to_string(rows) + " rows, named " + named->Describe() +
                                    ", used " + used->Describe();
          EXPECT_TRUE(BitwiseEqual(out_plain, out_hinted, width)) << "out: " << which;
          EXPECT_TRUE(BitwiseEqual(y_plain, y_hinted, used->rows)) << "product: " << which;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, PagedAttentionTest, BackendValues(), BackendParamName);

}  // namespace
}  // namespace g4::testing
