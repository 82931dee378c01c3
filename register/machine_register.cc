#include "register/machine_register.h"

namespace snowflake::reg {

MachineRegister::~MachineRegister() = default;

std::string_view RegisterErrorCodeName(RegisterErrorCode code) noexcept {
  // No default: a new code fails the build here (-Wswitch) until it has its name.
  switch (code) {
    case RegisterErrorCode::kNoFreeNumber:
      return "no_free_number";
    case RegisterErrorCode::kInUse:
      return "in_use";
    case RegisterErrorCode::kCorrupt:
      return "corrupt";
    case RegisterErrorCode::kUnreadable:
      return "unreadable";
    case RegisterErrorCode::kEpochMismatch:
      return "epoch_mismatch";
    case RegisterErrorCode::kNotClaimed:
      return "not_claimed";
    case RegisterErrorCode::kInvalidRequest:
      return "invalid_request";
    case RegisterErrorCode::kClaimLost:
      return "claim_lost";
    case RegisterErrorCode::kTimedOut:
      return "timed_out";
    case RegisterErrorCode::kUnreachable:
      return "unreachable";
    case RegisterErrorCode::kRolledBack:
      return "rolled_back";
    case RegisterErrorCode::kUnsupported:
      return "unsupported";
    case RegisterErrorCode::kFenced:
      return "fenced";
  }
  return "unknown";  // a value outside the enum
}

tl::expected<std::vector<RegisterListEntry>, RegisterError>
MachineRegister::ListNumbers() noexcept {
  return tl::unexpected(RegisterError{
      RegisterErrorCode::kUnsupported,
      "the " + std::string(backend_name()) + " register backend cannot list its numbers"});
}

tl::expected<void, RegisterError> MachineRegister::Release(uint32_t) noexcept {
  return tl::unexpected(RegisterError{
      RegisterErrorCode::kUnsupported,
      "the " + std::string(backend_name()) + " register backend cannot release a number"});
}

tl::expected<RaiseAllResult, RegisterError> MachineRegister::RaiseAll(int64_t, bool) noexcept {
  return tl::unexpected(RegisterError{
      RegisterErrorCode::kUnsupported,
      "raise-all is not supported by the " + std::string(backend_name()) + " register backend"});
}

}  // namespace snowflake::reg
