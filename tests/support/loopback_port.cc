#include "loopback_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <random>

namespace snowflake::testing {
namespace {

bool CanBindLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  close(fd);
  return bound;
}

}  // namespace

int EphemeralPortFloor() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  if (in >> low && low > 1024) return low;
  return 32768;
}

int FreeLoopbackPort() {
  static std::mutex mutex;
  static std::mt19937 random(std::random_device{}());
  const std::lock_guard lock(mutex);
  const int floor = EphemeralPortFloor();
  std::uniform_int_distribution<int> pick(std::min(20000, floor / 2), floor - 1);
  for (int attempt = 0; attempt < 256; ++attempt) {
    const int port = pick(random);
    if (CanBindLoopback(port)) return port;
  }
  return 0;
}

}  // namespace snowflake::testing
