#include "static_register.h"

#include <system_error>

#include "snowflake/id_layout.h"

namespace snowflake {

StaticRegister::StaticRegister(uint32_t machine, std::filesystem::path lock_dir)
    : machine_(machine), lock_dir_(std::move(lock_dir)) {}

std::string StaticRegister::location() const {
  return "register.machine = " + std::to_string(machine_);
}

tl::expected<MachineClaim, RegisterError> StaticRegister::Claim(const ClaimRequest&) noexcept {
  try {
    if (machine_ > kMaxMachine) {
      return tl::unexpected(RegisterError{
          RegisterErrorCode::kInvalidRequest,
          "register.machine " + std::to_string(machine_) + " is out of range 0-1023"});
    }
    std::error_code ec;
    std::filesystem::create_directories(lock_dir_, ec);
    if (ec) {
      return tl::unexpected(
          RegisterError{RegisterErrorCode::kUnreadable,
                        "cannot create " + lock_dir_.string() + ": " + ec.message()});
    }
    auto lock = FileLock::Acquire(lock_dir_ / ("machine-" + std::to_string(machine_) + ".lock"),
                                  /*wait=*/false, /*write_pid=*/true);
    if (!lock) {
      if (lock.error().held_by_other) {
        return tl::unexpected(RegisterError{
            RegisterErrorCode::kInUse,
            "machine " + std::to_string(machine_) + " is in use by " +
                (lock.error().holder_pid ? "pid " + std::to_string(*lock.error().holder_pid)
                                         : std::string("another process")) +
                " on this host: give each daemon its own register.machine"});
      }
      return tl::unexpected(RegisterError{RegisterErrorCode::kUnreadable, lock.error().message});
    }
    lock_ = std::move(*lock);
    return MachineClaim{machine_, 0};
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

}  // namespace snowflake
