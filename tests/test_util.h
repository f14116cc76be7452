// Helpers shared by all test binaries: where test data lives, random inputs,
// and tolerance comparison that reports the worst element.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace g4::testing {

// Absolute path of a file under the repo's testdata/ folder (unpacked in the
// build tree; $G4_TESTDATA overrides the folder).
std::string TestDataPath(const std::string& relative);
// A fresh, empty temporary directory, removed with its contents when the
// process that made it exits normally (a forked child's exit removes
// nothing).
std::string MakeTempDir();
// Directory holding the built binaries (build/g4 lives here; $G4_BINARY_DIR
// overrides it).
std::string BinaryDir();

// Uniform floats in [lo, hi) from a seeded generator.
std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

// Runs `<build>/g4 ARGS` and captures its output and exit status.
struct G4Run {
  int exit_code = -1;
  bool signaled = false;
  std::string out;  // stdout only
  std::string all;  // stdout then stderr
};
G4Run RunG4(const std::string& args);

struct Mismatch {
  bool ok = true;
  size_t worst_index = 0;
  double max_abs_diff = 0;
  double expected = 0, actual = 0;
  std::string ToString() const;
};
// Passes when |a - e| <= atol + rtol * |e| everywhere (NaN never passes).
Mismatch Compare(const float* expected, const float* actual, size_t n, double atol, double rtol = 0);

// |actual - expected| / |expected| over n values (L2 norms, in double): the
// "relative RMS difference" the reduced-precision envelopes bound.
double RelativeRms(const float* expected, const float* actual, size_t n);

}  // namespace g4::testing
