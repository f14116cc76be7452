// Flags people type from habit with other tools (llama.cpp, mlx_lm,
// ollama) that g4 spells differently or does not need. A command refuses
// them before parsing, with a hint, instead of letting the parser misread
// them (`-ngl 99` would otherwise be `-n gl`).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace g4::cli {

// The hint for `flag` (as typed, "--flag=value" allowed), e.g. for "-ngl":
// "GPU offload: use --backend cuda (the whole model runs on the GPU)";
// nullopt when the flag is not one of them.
std::optional<std::string> ForeignFlagHint(std::string_view flag);

}  // namespace g4::cli
