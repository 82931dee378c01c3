// The control socket, <runtime_dir>/control.sock (docs/control-protocol.md): an AF_UNIX
// stream socket speaking one JSON object per line. Commands: "status" (anyone who may
// connect: the socket is mode 0660, owned by the clients' group) and "resume" (root or
// the daemon's own uid only, checked with SO_PEERCRED).
//
// It serves on its own thread, so a slow or hostile client never stalls the fill loop;
// it talks to the loop only through a StatusBoard. Malformed, oversized or unknown
// requests get an error reply; nothing a client sends can crash it.
//
// A ControlServer's Start() and Stop() must be called from one thread; the serving thread
// is internal.

#ifndef SNOWFLAKE_DAEMON_CONTROL_SERVER_H_
#define SNOWFLAKE_DAEMON_CONTROL_SERVER_H_

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tl/expected.hpp>

#include "status_board.h"

namespace snowflake {

inline constexpr std::string_view kControlSocketFileName = "control.sock";
inline constexpr size_t kMaxControlRequestBytes = 4096;

struct ControlServerOptions {
  std::filesystem::path socket_path;
  std::optional<gid_t> group = std::nullopt;  // the socket's group; nullopt keeps the daemon's
  mode_t mode = 0660;
  // Peers allowed to send "resume". Empty: root and the daemon's effective uid.
  std::set<uid_t> resume_uids = {};
  // How long "resume" waits for the fill loop to act before replying with an error.
  std::chrono::milliseconds resume_timeout{2000};
  size_t max_connections = 64;
};

class ControlServer {
 public:
  // `board` must outlive the server.
  ControlServer(ControlServerOptions options, StatusBoard& board);
  ~ControlServer();  // Stop()s
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Binds the socket (replacing a stale one: the instance lock says nobody else serves
  // this directory), applies mode and group, and starts the serving thread.
  // Errors: a message naming the path and errno's text.
  [[nodiscard]] tl::expected<void, std::string> Start() noexcept;

  // Stops the thread, closes every connection and removes the socket. Idempotent.
  void Stop() noexcept;

 private:
  void Serve() noexcept;

  ControlServerOptions options_;
  StatusBoard& board_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};  // written by Stop() to wake the serving thread's poll
  std::thread thread_;
};

// The reply to one request line, for the server and for tests: a JSON object text
// without the newline. `peer_uid` is the sender's uid (SO_PEERCRED).
std::string HandleControlRequest(std::string_view line, uid_t peer_uid,
                                 const ControlServerOptions& options, StatusBoard& board);

// The status keys as a JSON object text (the CLI's `status --json` prints these).
std::string StatusToJson(const DaemonStatus& status, bool ok = true);

}  // namespace snowflake

#endif  // SNOWFLAKE_DAEMON_CONTROL_SERVER_H_
