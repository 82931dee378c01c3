// The "static" register backend: the operator assigns the number in config
// (register.machine); nothing is recorded. Keeping numbers unique across hosts is then
// the operator's job. On one host it still takes the number's host-wide lock
// (machine_lock.h, shared with the file backend), so two daemons here cannot both serve
// N, whatever their configs say.
//
// A StaticRegister is not safe for concurrent use by several threads.

#ifndef SNOWFLAKE_REGISTER_STATIC_REGISTER_H_
#define SNOWFLAKE_REGISTER_STATIC_REGISTER_H_

#include <toml++/toml.h>

#include <filesystem>
#include <optional>

#include "register/machine_register.h"
#include "snowflake/id_layout.h"
#include "util/file_lock.h"
#include "util/toml_fields.h"

namespace snowflake::reg {

// The static backend's own [register] key: register.machine.
struct StaticRegisterConfig {
  uint32_t machine = 0;
  friend bool operator==(const StaticRegisterConfig&, const StaticRegisterConfig&) = default;
};
// Reads register.machine from the whole [register] table. Errors (naming the source, the
// line and the key): missing, not an integer, outside the widest layout's numbers (the
// layout in effect is checked by the daemon's config check and by Claim).
[[nodiscard]] tl::expected<StaticRegisterConfig, util::ConfigError> ParseStaticRegisterConfig(
    const toml::table& register_table, std::string_view source) noexcept;
// The register for own.machine with the host's lock directory, in common's layout.
std::unique_ptr<MachineRegister> MakeStaticRegister(const StaticRegisterConfig& own,
                                                    const RegisterCommon& common);

class StaticRegister final : public MachineRegister {
 public:
  // `host_lock_dir`: the host-wide directory of machine-N.lock files (HostLockDir() in
  // production; created if missing). `id_bits`: the layout (id.layout) the number must fit.
  StaticRegister(uint32_t machine, std::filesystem::path host_lock_dir,
                 IdBits id_bits = kDefaultIdBits);

  // Returns {machine, 0}: the high-water file of this host is the only mark.
  // Errors: kInvalidRequest (machine beyond the layout's numbers), kInUse (a live daemon here holds
  // the number), kUnreadable (the lock file cannot be created).
  tl::expected<MachineClaim, RegisterError> Claim(const ClaimRequest& request) noexcept override;
  // Nothing to record; always succeeds once claimed (kNotClaimed before).
  tl::expected<void, RegisterError> UpdateHighWater(int64_t unix_ms) noexcept override;
  tl::expected<void, RegisterError> RecordCleanStop(int64_t last_issued_unix_ms) noexcept override;
  // The static backend keeps no register: each fails with kUnsupported, saying the number
  // is register.machine in the config.
  tl::expected<std::vector<RegisterListEntry>, RegisterError> ListNumbers() noexcept override;
  tl::expected<void, RegisterError> Release(uint32_t machine) noexcept override;
  tl::expected<RaiseAllResult, RegisterError> RaiseAll(int64_t above_unix_ms,
                                                       bool while_running) noexcept override;
  std::string_view backend_name() const noexcept override { return "static"; }
  std::string location() const override;

 private:
  uint32_t machine_;
  std::filesystem::path lock_dir_;
  IdBits id_bits_;
  std::optional<util::FileLock> lock_;
};

}  // namespace snowflake::reg

#endif  // SNOWFLAKE_REGISTER_STATIC_REGISTER_H_
