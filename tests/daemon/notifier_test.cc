#include "daemon/control/notifier.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "temp_dir.h"

namespace snowflake::daemon {
namespace {

// A NOTIFY_SOCKET the test owns, as systemd would.
class NotifySocket {
 public:
  explicit NotifySocket(const std::filesystem::path& path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval limit{.tv_sec = 10, .tv_usec = 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    setenv("NOTIFY_SOCKET", path.c_str(), 1);
  }
  ~NotifySocket() {
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    close(fd_);
  }
  bool bound() const { return bound_; }
  std::string Receive() {
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("(nothing)");
  }

 private:
  int fd_ = -1;
  bool bound_ = false;
};

TEST(Notifier, SendsReadyStatusAndStopping) {
  // Arrange
  snowflake::testing::TempDir dir;
  NotifySocket socket(dir / "notify");
  ASSERT_TRUE(socket.bound());
  Notifier sut;

  // Act
  sut.Ready("serving machine 3");
  sut.Status("paused");
  sut.Stopping("stopping");

  // Assert
  EXPECT_EQ(socket.Receive(), "READY=1\nSTATUS=serving machine 3");
  EXPECT_EQ(socket.Receive(), "STATUS=paused");
  EXPECT_EQ(socket.Receive(), "STOPPING=1\nSTATUS=stopping");
}

TEST(Notifier, WatchdogAtHalfTheInterval) {
  // Arrange: a 10 s watchdog for this pid.
  snowflake::testing::TempDir dir;
  NotifySocket socket(dir / "notify");
  ASSERT_TRUE(socket.bound());
  setenv("WATCHDOG_USEC", "10000000", 1);
  setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  Notifier sut;
  const auto t0 = std::chrono::steady_clock::now();

  // Act: the first beat goes at once; 4.9 s later none is due; at 5 s one is.
  sut.MaybeWatchdog(t0);
  sut.MaybeWatchdog(t0 + std::chrono::milliseconds(4900));
  sut.MaybeWatchdog(t0 + std::chrono::milliseconds(5000));
  sut.Status("marker");

  // Assert
  ASSERT_TRUE(sut.watchdog_interval());
  EXPECT_EQ(*sut.watchdog_interval(), std::chrono::seconds(10));
  EXPECT_EQ(socket.Receive(), "WATCHDOG=1");
  EXPECT_EQ(socket.Receive(), "WATCHDOG=1");
  EXPECT_EQ(socket.Receive(), "STATUS=marker");
}

TEST(Notifier, NoWatchdogForAnotherPid) {
  setenv("WATCHDOG_USEC", "10000000", 1);
  setenv("WATCHDOG_PID", "1", 1);

  Notifier sut;

  EXPECT_FALSE(sut.watchdog_interval());
  unsetenv("WATCHDOG_USEC");
  unsetenv("WATCHDOG_PID");
}

}  // namespace
}  // namespace snowflake::daemon
