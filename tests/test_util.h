// Helpers shared by all test binaries: where test data lives, random inputs,
// and tolerance comparison that reports the worst element.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"

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
// The repository's bundled demo model, models/demo ($G4_REPO_DIR names the
// checkout when the test binaries run elsewhere: scripts/gpu-run.sh).
std::string DemoModelDir();
// The fixture models under testdata/models (transformers' goldens for every
// kind of Gemma 4 text model), for the tests that run over all of them.
inline const std::vector<std::string> kFixtureModels = {"tiny-e",   "tiny-e2",   "tiny-dense",
                                                        "tiny-moe", "tiny-e-q4", "tiny-moe-q4"};
// A fixture's name as a gtest parameter name ("tiny-e-q4" -> "tiny_e_q4").
std::string FixtureTestName(std::string fixture);

// Writes `bytes` to `path` (created or truncated); a failed write fails the
// test.
void WriteFileBytes(const std::string& path, const std::string& bytes);
// `s` is an error of `code` whose message holds every needle.
void ExpectError(const Status& s, StatusCode code, std::initializer_list<std::string> needles);
// The same, and the message names its layer: `tag`, e.g. "[safetensors]".
void ExpectTaggedError(const std::string& tag, const Status& s, StatusCode code,
                       std::initializer_list<std::string> needles);

// Uniform floats in [lo, hi) from a seeded generator.
std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);
// Normal floats (mean, sigma) from a seeded generator.
std::vector<float> GaussianFloats(size_t n, uint32_t seed, float sigma = 1.0f, float mean = 0.0f);

// Runs `<build>/g4 ARGS` and captures its output and exit status.
struct G4Run {
  int exit_code = -1;
  bool signaled = false;
  std::string out;  // stdout only
  std::string all;  // stdout then stderr
};
G4Run RunG4(const std::string& args);
// What a run wrote to stderr.
inline std::string StderrOf(const G4Run& r) { return r.all.substr(r.out.size()); }
// The built g4 binary.
inline std::string G4Binary() { return BinaryDir() + "/g4"; }

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
