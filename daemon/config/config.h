// The daemon's configuration: every key of systemd/snowflaked.toml with its default, and
// the loader that validates a TOML file against it (docs/daemon.md is the reference).
//
// Config is a plain value type; LoadConfig() and ParseConfig() are safe to call from any
// thread.

#ifndef SNOWFLAKE_DAEMON_CONFIG_CONFIG_H_
#define SNOWFLAKE_DAEMON_CONFIG_CONFIG_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "register/register_backends.h"
#include "register/register_settings.h"
#include "snowflake/id_layout.h"
#include "util/toml_fields.h"

namespace snowflake::daemon {

struct Config {
  struct Daemon {
    std::filesystem::path runtime_dir = "/run/snowflaked";
    std::filesystem::path state_dir{reg::kDefaultStateDir};
    std::string instance = "default";
    std::string log_level = "info";
    std::string group;  // empty: the daemon's primary group
    // The one liveness setting: clients report a heartbeat older than this as "not
    // heartbeating" (it is in the segment header), the daemon beats well within it, and no
    // client takes an ID older than ring.max_age_ms + liveness_ms from a dead or hung
    // daemon's ring.
    int64_t liveness_ms = 50;
    friend bool operator==(const Daemon&, const Daemon&) = default;
  };
  struct Id {
    int64_t epoch_unix_ms = kDefaultEpochUnixMs;
    // id.layout: the bits of time, machine and sequence, fixed for the life of the epoch.
    IdBits bits = kDefaultIdBits;
    friend bool operator==(const Id&, const Id&) = default;
  };
  struct Clock {
    int64_t max_backward_ms = 100;
    // A stored mark (host mark, state file) further than this past the clock is refused,
    // never adopted (register_settings.h).
    int64_t max_forward_ms = reg::kDefaultMaxForwardMs;
    friend bool operator==(const Clock&, const Clock&) = default;
  };
  struct Ring {
    uint64_t capacity = 4096;
    int64_t max_age_ms = 0;
    uint64_t min_fill = 64;
    friend bool operator==(const Ring&, const Ring&) = default;
  };
  struct Persistence {
    int64_t reservation_ms = 1000;
    friend bool operator==(const Persistence&, const Persistence&) = default;
  };
  struct Systemd {
    int64_t status_interval_ms = 1000;
    friend bool operator==(const Systemd&, const Systemd&) = default;
  };

  // The HTTP front (docs/http.md). Off while `listen` is empty.
  struct Http {
    std::vector<std::string> listen;  // "127.0.0.1:8080", "[::1]:8080"
    std::vector<std::string> allow = {"127.0.0.0/8", "::1/128"};  // client networks (CIDR)
    // The admin listener (docs/http.md, "The admin listener"): plain HTTP on these
    // addresses, /healthz, /v1/status and /metrics only, for networks in admin_allow. Set,
    // the `listen` addresses no longer answer /v1/status and /metrics. Empty: none.
    std::vector<std::string> admin_listen;
    std::vector<std::string> admin_allow = {"127.0.0.0/8", "::1/128"};
    uint64_t max_connections = 256;
    // Connections one source may hold at once, handshakes under way included (an IPv4
    // address, or an IPv6 /64 as per-client limits group them); past it a new one is closed
    // as it is accepted, so no single source can hold the front's slots or its handshake
    // places (16 of 256 and of 64 by default).
    uint64_t max_connections_per_source = 16;
    // A connection older than this is closed after its next reply ("Connection: close"),
    // so callers reconnect (and re-handshake, after a CA rotation). 0: no maximum.
    int64_t max_connection_age_ms = 3'600'000;
    uint64_t max_requests_per_connection = 100000;
    uint64_t max_header_bytes = 8192;
    int64_t idle_timeout_ms = 10000;  // a whole request must arrive within this
    int64_t write_timeout_ms = 5000;
    uint64_t threads = 2;
    uint64_t max_services = 64;  // distinct service names served over HTTP
    // TLS (docs/http.md, "TLS"): with a certificate and its key every listener speaks
    // TLS 1.2/1.3 only; without, plain HTTP. With a client CA, only callers presenting a
    // certificate it signed complete the handshake (mutual TLS). Empty: not set.
    std::filesystem::path tls_cert_file;
    std::filesystem::path tls_key_file;
    std::filesystem::path tls_client_ca_file;
    // With a client CA: its CRLs (PEM), checked for every client certificate (a revoked
    // one fails the handshake); reloaded with the other files. Empty: no CRL check.
    std::filesystem::path tls_client_crl_file;
    // The fraction of the machine number's IDs per millisecond (id.layout) the front may hand
    // out (the rest is the local takers'), and each client's own rate (0: no per-client
    // limit). Past either a take is answered 429 `throttled`.
    double max_share = 0.5;
    uint64_t per_client_ids_per_s = 0;
    // With TLS (docs/security.md, "The network"): a handshake must end within
    // tls_handshake_timeout_ms of connecting, and at most tls_max_handshakes connections
    // may be handshaking at once (past it a new one is closed as it is accepted); neither
    // holds a max_connections slot. The lowest version served ("1.2" or "1.3"), the TLS 1.2
    // cipher list, TLS 1.3's suites (all AEAD; OpenSSL's three by default) and the
    // key-exchange groups, in OpenSSL's syntax.
    int64_t tls_handshake_timeout_ms = 2000;
    uint64_t tls_max_handshakes = 64;
    std::string tls_min_version = "1.2";
    std::string tls_ciphers = "ECDHE+AESGCM:ECDHE+CHACHA20";
    std::string tls_ciphersuites =
        "TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256";
    std::string tls_groups = "X25519:P-256:P-384";
    // TLS session tickets (docs/http.md, "Session tickets"): off by default. On, tickets are
    // sealed with a key that seals for tls_session_ticket_rotate_s and is accepted for one
    // more such period, then wiped; a ticket lives at most one period.
    bool tls_session_tickets = false;
    int64_t tls_session_ticket_rotate_s = 3600;
    // Authorization ([[http.authorize]], docs/http.md, "Authorization"): what one caller
    // may use. `identity` is a client key as per-client limits count it ("uri:<SAN URI>",
    // "cert:<sha256>", "addr:<IPv4>", "addr:<IPv6 /64>") or "*" (every caller without an
    // entry of its own); `services` service names or "*"; `endpoints` of "id", "ids",
    // "status", "metrics", "decode", "bounds" (/healthz is always answered). Empty: every
    // admitted caller may use everything.
    struct Grant {
      std::string identity;
      std::vector<std::string> services;
      std::vector<std::string> endpoints;
      friend bool operator==(const Grant&, const Grant&) = default;
    };
    std::vector<Grant> authorize;
    bool tls() const { return !tls_cert_file.empty(); }
    friend bool operator==(const Http&, const Http&) = default;
  };

  Daemon daemon;
  Id id;
  // The [register] table ("register" is a C++ keyword): the shared keys here, each
  // backend's own parsed by that backend (register_backends.h).
  reg::RegisterConfig machine_register;
  Clock clock;
  Ring ring;
  Persistence persistence;
  Systemd systemd;
  Http http;

  // The register file in effect: machine_register.path, or <state_dir>/register.json.
  std::filesystem::path RegisterPath() const;
  // The high-water state file: <state_dir>/high-water.json.
  std::filesystem::path HighWaterPath() const;

  friend bool operator==(const Config&, const Config&) = default;
};

// ConfigError: util/toml_fields.h.

// Parses and validates TOML text; `source` names it in error messages (a path, or
// "built-in defaults"). Keys absent from the text keep their defaults.
// Errors (each names the source, line and key): TOML syntax, an unknown table or key at
// any depth, a wrong type, a value out of range, inconsistent keys (min_fill > capacity),
// an unknown register.backend (naming the known ones), a key of another backend's
// (register.machine without backend "static", [register.etcd] without "etcd"), and
// whatever the named backend's own parser refuses (register_backends.h).
[[nodiscard]] tl::expected<Config, util::ConfigError> ParseConfig(std::string_view toml_text,
                                                                  std::string_view source) noexcept;

// Reads and parses the file at `path`. Errors: those of ParseConfig and of ReadConfigText()
// (util/toml_fields.h: the file cannot be read, or is larger than kMaxConfigBytes).
[[nodiscard]] tl::expected<Config, util::ConfigError> LoadConfig(
    const std::filesystem::path& path) noexcept;

// Checks a log level name (trace, debug, info, warn, error, critical, off).
bool IsValidLogLevel(std::string_view level) noexcept;

// The text of systemd/snowflaked.toml, embedded at build time: the commented sample whose
// values are the built-in defaults (ParseConfig of it equals Config{}).
std::string_view DefaultConfigText() noexcept;

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CONFIG_CONFIG_H_
