#include "daemon/config/config.h"

#include <toml++/toml.h>

#include <functional>
#include <map>

#include "daemon/config/net_address.h"
#include "default_config.h"  // generated from systemd/snowflaked.toml
#include "register/register_settings.h"
#include "util/toml_fields.h"

namespace snowflake::daemon {
namespace {

using Invalid = util::ConfigInvalid;

std::string_view TypeName(const toml::node& node) { return util::TomlFields::TypeName(node); }
std::string Shown(const toml::node& node) { return util::TomlFields::Shown(node); }

class Validator {
 public:
  Validator(std::string_view source, Config& config)
      : source_(source), fields_(source), config_(config) {}

  void Run(const toml::table& root) {
    using Handler = std::function<void(const std::string&, const toml::node&)>;
    using Section = std::map<std::string, Handler, std::less<>>;
    const std::map<std::string, Section, std::less<>> schema = {
        {"daemon",
         {{"runtime_dir",
           [&](auto& k, auto& n) { config_.daemon.runtime_dir = Path(k, n, false); }},
          {"state_dir", [&](auto& k, auto& n) { config_.daemon.state_dir = Path(k, n, false); }},
          {"instance", [&](auto& k, auto& n) { config_.daemon.instance = Instance(k, n); }},
          {"log_level", [&](auto& k, auto& n) { config_.daemon.log_level = LogLevel(k, n); }},
          {"group", [&](auto& k, auto& n) { config_.daemon.group = Group(k, n); }},
          {"liveness_ms",
           [&](auto& k, auto& n) {
             config_.daemon.liveness_ms = Integer(k, n, 10, 10'000, "from 10 to 10000");
           }}}},
        {"id",
         {{"epoch", [&](auto& k, auto& n) { config_.id.epoch_unix_ms = fields_.Epoch(k, n); }},
          // Read in CheckConsistency(), once the epoch its messages count years from is known.
          {"layout", [&](auto&, auto& n) { layout_node_ = &n; }}}},
        // [register]: read whole by the register's own reader (register_settings.h), which
        // snowflakectl's register commands use too.
        {"register", {}},
        {"clock",
         {{"max_backward_ms",
           [&](auto& k, auto& n) {
             config_.clock.max_backward_ms = Integer(k, n, 0, 60'000, "from 0 to 60000");
           }},
          {"max_forward_ms",
           [&](auto&, auto& n) {
             config_.clock.max_forward_ms = reg::ReadMaxForwardMs(fields_, n);
           }}}},
        {"ring",
         {{"capacity",
           [&](auto& k, auto& n) {
             const int64_t v = Integer(k, n, INT64_MIN, INT64_MAX, "");
             if (v < 1 || v > (int64_t{1} << 20) || (v & (v - 1)) != 0) {
               Fail(k, n, "must be a power of two from 1 to 1048576, got " + Shown(n));
             }
             config_.ring.capacity = static_cast<uint64_t>(v);
           }},
          {"max_age_ms",
           [&](auto& k, auto& n) {
             config_.ring.max_age_ms = Integer(k, n, 0, 60'000, "from 0 to 60000");
           }},
          {"min_fill",
           [&](auto& k, auto& n) {
             config_.ring.min_fill =
                 static_cast<uint64_t>(Integer(k, n, 1, int64_t{1} << 20, "from 1 to 1048576"));
             min_fill_node_ = &n;
           }}}},
        {"persistence",
         {{"reservation_ms",
           [&](auto& k, auto& n) {
             config_.persistence.reservation_ms = Integer(k, n, 1, 60'000, "from 1 to 60000");
           }}}},
        {"systemd",
         {{"status_interval_ms",
           [&](auto& k, auto& n) {
             config_.systemd.status_interval_ms =
                 Integer(k, n, 10, 3'600'000, "from 10 to 3600000");
           }}}},
        {"http",
         {{"listen", [&](auto& k, auto& n) { config_.http.listen = ListenList(k, n); }},
          {"allow", [&](auto& k, auto& n) { config_.http.allow = AllowList(k, n); }},
          {"admin_listen",
           [&](auto& k, auto& n) {
             config_.http.admin_listen = ListenList(k, n);
             admin_listen_node_ = &n;
           }},
          {"admin_allow",
           [&](auto& k, auto& n) {
             config_.http.admin_allow = AllowList(k, n);
             admin_allow_node_ = &n;
           }},
          {"max_connections",
           [&](auto& k, auto& n) {
             config_.http.max_connections =
                 static_cast<uint64_t>(Integer(k, n, 1, 100'000, "from 1 to 100000"));
           }},
          {"max_connections_per_source",
           [&](auto& k, auto& n) {
             config_.http.max_connections_per_source =
                 static_cast<uint64_t>(Integer(k, n, 1, 100'000, "from 1 to 100000"));
           }},
          {"max_connection_age_ms",
           [&](auto& k, auto& n) {
             config_.http.max_connection_age_ms =
                 Integer(k, n, 0, 86'400'000, "from 0 (no maximum) to 86400000");
           }},
          {"max_requests_per_connection",
           [&](auto& k, auto& n) {
             config_.http.max_requests_per_connection =
                 static_cast<uint64_t>(Integer(k, n, 1, 1'000'000'000, "from 1 to 1000000000"));
           }},
          {"max_header_bytes",
           [&](auto& k, auto& n) {
             config_.http.max_header_bytes =
                 static_cast<uint64_t>(Integer(k, n, 1024, 65536, "from 1024 to 65536"));
           }},
          {"idle_timeout_ms",
           [&](auto& k, auto& n) {
             config_.http.idle_timeout_ms = Integer(k, n, 10, 3'600'000, "from 10 to 3600000");
           }},
          {"write_timeout_ms",
           [&](auto& k, auto& n) {
             config_.http.write_timeout_ms = Integer(k, n, 10, 600'000, "from 10 to 600000");
           }},
          {"threads",
           [&](auto& k, auto& n) {
             config_.http.threads = static_cast<uint64_t>(Integer(k, n, 1, 64, "from 1 to 64"));
           }},
          {"max_services",
           [&](auto& k, auto& n) {
             config_.http.max_services =
                 static_cast<uint64_t>(Integer(k, n, 1, 1024, "from 1 to 1024"));
           }},
          {"tls_cert_file",
           [&](auto& k, auto& n) {
             config_.http.tls_cert_file = Path(k, n, true);
             tls_cert_node_ = &n;
           }},
          {"tls_key_file",
           [&](auto& k, auto& n) {
             config_.http.tls_key_file = Path(k, n, true);
             tls_key_node_ = &n;
           }},
          {"tls_client_ca_file",
           [&](auto& k, auto& n) {
             config_.http.tls_client_ca_file = Path(k, n, true);
             tls_client_ca_node_ = &n;
           }},
          {"tls_client_crl_file",
           [&](auto& k, auto& n) {
             config_.http.tls_client_crl_file = Path(k, n, true);
             tls_client_crl_node_ = &n;
           }},
          {"max_share", [&](auto& k, auto& n) { config_.http.max_share = Share(k, n); }},
          {"per_client_ids_per_s",
           [&](auto& k, auto& n) {
             config_.http.per_client_ids_per_s =
                 static_cast<uint64_t>(Integer(k, n, 0, 4'096'000, "from 0 (no limit) to 4096000"));
           }},
          {"tls_handshake_timeout_ms",
           [&](auto& k, auto& n) {
             config_.http.tls_handshake_timeout_ms =
                 Integer(k, n, 100, 60'000, "from 100 to 60000");
             TlsOnly(k, n);
           }},
          {"tls_max_handshakes",
           [&](auto& k, auto& n) {
             config_.http.tls_max_handshakes =
                 static_cast<uint64_t>(Integer(k, n, 1, 10'000, "from 1 to 10000"));
             TlsOnly(k, n);
           }},
          {"tls_min_version",
           [&](auto& k, auto& n) {
             const std::string& v = String(k, n);
             if (v != "1.2" && v != "1.3") {
               Fail(k, n, "must be \"1.2\" or \"1.3\", got " + Shown(n));
             }
             config_.http.tls_min_version = v;
             TlsOnly(k, n);
           }},
          {"tls_ciphers",
           [&](auto& k, auto& n) {
             config_.http.tls_ciphers = OpenSslList(
                 k, n, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:+-!@=._",
                 "must be an OpenSSL cipher list (e.g. \"ECDHE+AESGCM:ECDHE+CHACHA20\")");
             TlsOnly(k, n);
           }},
          {"tls_ciphersuites",
           [&](auto& k, auto& n) {
             config_.http.tls_ciphersuites = OpenSslList(
                 k, n, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:_",
                 "must be TLS 1.3 suite names separated by ':' (e.g. "
                 "\"TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256\")");
             TlsOnly(k, n);
           }},
          {"authorize", [&](auto& k, auto& n) { config_.http.authorize = Grants(k, n); }},
          {"tls_groups",
           [&](auto& k, auto& n) {
             config_.http.tls_groups = OpenSslList(
                 k, n, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:-_",
                 "must be group names separated by ':' (e.g. \"X25519:P-256\")");
             TlsOnly(k, n);
           }},
          {"tls_session_tickets",
           [&](auto& k, auto& n) {
             config_.http.tls_session_tickets = Boolean(k, n);
             TlsOnly(k, n);
           }},
          {"tls_session_ticket_rotate_s",
           [&](auto& k, auto& n) {
             config_.http.tls_session_ticket_rotate_s =
                 Integer(k, n, 60, 86'400, "from 60 to 86400 (seconds)");
             ticket_rotate_node_ = &n;
             TlsOnly(k, n);
           }}}},
    };

    for (auto&& [section_key, section_node] : root) {
      const std::string section_name(section_key.str());
      const auto section = schema.find(section_name);
      if (section == schema.end()) {
        // The known tables are the schema's, so a new table is never missing here.
        std::string known;
        for (const auto& [name, keys] : schema) known += (known.empty() ? "" : ", ") + name;
        throw Invalid{fields_.Where(section_key.source()) + ": " + section_name +
                      ": unknown table (known: " + known + ")"};
      }
      const toml::table* table = section_node.as_table();
      if (table == nullptr) {
        throw Invalid{fields_.Where(section_node.source()) + ": " + section_name +
                      ": must be a table, got " + std::string(TypeName(section_node))};
      }
      if (section_name == "register") {
        reg::ReadRegisterTable(*table, fields_, config_.machine_register);
        register_table_ = table;
        continue;
      }
      for (auto&& [key, node] : *table) {
        const std::string full_key = section_name + "." + std::string(key.str());
        const auto handler = section->second.find(key.str());
        if (handler == section->second.end()) {
          throw Invalid{fields_.Where(key.source()) + ": " + full_key + ": unknown key"};
        }
        handler->second(full_key, node);
      }
    }
    CheckConsistency();
  }

 private:
  [[noreturn]] void Fail(const std::string& key, const toml::node& node, const std::string& what) {
    fields_.Fail(key, node, what);
  }

  int64_t Integer(const std::string& key, const toml::node& node, int64_t min, int64_t max,
                  const std::string& range) {
    return fields_.Integer(key, node, min, max, range);
  }

  const std::string& String(const std::string& key, const toml::node& node) {
    return fields_.String(key, node);
  }

  // An array of strings, each checked by `check` (which returns an error text or "").
  template <typename Check>
  std::vector<std::string> StringList(const std::string& key, const toml::node& node,
                                      size_t max_items, Check check) {
    const auto* array = node.as_array();
    if (array == nullptr) {
      Fail(key, node, "must be an array of strings, got " + std::string(TypeName(node)));
    }
    if (array->size() > max_items) {
      Fail(key, node, "must have at most " + std::to_string(max_items) + " entries");
    }
    std::vector<std::string> out;
    for (const toml::node& item : *array) {
      const auto* text = item.as_string();
      if (text == nullptr) {
        Fail(key, item, "must be an array of strings, got " + std::string(TypeName(item)));
      }
      if (const std::string why = check(text->get()); !why.empty()) {
        Fail(key, item, why + ", got " + Shown(item));
      }
      out.push_back(text->get());
    }
    return out;
  }

  std::vector<std::string> ListenList(const std::string& key, const toml::node& node) {
    return StringList(key, node, 16, [](const std::string& s) {
      auto parsed = ParseListenAddress(s);
      return parsed ? std::string() : parsed.error();
    });
  }

  std::vector<std::string> AllowList(const std::string& key, const toml::node& node) {
    return StringList(key, node, 256, [](const std::string& s) {
      auto parsed = ParseCidr(s);
      return parsed ? std::string() : parsed.error();
    });
  }

  std::filesystem::path Path(const std::string& key, const toml::node& node, bool may_be_empty) {
    return fields_.Path(key, node, may_be_empty);
  }

  std::string Instance(const std::string& key, const toml::node& node) {
    const std::string& s = String(key, node);
    const bool ok = !s.empty() && s.size() <= 64 &&
                    s.find_first_not_of(
                        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                        "0123456789_.-") == std::string::npos;
    if (!ok) Fail(key, node, "must be 1 to 64 of [A-Za-z0-9_.-], got " + Shown(node));
    return s;
  }

  std::string LogLevel(const std::string& key, const toml::node& node) {
    const std::string& s = String(key, node);
    if (!IsValidLogLevel(s)) {
      Fail(key, node,
           "must be one of trace, debug, info, warn, error, critical, off, got " + Shown(node));
    }
    return s;
  }

  std::string Group(const std::string& key, const toml::node& node) {
    const std::string& s = String(key, node);
    const bool ok = s.size() <= 64 && s.find_first_of(" \t\n:/") == std::string::npos &&
                    (s.empty() || s.front() != '-');
    if (!ok)
      Fail(key, node,
           "must be a group name or number (empty: the daemon's group), got " + Shown(node));
    return s;
  }

  // [[http.authorize]]: an array of tables, each with an identity (at most once), services
  // and endpoints.
  std::vector<Config::Http::Grant> Grants(const std::string& key, const toml::node& node) {
    const auto* array = node.as_array();
    if (array == nullptr || !array->is_array_of_tables()) {
      Fail(key, node,
           "must be tables written [[http.authorize]], each with identity, services and "
           "endpoints, got " +
               std::string(TypeName(node)));
    }
    if (array->size() > 1024) Fail(key, node, "must have at most 1024 entries");
    std::vector<Config::Http::Grant> out;
    for (const toml::node& item : *array) {
      Config::Http::Grant grant;
      bool has_services = false;
      bool has_endpoints = false;
      for (auto&& [name, value] : *item.as_table()) {
        const std::string sub = key + "." + std::string(name.str());
        if (name.str() == "identity") {
          grant.identity = Identity(sub, value);
        } else if (name.str() == "services") {
          has_services = true;
          grant.services = StringList(sub, value, 1024, [](const std::string& v) {
            const bool ok = v == "*" || (!v.empty() && v.size() <= 63 &&
                                         v.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                                                             "0123456789._-") == std::string::npos);
            return ok ? std::string()
                      : std::string(
                            "must be service names (1 to 63 of "
                            "[a-z0-9._-]) or \"*\" (any)");
          });
        } else if (name.str() == "endpoints") {
          has_endpoints = true;
          grant.endpoints = StringList(sub, value, 8, [](const std::string& v) {
            const bool ok = v == "id" || v == "ids" || v == "status" || v == "metrics" ||
                            v == "decode" || v == "bounds" || v == "*";
            return ok ? std::string()
                      : std::string(
                            "must be endpoints of \"id\", \"ids\", \"status\", "
                            "\"metrics\", \"decode\", \"bounds\" or \"*\" (all)");
          });
        } else {
          throw Invalid{fields_.Where(name.source()) + ": " + sub +
                        ": unknown key (known: identity, services, endpoints)"};
        }
      }
      if (grant.identity.empty() || !has_services || !has_endpoints) {
        Fail(key, item,
             "each entry needs identity, services and endpoints (services = [] for none)");
      }
      for (const auto& other : out) {
        if (other.identity == grant.identity) {
          Fail(key, item, "names identity \"" + grant.identity + "\" twice: merge the entries");
        }
      }
      out.push_back(std::move(grant));
    }
    return out;
  }

  std::string Identity(const std::string& key, const toml::node& node) {
    const std::string& s = String(key, node);
    const bool prefixed = s.starts_with("uri:") || s.starts_with("cert:") || s.starts_with("addr:");
    if (!(s == "*" || (prefixed && s.size() > s.find(':') + 1 && s.size() <= 512))) {
      Fail(key, node,
           "must be \"*\" or a client as the front names it: \"uri:<SAN URI>\", "
           "\"cert:<sha256>\" or \"addr:<address>\" (a 403 names the caller's), got " +
               Shown(node));
    }
    return s;
  }

  // A list in OpenSSL's syntax: 1 to 1024 characters of `allowed`. Whether OpenSSL knows
  // the names is checked when the TLS context is built (at start and by --check-config).
  std::string OpenSslList(const std::string& key, const toml::node& node, std::string_view allowed,
                          const std::string& what) {
    const std::string& s = String(key, node);
    if (s.empty() || s.size() > 1024 || s.find_first_not_of(allowed) != std::string::npos) {
      Fail(key, node, what + ", got " + Shown(node));
    }
    return s;
  }

  // true or false.
  bool Boolean(const std::string& key, const toml::node& node) {
    const auto* b = node.as_boolean();
    if (b == nullptr) {
      Fail(key, node, "must be true or false, got " + std::string(TypeName(node)));
    }
    return b->get();
  }

  // A TLS setting, which means nothing without a certificate: remembered for the check
  // once every key is read.
  void TlsOnly(const std::string& key, const toml::node& node) {
    if (tls_setting_node_ == nullptr) {
      tls_setting_key_ = key;
      tls_setting_node_ = &node;
    }
  }

  // A fraction above 0 and at most 1 (an integer 1 is accepted as 1.0).
  double Share(const std::string& key, const toml::node& node) {
    double v = -1;
    if (const auto* f = node.as_floating_point()) {
      v = f->get();
    } else if (const auto* i = node.as_integer()) {
      v = static_cast<double>(i->get());
    } else {
      Fail(key, node, "must be a number above 0 and at most 1, got " + std::string(TypeName(node)));
    }
    if (!(v > 0 && v <= 1)) Fail(key, node, "must be above 0 and at most 1, got " + Shown(node));
    return v;
  }

  void CheckConsistency() {
    if (layout_node_ != nullptr) {
      config_.id.bits = reg::ReadIdLayout(fields_, *layout_node_, config_.id.epoch_unix_ms);
      if (!IdLayout::Create(config_.id.epoch_unix_ms, config_.id.bits)) {
        Fail("id.layout", *layout_node_,
             "with id.epoch " + std::to_string(config_.id.epoch_unix_ms) + " the range of " +
                 std::to_string(config_.id.bits.time) +
                 " time bits passes the largest Unix ms: choose an earlier epoch or fewer "
                 "time bits");
      }
    }
    // Every machine number the register may hand out must fit the layout's machine bits.
    reg::CheckMachinesInLayout(fields_, config_.machine_register, config_.id.bits, layout_node_,
                               register_table_);
    // TLS needs both halves of the pair; a client CA without a certificate would silently
    // serve plain HTTP to callers the operator meant to authenticate.
    const Config::Http& http = config_.http;
    if (http.tls_cert_file.empty() != http.tls_key_file.empty()) {
      const toml::node* given = tls_cert_node_ != nullptr ? tls_cert_node_ : tls_key_node_;
      const bool cert = !http.tls_cert_file.empty();
      Fail(cert ? "http.tls_cert_file" : "http.tls_key_file", *given,
           std::string("is set without ") + (cert ? "http.tls_key_file" : "http.tls_cert_file") +
               ": set both (TLS) or neither (plain HTTP)");
    }
    if (!http.tls_client_ca_file.empty() && http.tls_cert_file.empty()) {
      Fail("http.tls_client_ca_file", *tls_client_ca_node_,
           "needs http.tls_cert_file and http.tls_key_file (mutual TLS is TLS)");
    }
    if (!http.tls_client_crl_file.empty() && http.tls_client_ca_file.empty()) {
      Fail("http.tls_client_crl_file", *tls_client_crl_node_,
           "needs http.tls_client_ca_file (a CRL revokes client certificates, which only "
           "mutual TLS asks for)");
    }
    if (tls_setting_node_ != nullptr && !http.tls()) {
      Fail(tls_setting_key_, *tls_setting_node_,
           "has no effect without http.tls_cert_file and http.tls_key_file (plain HTTP has "
           "no handshake): set them, or remove this key");
    }
    CheckAdminListener();
    if (ticket_rotate_node_ != nullptr && !http.tls_session_tickets) {
      Fail("http.tls_session_ticket_rotate_s", *ticket_rotate_node_,
           "has no effect without http.tls_session_tickets = true (no ticket key is made): "
           "set that too, or remove this key");
    }
    if (min_fill_node_ != nullptr && config_.ring.min_fill > config_.ring.capacity) {
      Fail("ring.min_fill", *min_fill_node_,
           "must not exceed ring.capacity (" + std::to_string(config_.ring.capacity) + "), got " +
               Shown(*min_fill_node_));
    }
    if (config_.ring.min_fill > config_.ring.capacity) {
      // min_fill left at its default, capacity set below it: the default follows capacity.
      config_.ring.min_fill = config_.ring.capacity;
    }
  }

  // The admin listener is part of the front, on addresses of its own: an address the ID
  // listeners bind too (the same, or a wildcard of its family on the same port) would
  // fail at start, or serve both on one port.
  void CheckAdminListener() {
    const Config::Http& http = config_.http;
    if (admin_allow_node_ != nullptr && http.admin_listen.empty()) {
      Fail("http.admin_allow", *admin_allow_node_,
           "has no effect without http.admin_listen: set it, or remove this key");
    }
    if (http.admin_listen.empty()) return;
    if (http.listen.empty()) {
      Fail("http.admin_listen", *admin_listen_node_,
           "needs http.listen (the admin listener is part of the HTTP front, which is off "
           "while listen is empty)");
    }
    // Equal addresses, or a wildcard (0.0.0.0, [::]) and any address of its family (the
    // listeners are IPv6-only, so the families never overlap).
    const auto wildcard = [](const IpAddress& ip) {
      return ip == ParseIpAddress(ip.v4 ? "0.0.0.0" : "::").value();
    };
    for (const std::string& admin_text : http.admin_listen) {
      const ListenAddress admin = ParseListenAddress(admin_text).value();
      for (const std::string& id_text : http.listen) {
        const ListenAddress id = ParseListenAddress(id_text).value();
        const bool clash = admin.port == id.port && admin.ip.v4 == id.ip.v4 &&
                           (admin.ip == id.ip || wildcard(admin.ip) || wildcard(id.ip));
        if (clash) {
          Fail("http.admin_listen", *admin_listen_node_,
               "\"" + admin_text + "\" is also an address of http.listen (\"" + id_text +
                   "\"): give the admin listener a port of its own, e.g. 127.0.0.1:9090");
        }
      }
      for (const std::string& other_text : http.admin_listen) {
        if (&other_text == &admin_text) break;
        const ListenAddress other = ParseListenAddress(other_text).value();
        if (other.ip == admin.ip && other.port == admin.port) {
          Fail("http.admin_listen", *admin_listen_node_,
               "names \"" + admin_text + "\" twice: list each address once");
        }
      }
    }
  }

  std::string_view source_;
  util::TomlFields fields_;
  Config& config_;
  const toml::node* min_fill_node_ = nullptr;
  const toml::node* layout_node_ = nullptr;
  const toml::table* register_table_ = nullptr;
  const toml::node* admin_listen_node_ = nullptr;
  const toml::node* admin_allow_node_ = nullptr;
  const toml::node* tls_cert_node_ = nullptr;
  const toml::node* tls_key_node_ = nullptr;
  const toml::node* tls_client_ca_node_ = nullptr;
  const toml::node* tls_client_crl_node_ = nullptr;
  const toml::node* ticket_rotate_node_ = nullptr;
  std::string tls_setting_key_;  // the first TLS-only key read, for CheckConsistency()
  const toml::node* tls_setting_node_ = nullptr;
};

}  // namespace

std::filesystem::path Config::RegisterPath() const {
  return machine_register.Common(daemon.state_dir, id.bits).file_path;
}

std::filesystem::path Config::HighWaterPath() const { return daemon.state_dir / "high-water.json"; }

bool IsValidLogLevel(std::string_view level) noexcept {
  return level == "trace" || level == "debug" || level == "info" || level == "warn" ||
         level == "error" || level == "critical" || level == "off";
}

tl::expected<Config, util::ConfigError> ParseConfig(std::string_view toml_text,
                                                    std::string_view source) noexcept {
  try {
    auto root = util::ParseTomlText(toml_text, source);
    if (!root) return tl::unexpected(root.error());
    Config config;
    Validator(source, config).Run(*root);
    return config;
  } catch (const Invalid& e) {
    return tl::unexpected(util::ConfigError{e.message});
  } catch (const std::exception& e) {
    return tl::unexpected(util::ConfigError{std::string(source) + ": " + e.what()});
  }
}

tl::expected<Config, util::ConfigError> LoadConfig(const std::filesystem::path& path) noexcept {
  auto text = util::ReadConfigText(path);
  if (!text) return tl::unexpected(text.error());
  return ParseConfig(*text, path.string());
}

std::string_view DefaultConfigText() noexcept { return kDefaultConfigToml; }

}  // namespace snowflake::daemon
