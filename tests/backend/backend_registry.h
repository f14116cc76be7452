// The backends the backend test suite runs against, by name. Every op test
// is parameterized over BackendNames() (INSTANTIATE_TEST_SUITE_P(Backends,
// ..., BackendValues())), so a backend added here inherits every check.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/backend.h"

namespace g4::testing {

struct BackendFactory {
  std::string name;
  std::unique_ptr<Backend> (*make)();
};

// {"cpu", MakeCpuBackend} (the kernels the backend picks), then every other
// CPU kernel variant this machine runs ("cpu_avx512", "cpu_avx2",
// "cpu_baseline"), then "cuda" in a G4_WITH_CUDA build.
const std::vector<BackendFactory>& RegisteredBackends();
std::vector<std::string> BackendNames();
// A fresh backend; fails the test (and returns null) for an unknown name.
std::unique_ptr<Backend> MakeBackend(const std::string& name);

// For INSTANTIATE_TEST_SUITE_P: the names as generator values, and a test
// name suffix (the backend's name).
inline auto BackendValues() { return ::testing::ValuesIn(BackendNames()); }
inline std::string BackendParamName(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

}  // namespace g4::testing
