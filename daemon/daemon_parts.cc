#include "daemon/daemon_parts.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "daemon/http/http_front.h"
#include "daemon/register/register_backends.h"

namespace snowflake::daemon {
namespace {

// The HTTP front as a Front. It says in the log when it has stopped: the line that shows
// an operator the front went first.
class HttpFrontPart final : public Front {
 public:
  explicit HttpFrontPart(std::unique_ptr<HttpFront> front) : front_(std::move(front)) {}
  ~HttpFrontPart() override { Stop(); }

  void Stop() noexcept override {
    if (stopped_) return;
    stopped_ = true;
    front_->Stop();
    spdlog::info("http front stopped");
  }

 private:
  std::unique_ptr<HttpFront> front_;
  bool stopped_ = false;
};

}  // namespace

DaemonParts ProductionParts() {
  static RealClock clock;
  return DaemonParts{
      .clock = clock,
      .file_system = FileSystem::Default(),
      .make_register =
          [](const Config& config) {
            return MakeMachineRegister(config.machine_register, config.daemon.state_dir);
          },
      .make_front = [](const Config& config, StatusBoard& board, const DaemonLatencies& latencies)
          -> tl::expected<std::unique_ptr<Front>, std::string> {
        auto http = HttpFront::Start(config, board, &latencies);
        if (!http) return tl::unexpected(std::move(http.error()));
        if (!*http) return nullptr;  // [http] listen is empty: no front
        return std::make_unique<HttpFrontPart>(std::move(*http));
      },
  };
}

}  // namespace snowflake::daemon
