#include "register/etcd_register_config.h"

namespace snowflake::reg {
namespace {

bool IsEndpointUrl(std::string_view url) {
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

// Reads the keys of [register.etcd] one by one, remembering where the keys that later
// checks name are, so a failure points at the line to fix.
class EtcdTableReader {
 public:
  EtcdTableReader(const util::TomlFields& fields, EtcdRegisterConfig& etcd)
      : fields_(fields), etcd_(etcd) {}

  void Read(const std::string& key, const toml::node& node) {
    const toml::table& table = fields_.Table(key, node);
    etcd_node_ = &node;
    for (auto&& [name, value] : table) {
      const std::string k = key + "." + std::string(name.str());
      const std::string_view n = name.str();
      if (n == "endpoints") {
        etcd_.endpoints = Endpoints(k, value);
      } else if (n == "prefix") {
        etcd_.prefix = Prefix(k, value);
      } else if (n == "lease_ttl_s") {
        etcd_.lease_ttl_s = fields_.Integer(k, value, 2, 3600, "from 2 to 3600");
      } else if (n == "connect_timeout_ms") {
        etcd_.connect_timeout_ms = fields_.Integer(k, value, 10, 60'000, "from 10 to 60000");
      } else if (n == "request_timeout_ms") {
        etcd_.request_timeout_ms = fields_.Integer(k, value, 100, 60'000, "from 100 to 60000");
        request_timeout_node_ = &value;
      } else if (n == "mark_reservation_ms") {
        etcd_.mark_reservation_ms =
            fields_.Integer(k, value, 0, kMaxMarkReservationMs, kMarkReservationRange);
        if (etcd_.mark_reservation_ms > 0 && etcd_.mark_reservation_ms < kMinMarkReservationMs) {
          fields_.Fail(k, value,
                       std::string("must be ") + kMarkReservationRange + ", got " +
                           std::to_string(etcd_.mark_reservation_ms));
        }
        mark_reservation_node_ = &value;
      } else if (n == "ca_file") {
        etcd_.ca_file = fields_.Path(k, value, true);
        if (!etcd_.ca_file.empty()) tls_node_ = &value;
      } else if (n == "cert_file") {
        etcd_.cert_file = fields_.Path(k, value, true);
        cert_node_ = &value;
        if (!etcd_.cert_file.empty()) tls_node_ = &value;
      } else if (n == "key_file") {
        etcd_.key_file = fields_.Path(k, value, true);
        key_node_ = &value;
      } else if (n == "user") {
        etcd_.user = User(k, value);
        user_node_ = &value;
      } else if (n == "password") {
        etcd_.password = fields_.String(k, value);
        password_node_ = &value;
      } else if (n == "password_file") {
        etcd_.password_file = fields_.Path(k, value, true);
        password_node_ = &value;
      } else {
        fields_.FailKey(k, name,
                        "unknown key (register.etcd takes endpoints, prefix, lease_ttl_s, "
                        "connect_timeout_ms, request_timeout_ms, mark_reservation_ms, ca_file, "
                        "cert_file, key_file, user, password, password_file)");
      }
    }
  }

  // The rules between keys, once every key is read.
  void Check() const {
    if (etcd_.endpoints.empty()) {
      fields_.FailMissing("register.etcd.endpoints",
                          "required when register.backend = \"etcd\" (list the etcd members, "
                          "e.g. [\"http://10.0.0.1:2379\"])");
    }
    if (etcd_.request_timeout_ms >= etcd_.lease_ttl_s * 1000) {
      fields_.Fail("register.etcd.request_timeout_ms",
                   request_timeout_node_ != nullptr ? *request_timeout_node_ : *etcd_node_,
                   "must be below register.etcd.lease_ttl_s (" + std::to_string(etcd_.lease_ttl_s) +
                       " s), or a keepalive could not finish before the lease expires, got " +
                       std::to_string(etcd_.request_timeout_ms));
    }
    // Only when set: the default must not refuse a config written before the key existed.
    if (mark_reservation_node_ != nullptr && etcd_.mark_reservation_ms > 0 &&
        etcd_.mark_reservation_ms < 2 * etcd_.request_timeout_ms) {
      fields_.Fail("register.etcd.mark_reservation_ms", *mark_reservation_node_,
                   "must be at least twice register.etcd.request_timeout_ms (" +
                       std::to_string(etcd_.request_timeout_ms) +
                       " ms): a raise starts when half the window is left, and must be able to "
                       "finish before the daemon reaches the mark; got " +
                       std::to_string(etcd_.mark_reservation_ms));
    }
    if (etcd_.cert_file.empty() != etcd_.key_file.empty()) {
      const toml::node& at = cert_node_ != nullptr ? *cert_node_ : *key_node_;
      fields_.Fail(
          etcd_.cert_file.empty() ? "register.etcd.cert_file" : "register.etcd.key_file", at,
          "register.etcd.cert_file and register.etcd.key_file go together: set both or neither");
    }
    if (tls_node_ != nullptr) {
      bool any_https = false;
      for (const auto& e : etcd_.endpoints) any_https = any_https || e.starts_with("https://");
      if (!any_https) {
        fields_.Fail("register.etcd.ca_file", *tls_node_,
                     "TLS files are set but no endpoint uses https://: use https:// endpoints "
                     "or drop the TLS files");
      }
    }
    const bool has_password = !etcd_.password.empty() || !etcd_.password_file.empty();
    if (!etcd_.password.empty() && !etcd_.password_file.empty()) {
      fields_.Fail("register.etcd.password", *password_node_,
                   "set register.etcd.password or register.etcd.password_file, not both");
    }
    if (etcd_.user.empty() && has_password) {
      fields_.Fail("register.etcd.password", *password_node_,
                   "a password needs register.etcd.user");
    }
    if (!etcd_.user.empty() && !has_password) {
      fields_.Fail("register.etcd.user", *user_node_,
                   "a user needs register.etcd.password or register.etcd.password_file");
    }
  }

 private:
  std::vector<std::string> Endpoints(const std::string& key, const toml::node& node) const {
    const toml::array* array = node.as_array();
    if (array == nullptr) {
      fields_.Fail(key, node,
                   "must be an array of URLs like [\"http://10.0.0.1:2379\"], got " +
                       std::string(util::TomlFields::TypeName(node)));
    }
    if (array->empty() || array->size() > 16) {
      fields_.Fail(key, node, "must list 1 to 16 endpoints, got " + std::to_string(array->size()));
    }
    std::vector<std::string> out;
    for (const toml::node& item : *array) {
      const auto* s = item.as_string();
      if (s == nullptr) {
        fields_.Fail(
            key, item,
            "each endpoint must be a string, got " + std::string(util::TomlFields::TypeName(item)));
      }
      std::string url = s->get();
      while (!url.empty() && url.back() == '/') url.pop_back();
      if (!IsEndpointUrl(url)) {
        fields_.Fail(key, item,
                     "each endpoint must be \"http://host:port\" or \"https://host:port\" (no "
                     "path), got " +
                         util::TomlFields::Shown(item));
      }
      out.push_back(url);
    }
    return out;
  }

  std::string Prefix(const std::string& key, const toml::node& node) const {
    const std::string& s = fields_.String(key, node);
    bool ok = s.size() >= 2 && s.size() <= 128 && s.front() == '/' && s.back() == '/';
    for (const char c : s) ok = ok && static_cast<unsigned char>(c) > 0x20 && c != 0x7f;
    if (!ok) {
      fields_.Fail(key, node,
                   "must be 2 to 128 printable characters without spaces, starting and ending "
                   "with \"/\", got " +
                       util::TomlFields::Shown(node));
    }
    return s;
  }

  std::string User(const std::string& key, const toml::node& node) const {
    const std::string& s = fields_.String(key, node);
    bool ok = s.size() <= 128;
    for (const char c : s) ok = ok && static_cast<unsigned char>(c) > 0x20 && c != 0x7f;
    if (!ok) {
      fields_.Fail(
          key, node,
          "must be at most 128 printable characters, got " + util::TomlFields::Shown(node));
    }
    return s;
  }

  const util::TomlFields& fields_;
  EtcdRegisterConfig& etcd_;
  const toml::node* etcd_node_ = nullptr;
  const toml::node* request_timeout_node_ = nullptr;
  const toml::node* mark_reservation_node_ = nullptr;
  const toml::node* tls_node_ = nullptr;
  const toml::node* cert_node_ = nullptr;
  const toml::node* key_node_ = nullptr;
  const toml::node* user_node_ = nullptr;
  const toml::node* password_node_ = nullptr;
};

}  // namespace

tl::expected<EtcdRegisterConfig, util::ConfigError> ParseEtcdRegisterConfig(
    const toml::table& register_table, std::string_view source) noexcept {
  try {
    const util::TomlFields fields(source);
    EtcdRegisterConfig etcd;
    EtcdTableReader reader(fields, etcd);
    if (const toml::node* node = register_table.get("etcd")) reader.Read("register.etcd", *node);
    reader.Check();
    return etcd;
  } catch (const util::ConfigInvalid& e) {
    return tl::unexpected(util::ConfigError{e.message});
  } catch (const std::exception& e) {
    return tl::unexpected(util::ConfigError{std::string(source) + ": register.etcd: " + e.what()});
  }
}

}  // namespace snowflake::reg
