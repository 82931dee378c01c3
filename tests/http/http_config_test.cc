// [http] config keys and the address parsers behind them (daemon/config/config.cc,
// daemon/config/net_address.cc).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "daemon/config/config.h"
#include "daemon/config/net_address.h"

namespace snowflake::daemon {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(std::string_view text) {
  auto result = ParseConfig(text, "/etc/snowflaked.toml");
  if (result) return "(no error)";
  return result.error().message;
}

TEST(HttpConfig, OffByDefaultWithLoopbackAllowed) {
  const Config sut;

  EXPECT_TRUE(sut.http.listen.empty());
  EXPECT_EQ(sut.http.allow, (std::vector<std::string>{"127.0.0.0/8", "::1/128"}));
}

TEST(HttpConfig, ParsesEveryKey) {
  auto sut = ParseConfig(R"(
[http]
listen = ["127.0.0.1:8080", "[::1]:8081"]
allow = ["10.0.0.0/8", "192.168.1.7", "fd00::/8"]
max_connections = 100
max_requests_per_connection = 5
max_header_bytes = 4096
idle_timeout_ms = 500
write_timeout_ms = 600
threads = 3
max_services = 7
tls_cert_file = "/etc/snowflaked/tls/tls.crt"
tls_key_file = "/etc/snowflaked/tls/tls.key"
tls_client_ca_file = "/etc/snowflaked/tls/ca.crt"
tls_client_crl_file = "/etc/snowflaked/tls/crl.pem"
max_share = 0.25
per_client_ids_per_s = 1000
tls_handshake_timeout_ms = 1500
tls_max_handshakes = 16
tls_min_version = "1.3"
tls_ciphers = "ECDHE+AESGCM"
tls_groups = "X25519:P-256"
tls_session_tickets = true
tls_session_ticket_rotate_s = 600
)",
                         "x.toml");

  ASSERT_TRUE(sut) << sut.error().message;
  EXPECT_EQ(sut->http.listen, (std::vector<std::string>{"127.0.0.1:8080", "[::1]:8081"}));
  EXPECT_EQ(sut->http.allow.size(), 3u);
  EXPECT_EQ(sut->http.max_connections, 100u);
  EXPECT_EQ(sut->http.max_requests_per_connection, 5u);
  EXPECT_EQ(sut->http.max_header_bytes, 4096u);
  EXPECT_EQ(sut->http.idle_timeout_ms, 500);
  EXPECT_EQ(sut->http.write_timeout_ms, 600);
  EXPECT_EQ(sut->http.threads, 3u);
  EXPECT_EQ(sut->http.max_services, 7u);
  EXPECT_TRUE(sut->http.tls());
  EXPECT_EQ(sut->http.tls_cert_file, "/etc/snowflaked/tls/tls.crt");
  EXPECT_EQ(sut->http.tls_key_file, "/etc/snowflaked/tls/tls.key");
  EXPECT_EQ(sut->http.tls_client_ca_file, "/etc/snowflaked/tls/ca.crt");
  EXPECT_EQ(sut->http.tls_client_crl_file, "/etc/snowflaked/tls/crl.pem");
  EXPECT_EQ(sut->http.max_share, 0.25);
  EXPECT_EQ(sut->http.per_client_ids_per_s, 1000u);
  EXPECT_EQ(sut->http.tls_handshake_timeout_ms, 1500);
  EXPECT_EQ(sut->http.tls_max_handshakes, 16u);
  EXPECT_EQ(sut->http.tls_min_version, "1.3");
  EXPECT_EQ(sut->http.tls_ciphers, "ECDHE+AESGCM");
  EXPECT_EQ(sut->http.tls_groups, "X25519:P-256");
  EXPECT_TRUE(sut->http.tls_session_tickets);
  EXPECT_EQ(sut->http.tls_session_ticket_rotate_s, 600);
}

TEST(HttpConfig, AdminListenerIsOffByDefaultAndParses) {
  const Config defaults;
  EXPECT_TRUE(defaults.http.admin_listen.empty());
  EXPECT_EQ(defaults.http.admin_allow, (std::vector<std::string>{"127.0.0.0/8", "::1/128"}));

  auto sut = ParseConfig(R"(
[http]
listen = ["0.0.0.0:8080", "[::1]:8080"]
admin_listen = ["127.0.0.1:9090", "[::1]:9090"]
admin_allow = ["10.1.0.0/16", "::1"]
)",
                         "x.toml");

  ASSERT_TRUE(sut) << sut.error().message;
  EXPECT_EQ(sut->http.admin_listen, (std::vector<std::string>{"127.0.0.1:9090", "[::1]:9090"}));
  EXPECT_EQ(sut->http.admin_allow, (std::vector<std::string>{"10.1.0.0/16", "::1"}));
  // The same port in the other family is another socket (the listeners are IPv6-only).
  auto other_family =
      ParseConfig("[http]\nlisten = [\"0.0.0.0:8080\"]\nadmin_listen = [\"[::1]:8080\"]\n", "x");
  EXPECT_TRUE(other_family) << other_family.error().message;
}

TEST(HttpConfig, AdminListenerAddressesAreRefusedWithWhatToDo) {
  struct Case {
    const char* text;
    const char* expected;
  };
  const Case cases[] = {
      {"[http]\nlisten = [\"127.0.0.1:80\"]\nadmin_listen = \"127.0.0.1:90\"\n",
       "/etc/snowflaked.toml:3: http.admin_listen: must be an array"},
      {"[http]\nlisten = [\"127.0.0.1:80\"]\nadmin_listen = [\"localhost:90\"]\n",
       "/etc/snowflaked.toml:3: http.admin_listen: must be \"IPv4:port\""},
      {"[http]\nlisten = [\"127.0.0.1:80\"]\nadmin_listen = [\"::1:90\"]\n",
       "put an IPv6 address in brackets"},
      {"[http]\nlisten = [\"127.0.0.1:80\"]\nadmin_listen = [\"127.0.0.1:90\"]\n"
       "admin_allow = [\"10.1.2.3/8\"]\n",
       "/etc/snowflaked.toml:4: http.admin_allow: must be a network like"},
      {"[http]\nlisten = [\"127.0.0.1:80\"]\nadmin_listen = [\"127.0.0.1:90\"]\n"
       "admin_allow = [\"example.com\"]\n",
       "http.admin_allow"},
      // The ID listener's own address: refused, not left to fail at bind.
      {"[http]\nlisten = [\"127.0.0.1:8080\"]\nadmin_listen = [\"127.0.0.1:8080\"]\n",
       "/etc/snowflaked.toml:3: http.admin_listen: \"127.0.0.1:8080\" is also an address of "
       "http.listen (\"127.0.0.1:8080\"): give the admin listener a port of its own"},
      {"[http]\nlisten = [\"[::1]:8080\"]\nadmin_listen = [\"[0:0::1]:8080\"]\n",
       "http.admin_listen: \"[0:0::1]:8080\" is also an address of http.listen"},
      {"[http]\nlisten = [\"0.0.0.0:8080\"]\nadmin_listen = [\"127.0.0.1:8080\"]\n",
       "http.admin_listen: \"127.0.0.1:8080\" is also an address of http.listen "
       "(\"0.0.0.0:8080\")"},
      {"[http]\nlisten = [\"127.0.0.1:8080\"]\nadmin_listen = [\"0.0.0.0:8080\"]\n",
       "is also an address of http.listen"},
      {"[http]\nlisten = [\"127.0.0.1:80\"]\nadmin_listen = [\"127.0.0.1:90\", \"127.0.0.1:90\"]\n",
       "http.admin_listen: names \"127.0.0.1:90\" twice"},
      {"[http]\nadmin_listen = [\"127.0.0.1:9090\"]\n",
       "http.admin_listen: needs http.listen (the admin listener is part of the HTTP front"},
      {"[http]\nlisten = [\"127.0.0.1:80\"]\nadmin_allow = [\"10.0.0.0/8\"]\n",
       "/etc/snowflaked.toml:3: http.admin_allow: has no effect without http.admin_listen"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ErrorOf(c.text), HasSubstr(c.expected)) << c.text;
  }
}

TEST(HttpConfig, AuthorizeEntriesParseAndBadOnesNameTheKey) {
  auto sut = ParseConfig(R"(
[[http.authorize]]
identity = "uri:spiffe://example.org/orders"
services = ["orders", "orders-eu"]
endpoints = ["id", "ids"]
[[http.authorize]]
identity = "*"
services = []
endpoints = ["metrics", "decode", "bounds"]
)",
                         "x.toml");
  ASSERT_TRUE(sut) << sut.error().message;
  ASSERT_EQ(sut->http.authorize.size(), 2u);
  EXPECT_EQ(sut->http.authorize[0].identity, "uri:spiffe://example.org/orders");
  EXPECT_EQ(sut->http.authorize[0].services, (std::vector<std::string>{"orders", "orders-eu"}));
  EXPECT_EQ(sut->http.authorize[1].endpoints,
            (std::vector<std::string>{"metrics", "decode", "bounds"}));
  EXPECT_TRUE(Config().http.authorize.empty());

  EXPECT_THAT(ErrorOf("[http]\nauthorize = \"all\"\n"),
              HasSubstr("http.authorize: must be tables written [[http.authorize]]"));
  EXPECT_THAT(ErrorOf("[[http.authorize]]\nidentity = \"bob\"\nservices = []\nendpoints = []\n"),
              HasSubstr("http.authorize.identity: must be \"*\" or a client"));
  EXPECT_THAT(ErrorOf("[[http.authorize]]\nidentity = \"*\"\nservices = [\"A\"]\nendpoints = []\n"),
              HasSubstr("http.authorize.services: must be service names"));
  EXPECT_THAT(
      ErrorOf("[[http.authorize]]\nidentity = \"*\"\nservices = []\nendpoints = [\"healthz\"]\n"),
      HasSubstr("http.authorize.endpoints: must be endpoints of"));
  EXPECT_THAT(ErrorOf("[[http.authorize]]\nidentity = \"*\"\n"),
              HasSubstr("each entry needs identity, services and endpoints"));
  EXPECT_THAT(ErrorOf("[[http.authorize]]\nidentity = \"*\"\nservices = []\nendpoints = []\n"
                      "[[http.authorize]]\nidentity = \"*\"\nservices = []\nendpoints = []\n"),
              HasSubstr("names identity \"*\" twice"));
  EXPECT_THAT(ErrorOf("[[http.authorize]]\nidentity = \"*\"\nservices = []\nendpoints = []\n"
                      "service = \"x\"\n"),
              HasSubstr("http.authorize.service: unknown key"));
}

TEST(HttpConfig, TlsDefaultsAreTls12WithEcdheAeadAndAShortHandshakeDeadline) {
  const Config sut;

  EXPECT_EQ(sut.http.tls_min_version, "1.2");
  EXPECT_EQ(sut.http.tls_ciphers, "ECDHE+AESGCM:ECDHE+CHACHA20");
  EXPECT_EQ(sut.http.tls_groups, "X25519:P-256:P-384");
  EXPECT_EQ(sut.http.tls_handshake_timeout_ms, 2000);
  EXPECT_EQ(sut.http.tls_max_handshakes, 64u);
  EXPECT_FALSE(sut.http.tls_session_tickets);
  EXPECT_EQ(sut.http.tls_session_ticket_rotate_s, 3600);
}

TEST(HttpConfig, PlainWithHalfTheMachineNumberByDefault) {
  const Config sut;

  EXPECT_FALSE(sut.http.tls());
  EXPECT_EQ(sut.http.max_share, 0.5);
  EXPECT_EQ(sut.http.per_client_ids_per_s, 0u);
  auto whole = ParseConfig("[http]\nmax_share = 1\n", "x.toml");
  ASSERT_TRUE(whole) << whole.error().message;
  EXPECT_EQ(whole->http.max_share, 1.0);
}

TEST(HttpConfig, EachBadValueNamesFileLineAndKey) {
  struct Case {
    const char* text;
    const char* expected;
  };
  const Case cases[] = {
      {"[http]\nlisten = \"127.0.0.1:80\"\n",
       "/etc/snowflaked.toml:2: http.listen: must be an array"},
      {"[http]\nlisten = [\"localhost:80\"]\n",
       "/etc/snowflaked.toml:2: http.listen: must be \"IPv4:port\""},
      {"[http]\nlisten = [\"127.0.0.1:0\"]\n", "http.listen: must be \"IPv4:port\""},
      {"[http]\nlisten = [\"127.0.0.1:65536\"]\n", "http.listen"},
      {"[http]\nlisten = [\"::1:80\"]\n", "put an IPv6 address in brackets"},
      {"[http]\nlisten = [\"127.0.0.1\"]\n", "http.listen"},
      {"[http]\nlisten = [8080]\n", "must be an array of strings, got an integer"},
      {"[http]\nallow = [\"10.1.2.3/8\"]\n", "bits after the prefix length must be zero"},
      {"[http]\nallow = [\"10.0.0.0/33\"]\n", "the prefix length is 0 to 32"},
      {"[http]\nallow = [\"example.com\"]\n", "http.allow"},
      {"[http]\nmax_connections = 0\n", "http.max_connections: must be from 1 to 100000, got 0"},
      {"[http]\nmax_requests_per_connection = 0\n", "http.max_requests_per_connection"},
      {"[http]\nmax_connections_per_source = 0\n",
       "http.max_connections_per_source: must be from 1 to 100000, got 0"},
      {"[http]\nmax_connection_age_ms = -1\n",
       "http.max_connection_age_ms: must be from 0 (no maximum) to 86400000, got -1"},
      {"[http]\nmax_header_bytes = 100\n", "http.max_header_bytes: must be from 1024 to 65536"},
      {"[http]\nidle_timeout_ms = 1\n", "http.idle_timeout_ms"},
      {"[http]\nwrite_timeout_ms = \"5s\"\n",
       "http.write_timeout_ms: must be an integer, got a string"},
      {"[http]\nthreads = 0\n", "http.threads: must be from 1 to 64"},
      {"[http]\nmax_services = 2000\n", "http.max_services"},
      {"[http]\nlisten_on = []\n", "/etc/snowflaked.toml:2: http.listen_on: unknown key"},
      {"[http]\ntls_cert_file = \"/a.crt\"\n",
       "/etc/snowflaked.toml:2: http.tls_cert_file: is set without http.tls_key_file: set both "
       "(TLS) or neither (plain HTTP)"},
      {"[http]\ntls_key_file = \"/a.key\"\n",
       "http.tls_key_file: is set without http.tls_cert_file"},
      {"[http]\ntls_client_ca_file = \"/ca.crt\"\n",
       "http.tls_client_ca_file: needs http.tls_cert_file and http.tls_key_file"},
      {"[http]\ntls_cert_file = \"/a.crt\"\ntls_key_file = \"/a.key\"\n"
       "tls_client_crl_file = \"/crl.pem\"\n",
       "http.tls_client_crl_file: needs http.tls_client_ca_file"},
      {"[http]\ntls_cert_file = \"a.crt\"\ntls_key_file = \"/a.key\"\n",
       "http.tls_cert_file: must be an absolute path"},
      {"[http]\nmax_share = 0\n", "http.max_share: must be above 0 and at most 1, got 0"},
      {"[http]\nmax_share = 1.5\n", "http.max_share: must be above 0 and at most 1"},
      {"[http]\nmax_share = \"half\"\n", "http.max_share: must be a number"},
      {"[http]\nper_client_ids_per_s = -1\n", "http.per_client_ids_per_s: must be from 0"},
      {"[http]\ntls_handshake_timeout_ms = 50\n",
       "http.tls_handshake_timeout_ms: must be from 100 to 60000, got 50"},
      {"[http]\ntls_max_handshakes = 0\n", "http.tls_max_handshakes: must be from 1 to 10000"},
      {"[http]\ntls_min_version = \"1.1\"\n",
       "http.tls_min_version: must be \"1.2\" or \"1.3\", got \"1.1\""},
      {"[http]\ntls_min_version = 1.2\n", "http.tls_min_version: must be a string"},
      {"[http]\ntls_ciphers = \"\"\n", "http.tls_ciphers: must be an OpenSSL cipher list"},
      {"[http]\ntls_ciphers = \"ECDHE AESGCM\"\n", "http.tls_ciphers: must be an OpenSSL"},
      {"[http]\ntls_groups = \"X25519;P-256\"\n", "http.tls_groups: must be group names"},
      {"[http]\ntls_groups = \"X25519\"\n",
       "http.tls_groups: has no effect without http.tls_cert_file"},
      {"[http]\ntls_session_tickets = 1\n",
       "http.tls_session_tickets: must be true or false, got an integer"},
      {"[http]\ntls_session_tickets = true\n",
       "http.tls_session_tickets: has no effect without http.tls_cert_file"},
      {"[http]\ntls_cert_file = \"/a.crt\"\ntls_key_file = \"/a.key\"\n"
       "tls_session_tickets = true\ntls_session_ticket_rotate_s = 59\n",
       "http.tls_session_ticket_rotate_s: must be from 60 to 86400 (seconds), got 59"},
      {"[http]\ntls_cert_file = \"/a.crt\"\ntls_key_file = \"/a.key\"\n"
       "tls_session_tickets = true\ntls_session_ticket_rotate_s = 86401\n",
       "http.tls_session_ticket_rotate_s: must be from 60 to 86400"},
      {"[http]\ntls_cert_file = \"/a.crt\"\ntls_key_file = \"/a.key\"\n"
       "tls_session_ticket_rotate_s = 600\n",
       "http.tls_session_ticket_rotate_s: has no effect without http.tls_session_tickets = true"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ErrorOf(c.text), HasSubstr(c.expected)) << c.text;
  }
}

TEST(NetAddress, CidrMatchesItsNetworkOnly) {
  const Cidr v4 = ParseCidr("10.0.0.0/8").value();
  const Cidr one = ParseCidr("192.168.1.7").value();
  const Cidr v6 = ParseCidr("fd00::/8").value();
  const Cidr all = ParseCidr("0.0.0.0/0").value();

  EXPECT_TRUE(v4.Contains(ParseIpAddress("10.255.0.1").value()));
  EXPECT_FALSE(v4.Contains(ParseIpAddress("11.0.0.1").value()));
  EXPECT_TRUE(one.Contains(ParseIpAddress("192.168.1.7").value()));
  EXPECT_FALSE(one.Contains(ParseIpAddress("192.168.1.8").value()));
  EXPECT_TRUE(v6.Contains(ParseIpAddress("fd12::1").value()));
  EXPECT_FALSE(v6.Contains(ParseIpAddress("fe80::1").value()));
  // IPv4 rules never match IPv6 peers (outside ::ffff:0:0/96) and vice versa.
  EXPECT_FALSE(all.Contains(ParseIpAddress("::1").value()));
  EXPECT_TRUE(all.Contains(ParseIpAddress("8.8.8.8").value()));
  EXPECT_FALSE(v6.Contains(ParseIpAddress("10.0.0.1").value()));
}

// Per-client limits key an IPv6 peer by its /64 (one host's or one subscriber's network:
// a host picks any address in it), an IPv4 peer by its address.
TEST(NetAddress, ClientKeyIsTheIpv4AddressOrTheIpv6Slash64) {
  const auto key = [](const char* text) { return AddressClientKey(ParseIpAddress(text).value()); };

  EXPECT_EQ(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff:ffff:ffff:ffff"));
  EXPECT_NE(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
  EXPECT_EQ(key("2001:db8:1:2::1"), "addr:2001:db8:1:2::/64");
  EXPECT_EQ(key("10.0.0.1"), "addr:10.0.0.1");
  EXPECT_NE(key("10.0.0.1"), key("10.0.0.2"));
  EXPECT_EQ(key("::ffff:10.0.0.1"), key("10.0.0.1"));
  EXPECT_EQ(key("::1"), "addr:::/64");
}

TEST(NetAddress, ListenAddressParsesBothFamilies) {
  auto v4 = ParseListenAddress("127.0.0.1:8080");
  auto v6 = ParseListenAddress("[::1]:9");

  ASSERT_TRUE(v4 && v6);
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 8080);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 9);
  EXPECT_FALSE(ParseListenAddress("[127.0.0.1]:80"));
  EXPECT_FALSE(ParseListenAddress("127.0.0.1:80x"));
  EXPECT_FALSE(ParseListenAddress(":80"));
}

}  // namespace
}  // namespace snowflake::daemon
