// Where this build's tree and the source tree are, for tests that run the build's programs
// or read the tree's files. The paths live in one translation unit, test_paths.cc, which
// CMake makes from test_paths.cc.in: no other compile names the checkout's directory, so a
// compiler cache keyed by relative paths serves a fresh clone elsewhere for every other
// file.

#ifndef SNOWFLAKE_TESTS_SUPPORT_TEST_PATHS_H_
#define SNOWFLAKE_TESTS_SUPPORT_TEST_PATHS_H_

#include <string>
#include <string_view>

namespace snowflake::testing {

extern const char* const kBinaryDir;  // the build directory (PROJECT_BINARY_DIR), absolute
extern const char* const kSourceDir;  // the source tree (PROJECT_SOURCE_DIR), absolute

// kBinaryDir, or kBinaryDir "/" relative.
inline std::string BinaryPath(std::string_view relative = {}) {
  std::string path = kBinaryDir;
  if (!relative.empty()) path.append("/").append(relative);
  return path;
}

// kSourceDir, or kSourceDir "/" relative.
inline std::string SourcePath(std::string_view relative = {}) {
  std::string path = kSourceDir;
  if (!relative.empty()) path.append("/").append(relative);
  return path;
}

// The build's programs that tests run, named once here.
inline const std::string kSnowflakedPath = BinaryPath("daemon/snowflaked");
inline const std::string kSnowflakectlPath = BinaryPath("cli/snowflakectl");
// Fixtures more than one test runs (their CMakeLists.txt under tests/ say what they do).
inline const std::string kTestProducerPath = BinaryPath("tests/client/test_producer");
inline const std::string kClientWorkerPath = BinaryPath("tests/client/client_worker");
inline const std::string kDaemonStressWorkerPath = BinaryPath("tests/daemon/daemon_stress_worker");

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_TEST_PATHS_H_
