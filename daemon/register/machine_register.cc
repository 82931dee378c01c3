#include "daemon/register/machine_register.h"

namespace snowflake::daemon {

MachineRegister::~MachineRegister() = default;

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

tl::expected<int, RegisterError> MachineRegister::RaiseAll(int64_t) noexcept {
  return tl::unexpected(RegisterError{
      RegisterErrorCode::kUnsupported,
      "raise-all is not supported by the " + std::string(backend_name()) + " register backend"});
}

}  // namespace snowflake::daemon
