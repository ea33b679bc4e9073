// SPDX-License-Identifier: Apache-2.0
// systemd unit: systemd-analyze verify; ReadWritePaths of optional directories '-'-prefixed;
// the bounding set equals the DaemonSet's capabilities; Documentation= and ExecStart= name
// files `cmake --install` installs (installed into a DESTDIR here).
// (label deploy; also unit)
#include "deploy_helpers.h"

namespace {

using namespace colod::deploy_test;  // NOLINT(google-build-using-namespace): test-local helpers

// ---------------------------------------------------------------------------------------------
// systemd unit
// ---------------------------------------------------------------------------------------------

TEST(Unit, SystemdAnalyzeVerifyIsClean) {
  const std::string sa = which("systemd-analyze");
  if (sa.empty()) {
    GTEST_SKIP() << "systemd-analyze is not installed (Debian package systemd): cannot verify "
                    "deploy/colod.service";
  }
  TempDir tmp;
  ASSERT_TRUE(tmp.ok());
  // verify checks that ExecStart's binary exists: point it at this build's colod (where the
  // unit's own paths come from is checked by DocumentationAndBinariesAreWhatCmakeInstalls).
  std::string unit = readFile(kRoot / "deploy/colod.service");
  for (auto at = unit.find("/usr/local/bin/colod "); at != std::string::npos;
       at = unit.find("/usr/local/bin/colod ")) {
    unit.replace(at, std::string("/usr/local/bin/colod").size(), COLOD_BIN);
  }
  const auto path = tmp.path() / "colod.service";
  std::ofstream(path) << unit;
  const auto r = run({sa, "verify", "--man=no", path.string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const auto& line : splitLines(r.out + r.err)) {
    EXPECT_EQ(line.find("colod.service"), std::string::npos) << line;
  }
  // The check has teeth on this host: a wrong key is reported.
  std::ofstream(path) << unit << "\n[Service]\nCapabilityBoundingSett=CAP_BPF\n";
  const auto bad = run({sa, "verify", "--man=no", path.string()});
  EXPECT_NE((bad.out + bad.err).find("CapabilityBoundingSett"), std::string::npos)
      << "systemd-analyze verify did not report an unknown key: " << bad.out << bad.err;
}

TEST(Unit, OptionalDirectoriesAreDashPrefixedAndOwnOnesAreStateOrRuntimeDirectories) {
  const auto keys = unitKeys(readFile(kRoot / "deploy/colod.service"));
  const std::string state = "/var/lib/" + unitValue(keys, "StateDirectory");
  const std::string runtime = "/run/" + unitValue(keys, "RuntimeDirectory");
  EXPECT_EQ(state, "/var/lib/colod");
  EXPECT_EQ(runtime, "/run/colod");
  bool nri = false;
  for (auto [it, end] = keys.equal_range("ReadWritePaths"); it != end; ++it) {
    for (const auto& p : words(it->second)) {
      nri = nri || p == "-/var/run/nri";
      const bool own = p.rfind(state, 0) == 0 || p.rfind(runtime, 0) == 0;
      EXPECT_TRUE(p[0] == '-' || own)
          << p << ": a path that may not exist needs '-' or the unit fails with 226/NAMESPACE";
    }
  }
  EXPECT_TRUE(nri) << "ReadWritePaths=-/var/run/nri (the NRI socket) is missing";
}

TEST(Unit, CapabilityBoundingSetEqualsTheDaemonSets) {
  const auto keys = unitKeys(readFile(kRoot / "deploy/colod.service"));
  std::set<std::string> unit;
  for (const auto& c : words(unitValue(keys, "CapabilityBoundingSet"))) {
    unit.insert(c);
  }
  std::set<std::string> ds;
  for (const auto& c : daemonSetCapabilities()) {
    ds.insert("CAP_" + c);
  }
  EXPECT_EQ(unit, ds);
  EXPECT_EQ(unitValue(keys, "AmbientCapabilities"), "");
  EXPECT_EQ(unitValue(keys, "NoNewPrivileges"), "yes");
}

TEST(Unit, DoesNotRestartOnConfigErrors) {
  const auto keys = unitKeys(readFile(kRoot / "deploy/colod.service"));
  EXPECT_EQ(unitValue(keys, "RestartPreventExitStatus"), "3");
  EXPECT_EQ(unitValue(keys, "Restart"), "on-failure");
  EXPECT_NE(unitValue(keys, "ExecStartPre").find("--check-config"), std::string::npos);
  EXPECT_EQ(unitValue(keys, "WantedBy"), "multi-user.target");
}

TEST(Unit, DocumentationAndBinariesAreWhatCmakeInstallInstalls) {
  if (::access(kBuild.c_str(), W_OK) != 0) {
    GTEST_SKIP() << kBuild
                 << " is not writable by this user: cmake --install writes its "
                    "install_manifest_colod.txt there";
  }
  for (const std::string prefix : {"/usr/local", "/opt/colod"}) {
    SCOPED_TRACE(prefix);
    TempDir dest;
    ASSERT_TRUE(dest.ok());
    const auto r = run({COLOD_CMAKE_COMMAND, "--install", kBuild.string(), "--component", "colod",
                        "--prefix", prefix},
                       {"DESTDIR=" + dest.path().string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const fs::path& root = dest.path();
    const fs::path unit_file = root / (prefix.substr(1) + "/lib/systemd/system/colod.service");
    ASSERT_TRUE(fs::exists(unit_file)) << r.out;
    if (prefix == "/usr/local") {
      EXPECT_EQ(readFile(unit_file), readFile(kRoot / "deploy/colod.service"));
    }
    const auto keys = unitKeys(readFile(unit_file));
    const auto docs = words(unitValue(keys, "Documentation"));
    ASSERT_FALSE(docs.empty()) << "Documentation= lost";
    for (const auto& uri : docs) {
      ASSERT_EQ(uri.rfind("file://", 0), 0U)
          << uri << ": only installed files (no man page is installed)";
      EXPECT_TRUE(fs::exists(root / uri.substr(8))) << uri << " is not installed";
    }
    for (const char* key : {"ExecStart", "ExecStartPre"}) {
      const auto bin = words(unitValue(keys, key)).front();
      EXPECT_EQ(bin, prefix + "/bin/colod") << key;
      EXPECT_EQ(::access((root / bin.substr(1)).c_str(), X_OK), 0) << bin << " is not installed";
    }
    EXPECT_EQ(::access((root / (prefix.substr(1) + "/bin/coloctl")).c_str(), X_OK), 0);
  }
}

}  // namespace
