// The etcd register backend's own config: the [register.etcd] table (docs/daemon.md, "The
// etcd register"), parsed and checked here, not by the central config loader.
//
// Plain values and a pure function: safe from any thread.

#ifndef SNOWFLAKE_REGISTER_ETCD_REGISTER_CONFIG_H_
#define SNOWFLAKE_REGISTER_ETCD_REGISTER_CONFIG_H_

#include <toml++/toml.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "util/toml_fields.h"

namespace snowflake::reg {

// register.etcd.mark_reservation_ms: 30 s by default, a raise every 15 s per holder, so
// a fleet writes hosts / 15 marks a second (docs/operations.md, "A fleet's etcd"), while a
// successor of a crashed holder waits at most half a minute. 0, or 1 s to 10 min.
inline constexpr int64_t kDefaultMarkReservationMs = 30'000;
inline constexpr int64_t kMinMarkReservationMs = 1'000;
inline constexpr int64_t kMaxMarkReservationMs = 600'000;
inline constexpr const char* kMarkReservationRange = "0 (off) or from 1000 to 600000";

struct EtcdRegisterConfig {
  std::vector<std::string> endpoints;  // required
  std::string prefix = "/snowflaked/";
  int64_t lease_ttl_s = 10;
  int64_t connect_timeout_ms = 1000;
  int64_t request_timeout_ms = 3000;
  // How far ahead of the clock the high-water mark in etcd is raised (the daemon raises it
  // again once less than half is left): one raft write per holder per
  // mark_reservation_ms / 2, whatever the host hands out. The cost: a successor of a holder
  // that crashed waits for the clock to pass its mark, at most this long (a fresh number or
  // one cleanly stopped never waits). 0: the mark follows persistence.reservation_ms.
  int64_t mark_reservation_ms = kDefaultMarkReservationMs;
  std::filesystem::path ca_file;    // TLS (https endpoints): empty = system CAs
  std::filesystem::path cert_file;  // client certificate, with key_file
  std::filesystem::path key_file;
  std::string user;      // etcd authentication: empty = none
  std::string password;  // or password_file (exactly one, with user)
  std::filesystem::path password_file;
  friend bool operator==(const EtcdRegisterConfig&, const EtcdRegisterConfig&) = default;
};

// Reads register.etcd from `register_table` (the whole [register] table; the keys every
// backend shares are the config loader's). `source` names the file in messages.
// Errors (each names the source, the line and the key): [register.etcd] missing or without
// endpoints, not a table, an unknown key in it, a wrong type or a value out of range,
// request_timeout_ms not below lease_ttl_s, mark_reservation_ms below twice
// request_timeout_ms, cert_file without key_file (or the reverse),
// TLS files without an https:// endpoint, password and password_file both, a password
// without user or a user without one.
[[nodiscard]] tl::expected<EtcdRegisterConfig, util::ConfigError> ParseEtcdRegisterConfig(
    const toml::table& register_table, std::string_view source) noexcept;

}  // namespace snowflake::reg

#endif  // SNOWFLAKE_REGISTER_ETCD_REGISTER_CONFIG_H_
