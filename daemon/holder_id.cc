#include "daemon/holder_id.h"

#include <systemd/sd-id128.h>
#include <unistd.h>

namespace snowflake::daemon {

namespace {

// This application's id for sd_id128_get_machine_app_specific(): machine-id(5) asks that
// the machine id never be exposed (the register file is readable by operators and may be
// copied around), only an HMAC of it keyed by an application id. Never change it: the
// holder id of every installed daemon would change with it.
constexpr sd_id128_t kHolderAppId = SD_ID128_MAKE(5a, 4d, 1d, c8, 7a, 3a, 4a, 7d, bd, 52, c7, 89,
                                                  39, 2e, 48, 9a);

}  // namespace

std::string ResolveHolderId(const Config& config) {
  if (!config.machine_register.holder_id.empty()) return config.machine_register.holder_id;
  std::string host;
  sd_id128_t app_specific;
  if (sd_id128_get_machine_app_specific(kHolderAppId, &app_specific) == 0) {
    char text[SD_ID128_STRING_MAX];
    host = sd_id128_to_string(app_specific, text);
  }
  if (host.empty()) {
    // No machine-id (a minimal container): the host name is the next best identity.
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) == 0) host = name;
  }
  if (host.empty()) host = "unknown-host";
  return host + ":" + config.daemon.instance;
}

}  // namespace snowflake::daemon
