#include "front_daemon.h"

#include <gtest/gtest.h>

#include "http_probe.h"

namespace snowflake::testing {

FrontDaemon::FrontDaemon(const std::string& name, uint32_t machine, const std::string& extra)
    : harness(std::make_unique<DaemonHarness>(name)), port(FreePort()) {
  options = harness->Options();
  options.config_path = harness->WriteFile(
      "front.toml", "[register]\nbackend = \"static\"\nmachine = " + std::to_string(machine) +
                        "\n" + HttpFrontToml(port, extra));
}

void FrontDaemon::Start() {
  daemon.emplace(harness->Start(options));
  ASSERT_TRUE(daemon->ready()) << daemon->Describe();
}

}  // namespace snowflake::testing
