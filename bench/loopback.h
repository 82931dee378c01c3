// What the HTTP benchmarks share: a strict port argument and the 127.0.0.1 address.

#ifndef SNOWFLAKE_BENCH_LOOPBACK_H_
#define SNOWFLAKE_BENCH_LOOPBACK_H_

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace snowflake::bench {

// A TCP port given as decimal digits only, 1 to 65535; nullopt for anything else.
inline std::optional<uint16_t> ParsePort(std::string_view text) {
  unsigned value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535) {
    return std::nullopt;
  }
  return static_cast<uint16_t>(value);
}

// 127.0.0.1:port.
inline sockaddr_in LoopbackAddress(uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

}  // namespace snowflake::bench

#endif  // SNOWFLAKE_BENCH_LOOPBACK_H_
