// One snowflaked with a static machine number and its HTTP front on a free port of
// 127.0.0.1, for the tests of the front (plain and TLS) and of its share.

#ifndef SNOWFLAKE_TESTS_HTTP_FRONT_DAEMON_H_
#define SNOWFLAKE_TESTS_HTTP_FRONT_DAEMON_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "daemon_harness.h"

namespace snowflake::testing {

struct FrontDaemon {
  // The config: [register] backend "static" with `machine`, [http] on a free port plus the
  // `extra` lines (e.g. "threads = 2\n"). Start() runs it.
  FrontDaemon(const std::string& name, uint32_t machine, const std::string& extra);

  // Starts the daemon and fails the test (ASSERT) unless it became ready.
  void Start();

  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  std::string https() const { return "https://" + address(); }

  std::unique_ptr<DaemonHarness> harness;
  DaemonOptions options;
  uint16_t port = 0;
  std::optional<Daemon> daemon;
};

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_HTTP_FRONT_DAEMON_H_
