// The release build runs on any x86-64-v2 CPU (backend/cpu/isa.h): no
// instruction an x86-64-v2 CPU lacks outside the AVX2 / AVX-512 kernel
// variants (scripts/check-isa.py over the built g4), and G4_CPU picks the
// kernels `g4 bench` reports.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "test_util.h"

namespace g4 {
namespace {

TEST(PortableBinaryTest, NoAvxOutsideTheKernelVariants) {
#if defined(G4_NATIVE_BUILD)
  GTEST_SKIP() << "G4_NATIVE=ON builds target this CPU only";
#elif defined(G4_SANITIZED_BUILD)
  GTEST_SKIP() << "checks the shipped build; a sanitizer build's g4 carries the sanitizer runtimes";
#else
  if (std::system("command -v objdump > /dev/null && command -v python3 > /dev/null") != 0)
    GTEST_SKIP() << "needs objdump and python3";
  const std::string cmd = std::string("python3 ") + G4_SOURCE_DIR + "/scripts/check-isa.py " +
                          testing::BinaryDir() + "/g4 > " + testing::MakeTempDir() + "/isa.txt 2>&1";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see scripts/check-isa.py " << testing::BinaryDir() << "/g4";
#endif
}

// G4_CPU for the g4 processes this test starts.
class ScopedG4Cpu {
 public:
  explicit ScopedG4Cpu(const std::string& value) { setenv("G4_CPU", value.c_str(), 1); }
  ~ScopedG4Cpu() { unsetenv("G4_CPU"); }
};

TEST(PortableBinaryTest, G4CpuPicksTheKernelsBenchReports) {
  const std::string model = testing::TestDataPath("models/tiny-e");
  const std::string bench = "bench --model " + model + " --prompt 3 --gen 2 --memcpy-mib 0";
  const std::string best = CpuKernelsName(AutoCpuKernels());  // before G4_CPU is set here
  for (CpuKernels k : {CpuKernels::kAvx512, CpuKernels::kAvx2, CpuKernels::kBaseline}) {
    if (!CpuKernelsSupported(k)) continue;
    const std::string name = CpuKernelsName(k);
    ScopedG4Cpu env(name);
    const testing::G4Run r = testing::RunG4(bench);
    ASSERT_EQ(r.exit_code, 0) << r.all;
    EXPECT_NE(r.out.find("cpu: " + name + " kernels"), std::string::npos) << r.out;
  }
  // An unknown name is ignored with a warning: the best kernels run.
  ScopedG4Cpu env("sse9");
  const testing::G4Run r = testing::RunG4(bench);
  ASSERT_EQ(r.exit_code, 0) << r.all;
  EXPECT_NE(r.all.find("G4_CPU=sse9 is not one of"), std::string::npos) << r.all;
  EXPECT_NE(r.out.find("cpu: " + best + " kernels"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace g4
