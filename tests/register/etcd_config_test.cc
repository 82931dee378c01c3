// [register.etcd] in the config (daemon/config/config.cc): defaults, every key, and an error
// naming file:line and key for each kind of mistake.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "daemon/config/config.h"

namespace snowflake::reg {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(std::string_view text) {
  auto result = daemon::ParseConfig(text, "/etc/snowflaked.toml");
  if (result) return "(no error)";
  return result.error().message;
}

constexpr std::string_view kEtcd = "[register]\nbackend = \"etcd\"\n[register.etcd]\n";

std::string With(std::string_view lines) { return std::string(kEtcd) + std::string(lines); }

TEST(EtcdConfig, DefaultsApplyWithEndpointsOnly) {
  auto sut = daemon::ParseConfig(
      With("endpoints = [\"http://127.0.0.1:2379\", \"https://e2:2379/\"]\n"), "x");
  ASSERT_TRUE(sut) << sut.error().message;
  const auto& etcd = std::get<EtcdRegisterConfig>(sut->machine_register.options);
  EXPECT_EQ(sut->machine_register.backend(), "etcd");
  EXPECT_EQ(etcd.endpoints, (std::vector<std::string>{"http://127.0.0.1:2379", "https://e2:2379"}));
  EXPECT_EQ(etcd.prefix, "/snowflaked/");
  EXPECT_EQ(etcd.lease_ttl_s, 10);
  EXPECT_EQ(etcd.request_timeout_ms, 3000);
  EXPECT_EQ(etcd.connect_timeout_ms, 1000);
  EXPECT_EQ(etcd.mark_reservation_ms, 30'000);
}

TEST(EtcdConfig, ReadsEveryKey) {
  auto sut = daemon::ParseConfig(
      "[register]\nbackend = \"etcd\"\nmachines = \"0-511\"\n[register.etcd]\n"
      "endpoints = [\"https://[::1]:2379\"]\nprefix = \"/fleet-a/\"\nlease_ttl_s = 4\n"
      "connect_timeout_ms = 200\nrequest_timeout_ms = 1500\nca_file = \"/etc/ca.pem\"\n"
      "cert_file = \"/etc/c.pem\"\nkey_file = \"/etc/k.pem\"\nuser = \"sf\"\n"
      "password_file = \"/etc/pw\"\nmark_reservation_ms = 0\n",
      "x");
  ASSERT_TRUE(sut) << sut.error().message;
  const auto& etcd = std::get<EtcdRegisterConfig>(sut->machine_register.options);
  EXPECT_EQ(sut->machine_register.last_machine, 511u);
  EXPECT_EQ(etcd.prefix, "/fleet-a/");
  EXPECT_EQ(etcd.lease_ttl_s, 4);
  EXPECT_EQ(etcd.connect_timeout_ms, 200);
  EXPECT_EQ(etcd.request_timeout_ms, 1500);
  EXPECT_EQ(etcd.ca_file, "/etc/ca.pem");
  EXPECT_EQ(etcd.cert_file, "/etc/c.pem");
  EXPECT_EQ(etcd.key_file, "/etc/k.pem");
  EXPECT_EQ(etcd.user, "sf");
  EXPECT_EQ(etcd.password_file, "/etc/pw");
  EXPECT_EQ(etcd.mark_reservation_ms, 0);
}

TEST(EtcdConfig, ErrorsNameFileLineAndKey) {
  EXPECT_THAT(ErrorOf("[register]\nbackend = \"etcd\"\n"),
              HasSubstr("register.etcd.endpoints: required when register.backend = \"etcd\""));
  EXPECT_THAT(ErrorOf(With("endpoints = []\n")),
              HasSubstr(":4: register.etcd.endpoints: must list 1 to 16 endpoints"));
  EXPECT_THAT(ErrorOf(With("endpoints = \"http://a:1\"\n")),
              HasSubstr(":4: register.etcd.endpoints: must be an array"));
  EXPECT_THAT(ErrorOf(With("endpoints = [\"a:2379\"]\n")),
              HasSubstr("register.etcd.endpoints: each endpoint must be"));
  EXPECT_THAT(ErrorOf(With("endpoints = [\"http://a:2379/v3\"]\n")),
              HasSubstr("register.etcd.endpoints: each endpoint must be"));
  EXPECT_THAT(ErrorOf(With("endpoints = [\"http://a:70000\"]\n")),
              HasSubstr("register.etcd.endpoints"));
  EXPECT_THAT(ErrorOf(With("endpoints = [\"http://u:p@a:1\"]\n")),
              HasSubstr("register.etcd.endpoints"));
  EXPECT_THAT(ErrorOf(With("endpoints = [1]\n")),
              HasSubstr("each endpoint must be a string, got an integer"));
  const std::string ok = "endpoints = [\"http://a:1\"]\n";
  EXPECT_THAT(ErrorOf(With(ok + "prefix = \"snow\"\n")),
              HasSubstr(":5: register.etcd.prefix: must be 2 to 128"));
  EXPECT_THAT(ErrorOf(With(ok + "prefix = \"/a b/\"\n")), HasSubstr("register.etcd.prefix"));
  EXPECT_THAT(ErrorOf(With(ok + "lease_ttl_s = 1\n")),
              HasSubstr(":5: register.etcd.lease_ttl_s: must be from 2 to 3600, got 1"));
  EXPECT_THAT(ErrorOf(With(ok + "mark_reservation_ms = 500\n")),
              HasSubstr(":5: register.etcd.mark_reservation_ms: must be 0 (off) or from 1000 to "
                        "600000, got 500"));
  EXPECT_THAT(
      ErrorOf(With(ok + "mark_reservation_ms = 600001\n")),
      HasSubstr("register.etcd.mark_reservation_ms: must be 0 (off) or from 1000 to 600000"));
  EXPECT_THAT(ErrorOf(With(ok + "mark_reservation_ms = 5000\n")),
              HasSubstr(":5: register.etcd.mark_reservation_ms: must be at least twice "
                        "register.etcd.request_timeout_ms (3000 ms)"));
  // The default window with a long timeout: the rule binds only a window one sets.
  EXPECT_EQ(ErrorOf(With(ok + "lease_ttl_s = 60\nrequest_timeout_ms = 20000\n")), "(no error)");
  EXPECT_THAT(ErrorOf(With(ok + "request_timeout_ms = 50\n")),
              HasSubstr("register.etcd.request_timeout_ms: must be from 100 to 60000"));
  EXPECT_THAT(ErrorOf(With(ok + "lease_ttl_s = 2\nrequest_timeout_ms = 2000\n")),
              HasSubstr(":6: register.etcd.request_timeout_ms: must be below "
                        "register.etcd.lease_ttl_s"));
  EXPECT_THAT(ErrorOf(With(ok + "connect_timeout_ms = \"1\"\n")),
              HasSubstr("register.etcd.connect_timeout_ms: must be an integer, got a string"));
  EXPECT_THAT(ErrorOf(With(ok + "ca_file = \"ca.pem\"\n")),
              HasSubstr("register.etcd.ca_file: must be an absolute path"));
  EXPECT_THAT(ErrorOf(With(ok + "ca_file = \"/ca.pem\"\n")),
              HasSubstr("no endpoint uses https://"));
  EXPECT_THAT(ErrorOf(With("endpoints = [\"https://a:1\"]\ncert_file = \"/c.pem\"\n")),
              HasSubstr("register.etcd.key_file: register.etcd.cert_file and "
                        "register.etcd.key_file go together"));
  EXPECT_THAT(ErrorOf(With(ok + "user = \"u\"\n")),
              HasSubstr("register.etcd.user: a user needs register.etcd.password"));
  EXPECT_THAT(ErrorOf(With(ok + "password = \"p\"\n")),
              HasSubstr("register.etcd.password: a password needs register.etcd.user"));
  EXPECT_THAT(ErrorOf(With(ok + "user = \"u\"\npassword = \"p\"\npassword_file = \"/p\"\n")),
              HasSubstr("not both"));
  EXPECT_THAT(ErrorOf(With(ok + "endpoint = []\n")),
              HasSubstr(":5: register.etcd.endpoint: unknown key"));
  EXPECT_THAT(ErrorOf("[register]\nbackend = \"etcd\"\netcd = 3\n"),
              HasSubstr(":3: register.etcd: must be a table, got an integer"));
}

TEST(EtcdConfig, EtcdTableWithAnotherBackendIsAnError) {
  EXPECT_THAT(ErrorOf("[register.etcd]\nendpoints = [\"http://a:1\"]\n"),
              HasSubstr("register.etcd: only valid with register.backend = \"etcd\""));
}

}  // namespace
}  // namespace snowflake::reg
