#include "daemon/register/machine_register.h"

#include "daemon/config/config.h"
#include "daemon/register/etcd_register.h"
#include "daemon/register/file_register.h"
#include "daemon/register/machine_lock.h"
#include "daemon/register/static_register.h"

namespace snowflake::daemon {

MachineRegister::~MachineRegister() = default;

std::unique_ptr<MachineRegister> MakeMachineRegister(const Config& config) {
  const Config::Register& reg = config.machine_register;
  switch (reg.backend) {
    case RegisterBackend::kStatic:
      // The same host-wide locks as the file backend: a static and a file daemon of one
      // host never hold one number together.
      return std::make_unique<StaticRegister>(reg.machine.value_or(0), HostLockDir());
    case RegisterBackend::kEtcd:
      return std::make_unique<EtcdRegister>(EtcdRegisterOptionsFrom(config));
    case RegisterBackend::kFile:
      break;
  }
  return std::make_unique<FileRegister>(FileRegisterOptionsFrom(config));
}

FileRegisterOptions FileRegisterOptionsFrom(const Config& config) {
  return FileRegisterOptions{
      .path = config.RegisterPath(),
      .first_machine = config.machine_register.first_machine,
      .last_machine = config.machine_register.last_machine,
      .host_lock_dir = HostLockDir(),
  };
}

}  // namespace snowflake::daemon
