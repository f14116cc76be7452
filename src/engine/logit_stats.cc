#include "engine/logit_stats.h"

#include <algorithm>
#include <cmath>

namespace g4 {

double LogSumExpD(std::span<const float> row) {
  const double m = *std::max_element(row.begin(), row.end());
  double s = 0;
  for (float x : row) s += std::exp(x - m);
  return m + std::log(s);
}

double KlDivergence(std::span<const float> p, std::span<const float> q) {
  const double p_lse = LogSumExpD(p), q_lse = LogSumExpD(q);
  double kl = 0;
  for (size_t j = 0; j < p.size(); ++j) {
    const double lp = p[j] - p_lse;
    kl += std::exp(lp) * (lp - (q[j] - q_lse));
  }
  return std::max(kl, 0.0);
}

bool SameTop1(std::span<const float> p, std::span<const float> q) {
  return (std::max_element(p.begin(), p.end()) - p.begin()) == (std::max_element(q.begin(), q.end()) - q.begin());
}

}  // namespace g4
