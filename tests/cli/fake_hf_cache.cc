#include "fake_hf_cache.h"

#include <filesystem>
#include <fstream>

namespace g4::testing {

namespace fs = std::filesystem;

std::string AddToFakeCache(const std::string& root, const std::string& org, const std::string& name,
                           const std::string& commit, const std::string& model_dir, bool move) {
  const fs::path repo = fs::path(root) / ("models--" + org + "--" + name);
  const fs::path snap = repo / "snapshots" / commit;
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "refs");
  fs::create_directories(snap);
  int n = 0;
  for (const auto& entry : fs::directory_iterator(model_dir)) {
    if (!entry.is_regular_file()) continue;
    // Blob names are content hashes in a real cache; unique names do here.
    const std::string blob = commit + "-" + std::to_string(n++);
    if (move) fs::rename(entry.path(), repo / "blobs" / blob);
    else fs::copy_file(entry.path(), repo / "blobs" / blob);
    fs::create_symlink("../../blobs/" + blob, snap / entry.path().filename());
  }
  std::ofstream(repo / "refs" / "main") << commit;
  return snap.string();
}

unsigned long long DirectoryBytes(const std::string& dir) {
  unsigned long long total = 0;
  for (const auto& entry : fs::directory_iterator(dir))
    if (fs::is_regular_file(entry.path())) total += fs::file_size(entry.path());
  return total;
}

}  // namespace g4::testing
