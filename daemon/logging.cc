#include "daemon/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/systemd_sink.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <string>

namespace snowflake::daemon {

bool StartedBySystemd() noexcept {
  return std::getenv("JOURNAL_STREAM") != nullptr || std::getenv("INVOCATION_ID") != nullptr;
}

void SetUpLogging(std::string_view level) noexcept {
  try {
    std::shared_ptr<spdlog::logger> logger;
    if (StartedBySystemd()) {
      // The journal stamps time, pid and priority itself.
      logger = std::make_shared<spdlog::logger>(
          "snowflaked", std::make_shared<spdlog::sinks::systemd_sink_mt>("snowflaked"));
      logger->set_pattern("%v");
    } else {
      logger = std::make_shared<spdlog::logger>("snowflaked",
                                                std::make_shared<spdlog::sinks::stderr_sink_mt>());
      logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z snowflaked[%P] %l: %v");
    }
    logger->set_level(spdlog::level::from_str(std::string(level)));
    logger->flush_on(spdlog::level::info);
    spdlog::set_default_logger(std::move(logger));
  } catch (...) {
    // Keep spdlog's default stderr logger.
  }
}

}  // namespace snowflake::daemon
