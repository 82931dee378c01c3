#include "machine_register.h"

#include <unistd.h>

#include <fstream>

#include "config.h"
#include "file_register.h"
#include "machine_lock.h"
#include "static_register.h"

namespace snowflake {

MachineRegister::~MachineRegister() = default;

std::unique_ptr<MachineRegister> MakeMachineRegister(const Config& config) {
  const Config::Register& reg = config.machine_register;
  switch (reg.backend) {
    case RegisterBackend::kStatic:
      // The same host-wide locks as the file backend: a static and a file daemon of one
      // host never hold one number together.
      return std::make_unique<StaticRegister>(reg.machine.value_or(0), HostLockDir());
    case RegisterBackend::kFile:
      break;
  }
  return std::make_unique<FileRegister>(FileRegisterOptions{
      .path = config.RegisterPath(),
      .first_machine = reg.first_machine,
      .last_machine = reg.last_machine,
      .host_lock_dir = HostLockDir(),
  });
}

std::string ResolveHolderId(const Config& config) {
  if (!config.machine_register.holder_id.empty()) return config.machine_register.holder_id;
  std::string host;
  std::ifstream in("/etc/machine-id");
  std::getline(in, host);
  if (host.empty()) {
    // No machine-id (a minimal container): the host name is the next best identity.
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) == 0) host = name;
  }
  if (host.empty()) host = "unknown-host";
  return host + ":" + config.daemon.instance;
}

}  // namespace snowflake
