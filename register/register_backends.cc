#include "register/register_backends.h"

#include "register/etcd_register.h"
#include "register/file_register.h"
#include "register/static_register.h"

namespace snowflake::reg {
namespace {

// Adapters from a backend's typed functions to the table's uniform ones.
template <typename Own, tl::expected<Own, util::ConfigError> (*Parse)(const toml::table&,
                                                                      std::string_view) noexcept>
tl::expected<RegisterBackendConfig, util::ConfigError> ParseAs(const toml::table& register_table,
                                                               std::string_view source) noexcept {
  auto parsed = Parse(register_table, source);
  if (!parsed) return tl::unexpected(std::move(parsed.error()));
  return RegisterBackendConfig(std::move(*parsed));
}

template <typename Own, std::unique_ptr<MachineRegister> (*Make)(const Own&, const RegisterCommon&)>
std::unique_ptr<MachineRegister> MakeAs(const RegisterBackendConfig& own,
                                        const RegisterCommon& common) {
  return Make(std::get<Own>(own), common);
}

// The index of Own among RegisterBackendConfig's alternatives.
template <typename Own, typename Variant = RegisterBackendConfig>
struct AlternativeOf;
template <typename Own, typename... Alternatives>
struct AlternativeOf<Own, std::variant<Alternatives...>> {
  static constexpr size_t value = [] {
    size_t index = 0;
    // Counts the alternatives before Own; && stops at Own.
    (void)((std::is_same_v<Own, Alternatives> ? false : (++index, true)) && ...);
    return index;
  }();
};

constexpr std::string_view kStaticKeys[] = {"machine"};
constexpr std::string_view kEtcdKeys[] = {"etcd"};

// The table. A new backend: one row here, its config's alternative in
// RegisterBackendConfig (register_backends.h), its files in daemon/CMakeLists.txt.
constexpr RegisterBackendInfo kBackends[] = {
    {.name = "file",
     .alternative = AlternativeOf<FileRegisterConfig>::value,
     .keys = {},
     .misplaced_hint = "",
     .parse = ParseAs<FileRegisterConfig, ParseFileRegisterConfig>,
     .make = MakeAs<FileRegisterConfig, MakeFileRegister>},
    {.name = "static",
     .alternative = AlternativeOf<StaticRegisterConfig>::value,
     .keys = kStaticKeys,
     .misplaced_hint = " (the file and etcd registers assign numbers; restrict them with "
                       "register.machines)",
     .parse = ParseAs<StaticRegisterConfig, ParseStaticRegisterConfig>,
     .make = MakeAs<StaticRegisterConfig, MakeStaticRegister>},
    {.name = "etcd",
     .alternative = AlternativeOf<EtcdRegisterConfig>::value,
     .keys = kEtcdKeys,
     .misplaced_hint = "",
     .parse = ParseAs<EtcdRegisterConfig, ParseEtcdRegisterConfig>,
     .make = MakeAs<EtcdRegisterConfig, MakeEtcdRegister>},
};

// Each alternative is one backend's, so the config held names its backend.
constexpr bool EachAlternativeHasOneRow() {
  for (size_t alternative = 0; alternative < std::variant_size_v<RegisterBackendConfig>;
       ++alternative) {
    int rows = 0;
    for (const RegisterBackendInfo& row : kBackends) rows += row.alternative == alternative;
    if (rows != 1) return false;
  }
  return true;
}
static_assert(EachAlternativeHasOneRow(),
              "a backend's config type must be an alternative of RegisterBackendConfig named by "
              "exactly one row");

const RegisterBackendInfo& RowOf(const RegisterBackendConfig& options) {
  for (const RegisterBackendInfo& row : kBackends) {
    if (row.alternative == options.index()) return row;
  }
  return kBackends[0];  // unreachable: EachAlternativeHasOneRow()
}

}  // namespace

std::string_view RegisterConfig::backend() const noexcept { return RowOf(options).name; }

RegisterCommon RegisterConfig::Common(const std::filesystem::path& state_dir,
                                      IdBits id_bits) const {
  return RegisterCommon{
      .file_path = path.empty() ? state_dir / "register.json" : path,
      .first_machine = first_machine,
      .last_machine = last_machine.value_or(id_bits.max_machine()),
      .id_bits = id_bits,
  };
}

std::span<const RegisterBackendInfo> RegisterBackends() noexcept { return kBackends; }

std::string KnownRegisterBackends() {
  std::string out;
  const auto backends = RegisterBackends();
  for (size_t i = 0; i < backends.size(); ++i) {
    if (i > 0) out += i + 1 == backends.size() ? " or " : ", ";
    out += '"';
    out += backends[i].name;
    out += '"';
  }
  return out;
}

tl::expected<const RegisterBackendInfo*, std::string> FindRegisterBackend(std::string_view name) {
  for (const RegisterBackendInfo& backend : RegisterBackends()) {
    if (backend.name == name) return &backend;
  }
  return tl::unexpected("unknown register backend \"" + std::string(name) +
                        "\" (known: " + KnownRegisterBackends() + ")");
}

std::string MachinesOutsideLayout(const RegisterConfig& config, IdBits id_bits) {
  const uint32_t max = id_bits.max_machine();
  const std::string layout = "id.layout " + FormatIdBits(id_bits) + " numbers machines 0-" +
                             std::to_string(max) + " (2^" + std::to_string(id_bits.machine) + ")";
  if (const auto* own = std::get_if<StaticRegisterConfig>(&config.options);
      own != nullptr && own->machine > max) {
    return "register.machine " + std::to_string(own->machine) +
           " is outside the layout: " + layout +
           "; choose a number within it, or a layout with more machine bits";
  }
  if (config.first_machine > max || (config.last_machine && *config.last_machine > max)) {
    return "register.machines " + std::to_string(config.first_machine) + "-" +
           std::to_string(config.last_machine.value_or(max)) +
           " reaches outside the layout: " + layout +
           "; narrow the range, or choose a layout with more machine bits";
  }
  return "";
}

std::unique_ptr<MachineRegister> MakeMachineRegister(const RegisterConfig& config,
                                                     const std::filesystem::path& state_dir,
                                                     IdBits id_bits) {
  return RowOf(config.options).make(config.options, config.Common(state_dir, id_bits));
}

}  // namespace snowflake::reg
