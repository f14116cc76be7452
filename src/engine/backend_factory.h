// Picking a backend by name: "cpu", "cuda", or "auto" (cuda when this build
// has it and a GPU is present, else cpu).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "core/status.h"

namespace g4 {

StatusOr<std::unique_ptr<Backend>> MakeBackend(const std::string& name);

}  // namespace g4
