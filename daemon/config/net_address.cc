#include "daemon/config/net_address.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "util/decimal.h"

namespace snowflake::daemon {

bool Cidr::Contains(const IpAddress& address) const noexcept {
  int bits = prefix;
  for (size_t i = 0; i < 16 && bits > 0; ++i, bits -= 8) {
    const uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - bits));
    if ((address.bytes[i] & mask) != (network.bytes[i] & mask)) return false;
  }
  return true;
}

std::string AddressClientKey(const IpAddress& address) {
  char text[INET6_ADDRSTRLEN] = {};
  const bool mapped = address.v4 || (std::all_of(address.bytes.begin(), address.bytes.begin() + 10,
                                                 [](uint8_t b) { return b == 0; }) &&
                                     address.bytes[10] == 0xff && address.bytes[11] == 0xff);
  if (mapped) {
    inet_ntop(AF_INET, address.bytes.data() + 12, text, sizeof text);
    return std::string("addr:") + text;
  }
  std::array<uint8_t, 16> network{};
  std::copy(address.bytes.begin(), address.bytes.begin() + 8, network.begin());
  inet_ntop(AF_INET6, network.data(), text, sizeof text);
  return std::string("addr:") + text + "/64";
}

tl::expected<IpAddress, std::string> ParseIpAddress(std::string_view text) noexcept {
  if (text.empty() || text.size() > 45)
    return tl::unexpected(std::string("not an IP address literal"));
  char buffer[46] = {};
  std::memcpy(buffer, text.data(), text.size());
  IpAddress out;
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, buffer, &v4) == 1) {
    out.v4 = true;
    out.bytes[10] = 0xff;
    out.bytes[11] = 0xff;
    std::memcpy(out.bytes.data() + 12, &v4, 4);
    return out;
  }
  if (inet_pton(AF_INET6, buffer, &v6) == 1) {
    std::memcpy(out.bytes.data(), &v6, 16);
    return out;
  }
  return tl::unexpected(
      std::string("not an IPv4 or IPv6 address literal (host names are not accepted)"));
}

tl::expected<ListenAddress, std::string> ParseListenAddress(std::string_view text) noexcept {
  try {
    const std::string expected =
        "must be \"IPv4:port\" or \"[IPv6]:port\" with a port from 1 to 65535";
    std::string_view host;
    std::string_view port;
    if (!text.empty() && text.front() == '[') {
      const size_t close = text.find(']');
      if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
        return tl::unexpected(expected);
      }
      host = text.substr(1, close - 1);
      port = text.substr(close + 2);
      if (host.find(':') == std::string_view::npos) return tl::unexpected(expected);
    } else {
      const size_t colon = text.rfind(':');
      if (colon == std::string_view::npos) return tl::unexpected(expected);
      host = text.substr(0, colon);
      port = text.substr(colon + 1);
      if (host.find(':') != std::string_view::npos) {
        return tl::unexpected(expected + " (put an IPv6 address in brackets)");
      }
    }
    const std::optional<uint32_t> port_number = util::ParseDecimal<uint32_t>(port, 5);
    if (!port_number || *port_number < 1 || *port_number > 65535) {
      return tl::unexpected(expected);
    }
    auto ip = ParseIpAddress(host);
    if (!ip) return tl::unexpected(expected + " (" + ip.error() + ")");
    return ListenAddress{std::string(host), static_cast<uint16_t>(*port_number), *ip};
  } catch (...) {
    return tl::unexpected(std::string("out of memory"));
  }
}

tl::expected<Cidr, std::string> ParseCidr(std::string_view text) noexcept {
  try {
    const size_t slash = text.find('/');
    auto ip = ParseIpAddress(text.substr(0, slash));
    const std::string expected =
        "must be a network like \"10.0.0.0/8\", \"::1/128\" or one address";
    if (!ip) return tl::unexpected(expected + " (" + ip.error() + ")");
    const uint32_t max_prefix = ip->v4 ? 32 : 128;
    const std::optional<uint32_t> prefix =
        slash == std::string_view::npos ? max_prefix
                                        : util::ParseDecimal<uint32_t>(text.substr(slash + 1), 3);
    if (!prefix || *prefix > max_prefix) {
      return tl::unexpected(expected + " (the prefix length is 0 to " + std::to_string(max_prefix) +
                            ")");
    }
    Cidr cidr{*ip, static_cast<int>(*prefix + (ip->v4 ? 96 : 0))};
    // Host bits set: "10.1.2.3/8" usually means a typo in the length or the address.
    for (int bit = cidr.prefix; bit < 128; ++bit) {
      if ((cidr.network.bytes[bit / 8] >> (7 - bit % 8)) & 1) {
        return tl::unexpected(expected + " (bits after the prefix length must be zero)");
      }
    }
    return cidr;
  } catch (...) {
    return tl::unexpected(std::string("out of memory"));
  }
}

}  // namespace snowflake::daemon
