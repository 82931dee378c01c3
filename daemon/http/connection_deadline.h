// A connection's deadlines in the HTTP front's transport (docs/http.md: the idle, write,
// handshake and refusal timeouts), as one timer per connection. Used by both kinds of
// session (plain_session.h, tls_session.h).
//
// Thread-compatible: a member of its session; runs on the session's thread.

#ifndef SNOWFLAKE_DAEMON_HTTP_CONNECTION_DEADLINE_H_
#define SNOWFLAKE_DAEMON_HTTP_CONNECTION_DEADLINE_H_

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
//
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>

#include "daemon/config/config.h"

namespace snowflake::daemon::transport {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Steady = std::chrono::steady_clock;

// A connection refused over max_connections has this long to send the request its 429
// answers (Admit, http_transport.cc).
inline constexpr std::chrono::milliseconds kRefuseTimeout{1000};

// Timeouts are a deadline checked by one timer per connection, not a timer armed per
// operation: a request costs a store to the deadline, no timer syscall and no cancelled
// wait to complete. The timer wakes at least every tick (a quarter of the shortest
// timeout), so a deadline is enforced at most that late; a deadline earlier than the
// armed wake re-arms it. A member of its session; runs on the session's thread.
class ConnectionDeadline {
 public:
  ConnectionDeadline(const tcp::socket::executor_type& executor, const Config::Http& options);

  void ExpireAfter(std::chrono::milliseconds timeout) { ExpireAt(Steady::now() + timeout); }
  void ExpireAt(Steady::time_point deadline) {
    deadline_ = deadline;
    if (watching_ && deadline_ < armed_) Arm();
  }

  // Starts the timer. `owner` is the session this is a member of (a wake after it is gone
  // does nothing); `expire` closes its socket, which cancels its pending operations.
  void Watch(std::weak_ptr<void> owner, std::function<void()> expire);

 private:
  void Arm();

  asio::steady_timer timer_;
  const std::chrono::milliseconds tick_;
  Steady::time_point deadline_ = Steady::time_point::max();
  Steady::time_point armed_ = Steady::time_point::max();
  bool watching_ = false;
  std::weak_ptr<void> owner_;
  std::function<void()> expire_;
};

}  // namespace snowflake::daemon::transport

#endif  // SNOWFLAKE_DAEMON_HTTP_CONNECTION_DEADLINE_H_
