// libsnowflake against a producer in another process (tests/client/test_producer.cc):
// errors that need a second process or user (a dead or hung daemon, permission denied),
// restarts, and many threads in several processes.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "id_checker.h"
#include "snowflake/client.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "test_paths.h"
#include "wait_until.h"
#include "worker_runs.h"

namespace snowflake {
namespace {

using testing::kClientWorkerPath;
using testing::kTestProducerPath;
using testing::Process;
using testing::TempDir;
using testing::WaitUntil;

Process StartProducer(const std::filesystem::path& dir, uint64_t capacity = 1024) {
  Process producer = Process::Spawn({kTestProducerPath, dir.string(), std::to_string(capacity)});
  if (!producer.WaitForOutput(Process::Stream::kOut, "serving", std::chrono::seconds(20))) {
    ADD_FAILURE() << "test_producer did not start: " << producer.err();
  }
  return producer;
}

ClientOptions PatientOptions(const std::filesystem::path& dir) {
  ClientOptions options;
  options.runtime_dir = dir;
  options.wait_timeout = std::chrono::seconds(30);
  options.max_heartbeat_age = std::chrono::seconds(30);
  return options;
}

// Takes until an error and returns it (the IDs left in the ring come first).
Error TakeUntilError(Client& client) {
  for (int i = 0; i < 1'000'000; ++i) {
    auto id = client.Next();
    if (!id) return id.error();
  }
  return Error{ClientError::kSystemError, "no error after a million takes"};
}

TEST(ClientProcess, AWaitingCallerLearnsThatTheDaemonDied) {
  TempDir dir("client-dead");
  Process producer = StartProducer(dir.path(), 64);
  auto sut = Client::Open("orders", PatientOptions(dir.path()));
  ASSERT_TRUE(sut) << sut.error().message;
  ASSERT_TRUE(producer.Kill(SIGSTOP));  // no more refills; it still looks alive
  std::optional<Error> error;
  std::chrono::steady_clock::time_point returned;

  std::thread caller([&] {
    error = TakeUntilError(*sut);  // drains the ring, then waits on the futex
    returned = std::chrono::steady_clock::now();
  });
  // Until the caller has taken the last ID: it is then waiting (or about to) for more.
  // Read through the caller's own client: a stopped producer hands no region to a new one.
  const auto drained = WaitUntil(
      [&] {
        auto status = sut->GetStatus();
        return status && status->ring_fill == 0;
      },
      std::chrono::seconds(30), "the waiting caller to drain the stopped producer's ring");
  ASSERT_TRUE(producer.Kill(SIGKILL));
  ASSERT_TRUE(producer.Wait(std::chrono::seconds(10)));  // reaped: its pid is gone
  const auto died = std::chrono::steady_clock::now();
  caller.join();

  ASSERT_TRUE(drained);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code, ClientError::kDaemonDead) << error->message;
  const auto latency_us =
      std::chrono::duration_cast<std::chrono::microseconds>(returned - died).count();
  RecordProperty("latency_us", std::to_string(latency_us));
  std::printf("daemon_dead reported %lld us after the reap\n", static_cast<long long>(latency_us));
}

TEST(ClientProcess, AHungDaemonIsReportedAsNotHeartbeatingAndRecovers) {
  TempDir dir("client-hung");
  Process producer = StartProducer(dir.path(), 64);
  ClientOptions options = PatientOptions(dir.path());
  options.max_heartbeat_age = std::chrono::milliseconds(20);
  auto sut = Client::Open("orders", options);
  ASSERT_TRUE(sut) << sut.error().message;

  ASSERT_TRUE(producer.Kill(SIGSTOP));
  const Error hung = TakeUntilError(*sut);
  ASSERT_TRUE(producer.Kill(SIGCONT));
  const auto after = testing::AttemptUntil([&] { return sut->Next(); }, testing::kSucceeded,
                                           std::chrono::seconds(20), std::chrono::milliseconds(10));

  EXPECT_EQ(hung.code, ClientError::kDaemonNotHeartbeating) << hung.message;
  EXPECT_TRUE(after) << after.error().message;
}

TEST(ClientProcess, AUserOutsideTheSegmentsGroupGetsPermissionDeniedNamingTheGroup) {
  ASSERT_EQ(geteuid(), 0u) << "needs root to run the probe as another user";
  TempDir dir("client-perm");
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  Process producer = StartProducer(dir.path(), 64);

  auto probe =
      testing::RunCommand({kClientWorkerPath, "probe", dir.path().string(), "65534", "65534"});

  ASSERT_TRUE(probe.status.ExitedWith(0)) << probe.status.ToString() << probe.err;
  EXPECT_EQ(probe.out.substr(0, probe.out.find('\n')), "permission_denied") << probe.out;
  EXPECT_NE(probe.out.find("add this user to group 'root'"), std::string::npos) << probe.out;
}

TEST(ClientProcess, AClientOutlivesAProducerRestartOnTheSameSegment) {
  TempDir dir("client-restart");
  std::optional<Process> producer = StartProducer(dir.path(), 64);
  ClientOptions options = PatientOptions(dir.path());
  auto sut = Client::Open("orders", options);
  ASSERT_TRUE(sut) << sut.error().message;
  const uint64_t before = sut->Next().value();

  ASSERT_TRUE(producer->Kill(SIGTERM));
  ASSERT_TRUE(producer->Wait(std::chrono::seconds(10)));
  const Error stopped = TakeUntilError(*sut);
  producer = StartProducer(dir.path(), 64);
  auto after = sut->Next();

  EXPECT_EQ(stopped.code, ClientError::kDaemonStopped) << stopped.message;
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_GT(*after, before);
}

#ifdef SNOWFLAKE_SANITIZED
constexpr size_t kTakesPerThread = 5'000;
#else
constexpr size_t kTakesPerThread = 50'000;
#endif

// Property: threads in several processes, with Next and NextBatch, get IDs that are
// unique, strictly increasing per thread, and in real-time order across all of them.
TEST(ClientProcess, ManyThreadsInSeveralProcessesTakeUniqueIncreasingIds) {
  TempDir dir("client-procs");
  Process producer = StartProducer(dir.path(), 4096);
  constexpr int kProcesses = 3;
  constexpr int kThreads = 4;
  testing::IdCheckResult result;

  ASSERT_NO_FATAL_FAILURE(testing::RunTakeWorkers(
      {dir.path(), dir.path(), kProcesses, kThreads, kTakesPerThread}, &result));

  EXPECT_TRUE(result.ok()) << result.Summary();
  EXPECT_GE(result.ids, kProcesses * kThreads * kTakesPerThread);
}

}  // namespace
}  // namespace snowflake
