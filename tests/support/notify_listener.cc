// notify_listener SOCKET: the receiving end of sd_notify(3) for test harnesses whose
// language cannot bind an AF_UNIX datagram socket (Java 17's DatagramChannel refuses
// StandardProtocolFamily.UNIX; Node's dgram offers udp4 and udp6 only).
//
// It binds SOCKET (which must not exist), prints "listening" on stdout once the daemon
// may be started with NOTIFY_SOCKET=SOCKET, then prints each assignment of each datagram
// on a line of its own ("READY=1", "STATUS=serving: machine 3, ..."). It exits 0 after the
// datagram that holds the line READY=1, removing SOCKET: later notifications are refused,
// which the daemon ignores. It exits 1 when its stdin ends (the harness is gone) and 2
// on a usage or socket error, saying why on stderr. The harness bounds the wait.

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "notify_listener: %s\n", what.c_str());
  return 2;
}

// Prints the datagram's lines; true if one of them is READY=1.
bool Print(std::string_view datagram) {
  bool ready = false;
  while (!datagram.empty()) {
    const size_t end = datagram.find('\n');
    const std::string_view line = datagram.substr(0, end);
    if (!line.empty()) std::printf("%.*s\n", static_cast<int>(line.size()), line.data());
    ready = ready || line == "READY=1";
    if (end == std::string_view::npos) break;
    datagram.remove_prefix(end + 1);
  }
  std::fflush(stdout);
  return ready;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return Fail("usage: notify_listener SOCKET_PATH");
  const std::string path = argv[1];
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    return Fail("socket path must be 1 to " + std::to_string(sizeof(address.sun_path) - 1) +
                " bytes long: " + path);
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Fail(std::string("socket: ") + std::strerror(errno));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return Fail("cannot bind " + path + ": " + std::strerror(errno) +
                " (give a path in a directory of the test's own that does not exist yet)");
  }
  std::printf("listening\n");
  std::fflush(stdout);

  std::vector<char> buffer(64 * 1024);
  int status = 1;
  for (;;) {
    pollfd entries[2] = {{fd, POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
    if (poll(entries, 2, -1) < 0) {
      if (errno == EINTR) continue;
      status = Fail(std::string("poll: ") + std::strerror(errno));
      break;
    }
    if ((entries[0].revents & POLLIN) != 0) {
      const ssize_t size = recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (size > 0 && Print(std::string_view(buffer.data(), static_cast<size_t>(size)))) {
        status = 0;
        break;
      }
    }
    if ((entries[1].revents & (POLLIN | POLLHUP)) != 0) {
      char discard[256];
      if (read(STDIN_FILENO, discard, sizeof discard) <= 0) break;  // the harness is gone
    }
  }
  close(fd);
  unlink(path.c_str());
  return status;
}
