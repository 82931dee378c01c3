#include "daemon/daemon_parts.h"

#include <utility>

#include "daemon/http/http_admin_front.h"
#include "daemon/http/http_front.h"
#include "register/register_backends.h"

namespace snowflake::daemon {

DaemonParts ProductionParts() {
  return DaemonParts{
      .clock = Clock::Real(),
      .file_system = util::FileSystem::Default(),
      .make_register =
          [](const Config& config) {
            return reg::MakeMachineRegister(config.machine_register, config.daemon.state_dir,
                                            config.id.bits);
          },
      .make_fronts = [](const FrontContext& context)
          -> tl::expected<std::vector<std::unique_ptr<Front>>, std::string> {
        std::vector<std::unique_ptr<Front>> fronts;
        // The HTTP front is off unless [http] listen names an address.
        if (!context.config.http.listen.empty()) {
          fronts.push_back(std::make_unique<HttpFront>(context));
          // Its admin listener, when [http] admin_listen names an address (the config
          // refuses admin_listen without listen).
          if (!context.config.http.admin_listen.empty()) {
            fronts.push_back(std::make_unique<HttpAdminFront>(context));
          }
        }
        return fronts;
      },
  };
}

}  // namespace snowflake::daemon
