// Network addresses for the HTTP front's config: listen addresses ("127.0.0.1:8080",
// "[::1]:8080") and client networks in CIDR notation ("10.0.0.0/8", "::1/128"). Parsed with
// inet_pton only (no name resolution: a config never depends on DNS).
//
// Plain values; every function is safe to call from any thread.

#ifndef SNOWFLAKE_DAEMON_CONFIG_NET_ADDRESS_H_
#define SNOWFLAKE_DAEMON_CONFIG_NET_ADDRESS_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace snowflake::daemon {

// An IPv4 or IPv6 address; IPv4 kept as an IPv4-mapped IPv6 address (::ffff:a.b.c.d) so one
// comparison covers both families.
struct IpAddress {
  std::array<uint8_t, 16> bytes{};
  bool v4 = false;
  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

struct ListenAddress {
  std::string host;  // the literal as written, without brackets: "127.0.0.1", "::1"
  uint16_t port = 0;
  IpAddress ip;
  friend bool operator==(const ListenAddress&, const ListenAddress&) = default;
};

// A client network: addresses whose first `prefix` bits (counted on the mapped 128-bit
// form for IPv4) equal those of `network`.
struct Cidr {
  IpAddress network;
  int prefix = 0;  // 0..128 on the mapped form
  bool Contains(const IpAddress& address) const noexcept;
  friend bool operator==(const Cidr&, const Cidr&) = default;
};

// Who a peer address is for per-client limits: "addr:" and an IPv4 address (also when
// IPv4-mapped), or an IPv6 address's /64 ("addr:2001:db8:1:2::/64"), since a host on an
// IPv6 network may use any address of its /64 and a subscriber usually holds a whole one.
std::string AddressClientKey(const IpAddress& address);

// Parses an address literal (IPv4 dotted quad or IPv6). Errors: a message saying why.
tl::expected<IpAddress, std::string> ParseIpAddress(std::string_view text) noexcept;

// "a.b.c.d:port" or "[v6]:port", port 1..65535. Errors: a message saying what is wrong.
tl::expected<ListenAddress, std::string> ParseListenAddress(std::string_view text) noexcept;

// "a.b.c.d/n" (n 0..32), "v6/n" (n 0..128) or a plain address (one host). Host bits must be
// zero ("10.1.2.3/8" is refused: it usually means a typo). Errors: a message.
tl::expected<Cidr, std::string> ParseCidr(std::string_view text) noexcept;

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CONFIG_NET_ADDRESS_H_
