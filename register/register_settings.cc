#include "register/register_settings.h"

#include <exception>
#include <string>

#include "util/decimal.h"

namespace snowflake::reg {
namespace {

class RegisterTableReader {
 public:
  RegisterTableReader(const util::TomlFields& fields, RegisterConfig& out)
      : fields_(fields), out_(out) {}

  void Read(const toml::table& table) {
    const RegisterBackendInfo& backend = BackendOf(table);
    for (auto&& [key, node] : table) {
      const std::string full_key = "register." + std::string(key.str());
      if (key.str() == "backend") continue;  // read first, by BackendOf()
      if (key.str() == "path") {
        out_.path = fields_.Path(full_key, node, true);
      } else if (key.str() == "machines") {
        Machines(full_key, node);
      } else if (key.str() == "holder_id") {
        out_.holder_id = HolderId(full_key, node);
      } else {
        CheckBackendKey(backend, full_key, key);
      }
    }
    auto options = backend.parse(table, fields_.source());
    if (!options) throw util::ConfigInvalid{options.error().message};
    out_.options = std::move(*options);
  }

 private:
  // The row register.backend names (absent: the first, "file").
  const RegisterBackendInfo& BackendOf(const toml::table& table) const {
    const toml::node* node = table.get("backend");
    if (node == nullptr) return RegisterBackends().front();
    const std::string& name = fields_.String("register.backend", *node);
    auto backend = FindRegisterBackend(name);
    if (!backend) {
      fields_.Fail(
          "register.backend", *node,
          "must be " + KnownRegisterBackends() + ", got " + util::TomlFields::Shown(*node));
    }
    return **backend;
  }

  // A key of [register] that is not shared: the named backend's own (its parser reads it),
  // another backend's (refused, naming that backend), or unknown (refused, naming the
  // backend and the keys it takes).
  void CheckBackendKey(const RegisterBackendInfo& backend, const std::string& full_key,
                       const toml::key& key) const {
    const auto owns = [&](const RegisterBackendInfo& row) {
      for (const std::string_view k : row.keys) {
        if (k == key.str()) return true;
      }
      return false;
    };
    if (owns(backend)) return;
    for (const RegisterBackendInfo& other : RegisterBackends()) {
      if (owns(other)) {
        fields_.FailKey(full_key, key,
                        "only valid with register.backend = \"" + std::string(other.name) + "\"" +
                            std::string(other.misplaced_hint));
      }
    }
    std::string known = "backend, path, machines, holder_id";
    for (const std::string_view k : backend.keys) known += ", " + std::string(k);
    fields_.FailKey(full_key, key,
                    "unknown key (with register.backend = \"" + std::string(backend.name) +
                        "\" [register] takes " + known + ")");
  }

  std::string HolderId(const std::string& key, const toml::node& node) const {
    const std::string& s = fields_.String(key, node);
    bool ok = s.size() <= 256;
    for (const char c : s) ok = ok && static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
    if (!ok) {
      fields_.Fail(
          key, node,
          "must be at most 256 printable characters, got " + util::TomlFields::Shown(node));
    }
    return s;
  }

  void Machines(const std::string& key, const toml::node& node) {
    const std::string& s = fields_.String(key, node);
    auto number = [](std::string_view part, uint32_t& out) {
      const std::optional<uint32_t> v = util::ParseDecimal<uint32_t>(part, 5);
      if (!v) return false;
      out = *v;
      // The layout in effect (id.layout) is checked once the whole file is read
      // (MachinesOutsideLayout); here only the widest layout's numbers.
      return *v <= kMaxMachineOfAnyLayout;
    };
    uint32_t first = 0;
    uint32_t last = 0;
    const size_t dash = s.find('-');
    const bool ok = dash == std::string::npos
                        ? number(s, first) && number(s, last)
                        : number(std::string_view(s).substr(0, dash), first) &&
                              number(std::string_view(s).substr(dash + 1), last) && first <= last;
    if (!ok) {
      fields_.Fail(
          key, node,
          "must be \"first-last\" or one number, within the machine numbers of id.layout (0-" +
              std::to_string(kMaxMachineOfAnyLayout) + " at most), got " +
              util::TomlFields::Shown(node));
    }
    out_.first_machine = first;
    out_.last_machine = last;
  }

  const util::TomlFields& fields_;
  RegisterConfig& out_;
};

// The table `name` of `root`, or null when the file has none.
const toml::table* TableOf(const toml::table& root, std::string_view name,
                           const util::TomlFields& fields) {
  const toml::node* node = root.get(name);
  return node == nullptr ? nullptr : &fields.Table(std::string(name), *node);
}

}  // namespace

void ReadRegisterTable(const toml::table& table, const util::TomlFields& fields,
                       RegisterConfig& out) {
  RegisterTableReader(fields, out).Read(table);
}

IdBits ReadIdLayout(const util::TomlFields& fields, const toml::node& node, int64_t epoch_unix_ms) {
  auto bits = ParseIdBits(fields.String("id.layout", node), epoch_unix_ms);
  if (!bits) fields.Fail("id.layout", node, bits.error());
  return *bits;
}

void CheckMachinesInLayout(const util::TomlFields& fields, const RegisterConfig& config,
                           IdBits id_bits, const toml::node* layout_node,
                           const toml::table* register_table) {
  const std::string why = MachinesOutsideLayout(config, id_bits);
  if (why.empty()) return;
  if (layout_node != nullptr) fields.Fail("id.layout", *layout_node, why);
  // The layout is the default: said at the range's line.
  const toml::node* range = nullptr;
  if (register_table != nullptr) {
    range = register_table->get("machine");
    if (range == nullptr) range = register_table->get("machines");
  }
  throw util::ConfigInvalid{
      fields.Where(range != nullptr ? range->source() : toml::source_region{}) + ": " + why};
}

int64_t ReadMaxForwardMs(const util::TomlFields& fields, const toml::node& node) {
  return fields.Integer("clock.max_forward_ms", node, kMinMaxForwardMs, kMaxMaxForwardMs,
                        "from 3600000 (1 h) to 31536000000 (365 days)");
}

tl::expected<RegisterSettings, util::ConfigError> LoadRegisterSettings(
    const std::filesystem::path& path) noexcept {
  try {
    auto text = util::ReadConfigText(path);
    if (!text) return tl::unexpected(text.error());
    const std::string source = path.string();
    auto root = util::ParseTomlText(*text, source);
    if (!root) return tl::unexpected(root.error());
    const util::TomlFields fields(source);
    RegisterSettings settings;
    if (const toml::table* table = TableOf(*root, "register", fields)) {
      ReadRegisterTable(*table, fields, settings.machine_register);
    }
    if (const toml::table* daemon = TableOf(*root, "daemon", fields)) {
      if (const toml::node* node = daemon->get("state_dir")) {
        settings.state_dir = fields.Path("daemon.state_dir", *node, false);
      }
    }
    const toml::node* layout_node = nullptr;
    if (const toml::table* id = TableOf(*root, "id", fields)) {
      if (const toml::node* node = id->get("epoch")) {
        settings.epoch_unix_ms = fields.Epoch("id.epoch", *node);
      }
      if ((layout_node = id->get("layout")) != nullptr) {
        settings.id_bits = ReadIdLayout(fields, *layout_node, settings.epoch_unix_ms);
      }
    }
    CheckMachinesInLayout(fields, settings.machine_register, settings.id_bits, layout_node,
                          TableOf(*root, "register", fields));
    if (const toml::table* clock = TableOf(*root, "clock", fields)) {
      if (const toml::node* node = clock->get("max_forward_ms")) {
        settings.max_forward_ms = ReadMaxForwardMs(fields, *node);
      }
    }
    return settings;
  } catch (const util::ConfigInvalid& e) {
    return tl::unexpected(util::ConfigError{e.message});
  } catch (const std::exception& e) {
    return tl::unexpected(util::ConfigError{path.string() + ": " + e.what()});
  }
}

}  // namespace snowflake::reg
