// SPDX-License-Identifier: Apache-2.0
// Image: the runtime stage's packages cover the shared-library closure of every binary the
// image ships (ldd -> dpkg -S on the binaries of this build); the build stage's packages cover
// what configuring the tree with the image's options finds (a real configure -> dpkg -S).
// (label deploy; also unit)
#include "deploy_helpers.h"

namespace {

using namespace colod::deploy_test;  // NOLINT(google-build-using-namespace): test-local helpers

// ---------------------------------------------------------------------------------------------
// Image
// ---------------------------------------------------------------------------------------------

TEST(Image, RuntimeStageCoversTheSharedLibraryClosureOfEveryShippedBinary) {
  std::string why;
  if (!haveDpkgTools(why)) {
    GTEST_SKIP() << why;
  }
  const auto stages = containerfileStages();
  const Stage* build = buildStage(stages);
  ASSERT_NE(build, nullptr) << "no `FROM ... AS build` stage";
  const Stage& runtime = stages.back();
  ASSERT_NE(&runtime, build);
  const auto shipped = shippedFromBuild(*build);
  std::set<std::string> dests;
  for (const auto& s : shipped) {
    dests.insert(fs::path(s.second).filename().string());
  }
  ASSERT_TRUE(dests.count("colod") && dests.count("coloctl")) << "the image ships no colod/coloctl";
  EXPECT_NE(runtime.text.find("COPY --from=build /out/ /"), std::string::npos);

  const PackageDb db = loadPackageDb();
  ASSERT_TRUE(db.error.empty()) << db.error;
  const auto listed = aptPackages(runtime);
  ASSERT_FALSE(listed.empty());
  for (const auto& p : listed) {
    EXPECT_TRUE(p.size() < 4 || (p.compare(p.size() - 4, 4, "-dev") != 0 &&
                                 p.compare(p.size() - 4, 4, "-dbg") != 0))
        << p << ": the runtime stage takes the runtime library package, not -dev/-dbg";
    EXPECT_TRUE(db.installed(p)) << p
                                 << " is not a package this Debian host has installed (the "
                                    "image's release): wrong name or version suffix?";
  }
  const auto covered = db.closure(listed);

  std::map<std::string, std::string> lib_from;  // library path -> a binary linking it
  for (const auto& [rel, dest] : shipped) {
    const fs::path bin = kBuild / rel;
    ASSERT_TRUE(fs::exists(bin)) << bin << " (shipped as " << dest
                                 << ") is not built: cmake --build build --target colod coloctl";
    const auto l = ldd(bin);
    ASSERT_TRUE(l.error.empty()) << bin << ": " << l.error;
    EXPECT_TRUE(l.missing.empty())
        << bin << " links libraries this host lacks: " << l.missing.front();
    EXPECT_GE(l.libs.size(), 5U) << bin << ": ldd found too few libraries to be right";
    for (const auto& lib : l.libs) {
      lib_from.emplace(lib, dest);
    }
  }
  std::set<std::string> candidates;
  for (const auto& [lib, from] : lib_from) {
    for (const auto& c : dpkgCandidates(lib)) {
      candidates.insert(c);
    }
  }
  const auto owners = dpkgOwners(candidates);
  for (const auto& [lib, from] : lib_from) {
    const auto own = ownersOf(lib, owners);
    if (own.empty()) {
      ADD_FAILURE() << from << " links " << lib << ", which no Debian package provides";
      continue;
    }
    const bool ok = std::any_of(own.begin(), own.end(),
                                [&](const std::string& p) { return covered.count(p) != 0U; });
    EXPECT_TRUE(ok) << from << " links " << lib << " from package " << joined(own)
                    << ", which the runtime stage neither installs nor pulls in through "
                       "Depends: add it to the runtime stage's apt-get install";
  }
}

TEST(Image, BuildStageInstallsWhatConfiguringTheTreeWithItsOptionsFinds) {
  std::string why;
  if (!haveDpkgTools(why)) {
    GTEST_SKIP() << why;
  }
  const auto stages = containerfileStages();
  const Stage* build = buildStage(stages);
  ASSERT_NE(build, nullptr);
  const auto options = cmakeConfigureOptions(*build);
  ASSERT_FALSE(options.empty()) << "no `cmake -S ... -D...` configure in the build stage";
  const auto listed = aptPackages(*build);
  // Configuring the tree adds nri/testpeer, which needs Go, unless it is turned off.
  const bool testpeer_off =
      std::find(options.begin(), options.end(), "-DCOLOD_TESTPEER=OFF") != options.end();
  EXPECT_TRUE(testpeer_off || std::find(listed.begin(), listed.end(), "golang-go") != listed.end())
      << "the build stage configures the Go test peer without installing golang-go";

  // Configure the tree the way the image does and see what CMake found.
  TempDir tmp;
  ASSERT_TRUE(tmp.ok());
  std::vector<std::string> argv{COLOD_CMAKE_COMMAND, "-S", kRoot.string(), "-B",
                                (tmp.path() / "build").string()};
  argv.insert(argv.end(), options.begin(), options.end());
  const auto r = run(argv);
  ASSERT_EQ(r.exit_code, 0) << "configuring with the image's options failed:\n" << r.out << r.err;
  std::map<std::string, std::string> found;  // cache entry -> path
  for (const auto& line : splitLines(readFile(tmp.path() / "build/CMakeCache.txt"))) {
    std::smatch m;
    if (!std::regex_match(line, m, std::regex(R"(([^/#:]+):(FILEPATH|PATH)=(/.*))"))) {
      continue;
    }
    const std::string name = m[1];
    const std::string value = m[3];
    // git is optional: it only adds `git describe` to the version line (base/CMakeLists.txt),
    // and the image's build context has no .git (.containerignore) for it to describe.
    if (name == "GIT_EXECUTABLE") {
      continue;
    }
    if (name == "CMAKE_INSTALL_PREFIX" || value.find("NOTFOUND") != std::string::npos ||
        value.rfind(kRoot.string(), 0) == 0 || value.rfind(tmp.path().string(), 0) == 0 ||
        value.rfind("/sys/", 0) == 0 || value.rfind("/proc/", 0) == 0 || !fs::exists(value)) {
      continue;
    }
    found[name] = value;
  }
  ASSERT_GE(found.size(), 10U) << "CMakeCache.txt has too few tool/library paths to be right";

  const PackageDb db = loadPackageDb();
  ASSERT_TRUE(db.error.empty()) << db.error;
  for (const auto& p : listed) {
    EXPECT_TRUE(db.installed(p)) << p << " is not installed on this Debian host";
  }
  const auto covered = db.closure(listed);
  std::set<std::string> candidates;
  for (const auto& [name, path] : found) {
    for (const auto& c : dpkgCandidates(path)) {
      candidates.insert(c);
    }
  }
  const auto owners = dpkgOwners(candidates);
  for (const auto& [name, path] : found) {
    const auto own = ownersOf(path, owners);
    if (own.empty()) {
      ADD_FAILURE() << "configuring found " << name << "=" << path
                    << ", which no Debian package provides";
      continue;
    }
    const bool ok = std::any_of(own.begin(), own.end(),
                                [&](const std::string& p) { return covered.count(p) != 0U; });
    EXPECT_TRUE(ok) << "configuring with the image's options finds " << name << "=" << path
                    << " from " << joined(own) << ", which the build stage does not install"
                    << (own.count("golang-go") != 0U ? " (or pass -DCOLOD_TESTPEER=OFF)" : "");
  }
}

TEST(Image, BuildPackagesAreOnesInstallDepsKnows) {
  const auto stages = containerfileStages();
  const Stage* build = buildStage(stages);
  ASSERT_NE(build, nullptr);
  const auto pkgs = aptPackages(*build);
  ASSERT_GE(pkgs.size(), 10U);
  const std::string deps = readFile(kRoot / "scripts/install-deps.sh");
  for (const auto& p : pkgs) {
    // Whole-word match in the package list.
    const bool known = deps.find(" " + p + " ") != std::string::npos ||
                       deps.find(" " + p + "\n") != std::string::npos;
    EXPECT_TRUE(known) << p << " is built with in the image but not in install-deps.sh";
  }
}

TEST(Image, ContextExcludesBuildTreesAndGit) {
  const std::string ignore = readFile(kRoot / ".containerignore");
  std::set<std::string> patterns;
  for (const auto& line : splitLines(ignore)) {
    if (!trim(line).empty() && trim(line)[0] != '#') {
      patterns.insert(trim(line));
    }
  }
  EXPECT_TRUE(patterns.count("build*/")) << ".containerignore must exclude build*/";
  EXPECT_TRUE(patterns.count(".git")) << ".containerignore must exclude .git";
  for (const auto& p : patterns) {
    EXPECT_EQ(p.find('!'), std::string::npos) << "no re-includes: " << p;
    EXPECT_NE(p, "deploy") << "the image copies deploy/render-config.sh";
  }
  // docker reads the Containerfile-specific copy; they must not drift apart.
  EXPECT_EQ(readFile(kRoot / "deploy/Containerfile.dockerignore"), ignore);
}

}  // namespace
