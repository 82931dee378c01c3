#include "daemon/fronts/ring_services.h"

#include <utility>

namespace snowflake::daemon {

ClientOptions FrontClientOptions(const std::filesystem::path& runtime_dir) {
  ClientOptions options;
  options.runtime_dir = runtime_dir;
  options.wait_timeout = std::chrono::milliseconds(250);
  options.max_heartbeat_age = std::chrono::milliseconds(250);
  // This host's IDs only, whatever $SNOWFLAKE_REMOTES the daemon inherited (set for its
  // clients): a front that forwarded would hand out another daemon's IDs as this one's,
  // and fronts naming each other would forward in a loop while both are down.
  options.remotes.clear();
  options.remotes_from_environment = false;
  return options;
}

RingServices::RingServices(std::string front, std::filesystem::path runtime_dir,
                           uint64_t max_services, Metrics& metrics)
    : front_(std::move(front)),
      runtime_dir_(std::move(runtime_dir)),
      max_services_(max_services),
      metrics_(metrics) {}

tl::expected<RingServices::Service*, TakeRefusal> RingServices::ServiceFor(
    std::string_view service) {
  std::lock_guard lock(mutex_);
  if (auto found = services_.find(service); found != services_.end()) {
    return found->second.get();
  }
  if (auto valid = ValidateServiceName(service); !valid) {
    return tl::unexpected(TakeRefusal{.why = TakeRefusal::Why::kInvalidServiceName,
                                      .ring_error = {},
                                      .message = valid.error().message});
  }
  if (services_.size() >= max_services_) {
    return tl::unexpected(TakeRefusal{.why = TakeRefusal::Why::kTooManyServices,
                                      .ring_error = {},
                                      .message = "this front already serves " +
                                                 std::to_string(max_services_) +
                                                 " service names ([" + front_ + "] max_services)"});
  }
  auto client = Client::Open(service, FrontClientOptions(runtime_dir_));
  if (!client) {
    return tl::unexpected(TakeRefusal{.why = TakeRefusal::Why::kRing,
                                      .ring_error = client.error().code,
                                      .message = client.error().message});
  }
  auto entry = std::make_unique<Service>(
      Service{std::move(*client), metrics_.IssuedByFront(front_, service)});
  Service* raw = entry.get();
  services_.emplace(std::string(service), std::move(entry));
  return raw;
}

tl::expected<void, TakeRefusal> RingServices::Take(std::string_view service,
                                                   std::span<uint64_t> ids) {
  auto found = ServiceFor(service);
  if (!found) return tl::unexpected(std::move(found.error()));
  Client& client = (*found)->client;
  size_t filled = 0;
  while (filled < ids.size()) {
    auto taken = client.NextBatch(ids.subspan(filled));
    if (!taken) {
      return tl::unexpected(TakeRefusal{.why = TakeRefusal::Why::kRing,
                                        .ring_error = taken.error().code,
                                        .message = taken.error().message});
    }
    filled += *taken;
  }
  (*found)->issued.Increment(static_cast<double>(ids.size()));  // atomic: no lock
  return {};
}

}  // namespace snowflake::daemon
