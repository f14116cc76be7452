// Attention in double over decoded records, the emulator tests' reference
// (paged_attention_mma_sim_test.cc, paged_attention_sim_test.cc). Test-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace g4::cuda {

// Row `pos` of one sequence: q [positions, heads * d], keys and values
// [positions, kv_heads * d] (values in the original domain); keys lo .. pos
// with lo = pos - window + 1 when windowed. *vmax: the largest |value| read.
inline std::vector<double> AttentionInDouble(const std::vector<float>& q, const std::vector<float>& keys,
                                             const std::vector<float>& values, int heads, int kv_heads, int d,
                                             int window, int pos, double* vmax) {
  const int G = heads / kv_heads;
  const int64_t w = static_cast<int64_t>(kv_heads) * d, qw = static_cast<int64_t>(heads) * d;
  const int lo = window > 0 ? std::max(0, pos - window + 1) : 0;
  std::vector<double> out(static_cast<size_t>(qw));
  *vmax = 0;
  for (int h = 0; h < heads; ++h) {
    const int kh = h / G;
    const float* qh = q.data() + pos * qw + h * d;
    std::vector<double> sc(pos - lo + 1);
    double m = -INFINITY;
    for (int j = lo; j <= pos; ++j) {
      double dot = 0;
      for (int e = 0; e < d; ++e) dot += static_cast<double>(qh[e]) * keys[j * w + kh * d + e];
      sc[j - lo] = dot / std::sqrt(static_cast<double>(d));
      m = std::max(m, sc[j - lo]);
    }
    double l = 0;
    for (double& x : sc) l += (x = std::exp(x - m));
    for (int e = 0; e < d; ++e) {
      double acc = 0;
      for (int j = lo; j <= pos; ++j) acc += sc[j - lo] * values[j * w + kh * d + e];
      out[h * d + e] = acc / l;
    }
    for (int j = lo; j <= pos; ++j)
      for (int e = 0; e < d; ++e) *vmax = std::max<double>(*vmax, std::fabs(values[j * w + kh * d + e]));
  }
  return out;
}

}  // namespace g4::cuda
