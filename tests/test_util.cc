#include "test_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>

namespace g4::testing {

// Both default to the build tree; the environment may point elsewhere (test
// binaries carried to another machine with their data: scripts/gpu-run.sh).
std::string TestDataPath(const std::string& relative) {
  const char* env = std::getenv("G4_TESTDATA");
  return std::string(env && *env ? env : G4_TESTDATA) + "/" + relative;
}

std::string BinaryDir() {
  const char* env = std::getenv("G4_BINARY_DIR");
  return env && *env ? env : G4_BINARY_DIR;
}

std::string DemoModelDir() {
  const char* repo = std::getenv("G4_REPO_DIR");
  return std::string(repo && *repo ? repo : G4_SOURCE_DIR) + "/models/demo";
}

std::string FixtureTestName(std::string fixture) {
  std::replace(fixture.begin(), fixture.end(), '-', '_');
  return fixture;
}

void WriteFileBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

void ExpectTaggedError(const std::string& tag, const Status& s, StatusCode code,
                       std::initializer_list<std::string> needles) {
  ASSERT_FALSE(s.ok()) << "expected failure containing " << (needles.size() ? *needles.begin() : tag);
  EXPECT_EQ(s.code(), code) << s.ToString();
  if (!tag.empty()) {
    EXPECT_NE(s.message().find(tag), std::string::npos) << s.ToString();
  }
  for (const std::string& n : needles) EXPECT_NE(s.message().find(n), std::string::npos) << s.ToString();
}

void ExpectError(const Status& s, StatusCode code, std::initializer_list<std::string> needles) {
  ExpectTaggedError("", s, code, needles);
}

namespace {

// The directories MakeTempDir made in this process, removed at its exit.
// Test binaries call MakeTempDir hundreds of times per run, so without this
// every CI run left thousands in /tmp.
class TempDirRegistry {
 public:
  ~TempDirRegistry() {
    if (getpid() != owner_) return;  // a forked child exiting: the parent's directories stay
    for (const std::string& d : dirs_) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);  // best effort: nothing to report to at exit
    }
  }
  void Add(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_.push_back(dir);
  }

 private:
  const pid_t owner_ = getpid();
  std::mutex mu_;
  std::vector<std::string> dirs_;
};

}  // namespace

std::string MakeTempDir() {
  static TempDirRegistry registry;
  std::string tmpl = (std::filesystem::temp_directory_path() / "g4test-XXXXXX").string();
  char* p = mkdtemp(tmpl.data());
  if (p == nullptr) return std::string();
  registry.Add(p);
  return p;
}

G4Run RunG4(const std::string& args) {
  G4Run r;
  // One directory per command, removed as soon as its stderr is read: a test
  // binary runs hundreds of commands and should not hold their files to exit.
  const std::string dir = MakeTempDir();
  if (dir.empty()) {
    r.all = "RunG4: could not make a temporary directory for stderr";
    return r;
  }
  const std::string err = dir + "/stderr";
  const std::string cmd = BinaryDir() + "/g4 " + args + " 2>" + err;
  FILE* p = popen(cmd.c_str(), "r");
  if (p) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = pclose(p);
    r.signaled = WIFSIGNALED(status);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream e(err);
    r.all = r.out + std::string(std::istreambuf_iterator<char>(e), {});
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return r;
}

namespace {

// n draws of `dist` from a generator seeded with `seed`.
template <typename Dist>
std::vector<float> Draws(size_t n, uint32_t seed, Dist dist) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace

std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo, float hi) {
  return Draws(n, seed, std::uniform_real_distribution<float>(lo, hi));
}

std::vector<float> GaussianFloats(size_t n, uint32_t seed, float sigma, float mean) {
  return Draws(n, seed, std::normal_distribution<float>(mean, sigma));
}

std::string Mismatch::ToString() const {
  std::ostringstream s;
  s << "max |diff| " << max_abs_diff << " at index " << worst_index << " (expected " << expected
    << ", got " << actual << ")";
  return s.str();
}

double RelativeRms(const float* expected, const float* actual, size_t n) {
  double diff2 = 0, norm2 = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(actual[i]) - expected[i];
    diff2 += d * d;
    norm2 += static_cast<double>(expected[i]) * expected[i];
  }
  return std::sqrt(diff2 / norm2);
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
