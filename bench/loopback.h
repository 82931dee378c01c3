// What the HTTP benchmarks share: the 127.0.0.1 address.

#ifndef SNOWFLAKE_BENCH_LOOPBACK_H_
#define SNOWFLAKE_BENCH_LOOPBACK_H_

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>

namespace snowflake::bench {

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
