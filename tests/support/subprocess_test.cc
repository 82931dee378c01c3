#include "subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>

#include "temp_dir.h"

namespace snowflake::testing {
namespace {

using std::chrono::milliseconds;

TEST(RunCommand, CapturesStdoutStderrAndExitCode) {
  auto result = RunCommand({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});

  EXPECT_TRUE(result.status.ExitedWith(3)) << result.status.ToString();
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.out, "out\n");
  EXPECT_EQ(result.err, "err\n");
}

TEST(RunCommand, PassesArgumentsWithoutAShell) {
  auto result = RunCommand({"printf", "%s|", "a b", "$HOME", "*"});

  EXPECT_TRUE(result.status.ExitedWith(0));
  EXPECT_EQ(result.out, "a b|$HOME|*|");
}

TEST(RunCommand, FeedsStdinText) {
  RunOptions options;
  options.stdin_text = "hello\nworld\n";

  auto result = RunCommand({"cat"}, options);

  EXPECT_EQ(result.out, "hello\nworld\n");
}

TEST(RunCommand, LargeOutputDoesNotDeadlock) {
  auto result =
      RunCommand({"/bin/sh", "-c", "head -c 1000000 /dev/zero; head -c 300000 /dev/zero >&2"});

  EXPECT_TRUE(result.status.ExitedWith(0));
  EXPECT_EQ(result.out.size(), 1'000'000u);
  EXPECT_EQ(result.err.size(), 300'000u);
}

TEST(RunCommand, SetsAndUnsetsEnvironment) {
  setenv("SNOWFLAKE_SUBPROCESS_TEST_GONE", "x", 1);
  RunOptions options;
  options.env.set = {{"SNOWFLAKE_SUBPROCESS_TEST", "42"}};
  options.env.unset = {"SNOWFLAKE_SUBPROCESS_TEST_GONE"};

  auto result =
      RunCommand({"/bin/sh", "-c",
                  "echo \"$SNOWFLAKE_SUBPROCESS_TEST:${SNOWFLAKE_SUBPROCESS_TEST_GONE-unset}\""},
                 options);

  EXPECT_EQ(result.out, "42:unset\n");
}

TEST(RunCommand, KillsTheChildAtTheTimeout) {
  RunOptions options;
  options.timeout = milliseconds(100);

  auto result = RunCommand({"sleep", "30"}, options);

  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.status.term_signal, SIGKILL);
}

TEST(RunCommand, ThrowsWhenTheBinaryDoesNotExist) {
  EXPECT_THROW(RunCommand({"/nonexistent/snowflake-binary"}), std::system_error);
}

TEST(Process, WaitReturnsNulloptWhileRunningThenTheSignal) {
  auto sut = Process::Spawn({"sleep", "30"});

  EXPECT_FALSE(sut.Wait(milliseconds(20)).has_value());
  EXPECT_TRUE(sut.Running());
  EXPECT_TRUE(sut.Kill(SIGTERM));
  auto status = sut.Wait(milliseconds(10'000));

  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->term_signal, SIGTERM);
  EXPECT_FALSE(sut.Kill(SIGTERM));  // already reaped
}

TEST(Process, WaitForOutputSeesALineBeforeTheChildEnds) {
  auto sut = Process::Spawn({"/bin/sh", "-c", "echo ready >&2; exec sleep 30"});

  EXPECT_TRUE(sut.WaitForOutput(Process::Stream::kErr, "ready", milliseconds(10'000)));
  EXPECT_TRUE(sut.Running());
  EXPECT_EQ(sut.err(), "ready\n");
}

TEST(Process, WaitForOutputReturnsFalseWhenTheStreamClosesWithoutIt) {
  auto sut = Process::Spawn({"/bin/sh", "-c", "echo other"});

  EXPECT_FALSE(sut.WaitForOutput(Process::Stream::kOut, "ready", milliseconds(10'000)));
}

TEST(Process, WritesOutputToAFile) {
  TempDir dir;
  const auto path = dir / "out.txt";
  SpawnOptions options;
  options.out = Output::File(path);
  options.err = Output::Null();
  auto sut = Process::Spawn({"/bin/sh", "-c", "echo to-file"}, options);

  ASSERT_TRUE(sut.Wait(milliseconds(10'000)).has_value());

  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(text.str(), "to-file\n");
}

TEST(Process, ChildStartsWithDefaultSignalsEvenIfTheParentBlocksThem) {
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, &old);
  auto sut = Process::Spawn({"sleep", "30"});
  pthread_sigmask(SIG_SETMASK, &old, nullptr);

  sut.Kill(SIGTERM);
  auto status = sut.Wait(milliseconds(10'000));

  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->term_signal, SIGTERM);
}

TEST(Process, DestructorKillsARunningChild) {
  pid_t pid = 0;
  {
    auto sut = Process::Spawn({"sleep", "30"});
    pid = sut.pid();
  }

  // Reaped by the destructor: the pid is no longer our child (a running or unreaped
  // child would give 0 or its pid).
  errno = 0;
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace snowflake::testing
