// The chat page served at "/" (web/index.html, embedded at build time by
// cmake/embed_file.cmake: one self-contained HTML file, no external assets).
#pragma once

#include <string_view>

namespace g4::server {

std::string_view ChatPageHtml();

}  // namespace g4::server
