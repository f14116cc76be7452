// Fake Hugging Face caches for tests: the tree `hf download` writes
// (models--ORG--NAME/{blobs,refs,snapshots}), files stored once in blobs/
// and linked from the snapshot, refs/main naming the snapshot.
#pragma once

#include <string>

namespace g4::testing {

// Puts the files of `model_dir` into `root` as ORG/NAME at `commit`,
// moving them (`move`) or copying them. Returns the snapshot directory.
std::string AddToFakeCache(const std::string& root, const std::string& org, const std::string& name,
                           const std::string& commit, const std::string& model_dir, bool move = false);

// Sum of the sizes of the regular files (links followed) in `dir`.
unsigned long long DirectoryBytes(const std::string& dir);

}  // namespace g4::testing
