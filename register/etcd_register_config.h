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

#include "base/toml_fields.h"

namespace snowflake::daemon {

struct EtcdRegisterConfig {
  std::vector<std::string> endpoints;  // required
  std::string prefix = "/snowflaked/";
  int64_t lease_ttl_s = 10;
  int64_t connect_timeout_ms = 1000;
  int64_t request_timeout_ms = 3000;
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
// request_timeout_ms not below lease_ttl_s, cert_file without key_file (or the reverse),
// TLS files without an https:// endpoint, password and password_file both, a password
// without user or a user without one.
[[nodiscard]] tl::expected<EtcdRegisterConfig, ConfigError> ParseEtcdRegisterConfig(
    const toml::table& register_table, std::string_view source) noexcept;

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_REGISTER_ETCD_REGISTER_CONFIG_H_
