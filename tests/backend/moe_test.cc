// MoeRoute against a double-precision routing of the same logits, and
// MoeExperts against a naive double-precision reference over the exactly
// known (dense or affine-quantized) expert weights, with an error bound
// propagated through the three products. Both: rows alone equal rows in a
// batch, bitwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/moe_route.h"
#include "backend_test_util.h"

namespace g4 {
namespace {

using testing::GeluTanhRef;
using testing::DeviceTensor;
using testing::kEps;

class MoeTest : public testing::BackendTest {};

// ---------------------------------------------------------------- MoeRoute

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routed RunRoute(Backend& backend, const std::vector<float>& logits, int64_t rows, int experts, int k,
                const std::vector<float>& scale, int64_t pad) {
  DeviceTensor dl = testing::UploadF32(backend, logits, rows, experts, experts + pad);
  const DeviceBuffer ds = testing::UploadArray(backend, scale);
  DeviceTensor ids = testing::AllocTensor(backend, DType::kI32, rows, k);
  DeviceTensor w = testing::AllocTensor(backend, DType::kF32, rows, k);
  backend.ops().MoeRoute(dl.view, k, ds.as<float>(), ids.view, w.view);
  EXPECT_TRUE(testing::GuardsIntact(backend, ids));
  EXPECT_TRUE(testing::GuardsIntact(backend, w));
  return {testing::DownloadI32(backend, ids.view), testing::DownloadF32(backend, w.view)};
}

TEST_P(MoeTest, RouteMatchesDoublePrecisionTopK) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 2.0f);
  for (int trial = 0; trial < 40; ++trial) {
    const int experts = 4 + trial % 125, k = 1 + trial % std::min(experts, 8);
    const int64_t rows = 1 + trial % 13;
    std::vector<float> logits(rows * experts), scale(experts);
    for (float& x : logits) x = d(rng);
    for (float& s : scale) s = 0.25f + (rng() % 1000) / 500.0f;
    const Routed got = RunRoute(backend(), logits, rows, experts, k, scale, trial % 3);
    for (int64_t t = 0; t < rows; ++t) {
      const float* l = logits.data() + t * experts;
      std::vector<int> order(experts);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
      double top = 0;
      for (int j = 0; j < k; ++j) top += std::exp(static_cast<double>(l[order[j]]) - l[order[0]]);
      for (int j = 0; j < k; ++j) {
        ASSERT_EQ(got.ids[t * k + j], order[j]) << "trial " << trial << " row " << t << " slot " << j;
        const double want = std::exp(static_cast<double>(l[order[j]]) - l[order[0]]) / top * scale[order[j]];
        EXPECT_NEAR(got.weights[t * k + j], want, 16 * kEps * want) << "trial " << trial << " row " << t;
      }
    }
  }
}

TEST_P(MoeTest, RouteTiesGoToTheLowerExpertAndMatchTheReference) {
  const std::vector<float> logits = {1, 2, 2, 2, 0, /* row 2 */ 5, 5, 5, 5, 5};
  const std::vector<float> scale = {1, 1, 3, 1, 1};
  const Routed got = RunRoute(backend(), logits, 2, 5, 2, scale, 0);
  EXPECT_EQ(got.ids, (std::vector<int32_t>{1, 2, 0, 1}));
  for (int64_t t = 0; t < 2; ++t) {
    const Route r = RouteTopK(logits.data() + t * 5, 5, 2, scale.data());
    for (int j = 0; j < 2; ++j) EXPECT_NEAR(got.weights[t * 2 + j], r.weights[j], 4 * kEps * r.weights[j]);
  }
}

TEST_P(MoeTest, RouteRowsAloneEqualRowsInABatch) {
  const int experts = 128, k = 8;
  const int64_t rows = 50;
  const std::vector<float> logits = testing::RandomFloats(rows * experts, 17, -6.0f, 6.0f);
  const std::vector<float> scale = testing::RandomFloats(experts, 18, 0.5f, 2.0f);
  const Routed batch = RunRoute(backend(), logits, rows, experts, k, scale, 0);
  for (int64_t t : {0, 25, 49}) {
    const Routed one = RunRoute(backend(), testing::SliceRows(logits, experts, t, 1), 1, experts, k, scale, 3);
    EXPECT_TRUE(testing::BitwiseEqual(testing::SliceRows(batch.ids, k, t, 1), one.ids, k)) << "row " << t;
    EXPECT_TRUE(testing::BitwiseEqual(testing::SliceRows(batch.weights, k, t, 1), one.weights, k)) << "row " << t;
  }
}

// -------------------------------------------------------------- MoeExperts

struct ExpertSet {
  std::vector<testing::TestWeights> gate, up, down;  // host values
  std::vector<testing::DeviceWeights> dgate, dup, ddown;
  std::vector<WeightMatrix> wg, wu, wd;  // device views, [E] each
};

// kind 0: dense BF16; 1: affine 4-bit g32 (BF16 scales); 2: mixed (gate and
// up affine 8-bit g64 F16 scales, down affine 3-bit g32).
ExpertSet MakeExperts(Backend& backend, int experts, int64_t hidden, int64_t width, int kind, uint32_t seed) {
  ExpertSet s;
  for (int e = 0; e < experts; ++e) {
    switch (kind) {
      case 0:
        s.gate.push_back(testing::MakeDense(width, hidden, DType::kBF16, ++seed));
        s.up.push_back(testing::MakeDense(width, hidden, DType::kBF16, ++seed));
        s.down.push_back(testing::MakeDense(hidden, width, DType::kBF16, ++seed));
        break;
      case 1:
        s.gate.push_back(testing::MakeAffine(width, hidden, 4, 32, DType::kBF16, ++seed));
        s.up.push_back(testing::MakeAffine(width, hidden, 4, 32, DType::kBF16, ++seed));
        s.down.push_back(testing::MakeAffine(hidden, width, 4, 32, DType::kBF16, ++seed));
        break;
      default:
        s.gate.push_back(testing::MakeAffine(width, hidden, 8, 64, DType::kF16, ++seed));
        s.up.push_back(testing::MakeAffine(width, hidden, 8, 64, DType::kF16, ++seed));
        s.down.push_back(testing::MakeAffine(hidden, width, 3, 32, DType::kBF16, ++seed));
    }
  }
  for (int e = 0; e < experts; ++e) {
    s.dgate.push_back(testing::UploadWeights(backend, s.gate[e]));
    s.dup.push_back(testing::UploadWeights(backend, s.up[e]));
    s.ddown.push_back(testing::UploadWeights(backend, s.down[e]));
    s.wg.push_back(s.dgate.back().w);
    s.wu.push_back(s.dup.back().w);
    s.wd.push_back(s.ddown.back().w);
  }
  return s;
}

// out[t] = sum_j w[t, j] down_e(gelu(gate_e x) * up_e x) in double, and a
// bound on the float pipeline's error: each product's accumulation bound
// (as in matmul_test), the GELU product's evaluation error, and how the
// first two propagate through the down projection and the weighted sum.
void Reference(const ExpertSet& s, const std::vector<float>& x, const std::vector<int32_t>& ids,
               const std::vector<float>& w, int64_t rows, int k, int64_t hidden, int64_t width,
               std::vector<double>* out, std::vector<double>* tol) {
  out->assign(rows * hidden, 0.0);
  tol->assign(rows * hidden, 1e-30);
  const double mm_in = (hidden / 8.0 + 32) * kEps, mm_w = (width / 8.0 + 32) * kEps;
  std::vector<double> act(width), act_err(width), xd(hidden);
  for (int64_t t = 0; t < rows; ++t) {
    const float* xt = x.data() + t * hidden;
    for (int64_t c = 0; c < hidden; ++c) xd[c] = xt[c];
    for (int j = 0; j < k; ++j) {
      const int e = ids[t * k + j];
      const testing::TestWeights &g = s.gate[e], &u = s.up[e], &dn = s.down[e];
      for (int64_t i = 0; i < width; ++i) {
        double gv = 0, ga = 0, uv = 0, ua = 0;
        for (int64_t c = 0; c < hidden; ++c) {
          gv += xt[c] * g.value[i * hidden + c];
          ga += std::fabs(xt[c]) * g.magnitude[i * hidden + c];
          uv += xt[c] * u.value[i * hidden + c];
          ua += std::fabs(xt[c]) * u.magnitude[i * hidden + c];
        }
        const double g_err = mm_in * ga + testing::QuantizedInputBound(xd.data(), nullptr, g.magnitude.data() + i * hidden,
                                                                          hidden, g.w.group_size);
        const double u_err = mm_in * ua + testing::QuantizedInputBound(xd.data(), nullptr, u.magnitude.data() + i * hidden,
                                                                        hidden, u.w.group_size);
        act[i] = GeluTanhRef(gv) * uv;
        // |gelu'| <= 1.13; GeluMul's own evaluation error as in elementwise_test.
        act_err[i] = 1.13 * g_err * (std::fabs(uv) + u_err) + (std::fabs(GeluTanhRef(gv)) + 1.13 * g_err) * u_err +
                     8 * kEps * std::fabs(act[i]) + kEps * std::fabs(gv * uv) + kEps * g_err * std::fabs(uv);
      }
      const double wj = w[t * k + j];
      for (int64_t h = 0; h < hidden; ++h) {
        double y = 0, y_err = 0, y_mag = 0;
        for (int64_t i = 0; i < width; ++i) {
          y += dn.value[h * width + i] * act[i];
          y_err += std::fabs(dn.value[h * width + i]) * act_err[i];
          y_mag += dn.magnitude[h * width + i] * (std::fabs(act[i]) + act_err[i]);
        }
        y_err += mm_w * y_mag + testing::QuantizedInputBound(act.data(), act_err.data(),
                                                             dn.magnitude.data() + h * width, width, dn.w.group_size);
        (*out)[t * hidden + h] += wj * y;
        // The weighted sum: k fused multiply-adds, each one rounding.
        (*tol)[t * hidden + h] += std::fabs(wj) * (y_err + y_mag * k * kEps);
      }
    }
  }
}

// Random routing: k distinct experts per row (or, with `repeats`, any),
// positive weights.
void RandomRouting(std::mt19937& rng, int64_t rows, int experts, int k, bool repeats, std::vector<int32_t>* ids,
                   std::vector<float>* w) {
  ids->resize(rows * k);
  w->resize(rows * k);
  for (int64_t t = 0; t < rows; ++t) {
    std::vector<int32_t> all(experts);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    for (int j = 0; j < k; ++j) {
      (*ids)[t * k + j] = repeats ? static_cast<int32_t>(rng() % experts) : all[j];
      (*w)[t * k + j] = 0.05f + (rng() % 1000) / 700.0f;
    }
  }
}

std::vector<float> RunExperts(Backend& backend, const ExpertSet& s, const std::vector<float>& x,
                              const std::vector<int32_t>& ids, const std::vector<float>& w, int64_t rows, int k,
                              int64_t hidden, int64_t width, int64_t x_pad, int64_t out_pad) {
  DeviceTensor dx = testing::UploadF32(backend, x, rows, hidden, hidden + x_pad);
  DeviceTensor dids = testing::UploadI32(backend, ids, rows, k);
  DeviceTensor dw = testing::UploadF32(backend, w, rows, k);
  DeviceTensor out = testing::AllocTensor(backend, DType::kF32, rows, hidden, hidden + out_pad);
  DeviceTensor ws = testing::AllocTensor(backend, DType::kU8, 1,
                                         static_cast<int64_t>(MoeWorkspaceBytes(rows, k, hidden, width)));
  MoeExpertsArgs args;
  args.x = dx.view;
  args.ids = dids.view;
  args.weights = dw.view;
  args.gate = s.wg;
  args.up = s.wu;
  args.down = s.wd;
  args.out = out.view;
  args.workspace = ws.view;
  backend.ops().MoeExperts(args);
  EXPECT_TRUE(testing::GuardsIntact(backend, out));
  return testing::DownloadF32(backend, out.view);
}

TEST_P(MoeTest, ExpertsMatchNaiveReference) {
  std::mt19937 rng(5);
  struct Case {
    int kind, experts, k;
    int64_t hidden, width, rows;
    bool repeats;
    int64_t x_pad, out_pad;
  };
  const Case cases[] = {
      {0, 7, 3, 77, 45, 19, false, 0, 0},   {0, 5, 2, 40, 23, 1, false, 3, 0},
      {1, 7, 3, 128, 64, 19, false, 0, 5},  {1, 9, 4, 96, 32, 6, false, 17, 0},
      {2, 6, 2, 128, 96, 23, false, 1, 1},  {1, 4, 3, 64, 64, 12, true, 0, 0},
      {1, 3, 2, 64, 32, 1, true, 0, 0},  // one row naming one expert twice: runs longer than T
  };
  uint32_t seed = 1000;
  for (const Case& c : cases) {
    const ExpertSet s = MakeExperts(backend(), c.experts, c.hidden, c.width, c.kind, seed += 100);
    const std::vector<float> x = testing::RandomFloats(c.rows * c.hidden, ++seed, -1.5f, 1.5f);
    std::vector<int32_t> ids;
    std::vector<float> w;
    RandomRouting(rng, c.rows, c.experts, c.k, c.repeats, &ids, &w);
    if (c.rows == 1 && c.repeats) ids.assign(c.k, 1);
    const std::vector<float> got =
        RunExperts(backend(), s, x, ids, w, c.rows, c.k, c.hidden, c.width, c.x_pad, c.out_pad);
    std::vector<double> ref, tol;
    Reference(s, x, ids, w, c.rows, c.k, c.hidden, c.width, &ref, &tol);
    EXPECT_TRUE(testing::AllWithin(ref, got, tol, c.hidden))
        << "kind " << c.kind << " E " << c.experts << " k " << c.k << " H " << c.hidden << " Ie " << c.width
        << " T " << c.rows;
  }
}

// A batch of `rows` rows routed at random over `experts` experts of `kind`
// (experts from `seed`, inputs from seed + 1), and its output.
struct RoutedBatch {
  ExpertSet s;
  std::vector<float> x;
  std::vector<int32_t> ids;
  std::vector<float> w;
  std::vector<float> out;
};
RoutedBatch RunRoutedBatch(Backend& backend, std::mt19937& rng, int experts, int k, int64_t hidden,
                           int64_t width, int64_t rows, int kind, uint32_t seed) {
  RoutedBatch b;
  b.s = MakeExperts(backend, experts, hidden, width, kind, seed);
  b.x = testing::RandomFloats(rows * hidden, seed + 1);
  RandomRouting(rng, rows, experts, k, false, &b.ids, &b.w);
  b.out = RunExperts(backend, b.s, b.x, b.ids, b.w, rows, k, hidden, width, 0, 0);
  return b;
}

// Rows `ts` of batch b, each run alone (its input padded by x_pad, its
// output by out_pad), give their rows of b.out bit for bit.
void ExpectRowsAloneEqualTheBatch(Backend& backend, const RoutedBatch& b, int k, int64_t hidden, int64_t width,
                                  std::initializer_list<int64_t> ts, int64_t x_pad, int64_t out_pad, int kind) {
  for (int64_t t : ts) {
    const std::vector<float> one =
        RunExperts(backend, b.s, testing::SliceRows(b.x, hidden, t, 1), testing::SliceRows(b.ids, k, t, 1),
                   testing::SliceRows(b.w, k, t, 1), 1, k, hidden, width, x_pad, out_pad);
    EXPECT_TRUE(testing::BitwiseEqual(testing::SliceRows(b.out, hidden, t, 1), one, hidden))
        << "kind " << kind << " row " << t;
  }
}

TEST_P(MoeTest, ExpertsRowsAloneEqualRowsInABatch) {
  // Alone, a row's experts each see one row (the matrix-vector path); in the
  // batch they see many (the GEMM path): the bits must not change.
  std::mt19937 rng(9);
  const int experts = 8, k = 2;
  const int64_t hidden = 128, width = 64, rows = 40;
  for (int kind : {0, 1}) {
    const RoutedBatch b = RunRoutedBatch(backend(), rng, experts, k, hidden, width, rows, kind, 77 + kind);
    ExpectRowsAloneEqualTheBatch(backend(), b, k, hidden, width, {0, 13, 39}, 5, 3, kind);
    // The same row amid different neighbours (a smaller batch, other order).
    const int64_t t = 13;
    std::vector<float> x2 = testing::SliceRows(b.x, hidden, 20, 10);
    std::vector<int32_t> ids2 = testing::SliceRows(b.ids, k, 20, 10);
    std::vector<float> w2 = testing::SliceRows(b.w, k, 20, 10);
    std::copy(b.x.begin() + t * hidden, b.x.begin() + (t + 1) * hidden, x2.begin() + 4 * hidden);
    std::copy(b.ids.begin() + t * k, b.ids.begin() + (t + 1) * k, ids2.begin() + 4 * k);
    std::copy(b.w.begin() + t * k, b.w.begin() + (t + 1) * k, w2.begin() + 4 * k);
    const std::vector<float> other = RunExperts(backend(), b.s, x2, ids2, w2, 10, k, hidden, width, 0, 0);
    EXPECT_TRUE(testing::BitwiseEqual(testing::SliceRows(b.out, hidden, t, 1), testing::SliceRows(other, hidden, 4, 1),
                                      hidden))
        << "kind " << kind << ": row " << t << " among other neighbours";
  }
}

TEST_P(MoeTest, ExpertsRowsAloneEqualRowsInALongChunk) {
  // 1100 rows: a backend may take a long chunk in passes of rows (CUDA: 1024
  // per pass, to bound its scratch); rows on either side of a pass's edge
  // must still be their bits alone.
  std::mt19937 rng(31);
  const int experts = 8, k = 2;
  const int64_t hidden = 64, width = 32, rows = 1100;
  for (int kind : {0, 1}) {
    const RoutedBatch b = RunRoutedBatch(backend(), rng, experts, k, hidden, width, rows, kind, 900 + kind);
    ExpectRowsAloneEqualTheBatch(backend(), b, k, hidden, width, {0, 1023, 1024, 1099}, 0, 0, kind);
  }
}

// ops.h defines the result exactly: per row, each routed expert's
// down(gelu(gate x) * up x) (the backend's own row-invariant MatMul and
// GeluMul, here one row at a time), summed into zero in ascending expert
// order (ties: ascending j) by one fma per term. Equal ids included.
void ExpectTheDefinitionBitForBit(Ops& ops, Backend& backend, const ExpertSet& s, const std::vector<float>& x,
                                  const std::vector<int32_t>& ids, const std::vector<float>& w, int64_t rows, int k,
                                  int64_t hidden, int64_t width, const std::string& what) {
  const std::vector<float> got = RunExperts(backend, s, x, ids, w, rows, k, hidden, width, 0, 0);
  DeviceTensor dx = testing::UploadF32(backend, x, rows, hidden);
  DeviceTensor g = testing::AllocTensor(backend, DType::kF32, 1, width);
  DeviceTensor u = testing::AllocTensor(backend, DType::kF32, 1, width);
  DeviceTensor y = testing::AllocTensor(backend, DType::kF32, 1, hidden);
  for (int64_t t = 0; t < rows; ++t) {
    std::vector<int> js(k);
    std::iota(js.begin(), js.end(), 0);
    std::stable_sort(js.begin(), js.end(), [&](int a, int b) { return ids[t * k + a] < ids[t * k + b]; });
    std::vector<float> want(hidden, 0.0f);
    for (int j : js) {
      const int e = ids[t * k + j];
      ops.MatMul(dx.view.Rows(t, 1), s.wg[e], g.view);
      ops.MatMul(dx.view.Rows(t, 1), s.wu[e], u.view);
      ops.GeluMul(g.view, u.view, g.view);
      ops.MatMul(g.view, s.wd[e], y.view);
      const std::vector<float> ye = testing::DownloadF32(backend, y.view);
      for (int64_t h = 0; h < hidden; ++h) want[h] = std::fma(w[t * k + j], ye[h], want[h]);
    }
    EXPECT_TRUE(testing::BitwiseEqual(want, testing::SliceRows(got, hidden, t, 1), hidden)) << what << ", row " << t;
  }
}

TEST_P(MoeTest, ExpertsAreTheirDefinitionBitForBit) {
  std::mt19937 rng(21);
  const int experts = 6, k = 3;
  const int64_t hidden = 64, width = 32, rows = 9;
  const ExpertSet s = MakeExperts(backend(), experts, hidden, width, 1, 500);
  const std::vector<float> x = testing::RandomFloats(rows * hidden, 501);
  std::vector<int32_t> ids;
  std::vector<float> w;
  RandomRouting(rng, rows, experts, k, /*repeats=*/true, &ids, &w);
  ExpectTheDefinitionBitForBit(ops(), backend(), s, x, ids, w, rows, k, hidden, width, "9 rows");
}

TEST_P(MoeTest, DecodeExpertsAreTheirDefinitionBitForBit) {
  // A decode step's few rows (each expert at most one pair per row, up to
  // 16 pairs): the path where the device writes the one-row kernel's
  // products. Hidden 2112 is 33 groups of 64 (66 of 32): more than one
  // round of 32 groups per row.
  std::mt19937 rng(23);
  const int experts = 16, k = 8;
  const int64_t hidden = 2112, width = 96;
  for (int kind : {1, 2}) {
    const ExpertSet s = MakeExperts(backend(), experts, hidden, width, kind, 600 + 50 * kind);
    for (int64_t rows : {1, 2}) {
      for (bool repeats : {false, true}) {
        const std::vector<float> x = testing::RandomFloats(rows * hidden, 601 + kind + 7 * rows);
        std::vector<int32_t> ids;
        std::vector<float> w;
        RandomRouting(rng, rows, experts, k, repeats, &ids, &w);
        ExpectTheDefinitionBitForBit(ops(), backend(), s, x, ids, w, rows, k, hidden, width,
                                     "kind " + std::to_string(kind) + ", " + std::to_string(rows) + " rows" +
                                         (repeats ? ", repeated experts" : ""));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, MoeTest, testing::BackendValues(), testing::BackendParamName);

}  // namespace
}  // namespace g4
