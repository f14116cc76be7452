// Model locator: turns what a user types after -m into a checkpoint
// directory. Accepted, in this order:
//
//  1. An existing directory (relative or absolute): used as it is.
//  2. A Hugging Face repo id, ORG/NAME, optionally @REV: looked up in the
//     local Hugging Face cache, the tree `hf download` (huggingface_hub)
//     writes:
//       ROOT/models--ORG--NAME/refs/main          the commit `main` points at
//       ROOT/models--ORG--NAME/snapshots/COMMIT/  the files (symlinks into blobs/)
//     Without @REV the commit of refs/main is used (or the only snapshot when
//     there is no refs/main). REV may be a ref name (refs/REV: a branch or
//     tag), a full commit hash, or a unique prefix of one (7+ hex digits).
//     The repo folder is matched exactly first, then ignoring case (the Hub
//     treats ids case-insensitively; the cache keeps the case the download
//     used).
//
// Cache roots searched, first hit wins (the variables huggingface_hub reads):
//   $HF_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub,
//   $HOME/.cache/huggingface/hub
// Unset variables and missing folders are skipped.
//
// Nothing is downloaded: a repo id that is not in the cache is a NotFound
// error that names the roots searched and the command that downloads it.
// docs/models.md describes this for users; its examples are tested.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace g4 {

struct LocatedModel {
  std::string dir;       // the checkpoint directory to load
  std::string repo_id;   // ORG/NAME when found in the cache, else empty
  std::string revision;  // what selected the snapshot: "main", a ref, a hash (cache only)
  std::string commit;    // the snapshot folder's name (cache only)
  std::string cache_root;
};

// The cache roots above that exist, in search order, without duplicates.
std::vector<std::string> HfCacheRoots();

// True when `spec` has the shape of ORG/NAME[@REV] (names of letters,
// digits, '-', '_', '.'), whether or not it exists.
bool LooksLikeRepoId(const std::string& spec);

// Resolves `spec` as described above. Errors start with "[model]":
// NotFound for a missing directory or an uncached repo; InvalidArgument for
// an unknown revision or a cache folder without a usable snapshot.
StatusOr<LocatedModel> LocateModel(const std::string& spec);

// The same against explicit roots (tests, and `g4 models` with --cache).
StatusOr<LocatedModel> LocateModel(const std::string& spec, const std::vector<std::string>& roots);

// "models--ORG--NAME" -> "ORG/NAME"; empty when `folder` is not a model repo
// folder of the cache.
std::string RepoIdFromCacheFolder(const std::string& folder);

}  // namespace g4
