// Helpers the io tests share: parsing a config or a safetensors image that
// must succeed or whose failure the test inspects.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "io/config.h"
#include "io/safetensors.h"

namespace g4::testing {

// `j` parsed as a config.json; a failure fails the test (and gives a
// default config).
inline Gemma4Config ParseConfigOk(const nlohmann::json& j) {
  StatusOr<Gemma4Config> c = ParseGemma4Config(j.dump());
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : Gemma4Config{};
}

// A safetensors file held in memory (`image`), parsed under the name "test.st".
inline StatusOr<std::unique_ptr<SafetensorsFile>> ParseSafetensorsImage(const std::string& image) {
  return SafetensorsFile::Parse(reinterpret_cast<const uint8_t*>(image.data()), image.size(), "test.st");
}

}  // namespace g4::testing
