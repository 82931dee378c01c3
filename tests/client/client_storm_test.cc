// A host's processes starting at once against the real snowflaked: each must attach (the
// control socket hands every one the consumer region) and take. 500 processes in the
// optimised build, as a node's services restarted together; fewer under the sanitizers,
// whose process start-up alone costs tens of milliseconds of CPU each on 2 cores.
//
// Property: every worker's Client::Open and first Next succeed, and no two take one ID.
// How long the storm took is printed, not asserted.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "daemon_harness.h"
#include "temp_dir.h"
#include "test_paths.h"

extern char** environ;

namespace snowflake {
namespace {

using testing::Daemon;
using testing::DaemonHarness;

#ifdef SNOWFLAKE_SANITIZED
constexpr int kWorkers = 100;
#else
constexpr int kWorkers = 500;
#endif

TEST(ClientStorm, EveryProcessOfAStormAttachesAndTakes) {
  // Arrange: the daemon, and kWorkers workers each waiting for the go file.
  DaemonHarness harness("client-storm");
  Daemon daemon = harness.Start();
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  const testing::TempDir dir("storm");
  const std::string ready_fifo = (dir / "ready").string();
  const std::string go_file = (dir / "go").string();
  const std::string out_file = (dir / "ids").string();
  const std::string err_file = (dir / "errors").string();
  ASSERT_EQ(mkfifo(ready_fifo.c_str(), 0600), 0);
  // Read end first (non-blocking), so every worker's open for writing succeeds at once.
  const int ready = open(ready_fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(ready, 0);
  const std::string worker = testing::BinaryPath("tests/client/client_worker");
  const std::string runtime_dir = harness.runtime_dir().string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0600);
  std::vector<pid_t> workers;
  for (int i = 0; i < kWorkers; ++i) {
    std::vector<char*> argv = {
        const_cast<char*>(worker.c_str()),      const_cast<char*>("storm"),
        const_cast<char*>(runtime_dir.c_str()), const_cast<char*>(ready_fifo.c_str()),
        const_cast<char*>(go_file.c_str()),     nullptr};
    pid_t pid = -1;
    ASSERT_EQ(posix_spawn(&pid, worker.c_str(), &actions, nullptr, argv.data(), environ), 0);
    workers.push_back(pid);
  }
  posix_spawn_file_actions_destroy(&actions);
  int reported = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(3);
  while (reported < kWorkers && std::chrono::steady_clock::now() < deadline) {
    pollfd entry{.fd = ready, .events = POLLIN, .revents = 0};
    if (poll(&entry, 1, 100) <= 0) continue;
    char bytes[512];
    const ssize_t n = read(ready, bytes, sizeof(bytes));
    if (n > 0) reported += static_cast<int>(n);
  }
  close(ready);
  ASSERT_EQ(reported, kWorkers) << "not every worker started";

  // Act: all at once.
  const auto start = std::chrono::steady_clock::now();
  std::ofstream(go_file) << "go\n";
  int failed = 0;
  for (const pid_t pid : workers) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  const auto took = std::chrono::steady_clock::now() - start;

  // Assert
  std::ifstream errors(err_file);
  std::stringstream said;
  said << errors.rdbuf();
  EXPECT_EQ(failed, 0) << said.str().substr(0, 2000);
  std::ifstream ids_in(out_file);
  std::set<uint64_t> ids;
  size_t lines = 0;
  for (uint64_t id; ids_in >> id; ++lines) ids.insert(id);
  EXPECT_EQ(lines, static_cast<size_t>(kWorkers));
  EXPECT_EQ(ids.size(), lines) << "an ID was taken twice";
  std::printf(
      "%d processes attached and took within %lld ms\n", kWorkers,
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
}

}  // namespace
}  // namespace snowflake
