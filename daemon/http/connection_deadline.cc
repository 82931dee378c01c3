#include "daemon/http/connection_deadline.h"

#include <algorithm>
#include <boost/beast/core/error.hpp>

namespace snowflake::daemon::transport {

ConnectionDeadline::ConnectionDeadline(const tcp::socket::executor_type& executor,
                                       const Config::Http& options)
    : timer_(executor),
      tick_(std::max<std::chrono::milliseconds>(
          std::chrono::milliseconds(10),
          std::min<std::chrono::milliseconds>(
              {std::chrono::milliseconds(options.idle_timeout_ms),
               std::chrono::milliseconds(options.write_timeout_ms),
               std::chrono::milliseconds(options.tls_handshake_timeout_ms), kRefuseTimeout}) /
              4)) {}

void ConnectionDeadline::Watch(std::weak_ptr<void> owner, std::function<void()> expire) {
  owner_ = std::move(owner);
  expire_ = std::move(expire);
  watching_ = true;
  Arm();
}

void ConnectionDeadline::Arm() {
  armed_ = std::min(deadline_, Steady::now() + tick_);
  timer_.expires_at(armed_);  // cancels a pending wait: it completes as aborted
  timer_.async_wait([this, weak = owner_](boost::beast::error_code ec) {
    const std::shared_ptr<void> alive = weak.lock();
    if (alive == nullptr || ec == asio::error::operation_aborted) return;
    if (Steady::now() >= deadline_) return expire_();
    Arm();
  });
}

}  // namespace snowflake::daemon::transport
