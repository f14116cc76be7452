// engine/model_locator: what -m resolves to, on Hugging Face cache trees
// built here the way `hf download` lays them out (refs/, snapshots/ with
// links into blobs/). The examples table of docs/models.md is read and
// every row checked against the tree the page describes.
#include "engine/model_locator.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "test_util.h"

namespace g4 {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A cache repo folder: snapshots (each with a config.json linked into
// blobs/, as the Hub cache stores files) and refs.
fs::path MakeRepo(const fs::path& root, const std::string& org, const std::string& name,
                  const std::vector<std::string>& commits, const std::vector<std::pair<std::string, std::string>>& refs) {
  const fs::path repo = root / ("models--" + org + "--" + name);
  for (const std::string& c : commits) {
    Write(repo / "blobs" / ("blob-" + c), "{\"model_type\": \"gemma4\", \"commit\": \"" + c + "\"}");
    fs::create_directories(repo / "snapshots" / c);
    fs::create_symlink("../../blobs/blob-" + c, repo / "snapshots" / c / "config.json");
  }
  for (const auto& [ref, commit] : refs) Write(repo / "refs" / ref, commit);
  return repo;
}

// Sets an environment variable for one test, restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* v = getenv(name)) old_ = v, had_ = true;
    if (value.empty()) unsetenv(name);
    else setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

const std::string kMain = "3c5a8f0e91d2b4a6c8e0f1a2b3c4d5e6f7a8b9c0";
const std::string kV11 = "9f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6";

TEST(ModelLocator, DocsExamplesResolveAsTheTableSays) {
  const fs::path root = fs::path(testing::MakeTempDir()) / "hub";
  MakeRepo(root, "google", "gemma-4-E2B-it", {kMain, kV11}, {{"main", kMain}, {"v1.1", kV11}});
  const fs::path doc = fs::path(__FILE__).parent_path() / "../../docs/models.md";
  std::ifstream in(doc);
  ASSERT_TRUE(in) << doc;
  std::stringstream text;
  text << in.rdbuf();
  // The page shows the same tree this test builds.
  ASSERT_NE(text.str().find("refs/main               " + kMain), std::string::npos);
  ASSERT_NE(text.str().find("refs/v1.1               " + kV11), std::string::npos);
  const std::string body = text.str();
  const size_t begin = body.find("<!-- resolution examples");
  const size_t end = body.find("<!-- end of resolution examples -->");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::regex row(R"(\| `([^`]+)` \| `([^`]+)` \|)");
  int rows = 0;
  const std::string table = body.substr(begin, end - begin);
  for (std::sregex_iterator it(table.begin(), table.end(), row), stop; it != stop; ++it) {
    const std::string spec = (*it)[1], expected = (*it)[2];
    StatusOr<LocatedModel> m = LocateModel(spec, {root.string()});
    ASSERT_TRUE(m.ok()) << spec << ": " << m.status().ToString();
    EXPECT_EQ(fs::path(m->dir), root / expected) << spec;
    EXPECT_EQ(m->repo_id, "google/gemma-4-E2B-it") << spec;
    ++rows;
  }
  EXPECT_GE(rows, 5);
}

TEST(ModelLocator, RefsMainPicksTheSnapshotAndRevisionsSelectOthers) {
  const fs::path root = fs::path(testing::MakeTempDir());
  MakeRepo(root, "org", "m", {"aaaaaaaa11", "bbbbbbbb22"}, {{"main", "bbbbbbbb22\n"}, {"pr/1", "aaaaaaaa11"}});
  auto main = LocateModel("org/m", {root.string()});
  ASSERT_TRUE(main.ok()) << main.status().ToString();
  EXPECT_EQ(fs::path(main->dir).filename(), "bbbbbbbb22");
  EXPECT_EQ(main->revision, "main");
  EXPECT_EQ(main->commit, "bbbbbbbb22");
  // The snapshot really is what the ref names: its config says so.
  std::ifstream cfg(fs::path(main->dir) / "config.json");
  std::string cfg_text((std::istreambuf_iterator<char>(cfg)), {});
  EXPECT_NE(cfg_text.find("bbbbbbbb22"), std::string::npos);
  auto pr = LocateModel("org/m@pr/1", {root.string()});
  ASSERT_TRUE(pr.ok()) << pr.status().ToString();
  EXPECT_EQ(fs::path(pr->dir).filename(), "aaaaaaaa11");
  // A prefix shared by no snapshot, an unknown ref, path tricks.
  for (const char* bad : {"org/m@cccccccc", "org/m@nope", "org/m@../../x"}) {
    auto r = LocateModel(bad, {root.string()});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("aaaaaaaa11"), std::string::npos) << r.status().message();
  }
}

TEST(ModelLocator, AmbiguousPrefixAndMissingSnapshotAreErrors) {
  const fs::path root = fs::path(testing::MakeTempDir());
  MakeRepo(root, "org", "m", {"abcdef0011", "abcdef0022"}, {{"main", "ffffffff99"}});
  auto ambiguous = LocateModel("org/m@abcdef0", {root.string()});
  ASSERT_FALSE(ambiguous.ok());
  EXPECT_NE(ambiguous.status().message().find("several"), std::string::npos) << ambiguous.status().message();
  // refs/main names a commit whose snapshot is gone (an interrupted download).
  auto gone = LocateModel("org/m", {root.string()});
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("ffffffff99"), std::string::npos) << gone.status().message();
}

TEST(ModelLocator, WithoutRefsMainOnlyASingleSnapshotIsUsed) {
  const fs::path root = fs::path(testing::MakeTempDir());
  MakeRepo(root, "org", "one", {"1111111"}, {});
  MakeRepo(root, "org", "two", {"1111111", "2222222"}, {});
  auto one = LocateModel("org/one", {root.string()});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(fs::path(one->dir).filename(), "1111111");
  auto two = LocateModel("org/two", {root.string()});
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("2 snapshots"), std::string::npos) << two.status().message();
}

TEST(ModelLocator, DirectoriesWinAndMissingThingsSayWhatToDo) {
  const fs::path tmp = fs::path(testing::MakeTempDir());
  const fs::path root = tmp / "hub";
  MakeRepo(root, "org", "m", {"1234567"}, {{"main", "1234567"}});
  // A directory named like a repo id is taken as the directory.
  fs::create_directories(tmp / "org" / "m");
  const fs::path cwd = fs::current_path();
  fs::current_path(tmp);
  auto local = LocateModel("org/m", {root.string()});
  fs::current_path(cwd);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->dir, "org/m");
  EXPECT_TRUE(local->repo_id.empty());

  auto missing_dir = LocateModel((tmp / "nothing").string(), {root.string()});
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_EQ(missing_dir.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing_dir.status().message().find("no such model directory"), std::string::npos);

  auto uncached = LocateModel("google/gemma-4-E4B-it", {root.string()});
  ASSERT_FALSE(uncached.ok());
  EXPECT_EQ(uncached.status().code(), StatusCode::kNotFound);
  EXPECT_NE(uncached.status().message().find("hf download google/gemma-4-E4B-it"), std::string::npos);
  EXPECT_NE(uncached.status().message().find(root.string()), std::string::npos);
}

TEST(ModelLocator, RepoIdShapes) {
  for (const char* good : {"google/gemma-4-E2B-it", "mlx-community/gemma-4-e4b-it-4bit", "a/b@main", "a_b/c.d@v1.1",
                           "org/name@pr/1"})
    EXPECT_TRUE(LooksLikeRepoId(good)) << good;
  for (const char* bad : {"", "name", "/abs/path", "./rel/x", "a/b/c", "a/", "/b", "a/b@", "../x", "a/..", "a b/c"})
    EXPECT_FALSE(LooksLikeRepoId(bad)) << bad;
  EXPECT_EQ(RepoIdFromCacheFolder("models--google--gemma-4-E2B-it"), "google/gemma-4-E2B-it");
  EXPECT_EQ(RepoIdFromCacheFolder("datasets--a--b"), "");
  EXPECT_EQ(RepoIdFromCacheFolder("models--nodash"), "");
}

TEST(ModelLocator, CacheRootsFollowTheHuggingFaceVariablesInOrder) {
  const fs::path tmp = fs::path(testing::MakeTempDir());
  for (const char* d : {"hubcache", "hfhome/hub", "xdg/huggingface/hub", "home/.cache/huggingface/hub"})
    fs::create_directories(tmp / d);
  ScopedEnv a("HF_HUB_CACHE", (tmp / "hubcache").string());
  ScopedEnv b("HF_HOME", (tmp / "hfhome").string());
  ScopedEnv c("XDG_CACHE_HOME", (tmp / "xdg").string());
  ScopedEnv d("HOME", (tmp / "home").string());
  const std::vector<std::string> roots = HfCacheRoots();
  ASSERT_EQ(roots.size(), 4u);
  EXPECT_EQ(fs::path(roots[0]), tmp / "hubcache");
  EXPECT_EQ(fs::path(roots[1]), tmp / "hfhome/hub");
  EXPECT_EQ(fs::path(roots[2]), tmp / "xdg/huggingface/hub");
  EXPECT_EQ(fs::path(roots[3]), tmp / "home/.cache/huggingface/hub");
  // The first root holding the repo wins; later ones are searched when it does not.
  MakeRepo(tmp / "hfhome/hub", "org", "m", {"2222222"}, {{"main", "2222222"}});
  MakeRepo(tmp / "home/.cache/huggingface/hub", "org", "m", {"4444444"}, {{"main", "4444444"}});
  auto m = LocateModel("org/m");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(fs::path(m->dir).filename(), "2222222");
  EXPECT_EQ(fs::path(m->cache_root), tmp / "hfhome/hub");
  // Unset and missing roots are skipped.
  ScopedEnv e("HF_HUB_CACHE", "");
  ScopedEnv f("XDG_CACHE_HOME", (tmp / "does-not-exist").string());
  EXPECT_EQ(HfCacheRoots().size(), 2u);
}

}  // namespace
}  // namespace g4
