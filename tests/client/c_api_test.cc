// The C ABI from a C program (c_api_program.c, compiled as C11): it takes, batches and
// decodes against a live producer, reports a missing daemon by status name, and an empty
// ring of a healthy daemon as SF_RING_EMPTY, to retry here.

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "subprocess.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace snowflake {
namespace {

using testing::kTestProducerPath;
using testing::Process;
using testing::TempDir;

const std::string kProgram = ::snowflake::testing::BinaryPath("tests/client/c_api_program");

TEST(CApi, ACProgramTakesBatchesAndDecodesIds) {
  TempDir dir("c-api");
  Process producer = Process::Spawn({kTestProducerPath, dir.path().string(), "256"});
  ASSERT_TRUE(producer.WaitForOutput(Process::Stream::kOut, "serving", std::chrono::seconds(20)))
      << producer.err();

  auto result = testing::RunCommand({kProgram, dir.path().string()});

  EXPECT_TRUE(result.status.ExitedWith(0)) << result.status.ToString() << "\n"
                                           << result.out << result.err;
  EXPECT_EQ(result.out.rfind("ok ", 0), 0u) << result.out;
  EXPECT_NE(result.out.find("machine 5"), std::string::npos) << result.out;
}

TEST(CApi, ACProgramGetsDaemonNotRunningWithThePath) {
  TempDir dir("c-api-none");

  auto result = testing::RunCommand({kProgram, dir.path().string()});

  EXPECT_TRUE(result.status.ExitedWith(1)) << result.status.ToString();
  EXPECT_NE(result.out.find("sf_open: daemon_not_running: "), std::string::npos) << result.out;
  EXPECT_NE(result.out.find(dir.path().string()), std::string::npos) << result.out;
}

// The segment is the conformance table's empty_ring_without_waiting row: a serving header
// whose heartbeat stays fresh (liveness_ms 10,000), an empty ring, the region served.
TEST(CApi, ACProgramGetsRingEmptyToRetryHereFromAHealthyDaemonsEmptyRing) {
  TempDir dir("c-api-empty");
  const auto fixture = testing::RunCommand(
      {::snowflake::testing::BinaryPath("tests/conformance/conformance_fixture"), "--cases",
       ::snowflake::testing::SourcePath("tests/conformance/cases.json"), "--case",
       "empty_ring_without_waiting", "--dir", dir.path().string(), "--live-pid",
       std::to_string(getpid())});
  ASSERT_TRUE(fixture.status.ExitedWith(0)) << fixture.err;

  auto result = testing::RunCommand({kProgram, dir.path().string(), "--empty"});

  EXPECT_TRUE(result.status.ExitedWith(0)) << result.status.ToString() << "\n" << result.out;
  EXPECT_EQ(result.out.rfind("ring_empty retry_here: ", 0), 0u) << result.out;
  EXPECT_NE(result.out.find("stayed empty although snowflaked looks healthy"), std::string::npos)
      << result.out;
}

}  // namespace
}  // namespace snowflake
