#include "io/weights_check.h"

#include <cmath>
#include <vector>

namespace g4 {
namespace {

std::string ValueName(float v) {
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

}  // namespace

Status CheckVectorFinite(const float* v, int64_t n, const std::string& name) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i]))
      return Corrupt("[weights] " + name + ": element " + std::to_string(i) + " is " + ValueName(v[i]) +
                     " (weights must be finite)");
  }
  return Status::Ok();
}

Status CheckMatrixSampleFinite(const WeightMatrix& m, const std::string& name) {
  if (m.rows <= 0 || m.cols <= 0) return Status::Ok();
  std::vector<float> row(static_cast<size_t>(m.cols));
  const int64_t samples = std::min<int64_t>(kSampledRows, m.rows);
  for (int64_t i = 0; i < samples; ++i) {
    // Evenly spread, first and last row included.
    const int64_t r = samples == 1 ? 0 : i * (m.rows - 1) / (samples - 1);
    DequantizeRow(m, r, row.data());
    for (int64_t c = 0; c < m.cols; ++c) {
      if (std::isfinite(row[c])) continue;
      return Corrupt("[weights] " + name + ": row " + std::to_string(r) + ", column " + std::to_string(c) + " is " +
                     ValueName(row[c]) + (m.is_affine() ? " after dequantization (check its .scales and .biases)" : "") +
                     " (weights must be finite)");
    }
  }
  return Status::Ok();
}

}  // namespace g4
