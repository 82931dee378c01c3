// http_floor: the floor of an event-driven HTTP server on this host, as a baseline for the
// front's one-ID latency (bench/README.md). One thread, one level-triggered epoll set, and
// per request exactly epoll_wait, read and write: it answers every complete request
// (anything ending in a blank line) with the same fixed 200 reply shaped like the front's
// `GET /v1/id` in text/plain. No parsing, no routing, no ID, no counters: no server that
// does any work can answer faster here, so the gap between it and Redis is all the room
// there is below Redis.
//
//   http_floor --port P      (listens on 127.0.0.1:P until killed)

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "loopback.h"

namespace {

[[noreturn]] void Die(const char* what) {
  std::perror(what);
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  uint16_t port = 0;
  CLI::App app{"http_floor: a fixed-reply HTTP responder, the floor of a server here"};
  app.add_option("--port", port, "listen on 127.0.0.1:PORT")
      ->required()
      ->check(CLI::Range(1, 65535));
  CLI11_PARSE(app, argc, argv);
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) Die("socket");
  const int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address = snowflake::bench::LoopbackAddress(port);
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) Die("bind");
  if (listen(listener, SOMAXCONN) != 0) Die("listen");
  const int epoll = epoll_create1(EPOLL_CLOEXEC);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = listener;
  if (epoll < 0 || epoll_ctl(epoll, EPOLL_CTL_ADD, listener, &event) != 0) Die("epoll");

  static constexpr std::string_view kBody = "121917117749534721\n";
  const std::string reply = "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
                            "Content-Length: " + std::to_string(kBody.size()) + "\r\n\r\n" +
                            std::string(kBody);
  epoll_event ready[64];
  char buffer[16384];
  for (;;) {
    const int n = epoll_wait(epoll, ready, 64, -1);
    for (int i = 0; i < n; ++i) {
      const int fd = ready[i].data.fd;
      if (fd == listener) {
        const int peer = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (peer < 0) continue;
        setsockopt(peer, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        epoll_event peer_event{};
        peer_event.events = EPOLLIN;
        peer_event.data.fd = peer;
        epoll_ctl(epoll, EPOLL_CTL_ADD, peer, &peer_event);
        continue;
      }
      const ssize_t got = read(fd, buffer, sizeof buffer);
      if (got <= 0) {
        close(fd);
        continue;
      }
      // One reply per blank line read: the bench sends one request at a time, whole.
      const std::string_view bytes(buffer, static_cast<size_t>(got));
      for (size_t at = bytes.find("\r\n\r\n"); at != std::string_view::npos;
           at = bytes.find("\r\n\r\n", at + 4)) {
        if (write(fd, reply.data(), reply.size()) < 0) break;
      }
    }
  }
}
