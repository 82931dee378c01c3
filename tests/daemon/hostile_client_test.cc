// Hostile clients against the real daemon (docs/security.md, "What a hostile group member
// can do TODAY"): each attack that is enforced today gets the promised outcome, and the
// daemon keeps serving other clients with no duplicate.
// Property for every test: IDs taken by well-behaved clients during the attack are
// unique and, per client, strictly increasing.

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon_harness.h"
#include "snowflake/client.h"
#include "snowflake/segment_layout.h"
#include "subprocess.h"

namespace snowflake {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::Daemon;
using testing::DaemonHarness;
using testing::RunCommand;

const std::string kCtl = SNOWFLAKE_BINARY_DIR "/cli/snowflakectl";
const std::string kDaemon = SNOWFLAKE_BINARY_DIR "/daemon/snowflaked";

// Takes `count` IDs and checks they are strictly increasing; appends them to `all`.
void TakeAndCheck(Client& client, size_t count, std::vector<uint64_t>& all) {
  uint64_t last = 0;
  for (size_t i = 0; i < count; ++i) {
    auto id = client.Next();
    ASSERT_TRUE(id) << id.error().message;
    ASSERT_GT(*id, last);
    last = *id;
    all.push_back(*id);
  }
}

void ExpectUnique(std::vector<uint64_t> ids) {
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << "a duplicate ID";
}

// `snowflakectl status --json` until `done(reply)` or 30 s; the last reply.
json StatusUntil(const std::filesystem::path& runtime_dir, const std::function<bool(const json&)>& done) {
  json reply;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto result = RunCommand({kCtl, "status", "--json", "--runtime-dir", runtime_dir.string()});
    reply = json::parse(result.out, nullptr, false);
    if (result.status.ExitedWith(0) && !reply.is_discarded() && done(reply)) return reply;
    std::this_thread::sleep_for(200ms);
  }
  return reply;
}

TEST(HostileClient, GarbageServiceNamesDoNotBreakStatus) {
  // Arrange: a daemon and a well-behaved client.
  DaemonHarness harness("hostile-names");
  Daemon daemon = harness.Start();
  auto client = Client::Open("orders", harness.Clients());
  ASSERT_TRUE(client) << client.error().message;
  std::vector<uint64_t> ids;
  TakeAndCheck(*client, 1000, ids);

  // Act: a group member writes a live slot with a non-UTF-8, invalid name (as pwrite).
  const auto path = harness.runtime_dir() / std::string(shm::kSegmentFileName);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const uint64_t slot_offset = shm::kConsumerOffset + offsetof(shm::ConsumerRegion, services) +
                               (shm::kServiceSlotCount - 1) * sizeof(shm::ServiceSlot);
  unsigned char slot[sizeof(shm::ServiceSlot)] = {};
  const uint64_t owner = static_cast<uint64_t>(getpid());
  const uint64_t ready = shm::kServiceSlotActive;
  const uint64_t taken = 7;
  std::memcpy(slot + offsetof(shm::ServiceSlot, owner_pid), &owner, 8);
  std::memcpy(slot + offsetof(shm::ServiceSlot, name_ready), &ready, 8);
  std::memcpy(slot + offsetof(shm::ServiceSlot, taken), &taken, 8);
  std::memcpy(slot + offsetof(shm::ServiceSlot, name), "\xff\xfe" "Bad Name", 10);
  ASSERT_EQ(pwrite(fd, slot, sizeof(slot), static_cast<off_t>(slot_offset)),
            static_cast<ssize_t>(sizeof(slot)));
  close(fd);
  const json status = StatusUntil(harness.runtime_dir(), [](const json& reply) {
    return reply["services"].contains("invalid:fffe426164204e616d65");
  });
  TakeAndCheck(*client, 1000, ids);

  // Assert
  ASSERT_TRUE(status.contains("services")) << status.dump();
  EXPECT_EQ(status["services"]["invalid:fffe426164204e616d65"], 7) << status.dump();
  EXPECT_TRUE(status["services"].contains("orders")) << status.dump();
  ExpectUnique(ids);
}

TEST(HostileClient, HoldingTheControlSocketDoesNotLockOutTheOperator) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another uid";
  // Arrange: the clients' group is nogroup, and a member (nobody) may reach the socket.
  constexpr uid_t kNobody = 65534;
  constexpr gid_t kNogroup = 65534;
  DaemonHarness harness("hostile-socket");
  ASSERT_EQ(chmod(harness.root().c_str(), 0755), 0);
  auto options = harness.Options();
  options.config_path = harness.WriteFile("c.toml", "[daemon]\ngroup = \"nogroup\"\n");
  Daemon daemon = harness.Start(options);
  auto client = Client::Open("orders", harness.Clients());
  ASSERT_TRUE(client) << client.error().message;
  sockaddr_un addr{};  // built before fork: the child only makes system calls
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, (harness.runtime_dir() / "control.sock").c_str(),
               sizeof(addr.sun_path) - 1);
  int report[2];
  int release[2];
  ASSERT_EQ(pipe(report), 0);
  ASSERT_EQ(pipe(release), 0);

  // Act: the member opens 64 connections and holds them.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(report[0]);
    close(release[1]);
    if (setgroups(0, nullptr) != 0 || setgid(kNogroup) != 0 || setuid(kNobody) != 0) _exit(2);
    int held = 0;
    for (int i = 0; i < 64; ++i) {
      const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
      if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) ++held;
    }
    char line[16];
    const int len = std::snprintf(line, sizeof(line), "%d\n", held);
    if (write(report[1], line, static_cast<size_t>(len)) != len) _exit(3);
    char c;
    [[maybe_unused]] const ssize_t r = read(release[0], &c, 1);
    _exit(0);
  }
  close(report[1]);
  close(release[0]);
  char line[16] = {};
  ASSERT_GT(read(report[0], line, sizeof(line) - 1), 0);
  std::this_thread::sleep_for(500ms);  // let the daemon accept (or refuse) them all
  auto status = RunCommand({kCtl, "status", "--json", "--runtime-dir", harness.runtime_dir().string()});
  auto resume = RunCommand({kCtl, "resume", "--runtime-dir", harness.runtime_dir().string()});
  std::vector<uint64_t> ids;
  TakeAndCheck(*client, 5000, ids);
  close(release[1]);
  int wstatus = 0;
  waitpid(child, &wstatus, 0);
  close(report[0]);

  // Assert
  EXPECT_EQ(std::atoi(line), 64) << "the member's connections were all made";
  EXPECT_TRUE(status.status.ExitedWith(0)) << status.out << status.err;
  EXPECT_EQ(json::parse(status.out, nullptr, false).value("state", ""), "serving") << status.out;
  EXPECT_TRUE(resume.status.ExitedWith(0)) << resume.out << resume.err;
  ExpectUnique(ids);
}

TEST(HostileClient, ForkMidTakeNeverDuplicatesOrDeadlocks) {
  // Arrange: a client whose thread takes continuously into a preallocated buffer.
  DaemonHarness harness("hostile-fork");
  Daemon daemon = harness.Start();
  std::optional<Client> client;
  {
    auto opened = Client::Open("forky", harness.Clients());
    ASSERT_TRUE(opened) << opened.error().message;
    client.emplace(std::move(*opened));
  }
  constexpr size_t kThreadIds = 20'000;
  constexpr size_t kChildIds = 2'000;
  constexpr int kChildren = 4;
  std::vector<uint64_t> thread_ids(kThreadIds, 0);
  std::atomic<size_t> thread_taken{0};
  std::atomic<bool> stop{false};
  std::thread taker([&] {
    for (size_t i = 0; i < kThreadIds && !stop; ++i) {
      auto id = client->Next();  // no allocation on this path
      if (!id) break;
      thread_ids[i] = *id;
      thread_taken = i + 1;
    }
  });

  // Act: fork while the thread takes; each child takes, reports, closes its Client copy.
  std::vector<uint64_t> child_ids;
  int deadlocked = 0;
  int failed = 0;
  for (int c = 0; c < kChildren; ++c) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(fds[0]);
      static uint64_t mine[kChildIds];
      for (size_t i = 0; i < kChildIds; ++i) {
        auto id = client->Next();
        if (!id) _exit(4);
        mine[i] = *id;
      }
      if (write(fds[1], mine, sizeof(mine)) != static_cast<ssize_t>(sizeof(mine))) _exit(5);
      client.reset();  // the destructor in a child must not retire the parent's slot
      _exit(0);
    }
    close(fds[1]);
    std::vector<uint64_t> got(kChildIds);
    size_t read_bytes = 0;
    auto* bytes = reinterpret_cast<char*>(got.data());
    ssize_t n;
    while (read_bytes < kChildIds * 8 &&
           (n = read(fds[0], bytes + read_bytes, kChildIds * 8 - read_bytes)) > 0) {
      read_bytes += static_cast<size_t>(n);
    }
    close(fds[0]);
    int wstatus = 0;
    pid_t waited = 0;
    for (int i = 0; i < 600 && (waited = waitpid(child, &wstatus, WNOHANG)) == 0; ++i) {
      std::this_thread::sleep_for(50ms);
    }
    if (waited == 0) {
      ++deadlocked;
      kill(child, SIGKILL);
      waitpid(child, &wstatus, 0);
    } else if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
      ++failed;
    }
    if (read_bytes == kChildIds * 8) child_ids.insert(child_ids.end(), got.begin(), got.end());
  }
  stop = true;
  taker.join();
  // The parent's counter still counts after its children closed their copies, also once
  // the daemon has scanned the slots (every second) since.
  std::this_thread::sleep_for(2500ms);
  std::vector<uint64_t> after;
  TakeAndCheck(*client, 1000, after);
  const uint64_t expected_total = thread_taken + child_ids.size() + after.size();
  const json status = StatusUntil(harness.runtime_dir(), [&](const json& reply) {
    return reply["services"].value("forky", uint64_t{0}) >= expected_total;
  });

  // Assert
  EXPECT_EQ(deadlocked, 0);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(child_ids.size(), kChildIds * kChildren);
  std::vector<uint64_t> all(thread_ids.begin(), thread_ids.begin() + thread_taken);
  all.insert(all.end(), child_ids.begin(), child_ids.end());
  all.insert(all.end(), after.begin(), after.end());
  ExpectUnique(all);
  EXPECT_EQ(status["services"].value("forky", uint64_t{0}), expected_total) << status.dump();
}

TEST(HostileClient, OversizedConfigFailsFastWithAClearError) {
  DaemonHarness harness("hostile-config");
  testing::RunOptions options;
  options.timeout = 60s;

  auto result = RunCommand({kDaemon, "--config", "/dev/zero", "--runtime-dir",
                            harness.runtime_dir().string(), "--state-dir",
                            harness.state_dir().string()},
                           options);

  EXPECT_FALSE(result.timed_out);
  EXPECT_TRUE(result.status.ExitedWith(2)) << result.status.ToString() << result.err;
  EXPECT_NE(result.err.find("larger than 1048576 bytes"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace snowflake
