// The fused ops against the separate ops they stand for, bitwise on the same
// backend: MatMuls (several products of one input) against MatMul per
// product, AddNorm against RmsNorm, Add, Scale and RmsNorm (and with its
// next-product hint against none), HeadNormRope
// against per-head RmsNorm and Rope, GatedMatMul against GeluMul then
// MatMul.
#include <gtest/gtest.h>

#include <vector>

#include "backend_test_util.h"

namespace g4 {
namespace {

using testing::DeviceTensor;

class FusedOpsTest : public testing::BackendTest {};

// MatMuls over `tws` against MatMul per product, with m input rows.
void CheckMatMuls(Backend& backend, const std::vector<const testing::TestWeights*>& tws, int64_t m, uint32_t seed,
                  int64_t x_pad) {
  const int64_t k = tws[0]->w.cols;
  const std::vector<float> x = testing::RandomFloats(m * k, seed, -2.0f, 2.0f);
  DeviceTensor dx = testing::UploadF32(backend, x, m, k, k + x_pad);
  std::vector<testing::DeviceWeights> dws;
  std::vector<DeviceTensor> fused, apart;
  for (const testing::TestWeights* tw : tws) {
    dws.push_back(testing::UploadWeights(backend, *tw));
    fused.push_back(testing::AllocTensor(backend, DType::kF32, m, tw->w.rows, tw->w.rows + 3));
    apart.push_back(testing::AllocTensor(backend, DType::kF32, m, tw->w.rows));
  }
  std::vector<const WeightMatrix*> ws;
  std::vector<TensorView> ys;
  for (size_t i = 0; i < tws.size(); ++i) {
    ws.push_back(&dws[i].w);
    ys.push_back(fused[i].view);
  }
  backend.ops().MatMuls(dx.view, ws, ys);
  for (size_t i = 0; i < tws.size(); ++i) backend.ops().MatMul(dx.view, dws[i].w, apart[i].view);
  for (size_t i = 0; i < tws.size(); ++i) {
    const int64_t n = tws[i]->w.rows;
    EXPECT_TRUE(testing::BitwiseEqual(testing::DownloadF32(backend, apart[i].view),
                                      testing::DownloadF32(backend, fused[i].view), n))
        << "product " << i << " of " << tws.size() << ": " << tws[i]->w.Describe() << " m=" << m;
    EXPECT_TRUE(testing::GuardsIntact(backend, fused[i]));
  }
}

TEST_P(FusedOpsTest, MatMulsEqualMatMulPerProduct) {
  uint32_t seed = 900;
  // q/k/v-like: one format, different row counts (one launch on CUDA).
  const testing::TestWeights q = testing::MakeAffine(96, 512, 4, 64, DType::kBF16, ++seed);
  const testing::TestWeights k = testing::MakeAffine(33, 512, 4, 64, DType::kBF16, ++seed);
  const testing::TestWeights v = testing::MakeAffine(40, 512, 4, 64, DType::kF16, ++seed);
  const testing::TestWeights w4 = testing::MakeAffine(7, 512, 4, 64, DType::kF32, ++seed);
  // Formats that cannot share a launch: another bit width, another group, dense.
  const testing::TestWeights b8 = testing::MakeAffine(50, 512, 8, 64, DType::kBF16, ++seed);
  const testing::TestWeights g32 = testing::MakeAffine(20, 512, 4, 32, DType::kBF16, ++seed);
  const testing::TestWeights dense = testing::MakeDense(30, 512, DType::kBF16, ++seed);
  for (int64_t m : {1, 2, 5, 9, 70}) {
    CheckMatMuls(backend(), {&q, &k, &v}, m, ++seed, 0);
    CheckMatMuls(backend(), {&q, &k, &v, &w4}, m, ++seed, 5);
    CheckMatMuls(backend(), {&q, &b8}, m, ++seed, 0);
    CheckMatMuls(backend(), {&g32, &q, &dense}, m, ++seed, 0);
    CheckMatMuls(backend(), {&v}, m, ++seed, 0);
  }
  // Every bit width sharing a launch with itself, one input row.
  for (int bits : {2, 3, 5, 6, 8}) {
    const testing::TestWeights a = testing::MakeAffine(65, 384, bits, 128, DType::kBF16, ++seed);
    const testing::TestWeights b = testing::MakeAffine(31, 384, bits, 128, DType::kF16, ++seed);
    CheckMatMuls(backend(), {&a, &b}, 1, ++seed, 0);
    CheckMatMuls(backend(), {&a, &b}, 3, ++seed, 0);
  }
  // More rows than the GPU has resident warps, products ending inside a warp's
  // rows and inside a batch of its rows (the CUDA one-row kernel's walk).
  const testing::TestWeights many_a = testing::MakeAffine(5001, 192, 4, 64, DType::kBF16, ++seed);
  const testing::TestWeights many_b = testing::MakeAffine(3, 192, 4, 64, DType::kF16, ++seed);
  const testing::TestWeights many_c = testing::MakeAffine(9005, 192, 4, 64, DType::kBF16, ++seed);
  CheckMatMuls(backend(), {&many_a, &many_b, &many_c}, 1, ++seed, 0);
  CheckMatMuls(backend(), {&many_b, &many_c}, 1, ++seed, 0);
  // A row too long for the one-row kernel to quantize in shared memory.
  const testing::TestWeights long_a = testing::MakeAffine(9, 33792, 4, 64, DType::kBF16, ++seed);
  const testing::TestWeights long_b = testing::MakeAffine(40, 33792, 4, 64, DType::kBF16, ++seed);
  CheckMatMuls(backend(), {&long_a, &long_b}, 1, ++seed, 0);
}

// AddNorm against the separate ops, on x, o and next_out with their own
// strides.
void CheckAddNorm(Backend& backend, int64_t rows, int64_t d, bool post_w, float scale, bool next, bool next_w,
                  uint32_t seed) {
  const std::vector<float> x = testing::RandomFloats(rows * d, seed, -3.0f, 3.0f);
  const std::vector<float> o = testing::RandomFloats(rows * d, seed + 1, -5.0f, 5.0f);
  const DeviceBuffer w1 = testing::UploadArray(backend, testing::RandomFloats(d, seed + 2, -2.0f, 2.0f));
  const DeviceBuffer w2 = testing::UploadArray(backend, testing::RandomFloats(d, seed + 3, -2.0f, 2.0f));
  const float eps = 1e-6f;
  // Apart.
  DeviceTensor ax = testing::UploadF32(backend, x, rows, d);
  DeviceTensor ao = testing::UploadF32(backend, o, rows, d);
  DeviceTensor an = testing::AllocTensor(backend, DType::kF32, rows, d);
  Ops& ops = backend.ops();
  ops.RmsNorm(ao.view, post_w ? w1.as<float>() : nullptr, eps, ao.view);
  ops.Add(ax.view, ao.view, ax.view);
  ops.Scale(ax.view, scale);
  if (next) ops.RmsNorm(ax.view, next_w ? w2.as<float>() : nullptr, eps, an.view);
  // Fused.
  DeviceTensor fx = testing::UploadF32(backend, x, rows, d, d + 3);
  DeviceTensor fo = testing::UploadF32(backend, o, rows, d, d + 1);
  DeviceTensor fn = testing::AllocTensor(backend, DType::kF32, rows, d, d + 6);
  AddNormArgs args;
  args.x = fx.view;
  args.o = fo.view;
  args.post_weight = post_w ? w1.as<float>() : nullptr;
  args.scale = scale;
  if (next) args.next_out = fn.view;
  args.next_weight = next_w ? w2.as<float>() : nullptr;
  args.eps = eps;
  ops.AddNorm(args);
  const std::string what = "rows " + std::to_string(rows) + " d " + std::to_string(d) + " post_w " +
                           std::to_string(post_w) + " scale " + std::to_string(scale) + " next " +
                           std::to_string(next) + " next_w " + std::to_string(next_w);
  EXPECT_TRUE(testing::BitwiseEqual(testing::DownloadF32(backend, ax.view), testing::DownloadF32(backend, fx.view), d))
      << "x: " << what;
  if (next) {
    EXPECT_TRUE(
        testing::BitwiseEqual(testing::DownloadF32(backend, an.view), testing::DownloadF32(backend, fn.view), d))
        << "next_out: " << what;
    EXPECT_TRUE(testing::GuardsIntact(backend, fn));
  }
  EXPECT_TRUE(testing::GuardsIntact(backend, fx));
}

TEST_P(FusedOpsTest, AddNormEqualsTheSeparateOps) {
  uint32_t seed = 1300;
  for (int64_t rows : {1, 3, 17})
    // Both sides of the one-block-per-row width on CUDA, and of each
    // register kernel's columns per thread (8, 12, 16, 24; more: the loop).
    for (int64_t d : {1, 64, 1000, 1024, 2048, 2560, 2565, 3840, 5376, 6400})
      for (bool post_w : {false, true})
        for (float scale : {1.0f, 0.37f})
          for (bool next : {false, true}) CheckAddNorm(backend(), rows, d, post_w, scale, next, !post_w, seed += 4);
}

// AddNorm naming the next product (AddNormArgs::next_product) then that
// product, against AddNorm and the product without the hint: the same bits
// for x, next_out and every output. `then` is the product after the
// AddNorm (MatMuls over its weights, the first of them the named one unless
// `other` is given, which is named instead: a hint that does not match);
// with `between`, a Scale of the product's input comes between the two ops
// (the hint is void, and the product must see the scaled input).
struct HintCase {
  int64_t rows = 1, d = 512;
  bool of_x = false;
  bool between = false;
};
void CheckAddNormHint(Backend& backend, const HintCase& c, const std::vector<const testing::TestWeights*>& then,
                      const testing::TestWeights* other, uint32_t seed) {
  const int64_t rows = c.rows, d = c.d;
  const std::vector<float> x = testing::RandomFloats(rows * d, seed, -3.0f, 3.0f);
  const std::vector<float> o = testing::RandomFloats(rows * d, seed + 1, -5.0f, 5.0f);
  const DeviceBuffer w1 = testing::UploadArray(backend, testing::RandomFloats(d, seed + 2, -2.0f, 2.0f));
  const DeviceBuffer w2 = testing::UploadArray(backend, testing::RandomFloats(d, seed + 3, -2.0f, 2.0f));
  std::vector<testing::DeviceWeights> dws;
  for (const testing::TestWeights* tw : then) dws.push_back(testing::UploadWeights(backend, *tw));
  std::vector<const WeightMatrix*> ws;
  for (const testing::DeviceWeights& dw : dws) ws.push_back(&dw.w);
  const testing::DeviceWeights dother = other ? testing::UploadWeights(backend, *other) : testing::DeviceWeights();
  Ops& ops = backend.ops();
  struct Side {
    DeviceTensor x, o, n;
    std::vector<DeviceTensor> ys;
  };
  const auto run = [&](bool hint) {
    Side s;
    s.x = testing::UploadF32(backend, x, rows, d, d + 3);
    s.o = testing::UploadF32(backend, o, rows, d);
    s.n = testing::AllocTensor(backend, DType::kF32, rows, d, d + 5);
    AddNormArgs a;
    a.x = s.x.view;
    a.o = s.o.view;
    a.post_weight = w1.as<float>();
    a.scale = 0.75f;
    a.next_out = s.n.view;
    a.next_weight = w2.as<float>();
    if (hint) {
      a.next_product = other ? &dother.w : ws[0];
      a.product_of_x = c.of_x;
    }
    ops.AddNorm(a);
    const TensorView& in = c.of_x ? s.x.view : s.n.view;
    if (c.between) ops.Scale(in, -1.5f);
    std::vector<TensorView> ys;
    for (const WeightMatrix* w : ws) {
      s.ys.push_back(testing::AllocTensor(backend, DType::kF32, rows, w->rows, w->rows + 1));
      ys.push_back(s.ys.back().view);
    }
    ops.MatMuls(in, ws, ys);
    return s;
  };
  Side apart = run(false), hinted = run(true);
  const std::string what = "rows " + std::to_string(rows) + " d " + std::to_string(d) + " of_x " +
                           std::to_string(c.of_x) + " between " + std::to_string(c.between) + " " +
                           then[0]->w.Describe() + (other ? " named " + other->w.Describe() : "");
  EXPECT_TRUE(testing::BitwiseEqual(testing::DownloadF32(backend, apart.x.view),
                                    testing::DownloadF32(backend, hinted.x.view), d))
      << "x: " << what;
  EXPECT_TRUE(testing::BitwiseEqual(testing::DownloadF32(backend, apart.n.view),
                                    testing::DownloadF32(backend, hinted.n.view), d))
      << "next_out: " << what;
  for (size_t i = 0; i < ws.size(); ++i) {
    EXPECT_TRUE(testing::BitwiseEqual(testing::DownloadF32(backend, apart.ys[i].view),
                                      testing::DownloadF32(backend, hinted.ys[i].view), ws[i]->rows))
        << "product " << i << ": " << what;
    EXPECT_TRUE(testing::GuardsIntact(backend, hinted.ys[i]));
  }
  EXPECT_TRUE(testing::GuardsIntact(backend, hinted.x));
  EXPECT_TRUE(testing::GuardsIntact(backend, hinted.n));
}

TEST_P(FusedOpsTest, AddNormHintNeverChangesTheProduct) {
  uint32_t seed = 3100;
  // Widths on both sides of CUDA's one-block-per-row width and its register
  // kernels' limit; row counts for the one-row, few-row and tiled MatMuls.
  for (int64_t d : {512, 2560, 6400})
    for (int bits : {4, 8, 2})
      for (int group : {32, 64, 128}) {
        const testing::TestWeights a = testing::MakeAffine(70, d, bits, group, DType::kBF16, ++seed);
        const testing::TestWeights b = testing::MakeAffine(33, d, bits, group, DType::kF16, ++seed);
        for (int64_t rows : {1, 3, 40})
          for (bool of_x : {false, true})
            CheckAddNormHint(backend(), {.rows = rows, .d = d, .of_x = of_x}, {&a, &b}, nullptr, seed += 4);
      }
  const testing::TestWeights q = testing::MakeAffine(64, 2560, 4, 64, DType::kBF16, ++seed);
  const testing::TestWeights q8 = testing::MakeAffine(64, 2560, 8, 64, DType::kBF16, ++seed);
  const testing::TestWeights q32 = testing::MakeAffine(64, 2560, 4, 32, DType::kBF16, ++seed);
  const testing::TestWeights dense = testing::MakeDense(64, 2560, DType::kBF16, ++seed);
  const testing::TestWeights narrow = testing::MakeAffine(40, 512, 4, 64, DType::kBF16, ++seed);
  for (int64_t rows : {1, 5}) {
    for (bool of_x : {false, true}) {
      // An op between voids the hint.
      CheckAddNormHint(backend(), {.rows = rows, .d = 2560, .of_x = of_x, .between = true}, {&q}, nullptr, seed += 4);
      CheckAddNormHint(backend(), {.rows = rows, .d = 512, .of_x = of_x, .between = true}, {&narrow}, nullptr,
                       seed += 4);
    }
    // A named product of another format than the one that follows.
    CheckAddNormHint(backend(), {.rows = rows, .d = 2560}, {&q}, &q8, seed += 4);
    CheckAddNormHint(backend(), {.rows = rows, .d = 2560}, {&q}, &q32, seed += 4);
    CheckAddNormHint(backend(), {.rows = rows, .d = 2560}, {&q8}, &q, seed += 4);
    CheckAddNormHint(backend(), {.rows = rows, .d = 2560}, {&dense}, &q, seed += 4);
    CheckAddNormHint(backend(), {.rows = rows, .d = 2560}, {&q}, &dense, seed += 4);
    // Products of two formats after the hint (not one launch on CUDA).
    CheckAddNormHint(backend(), {.rows = rows, .d = 2560}, {&q, &q8}, nullptr, seed += 4);
  }
}

// GatedMatMul against GeluMul then MatMul, u with its own stride.
void CheckGatedMatMul(Backend& backend, const testing::TestWeights& tw, int64_t m, uint32_t seed) {
  const int64_t k = tw.w.cols, n = tw.w.rows;
  const std::vector<float> g = testing::RandomFloats(m * k, seed, -3.0f, 3.0f);
  const std::vector<float> u = testing::RandomFloats(m * k, seed + 1, -2.0f, 2.0f);
  const testing::DeviceWeights dw = testing::UploadWeights(backend, tw);
  DeviceTensor ag = testing::UploadF32(backend, g, m, k);
  DeviceTensor au = testing::UploadF32(backend, u, m, k, k + 7);
  DeviceTensor ay = testing::AllocTensor(backend, DType::kF32, m, n);
  backend.ops().GeluMul(ag.view, au.view, ag.view);
  backend.ops().MatMul(ag.view, dw.w, ay.view);
  DeviceTensor fg = testing::UploadF32(backend, g, m, k);
  DeviceTensor fy = testing::AllocTensor(backend, DType::kF32, m, n, n + 2);
  backend.ops().GatedMatMul(fg.view, au.view, dw.w, fy.view);
  EXPECT_TRUE(testing::BitwiseEqual(testing::DownloadF32(backend, ay.view), testing::DownloadF32(backend, fy.view), n))
      << tw.w.Describe() << " m=" << m;
  EXPECT_TRUE(testing::GuardsIntact(backend, fy));
}

TEST_P(FusedOpsTest, GatedMatMulEqualsGeluMulThenMatMul) {
  uint32_t seed = 2100;
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int group : {32, 64, 128}) {
      const testing::TestWeights w = testing::MakeAffine(45, 768, bits, group, DType::kBF16, ++seed);
      for (int64_t m : {1, 3, 9}) CheckGatedMatMul(backend(), w, m, seed += 2);
    }
  const testing::TestWeights dense = testing::MakeDense(37, 300, DType::kBF16, ++seed);
  for (int64_t m : {1, 4, 70}) CheckGatedMatMul(backend(), dense, m, seed += 2);
  // A row too long for the one-row kernel to quantize in shared memory.
  const testing::TestWeights long_w = testing::MakeAffine(9, 33792, 4, 64, DType::kBF16, ++seed);
  CheckGatedMatMul(backend(), long_w, 1, ++seed);
}

// HeadNormRope on q, k and v against the separate ops.
void CheckHeadNormRope(Backend& backend, int64_t T, int D, int qh, int kvh, bool with_k, bool with_v,
                       uint32_t seed) {
  const std::vector<float> q = testing::RandomFloats(T * qh * D, seed, -4.0f, 4.0f);
  const std::vector<float> k = testing::RandomFloats(T * kvh * D, seed + 1, -4.0f, 4.0f);
  const std::vector<float> v = testing::RandomFloats(T * kvh * D, seed + 2, -4.0f, 4.0f);
  const DeviceBuffer qw = testing::UploadArray(backend, testing::RandomFloats(D, seed + 3, -2.0f, 2.0f));
  const DeviceBuffer kw = testing::UploadArray(backend, testing::RandomFloats(D, seed + 4, -2.0f, 2.0f));
  std::vector<float> freq = testing::RandomFloats(D / 2, seed + 5, 0.0f, 1.0f);
  for (size_t i = freq.size() * 3 / 4; i < freq.size(); ++i) freq[i] = 0.0f;  // partial rotary: pass-through pairs
  const DeviceBuffer inv_freq = testing::UploadArray(backend, freq);
  std::vector<int32_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>((t * 7919 + seed) % 40000);
  const DeviceBuffer positions = testing::UploadArray(backend, pos);
  const float eps = 1e-6f;
  Ops& ops = backend.ops();
  // Apart.
  DeviceTensor aq = testing::UploadF32(backend, q, T, qh * D);
  DeviceTensor ak = testing::UploadF32(backend, k, T, kvh * D);
  DeviceTensor av = testing::UploadF32(backend, v, T, kvh * D);
  const auto norm = [&](const TensorView& x, int heads, const float* w) {
    ops.RmsNorm(x.Reshape(T * heads, D), w, eps, x.Reshape(T * heads, D));
  };
  norm(aq.view, qh, qw.as<float>());
  ops.Rope(aq.view, qh, D, positions.as<int32_t>(), inv_freq.as<float>());
  if (with_k) {
    norm(ak.view, kvh, kw.as<float>());
    ops.Rope(ak.view, kvh, D, positions.as<int32_t>(), inv_freq.as<float>());
  }
  if (with_v) norm(av.view, kvh, nullptr);
  // Fused.
  DeviceTensor fq = testing::UploadF32(backend, q, T, qh * D);
  DeviceTensor fk = testing::UploadF32(backend, k, T, kvh * D);
  DeviceTensor fv = testing::UploadF32(backend, v, T, kvh * D);
  HeadNormRopeArgs args;
  args.q = fq.view;
  args.q_heads = qh;
  args.q_weight = qw.as<float>();
  if (with_k) args.k = fk.view;
  if (with_v) args.v = fv.view;
  args.kv_heads = kvh;
  args.k_weight = kw.as<float>();
  args.head_dim = D;
  args.positions = positions.as<int32_t>();
  args.inv_freq = inv_freq.as<float>();
  args.eps = eps;
  ops.HeadNormRope(args);
  const std::string what = "T " + std::to_string(T) + " D " + std::to_string(D) + " heads " + std::to_string(qh) +
                           "/" + std::to_string(kvh) + " k " + std::to_string(with_k) + " v " + std::to_string(with_v);
  EXPECT_TRUE(testing::BitwiseEqual(testing::DownloadF32(backend, aq.view), testing::DownloadF32(backend, fq.view),
                                    qh * D))
      << "q: " << what;
  // k and v: normalized where asked, untouched otherwise (both sides).
  EXPECT_TRUE(testing::BitwiseEqual(testing::DownloadF32(backend, ak.view), testing::DownloadF32(backend, fk.view),
                                    kvh * D))
      << "k: " << what;
  EXPECT_TRUE(testing::BitwiseEqual(testing::DownloadF32(backend, av.view), testing::DownloadF32(backend, fv.view),
                                    kvh * D))
      << "v: " << what;
  EXPECT_TRUE(testing::GuardsIntact(backend, fq));
  EXPECT_TRUE(testing::GuardsIntact(backend, fk));
  EXPECT_TRUE(testing::GuardsIntact(backend, fv));
}

TEST_P(FusedOpsTest, HeadNormRopeEqualsTheSeparateOps) {
  uint32_t seed = 1700;
  for (int D : {32, 64, 128, 256, 512, 48})  // 48: no fused kernel on CUDA
    for (int64_t T : {1, 3, 20}) {
      CheckHeadNormRope(backend(), T, D, 8, 2, true, true, seed += 8);
      CheckHeadNormRope(backend(), T, D, 4, 1, true, false, seed += 8);
      CheckHeadNormRope(backend(), T, D, 2, 2, false, false, seed += 8);
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, FusedOpsTest, testing::BackendValues(), testing::BackendParamName);

}  // namespace
}  // namespace g4
