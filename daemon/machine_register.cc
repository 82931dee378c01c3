#include "machine_register.h"

#include <unistd.h>

#include <fstream>

#include "config.h"
#include "etcd_register.h"
#include "file_register.h"
#include "static_register.h"

namespace snowflake {

MachineRegister::~MachineRegister() = default;

std::unique_ptr<MachineRegister> MakeMachineRegister(const Config& config) {
  const Config::Register& reg = config.machine_register;
  switch (reg.backend) {
    case RegisterBackend::kStatic: {
      std::filesystem::path lock_dir = config.RegisterPath();
      lock_dir += ".d";
      return std::make_unique<StaticRegister>(reg.machine.value_or(0), lock_dir);
    }
    case RegisterBackend::kEtcd:
      return std::make_unique<EtcdRegister>(EtcdRegisterOptionsFrom(config));
    case RegisterBackend::kFile:
      break;
  }
  return std::make_unique<FileRegister>(FileRegisterOptions{
      .path = config.RegisterPath(),
      .first_machine = reg.first_machine,
      .last_machine = reg.last_machine,
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
