#include "test_util.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace g4::testing {

std::string TestDataPath(const std::string& relative) { return std::string(G4_TESTDATA) + "/" + relative; }

std::string BinaryDir() { return G4_BINARY_DIR; }

std::string MakeTempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "g4test-XXXXXX").string();
  char* p = mkdtemp(tmpl.data());
  return p ? std::string(p) : std::string();
}

std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::string Mismatch::ToString() const {
  std::ostringstream s;
  s << "max |diff| " << max_abs_diff << " at index " << worst_index << " (expected " << expected
    << ", got " << actual << ")";
  return s.str();
}

Mismatch Compare(const float* expected, const float* actual, size_t n, double atol, double rtol) {
  Mismatch m;
  double worst_excess = -1;
  for (size_t i = 0; i < n; ++i) {
    const double e = expected[i], a = actual[i];
    const double d = std::fabs(a - e);
    const bool bad = !(d <= atol + rtol * std::fabs(e));  // NaN-safe
    const double excess = std::isnan(d) ? INFINITY : d - (atol + rtol * std::fabs(e));
    if (std::isnan(d) || d > m.max_abs_diff) m.max_abs_diff = std::isnan(d) ? NAN : d;
    if (bad) m.ok = false;
    if (excess > worst_excess) {
      worst_excess = excess;
      m.worst_index = i;
      m.expected = e;
      m.actual = a;
    }
  }
  return m;
}

}  // namespace g4::testing
