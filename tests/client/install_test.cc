// Packaging: `cmake --install` of the client component into a temporary prefix, then an
// out-of-tree project (consumer_project/) configured with find_package(snowflake) and
// pkg-config, built, and run against a live producer. Under a sanitizer preset the
// consumer is built with the same -fsanitize flags, since the installed libraries are
// instrumented.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "subprocess.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace snowflake {
namespace {

using testing::kTestProducerPath;
using testing::Process;
using testing::RunCommand;
using testing::RunOptions;
using testing::RunResult;
using testing::TempDir;

const std::string kCmake = SNOWFLAKE_CMAKE_COMMAND;
const std::string kSanitize = SNOWFLAKE_SANITIZE_FLAGS;

RunOptions Slow() {
  RunOptions options;
  options.timeout = std::chrono::minutes(5);
  return options;
}

std::string Describe(const RunResult& result) {
  return result.status.ToString() + "\n--- stdout\n" + result.out + "\n--- stderr\n" + result.err;
}

TEST(Install, AnOutOfTreeProjectFindsBuildsAndRunsAgainstTheInstalledLibrary) {
  TempDir work("install-test");
  const auto prefix = work / "prefix";
  const auto build = work / "build";

  RunResult installed = RunCommand({kCmake, "--install", ::snowflake::testing::BinaryPath(),
                                    "--prefix", prefix.string(), "--component", "client"},
                                   Slow());
  ASSERT_TRUE(installed.status.ExitedWith(0)) << Describe(installed);
  for (const char* file : {"include/snowflake/client.h", "include/snowflake/client_error.h",
                           "include/snowflake/snowflake.h", "include/snowflake/id_layout.h"}) {
    EXPECT_TRUE(std::filesystem::exists(prefix / file)) << file;
  }
  std::vector<std::string> libs;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(prefix)) {
    libs.push_back(entry.path().filename().string());
  }
  for (const char* name :
       {"libsnowflake.a", "libsnowflake.so", "libsnowflake.so.0", "snowflakeConfig.cmake",
        "snowflakeConfigVersion.cmake", "snowflakeTargets.cmake", "snowflake.pc"}) {
    EXPECT_NE(std::find(libs.begin(), libs.end(), name), libs.end()) << name;
  }
  EXPECT_FALSE(std::filesystem::exists(prefix / "sbin")) << "the daemon is not part of it";

  std::vector<std::string> configure = {
      kCmake,
      "-S",
      ::snowflake::testing::SourcePath("tests/client/consumer_project"),
      "-B",
      build.string(),
      "-G",
      "Ninja",
      "-DCMAKE_BUILD_TYPE=Debug",
      "-DCMAKE_PREFIX_PATH=" + prefix.string()};
  if (!kSanitize.empty()) {
    const std::string flags = "-fsanitize=" + kSanitize + " -fno-omit-frame-pointer";
    configure.push_back("-DCMAKE_C_FLAGS=" + flags);
    configure.push_back("-DCMAKE_CXX_FLAGS=" + flags);
    configure.push_back("-DCMAKE_EXE_LINKER_FLAGS=" + flags);
  }
  RunOptions configure_options = Slow();
  // pkg-config finds snowflake.pc in the prefix only.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(prefix)) {
    if (entry.path().filename() == "snowflake.pc") {
      configure_options.env.set.push_back({"PKG_CONFIG_PATH", entry.path().parent_path().string()});
    }
  }
  RunResult configured = RunCommand(configure, configure_options);
  ASSERT_TRUE(configured.status.ExitedWith(0)) << Describe(configured);
  RunResult built = RunCommand({kCmake, "--build", build.string(), "-j", "2"}, Slow());
  ASSERT_TRUE(built.status.ExitedWith(0)) << Describe(built);

  TempDir runtime("install-runtime");
  Process producer = Process::Spawn({kTestProducerPath, runtime.path().string(), "256"});
  ASSERT_TRUE(producer.WaitForOutput(Process::Stream::kOut, "serving", std::chrono::seconds(20)))
      << producer.err();
  RunOptions run_options;
  run_options.env.set.push_back({"SNOWFLAKE_RUNTIME_DIR", runtime.path().string()});
  for (const char* program : {"consumer", "consumer_static", "consumer_c"}) {
    RunResult ran = RunCommand({(build / program).string()}, run_options);

    EXPECT_TRUE(ran.status.ExitedWith(0)) << program << ": " << Describe(ran);
    EXPECT_NE(ran.out.find("ok\n"), std::string::npos) << program << ": " << ran.out;
  }
}

}  // namespace
}  // namespace snowflake
