#include "engine/model_locator.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "core/file_read.h"

namespace g4 {
namespace {

namespace fs = std::filesystem;

bool IsDir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::string();
}

bool NameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; }

bool ValidName(std::string_view s) {
  return !s.empty() && s != "." && s != ".." && std::all_of(s.begin(), s.end(), NameChar);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool IsHex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// The first line of a refs/ file (a commit hash), trimmed; empty when absent.
std::string ReadRef(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

std::vector<std::string> Snapshots(const fs::path& repo) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(repo / "snapshots", ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The repo folder for ORG/NAME under `root`: exact name, else the one
// folder whose name matches ignoring case.
std::string FindRepoFolder(const std::string& root, const std::string& org, const std::string& name) {
  const std::string want = "models--" + org + "--" + name;
  if (IsDir(root + "/" + want)) return root + "/" + want;
  const std::string lower = Lower(want);
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string f = it->path().filename().string();
    if (Lower(f) == lower && it->is_directory(ec)) return it->path().string();
  }
  return "";
}

std::string JoinList(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : ", ") + i;
  return s.empty() ? "none" : s;
}

// Picks the snapshot of `repo` that `rev` names (empty: main).
StatusOr<LocatedModel> PickSnapshot(const std::string& spec, const std::string& repo, const std::string& rev) {
  const fs::path base(repo);
  const std::vector<std::string> snaps = Snapshots(base);
  LocatedModel m;
  m.revision = rev.empty() ? "main" : rev;
  auto found = [&](const std::string& commit) -> StatusOr<LocatedModel> {
    if (std::find(snaps.begin(), snaps.end(), commit) == snaps.end())
      return InvalidArgument("[model] " + spec + ": " + m.revision + " points at " + commit +
                             ", which is not in " + (base / "snapshots").string() +
                             " (an interrupted download? fetch it again)");
    m.commit = commit;
    m.dir = (base / "snapshots" / commit).string();
    return m;
  };
  // A ref (branch or tag name; refs may hold slashes, e.g. refs/pr/1).
  if (rev.find("..") == std::string::npos) {
    const std::string ref = ReadRef(base / "refs" / m.revision);
    if (!ref.empty()) return found(ref);
  }
  if (rev.empty()) {
    if (snaps.size() == 1) return found(snaps[0]);
    return InvalidArgument("[model] " + spec + ": " + repo + " has no refs/main and " +
                           (snaps.empty() ? std::string("no snapshots") : std::to_string(snaps.size()) + " snapshots (" +
                                                                             JoinList(snaps) + ")") +
                           "; name one with " + spec + "@COMMIT");
  }
  if (std::find(snaps.begin(), snaps.end(), rev) != snaps.end()) return found(rev);
  if (IsHex(rev) && rev.size() >= 7) {
    std::vector<std::string> hits;
    for (const std::string& s : snaps)
      if (s.rfind(rev, 0) == 0) hits.push_back(s);
    if (hits.size() == 1) return found(hits[0]);
    if (hits.size() > 1)
      return InvalidArgument("[model] " + spec + ": " + rev + " matches several snapshots (" + JoinList(hits) + ")");
  }
  std::vector<std::string> refs;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(base / "refs", ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) refs.push_back(fs::relative(it->path(), base / "refs", ec).string());
  std::sort(refs.begin(), refs.end());
  return InvalidArgument("[model] " + spec + ": no revision " + rev + " in " + repo + " (refs: " + JoinList(refs) +
                         "; snapshots: " + JoinList(snaps) + ")");
}

}  // namespace

std::vector<std::string> HfCacheRoots() {
  std::vector<std::string> candidates;
  if (std::string v = Env("HF_HUB_CACHE"); !v.empty()) candidates.push_back(v);
  if (std::string v = Env("HF_HOME"); !v.empty()) candidates.push_back(v + "/hub");
  if (std::string v = Env("XDG_CACHE_HOME"); !v.empty()) candidates.push_back(v + "/huggingface/hub");
  if (std::string v = Env("HOME"); !v.empty()) candidates.push_back(v + "/.cache/huggingface/hub");
  std::vector<std::string> roots;
  std::vector<std::string> seen;
  for (const std::string& c : candidates) {
    if (!IsDir(c)) continue;
    std::error_code ec;
    const std::string canon = fs::weakly_canonical(c, ec).string();
    const std::string key = ec ? c : canon;
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    roots.push_back(c);
  }
  return roots;
}

bool LooksLikeRepoId(const std::string& spec) {
  const size_t at = spec.find('@');
  const std::string id = spec.substr(0, at);
  if (at != std::string::npos && at + 1 == spec.size()) return false;  // "org/name@"
  const size_t slash = id.find('/');
  if (slash == std::string::npos || id.find('/', slash + 1) != std::string::npos) return false;
  return ValidName(std::string_view(id).substr(0, slash)) && ValidName(std::string_view(id).substr(slash + 1));
}

StatusOr<LocatedModel> LocateModel(const std::string& spec) { return LocateModel(spec, HfCacheRoots()); }

StatusOr<LocatedModel> LocateModel(const std::string& spec, const std::vector<std::string>& roots) {
  if (spec.empty()) return InvalidArgument("[model] no model given");
  if (IsDir(spec)) {
    LocatedModel m;
    m.dir = spec;
    return m;
  }
  // Something there that is not a directory (a file, a symlink loop) is named
  // as what it is, not reported missing.
  StatusOr<PathType> type = StatPath(spec);
  if (!type.ok()) return Status(type.status().code(), "[model] " + type.status().message());
  if (*type != PathType::kMissing)
    return InvalidArgument("[model] " + spec + " is not a directory (a model is a checkpoint directory or ORG/NAME)");
  if (!LooksLikeRepoId(spec)) return NotFound("[model] " + spec + ": no such model directory");
  const size_t at = spec.find('@');
  const std::string id = spec.substr(0, at);
  const std::string rev = at == std::string::npos ? "" : spec.substr(at + 1);
  const size_t slash = id.find('/');
  const std::string org = id.substr(0, slash), name = id.substr(slash + 1);
  for (const std::string& root : roots) {
    const std::string repo = FindRepoFolder(root, org, name);
    if (repo.empty()) continue;
    G4_ASSIGN_OR_RETURN(LocatedModel m, PickSnapshot(spec, repo, rev));
    m.repo_id = RepoIdFromCacheFolder(fs::path(repo).filename().string());
    m.cache_root = root;
    return m;
  }
  return NotFound("[model] " + spec + ": not a directory, and " + id +
                  " is not in the Hugging Face cache (searched: " + JoinList(roots) +
                  "). Download it with: hf download " + id + (rev.empty() ? "" : " --revision " + rev) +
                  " (docs/models.md; g4 models lists what the cache holds)");
}

std::string RepoIdFromCacheFolder(const std::string& folder) {
  const std::string prefix = "models--";
  if (folder.rfind(prefix, 0) != 0) return "";
  const std::string rest = folder.substr(prefix.size());
  const size_t sep = rest.find("--");
  if (sep == std::string::npos || sep == 0 || sep + 2 >= rest.size()) return "";
  return rest.substr(0, sep) + "/" + rest.substr(sep + 2);
}

}  // namespace g4
