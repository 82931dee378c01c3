#include "config.h"

#include <toml++/toml.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "default_config.h"  // generated from systemd/snowflaked.toml
#include "net_address.h"

namespace snowflake {
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
          {"group", [&](auto& k, auto& n) { config_.daemon.group = Group(k, n); }}}},
        {"id", {{"epoch", [&](auto& k, auto& n) { config_.id.epoch_unix_ms = Epoch(k, n); }}}},
        {"register",
         {{"backend", [&](auto& k, auto& n) { config_.machine_register.backend = Backend(k, n); }},
          {"path", [&](auto& k, auto& n) { config_.machine_register.path = Path(k, n, true); }},
          {"machines", [&](auto& k, auto& n) { Machines(k, n); }},
          {"holder_id",
           [&](auto& k, auto& n) { config_.machine_register.holder_id = HolderId(k, n); }},
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
    Fail(key, node, "must be \"file\" or \"static\", got " + Shown(node));
  }

  void Machines(const std::string& key, const toml::node& node) {
    const std::string& s = String(key, node);
    auto number = [](std::string_view part, uint32_t& out) {
      if (part.empty() || part.size() > 4) return false;
      uint32_t v = 0;
      for (const char c : part) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + static_cast<uint32_t>(c - '0');
      }
      out = v;
      return v <= kMaxMachine;
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

  static int64_t UnixMsOf(const toml::date_time& dt) {
    using namespace std::chrono;
    const year_month_day ymd{year{dt.date.year}, month{dt.date.month}, day{dt.date.day}};
    const int64_t days = sys_days{ymd}.time_since_epoch().count();
    const int64_t offset_minutes = dt.offset ? dt.offset->minutes : 0;
    return ((days * 24 + dt.time.hour) * 60 + dt.time.minute - offset_minutes) * 60'000 +
           int64_t{dt.time.second} * 1000 + dt.time.nanosecond / 1'000'000;
  }

  int64_t Epoch(const std::string& key, const toml::node& node) {
    const std::string expected =
        "must be an ISO-8601 UTC time like \"2026-01-01T00:00:00Z\" or Unix milliseconds";
    int64_t unix_ms = 0;
    if (const auto* i = node.as_integer()) {
      unix_ms = i->get();
    } else if (const auto* dt = node.as_date_time()) {
      if (!dt->get().offset)
        Fail(key, node, expected + " (a time zone is required), got " + Shown(node));
      unix_ms = UnixMsOf(dt->get());
    } else if (const auto* s = node.as_string()) {
      // TOML's own date-time grammar is RFC 3339, which is what we accept: reuse it, on
      // text restricted to the characters of a date-time so nothing else can be injected.
      const std::string& text = s->get();
      const bool charset_ok = !text.empty() && text.size() <= 40 &&
                              text.find_first_not_of("0123456789-:.+TZtz ") == std::string::npos;
      toml::parse_result parsed;
      const toml::value<toml::date_time>* dt = nullptr;
      if (charset_ok) {
        try {
          parsed = toml::parse("v = " + text);
          const auto* v = parsed.get("v");
          dt = v != nullptr && parsed.size() == 1 ? v->as_date_time() : nullptr;
        } catch (const toml::parse_error&) {
          dt = nullptr;
        }
      }
      if (dt == nullptr || !dt->get().offset) Fail(key, node, expected + ", got " + Shown(node));
      unix_ms = UnixMsOf(dt->get());
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
           "only valid with register.backend = \"static\" (the file register assigns numbers; "
           "restrict them with register.machines)");
    }
  }

  std::string_view source_;
  Config& config_;
  const toml::node* min_fill_node_ = nullptr;
  const toml::node* machine_node_ = nullptr;
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
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) {
      return tl::unexpected(
          ConfigError{path.string() + ": cannot read the config file: " + std::strerror(errno)});
    }
    return ParseConfig(text.str(), path.string());
  } catch (const std::exception& e) {
    return tl::unexpected(ConfigError{path.string() + ": " + e.what()});
  }
}

std::string_view DefaultConfigText() noexcept { return kDefaultConfigToml; }

}  // namespace snowflake
