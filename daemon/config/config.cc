#include "daemon/config/config.h"

#include <toml++/toml.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "daemon/base/decimal.h"
#include "daemon/config/net_address.h"
#include "default_config.h"  // generated from systemd/snowflaked.toml
#include "snowflake/time_text.h"

namespace snowflake::daemon {
namespace {

// Thrown inside this file only, so a validator can stop at the first error; ParseConfig
// turns it into a ConfigError.
struct Invalid {
  std::string message;
};

std::string_view TypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    default:
      return "nothing";
  }
}

// Where a node is, as "<file>:<line>".
std::string Where(std::string_view source, const toml::source_region& region) {
  std::string out(source);
  if (region.begin.line > 0) out += ":" + std::to_string(region.begin.line);
  return out;
}

// What a value looks like in a message: strings quoted, others as TOML prints them.
std::string Shown(const toml::node& node) {
  if (const auto* s = node.as_string()) return "\"" + s->get() + "\"";
  std::ostringstream out;
  node.visit([&](const auto& n) { out << n; });
  return out.str();
}

class Validator {
 public:
  Validator(std::string_view source, Config& config) : source_(source), config_(config) {}

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
        {"id", {{"epoch", [&](auto& k, auto& n) { config_.id.epoch_unix_ms = Epoch(k, n); }}}},
        {"register",
         {{"backend", [&](auto& k, auto& n) { config_.machine_register.backend = Backend(k, n); }},
          {"path", [&](auto& k, auto& n) { config_.machine_register.path = Path(k, n, true); }},
          {"machines", [&](auto& k, auto& n) { Machines(k, n); }},
          {"holder_id",
           [&](auto& k, auto& n) { config_.machine_register.holder_id = HolderId(k, n); }},
          {"etcd", [&](auto& k, auto& n) { EtcdTable(k, n); }},
          {"machine",
           [&](auto& k, auto& n) {
             config_.machine_register.machine =
                 static_cast<uint32_t>(Integer(k, n, 0, kMaxMachine, "from 0 to 1023"));
             machine_node_ = &n;
           }}}},
        {"clock",
         {{"max_backward_ms",
           [&](auto& k, auto& n) {
             config_.clock.max_backward_ms = Integer(k, n, 0, 60'000, "from 0 to 60000");
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
          {"max_connections",
           [&](auto& k, auto& n) {
             config_.http.max_connections =
                 static_cast<uint64_t>(Integer(k, n, 1, 100'000, "from 1 to 100000"));
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
           }}}},
    };

    for (auto&& [section_key, section_node] : root) {
      const std::string section_name(section_key.str());
      const auto section = schema.find(section_name);
      if (section == schema.end()) {
        throw Invalid{Where(source_, section_key.source()) + ": " + section_name +
                      ": unknown table (known: daemon, id, register, clock, ring, "
                      "persistence, systemd)"};
      }
      const toml::table* table = section_node.as_table();
      if (table == nullptr) {
        throw Invalid{Where(source_, section_node.source()) + ": " + section_name +
                      ": must be a table, got " + std::string(TypeName(section_node))};
      }
      for (auto&& [key, node] : *table) {
        const std::string full_key = section_name + "." + std::string(key.str());
        const auto handler = section->second.find(key.str());
        if (handler == section->second.end()) {
          throw Invalid{Where(source_, key.source()) + ": " + full_key + ": unknown key"};
        }
        handler->second(full_key, node);
      }
    }
    CheckConsistency();
  }

 private:
  [[noreturn]] void Fail(const std::string& key, const toml::node& node, const std::string& what) {
    throw Invalid{Where(source_, node.source()) + ": " + key + ": " + what};
  }

  int64_t Integer(const std::string& key, const toml::node& node, int64_t min, int64_t max,
                  const std::string& range) {
    const auto* v = node.as_integer();
    if (v == nullptr) Fail(key, node, "must be an integer, got " + std::string(TypeName(node)));
    if (v->get() < min || v->get() > max)
      Fail(key, node, "must be " + range + ", got " + Shown(node));
    return v->get();
  }

  const std::string& String(const std::string& key, const toml::node& node) {
    const auto* v = node.as_string();
    if (v == nullptr) Fail(key, node, "must be a string, got " + std::string(TypeName(node)));
    return v->get();
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
    const std::string& s = String(key, node);
    if (s.empty() && may_be_empty) return {};
    if (s.empty() || s.front() != '/')
      Fail(key, node, "must be an absolute path, got " + Shown(node));
    return s;
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

  std::string HolderId(const std::string& key, const toml::node& node) {
    const std::string& s = String(key, node);
    bool ok = s.size() <= 256;
    for (const char c : s) ok = ok && static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
    if (!ok) Fail(key, node, "must be at most 256 printable characters, got " + Shown(node));
    return s;
  }

  RegisterBackend Backend(const std::string& key, const toml::node& node) {
    const std::string& s = String(key, node);
    if (s == "file") return RegisterBackend::kFile;
    if (s == "static") return RegisterBackend::kStatic;
    if (s == "etcd") return RegisterBackend::kEtcd;
    Fail(key, node, "must be \"file\", \"static\" or \"etcd\", got " + Shown(node));
  }

  void Machines(const std::string& key, const toml::node& node) {
    const std::string& s = String(key, node);
    auto number = [](std::string_view part, uint32_t& out) {
      const std::optional<uint32_t> v = ParseDecimal<uint32_t>(part, 4);
      if (!v) return false;
      out = *v;
      return *v <= kMaxMachine;
    };
    uint32_t first = 0;
    uint32_t last = 0;
    const size_t dash = s.find('-');
    const bool ok = dash == std::string::npos
                        ? number(s, first) && number(s, last)
                        : number(std::string_view(s).substr(0, dash), first) &&
                              number(std::string_view(s).substr(dash + 1), last) && first <= last;
    if (!ok)
      Fail(key, node, "must be \"first-last\" or one number within 0-1023, got " + Shown(node));
    config_.machine_register.first_machine = first;
    config_.machine_register.last_machine = last;
  }

  // [register.etcd]: every key checked here; consistency with the backend in
  // CheckConsistency().
  void EtcdTable(const std::string& key, const toml::node& node) {
    const toml::table* table = node.as_table();
    if (table == nullptr) Fail(key, node, "must be a table, got " + std::string(TypeName(node)));
    etcd_node_ = &node;
    Config::Register::Etcd& etcd = config_.machine_register.etcd;
    for (auto&& [name, value] : *table) {
      const std::string k = key + "." + std::string(name.str());
      const std::string_view n = name.str();
      if (n == "endpoints") {
        etcd.endpoints = Endpoints(k, value);
      } else if (n == "prefix") {
        etcd.prefix = EtcdPrefix(k, value);
      } else if (n == "lease_ttl_s") {
        etcd.lease_ttl_s = Integer(k, value, 2, 3600, "from 2 to 3600");
      } else if (n == "connect_timeout_ms") {
        etcd.connect_timeout_ms = Integer(k, value, 10, 60'000, "from 10 to 60000");
      } else if (n == "request_timeout_ms") {
        etcd.request_timeout_ms = Integer(k, value, 100, 60'000, "from 100 to 60000");
        request_timeout_node_ = &value;
      } else if (n == "ca_file") {
        etcd.ca_file = Path(k, value, true);
        if (!etcd.ca_file.empty()) tls_node_ = &value;
      } else if (n == "cert_file") {
        etcd.cert_file = Path(k, value, true);
        cert_node_ = &value;
        if (!etcd.cert_file.empty()) tls_node_ = &value;
      } else if (n == "key_file") {
        etcd.key_file = Path(k, value, true);
        key_node_ = &value;
      } else if (n == "user") {
        etcd.user = EtcdUser(k, value);
        user_node_ = &value;
      } else if (n == "password") {
        etcd.password = String(k, value);
        password_node_ = &value;
      } else if (n == "password_file") {
        etcd.password_file = Path(k, value, true);
        password_node_ = &value;
      } else {
        throw Invalid{Where(source_, name.source()) + ": " + k + ": unknown key"};
      }
    }
  }

  std::vector<std::string> Endpoints(const std::string& key, const toml::node& node) {
    const toml::array* array = node.as_array();
    if (array == nullptr) {
      Fail(key, node,
           "must be an array of URLs like [\"http://10.0.0.1:2379\"], got " +
               std::string(TypeName(node)));
    }
    if (array->empty() || array->size() > 16) {
      Fail(key, node, "must list 1 to 16 endpoints, got " + std::to_string(array->size()));
    }
    std::vector<std::string> out;
    for (const toml::node& item : *array) {
      const auto* s = item.as_string();
      if (s == nullptr) {
        Fail(key, item, "each endpoint must be a string, got " + std::string(TypeName(item)));
      }
      std::string url = s->get();
      while (!url.empty() && url.back() == '/') url.pop_back();
      if (!IsEndpointUrl(url)) {
        Fail(key, item,
             "each endpoint must be \"http://host:port\" or \"https://host:port\" (no path), "
             "got " + Shown(item));
      }
      out.push_back(url);
    }
    return out;
  }

  static bool IsEndpointUrl(std::string_view url) {
    std::string_view rest;
    if (url.starts_with("http://")) {
      rest = url.substr(7);
    } else if (url.starts_with("https://")) {
      rest = url.substr(8);
    } else {
      return false;
    }
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return false;
    const std::string_view host = rest.substr(0, colon);
    const std::string_view port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != port.npos) {
      return false;
    }
    const int port_number = std::stoi(std::string(port));
    if (port_number < 1 || port_number > 65535) return false;
    // A host name, an IPv4 address or a bracketed IPv6 address: nothing that could carry
    // a path, credentials or a query.
    return host.find_first_not_of(
               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-[]:") ==
           std::string_view::npos;
  }

  std::string EtcdPrefix(const std::string& key, const toml::node& node) {
    const std::string& s = String(key, node);
    bool ok = s.size() >= 2 && s.size() <= 128 && s.front() == '/' && s.back() == '/';
    for (const char c : s) ok = ok && static_cast<unsigned char>(c) > 0x20 && c != 0x7f;
    if (!ok) {
      Fail(key, node,
           "must be 2 to 128 printable characters without spaces, starting and ending with "
           "\"/\", got " + Shown(node));
    }
    return s;
  }

  std::string EtcdUser(const std::string& key, const toml::node& node) {
    const std::string& s = String(key, node);
    bool ok = s.size() <= 128;
    for (const char c : s) ok = ok && static_cast<unsigned char>(c) > 0x20 && c != 0x7f;
    if (!ok) Fail(key, node, "must be at most 128 printable characters, got " + Shown(node));
    return s;
  }

  void CheckEtcd() {
    const Config::Register& reg = config_.machine_register;
    const Config::Register::Etcd& etcd = reg.etcd;
    if (reg.backend != RegisterBackend::kEtcd) {
      if (etcd_node_ != nullptr) {
        Fail("register.etcd", *etcd_node_,
             "only valid with register.backend = \"etcd\"");
      }
      return;
    }
    if (etcd.endpoints.empty()) {
      throw Invalid{std::string(source_) +
                    ": register.etcd.endpoints: required when register.backend = \"etcd\" "
                    "(list the etcd members, e.g. [\"http://10.0.0.1:2379\"])"};
    }
    if (etcd.request_timeout_ms >= etcd.lease_ttl_s * 1000) {
      Fail("register.etcd.request_timeout_ms",
           request_timeout_node_ != nullptr ? *request_timeout_node_ : *etcd_node_,
           "must be below register.etcd.lease_ttl_s (" + std::to_string(etcd.lease_ttl_s) +
               " s), or a keepalive could not finish before the lease expires, got " +
               std::to_string(etcd.request_timeout_ms));
    }
    if (etcd.cert_file.empty() != etcd.key_file.empty()) {
      const toml::node& at = cert_node_ != nullptr ? *cert_node_ : *key_node_;
      Fail(etcd.cert_file.empty() ? "register.etcd.cert_file" : "register.etcd.key_file", at,
           "register.etcd.cert_file and register.etcd.key_file go together: set both or neither");
    }
    if (tls_node_ != nullptr) {
      bool any_https = false;
      for (const auto& e : etcd.endpoints) any_https = any_https || e.starts_with("https://");
      if (!any_https) {
        Fail("register.etcd.ca_file", *tls_node_,
             "TLS files are set but no endpoint uses https://: use https:// endpoints or drop "
             "the TLS files");
      }
    }
    const bool has_password = !etcd.password.empty() || !etcd.password_file.empty();
    if (!etcd.password.empty() && !etcd.password_file.empty()) {
      Fail("register.etcd.password", *password_node_,
           "set register.etcd.password or register.etcd.password_file, not both");
    }
    if (etcd.user.empty() && has_password) {
      Fail("register.etcd.password", *password_node_,
           "a password needs register.etcd.user");
    }
    if (!etcd.user.empty() && !has_password) {
      Fail("register.etcd.user", *user_node_,
           "a user needs register.etcd.password or register.etcd.password_file");
    }
  }

  // One grammar for times everywhere (snowflake/time_text.h): a TOML date-time is written
  // back as RFC 3339 text and parsed like the string form and like snowflakectl's --epoch.
  int64_t Epoch(const std::string& key, const toml::node& node) {
    const std::string expected = "must be " + std::string(kTimeTextForms);
    int64_t unix_ms = 0;
    if (const auto* i = node.as_integer()) {
      unix_ms = i->get();
    } else if (node.is_date_time() || node.is_string()) {
      std::string text;
      if (const auto* s = node.as_string()) {
        text = s->get();
      } else {
        std::ostringstream out;
        out << *node.as_date_time();
        text = out.str();
      }
      auto parsed = ParseTimeText(text);
      if (!parsed) Fail(key, node, expected + "; got " + Shown(node) + ": " + parsed.error());
      unix_ms = *parsed;
    } else {
      Fail(key, node, expected + ", got " + std::string(TypeName(node)));
    }
    if (!IdLayout::Create(unix_ms)) {
      Fail(key, node, "must be at or after 1970-01-01T00:00:00Z, got " + Shown(node));
    }
    return unix_ms;
  }

  void CheckConsistency() {
    const Config::Register& reg = config_.machine_register;
    if (min_fill_node_ != nullptr && config_.ring.min_fill > config_.ring.capacity) {
      Fail("ring.min_fill", *min_fill_node_,
           "must not exceed ring.capacity (" + std::to_string(config_.ring.capacity) + "), got " +
               Shown(*min_fill_node_));
    }
    if (config_.ring.min_fill > config_.ring.capacity) {
      // min_fill left at its default, capacity set below it: the default follows capacity.
      config_.ring.min_fill = config_.ring.capacity;
    }
    if (reg.backend == RegisterBackend::kStatic && !reg.machine) {
      throw Invalid{std::string(source_) +
                    ": register.machine: required when register.backend = \"static\""};
    }
    if (reg.backend != RegisterBackend::kStatic && machine_node_ != nullptr) {
      Fail("register.machine", *machine_node_,
           "only valid with register.backend = \"static\" (the file and etcd registers assign "
           "numbers; restrict them with register.machines)");
    }
    CheckEtcd();
  }

  std::string_view source_;
  Config& config_;
  const toml::node* min_fill_node_ = nullptr;
  const toml::node* machine_node_ = nullptr;
  const toml::node* etcd_node_ = nullptr;
  const toml::node* request_timeout_node_ = nullptr;
  const toml::node* tls_node_ = nullptr;
  const toml::node* cert_node_ = nullptr;
  const toml::node* key_node_ = nullptr;
  const toml::node* user_node_ = nullptr;
  const toml::node* password_node_ = nullptr;
};

}  // namespace

std::filesystem::path Config::RegisterPath() const {
  return machine_register.path.empty() ? daemon.state_dir / "register.json" : machine_register.path;
}

std::filesystem::path Config::HighWaterPath() const { return daemon.state_dir / "high-water.json"; }

bool IsValidLogLevel(std::string_view level) noexcept {
  return level == "trace" || level == "debug" || level == "info" || level == "warn" ||
         level == "error" || level == "critical" || level == "off";
}

tl::expected<Config, ConfigError> ParseConfig(std::string_view toml_text,
                                              std::string_view source) noexcept {
  try {
    toml::table root;
    try {
      root = toml::parse(toml_text, source);
    } catch (const toml::parse_error& e) {
      const auto& begin = e.source().begin;
      return tl::unexpected(ConfigError{std::string(source) + ":" + std::to_string(begin.line) +
                                        ":" + std::to_string(begin.column) + ": " +
                                        std::string(e.description())});
    }
    Config config;
    Validator(source, config).Run(root);
    return config;
  } catch (const Invalid& e) {
    return tl::unexpected(ConfigError{e.message});
  } catch (const std::exception& e) {
    return tl::unexpected(ConfigError{std::string(source) + ": " + e.what()});
  }
}

tl::expected<Config, ConfigError> LoadConfig(const std::filesystem::path& path) noexcept {
  try {
    // An ifstream opens a directory and reads it as empty: that would silently run on
    // the defaults instead of the operator's file.
    std::error_code ignored;
    if (std::filesystem::is_directory(path, ignored)) {
      return tl::unexpected(ConfigError{
          path.string() + ": cannot read the config file: it is a directory (name the file)"});
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      return tl::unexpected(
          ConfigError{path.string() + ": cannot read the config file: " + std::strerror(errno)});
    }
    // Bounded: `--config /dev/zero` (or a log file named by mistake) must fail at once,
    // not grow the daemon until it runs out of memory.
    std::string text(kMaxConfigBytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    if (in.bad()) {
      return tl::unexpected(
          ConfigError{path.string() + ": cannot read the config file: " + std::strerror(errno)});
    }
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxConfigBytes) {
      return tl::unexpected(ConfigError{
          path.string() + ": the config file is larger than " + std::to_string(kMaxConfigBytes) +
          " bytes; is it the right file? (snowflaked's config is a small TOML file)"});
    }
    return ParseConfig(text, path.string());
  } catch (const std::exception& e) {
    return tl::unexpected(ConfigError{path.string() + ": " + e.what()});
  }
}

std::string_view DefaultConfigText() noexcept { return kDefaultConfigToml; }

}  // namespace snowflake::daemon
