// The register backends' table: each backend's name, its own [register] keys, the function
// that parses them and the one that makes the register. The config loader
// (config/config.cc), MakeMachineRegister() and `snowflakectl register` all go through it,
// so a new backend is its own files, one alternative of RegisterBackendConfig and one row
// of the table (register_backends.cc) — docs/architecture.md, "Where a change goes".
//
// Plain values and pure functions; the table is constant: safe from any thread.

#ifndef SNOWFLAKE_REGISTER_REGISTER_BACKENDS_H_
#define SNOWFLAKE_REGISTER_REGISTER_BACKENDS_H_

#include <toml++/toml.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <variant>

#include "register/etcd_register_config.h"
#include "register/file_register.h"
#include "register/machine_register.h"
#include "register/static_register.h"
#include "snowflake/id_layout.h"
#include "util/toml_fields.h"

namespace snowflake::reg {

// A backend's own keys as its parser returned them: one alternative per backend, each
// named by exactly one row of the table.
using RegisterBackendConfig =
    std::variant<FileRegisterConfig, StaticRegisterConfig, EtcdRegisterConfig>;

// The [register] table: the keys every backend shares, read by the config loader, and the
// named backend's own, read by that backend's parser.
struct RegisterConfig {
  // The file register, read for every backend because the sample config sets it (empty:
  // <state_dir>/register.json); other backends ignore it.
  std::filesystem::path path;
  uint32_t first_machine = 0;  // register.machines: the numbers file and etcd may hand out
  // Unset: to the last number of id.layout (Common() resolves it).
  std::optional<uint32_t> last_machine;
  std::string holder_id;  // empty: /etc/machine-id + ":" + instance
  // The named backend's own keys; which alternative it holds says which backend is named
  // (the default, FileRegisterConfig, is "file").
  RegisterBackendConfig options;

  // register.backend: the name of the row whose config `options` holds.
  std::string_view backend() const noexcept;

  // What a backend's factory gets besides its own keys, with the register file resolved
  // against the state directory in effect (--state-dir may override the config's) and the
  // fleet's layout (id.layout), whose last number ends an unset range.
  RegisterCommon Common(const std::filesystem::path& state_dir,
                        IdBits id_bits = kDefaultIdBits) const;

  friend bool operator==(const RegisterConfig&, const RegisterConfig&) = default;
};

// One row of the table.
struct RegisterBackendInfo {
  std::string_view name;  // register.backend = "<name>"
  // The alternative of RegisterBackendConfig this backend's parse returns.
  size_t alternative;
  // The keys of [register] this backend owns besides the shared ones (a subtable counts
  // as one key); another backend's config naming one of them is refused.
  std::span<const std::string_view> keys;
  // Said after "only valid with register.backend = "<name>"" when another backend's config
  // names one of `keys`: what to use there instead ("" for nothing).
  std::string_view misplaced_hint;
  // Reads this backend's keys from the whole [register] table (the shared keys are the
  // loader's; a key of neither is refused before this is called). `source` names the file.
  tl::expected<RegisterBackendConfig, util::ConfigError> (*parse)(const toml::table& register_table,
                                                                  std::string_view source) noexcept;
  // The register, not yet claimed. REQUIRES: `own` holds what `parse` returns.
  std::unique_ptr<MachineRegister> (*make)(const RegisterBackendConfig& own,
                                           const RegisterCommon& common);
};

// Every backend, the default ("file") first.
std::span<const RegisterBackendInfo> RegisterBackends() noexcept;

// The row named `name`. Errors: a sentence naming `name` and every known backend
// ("unknown register backend "zk" (known: "file", "static" or "etcd")").
tl::expected<const RegisterBackendInfo*, std::string> FindRegisterBackend(std::string_view name);

// "\"file\", \"static\" or \"etcd\"": the known names, for messages.
std::string KnownRegisterBackends();

// The register `config` names, not yet claimed; `state_dir` is the daemon's, `id_bits` the
// fleet's layout (id.layout). Never null.
std::unique_ptr<MachineRegister> MakeMachineRegister(const RegisterConfig& config,
                                                     const std::filesystem::path& state_dir,
                                                     IdBits id_bits = kDefaultIdBits);

// Empty if register.machines (and a static register.machine) lie within the numbers of the
// layout `id_bits`; otherwise what is wrong and what to do.
std::string MachinesOutsideLayout(const RegisterConfig& config, IdBits id_bits);

}  // namespace snowflake::reg

#endif  // SNOWFLAKE_REGISTER_REGISTER_BACKENDS_H_
