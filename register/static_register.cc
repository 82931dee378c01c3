#include "register/static_register.h"

#include <system_error>

#include "register/machine_lock.h"
#include "snowflake/id_layout.h"

namespace snowflake::reg {

tl::expected<StaticRegisterConfig, util::ConfigError> ParseStaticRegisterConfig(
    const toml::table& register_table, std::string_view source) noexcept {
  try {
    const util::TomlFields fields(source);
    const toml::node* node = register_table.get("machine");
    if (node == nullptr) {
      fields.FailMissing("register.machine", "required when register.backend = \"static\"");
    }
    // Checked against id.layout's machine bits when the register is made (Claim) and by the
    // daemon's config check; here only against the widest layout.
    return StaticRegisterConfig{.machine = static_cast<uint32_t>(fields.Integer(
                                    "register.machine", *node, 0, kMaxMachineOfAnyLayout,
                                    "from 0 to " + std::to_string(kMaxMachineOfAnyLayout) +
                                        ", below 2^machine bits of id.layout"))};
  } catch (const util::ConfigInvalid& e) {
    return tl::unexpected(util::ConfigError{e.message});
  } catch (const std::exception& e) {
    return tl::unexpected(
        util::ConfigError{std::string(source) + ": register.machine: " + e.what()});
  }
}

// The same host-wide locks as the file backend: a static and a file daemon of one host
// never hold one number together.
std::unique_ptr<MachineRegister> MakeStaticRegister(const StaticRegisterConfig& own,
                                                    const RegisterCommon& common) {
  return std::make_unique<StaticRegister>(own.machine, HostLockDir(), common.id_bits);
}

StaticRegister::StaticRegister(uint32_t machine, std::filesystem::path lock_dir, IdBits id_bits)
    : machine_(machine), lock_dir_(std::move(lock_dir)), id_bits_(id_bits) {}

std::string StaticRegister::location() const {
  return "register.machine = " + std::to_string(machine_);
}

tl::expected<MachineClaim, RegisterError> StaticRegister::Claim(const ClaimRequest&) noexcept {
  try {
    if (machine_ > id_bits_.max_machine()) {
      return tl::unexpected(RegisterError{
          RegisterErrorCode::kInvalidRequest,
          "register.machine " + std::to_string(machine_) + " is out of range 0-" +
              std::to_string(id_bits_.max_machine()) + " of id.layout " + FormatIdBits(id_bits_) +
              " (2^" + std::to_string(id_bits_.machine) + " machine numbers)"});
    }
    auto lock = AcquireMachineLock(lock_dir_, machine_);
    if (!lock) {
      if (lock.error().held_by_other) {
        return tl::unexpected(RegisterError{
            RegisterErrorCode::kInUse,
            "machine " + std::to_string(machine_) + " is in use by " +
                (lock.error().holder_pid ? "pid " + std::to_string(*lock.error().holder_pid)
                                         : std::string("another process")) +
                " on this host (lock " + MachineLockPath(lock_dir_, machine_).string() +
                "): give each daemon of a host its own register.machine, or use the file "
                "register"});
      }
      return tl::unexpected(RegisterError{RegisterErrorCode::kUnreadable, lock.error().message});
    }
    lock_ = std::move(*lock);
    return MachineClaim{.machine = machine_, .high_water_unix_ms = 0};
  } catch (const std::exception& e) {
    return tl::unexpected(RegisterError{RegisterErrorCode::kUnreadable, e.what()});
  }
}

// The static backend stores no marks: the local high-water file is the only record.
tl::expected<void, RegisterError> StaticRegister::UpdateHighWater(int64_t) noexcept {
  if (!lock_) return tl::unexpected(RegisterError{RegisterErrorCode::kNotClaimed, "not claimed"});
  return {};
}

tl::expected<void, RegisterError> StaticRegister::RecordCleanStop(int64_t unix_ms) noexcept {
  return UpdateHighWater(unix_ms);
}

namespace {

RegisterError NoRegister(const char* what) {
  return RegisterError{RegisterErrorCode::kUnsupported,
                       std::string("register.backend is \"static\": there is no register to ") +
                           what + " (the number is register.machine in the config)"};
}

}  // namespace

tl::expected<std::vector<RegisterListEntry>, RegisterError> StaticRegister::ListNumbers() noexcept {
  return tl::unexpected(NoRegister("show"));
}

tl::expected<void, RegisterError> StaticRegister::Release(uint32_t) noexcept {
  return tl::unexpected(NoRegister("release a number from"));
}

tl::expected<RaiseAllResult, RegisterError> StaticRegister::RaiseAll(int64_t, bool) noexcept {
  return tl::unexpected(NoRegister("raise"));
}

}  // namespace snowflake::reg
