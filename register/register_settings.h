// What a register needs of the daemon's config file, read by one code for both of the
// register's users: the daemon's loader (daemon/config/config.cc) hands its [register]
// table to ReadRegisterTable(), and `snowflakectl register` reads the file with
// LoadRegisterSettings(), which reads [register], daemon.state_dir, id.epoch, id.layout and
// clock.max_forward_ms through the same readers. Every other key is the daemon's alone:
// LoadRegisterSettings() does not read it, and `snowflaked --check-config` checks it.
//
// Plain values and pure functions: safe from any thread.

#ifndef SNOWFLAKE_REGISTER_REGISTER_SETTINGS_H_
#define SNOWFLAKE_REGISTER_REGISTER_SETTINGS_H_

#include <toml++/toml.h>

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <tl/expected.hpp>

#include "register/register_backends.h"
#include "snowflake/id_layout.h"
#include "util/toml_fields.h"

namespace snowflake::reg {

// daemon.state_dir's default: the register file's directory unless register.path names one.
inline constexpr std::string_view kDefaultStateDir = "/var/lib/snowflaked";

// clock.max_forward_ms: how far past the clock a stored mark (a host mark, the state
// file's reservation, a raise-all fence) may lie before it is refused instead of adopted.
// The lower bound leaves every honest mark room (a reservation reaches at most
// persistence.reservation_ms ahead, and a clock may step back max_backward_ms).
inline constexpr int64_t kDefaultMaxForwardMs = 86'400'000;  // 24 h
inline constexpr int64_t kMinMaxForwardMs = 3'600'000;       // 1 h
inline constexpr int64_t kMaxMaxForwardMs = 31'536'000'000;  // 365 days

// The one rule for "far past": `unix_ms` lies more than `max_forward_ms` past
// `reference_unix_ms`. The reference is the clock, or for a daemon that has claimed its
// number the later of the clock and the register's mark: an operator's fence put there
// with `raise-all --force-far` is real, and what this host recorded of it must not then
// keep the daemon from starting.
inline bool FarPast(int64_t unix_ms, int64_t reference_unix_ms, int64_t max_forward_ms) {
  return unix_ms > reference_unix_ms && unix_ms - reference_unix_ms > max_forward_ms;
}

// Reads clock.max_forward_ms from `node` (the key's one reader, for the daemon's loader
// and LoadRegisterSettings). Throws ConfigInvalid naming the file, line and key.
int64_t ReadMaxForwardMs(const util::TomlFields& fields, const toml::node& node);

// Reads id.layout from `node` (the key's one reader, for the daemon's loader and
// LoadRegisterSettings): a preset name or "time/machine/sequence" bits (ParseIdBits), its
// errors stating the trade-off against `epoch_unix_ms`. Throws ConfigInvalid naming the
// file, line and key.
IdBits ReadIdLayout(const util::TomlFields& fields, const toml::node& node, int64_t epoch_unix_ms);

// Refuses a register.machines or static register.machine outside the numbers of `id_bits`
// (MachinesOutsideLayout), for the daemon's loader and LoadRegisterSettings in the same
// words: at id.layout's line when `layout_node` is given, else at the range's line in
// `register_table` (may be null). Throws ConfigInvalid.
void CheckMachinesInLayout(const util::TomlFields& fields, const RegisterConfig& config,
                           IdBits id_bits, const toml::node* layout_node,
                           const toml::table* register_table);

// Reads the [register] table into `out`: the keys every backend shares (backend, path,
// machines, holder_id) and, through the backends' table, the named backend's own. Throws
// ConfigInvalid (through `fields`, naming the file, line and key) for an unknown backend, a
// key of another backend's, an unknown key, a bad value, or whatever the backend's own
// parser refuses.
void ReadRegisterTable(const toml::table& table, const util::TomlFields& fields,
                       RegisterConfig& out);

// What `snowflakectl register` needs of a config file.
struct RegisterSettings {
  RegisterConfig machine_register;
  std::filesystem::path state_dir{kDefaultStateDir};  // daemon.state_dir
  int64_t epoch_unix_ms = kDefaultEpochUnixMs;        // id.epoch
  IdBits id_bits = kDefaultIdBits;                    // id.layout
  int64_t max_forward_ms = kDefaultMaxForwardMs;      // clock.max_forward_ms
};

// Reads [register], daemon.state_dir, id.epoch, id.layout and clock.max_forward_ms from the
// config file at `path`, with the daemon's readers; absent keys keep the daemon's defaults.
// A register.machines or static register.machine outside id.layout's numbers is refused. Errors:
// those of ReadConfigText() and ParseTomlText(), and of the keys read (each names the file, line
// and key). Other tables and keys are not read.
[[nodiscard]] tl::expected<RegisterSettings, util::ConfigError> LoadRegisterSettings(
    const std::filesystem::path& path) noexcept;

}  // namespace snowflake::reg

#endif  // SNOWFLAKE_REGISTER_REGISTER_SETTINGS_H_
