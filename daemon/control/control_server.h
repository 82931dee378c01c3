// The control socket, <runtime_dir>/control.sock (docs/control-protocol.md): an AF_UNIX
// stream socket speaking one JSON object per line, in the words of protocol/. Commands:
// "status" and "attach" (anyone who may connect: the socket is mode 0660, owned by the
// clients' group; attach answers with the consumer region's descriptor, SCM_RIGHTS, and
// ends the connection) and "resume" (root or the daemon's own uid only, checked with
// SO_PEERCRED).
//
// It serves on its own thread, so a slow or hostile client never stalls the fill loop;
// it talks to the loop only through a StatusBoard. Malformed, oversized or unknown
// requests get an error reply; nothing a client sends can crash it. Nor can a client
// stall the socket for others: every socket is non-blocking and replies are buffered
// (a peer that does not read gets closed after write_timeout), an idle connection is
// closed after idle_timeout, `reserved_connections` of the slots are kept for root and
// the daemon's user (SO_PEERCRED), so group members holding every other slot cannot lock
// the operator out of status and resume, and one user may hold at most
// `max_connections_per_user`, so one member cannot lock the others out of attach
// (docs/security.md).
//
// A ControlServer's Start() and Stop() must be called from one thread; the serving thread
// is internal.

#ifndef SNOWFLAKE_DAEMON_CONTROL_CONTROL_SERVER_H_
#define SNOWFLAKE_DAEMON_CONTROL_CONTROL_SERVER_H_

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tl/expected.hpp>

#include "daemon/control/status_board.h"

namespace snowflake::daemon {

using protocol::kControlSocketFileName;
using protocol::kMaxControlRequestBytes;
// A connection whose unsent replies exceed this stops being read until they drain.
inline constexpr size_t kMaxControlPendingBytes = 256 * 1024;
// The listen backlog: room for a host's processes starting at once, each attaching (the
// kernel caps it at net.core.somaxconn).
inline constexpr int kControlListenBacklog = 4096;

struct ControlServerOptions {
  std::filesystem::path socket_path;
  std::optional<gid_t> group = std::nullopt;  // the socket's group; nullopt keeps the daemon's
  mode_t mode = 0660;
  // Peers allowed to send "resume". Empty: root and the daemon's effective uid.
  std::set<uid_t> resume_uids = {};
  // How long "resume" waits for the fill loop to act before replying with an error.
  std::chrono::milliseconds resume_timeout{2000};
  size_t max_connections = 64;
  // Of max_connections, how many only privileged peers (root, the daemon's euid and
  // resume_uids) may use.
  size_t reserved_connections = 4;
  // How many connections one unprivileged user may hold at once: one member of the
  // clients' group holding every slot would otherwise refuse every other member's attach
  // (which each starting client needs). A user's processes beyond it get
  // too_many_connections and retry; an attach holds its slot only until it is answered.
  size_t max_connections_per_user = 16;
  // A connection with no request in progress and nothing to send is closed after this.
  std::chrono::milliseconds idle_timeout{10'000};
  // A connection whose pending reply makes no progress for this long is closed.
  std::chrono::milliseconds write_timeout{2'000};
};

// True if `uid` is root, the daemon's effective uid, or in options.resume_uids (when
// set): the peers that may resume and that may use the reserved connection slots.
bool IsPrivilegedPeer(uid_t uid, const ControlServerOptions& options) noexcept;

// The protocol state of one connection, without any I/O, so it can be tested and fuzzed
// on its own: bytes received go in, reply bytes to send come out.
// Not thread-safe; the serving thread owns each session.
class ControlSession {
 public:
  // `options` and `board` must outlive the session.
  ControlSession(uid_t peer_uid, const ControlServerOptions& options, StatusBoard& board)
      : peer_uid_(peer_uid), options_(options), board_(board) {}

  // Handles received bytes: each complete line is one request whose reply is appended to
  // output(). A line (or an unterminated tail) over kMaxControlRequestBytes gets an
  // error reply and the session starts closing: it reads nothing more.
  void OnReceive(std::string_view bytes);
  // The peer shut down its sending side: a last request without a newline is answered,
  // then the session closes once its output is sent.
  void OnPeerClosed();

  // Reply bytes not yet sent; the caller erases what it sent.
  std::string& output() { return output_; }
  // A descriptor to send with the output byte at `offset` (SCM_RIGHTS with the sendmsg
  // that starts there): an attach reply's consumer region.
  struct PendingDescriptor {
    size_t offset = 0;
    UniqueFd fd;
  };
  // In offset order; the caller pops one it sent and lowers the others' offsets by what
  // it erased from output().
  std::deque<PendingDescriptor>& descriptors() { return descriptors_; }
  // True once the session takes no more input: close after flushing output().
  bool closing() const { return closing_; }
  // True while a request line is partly received.
  bool mid_request() const { return !buffer_.empty(); }
  uid_t peer_uid() const { return peer_uid_; }

 private:
  void Reply(std::string text);
  void Answer(std::string_view line);

  uid_t peer_uid_;
  const ControlServerOptions& options_;
  StatusBoard& board_;
  std::string buffer_;  // received bytes of the current, incomplete line
  std::string output_;
  std::deque<PendingDescriptor> descriptors_;
  bool closing_ = false;
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

// The answer to one request line: a JSON object text without the newline, the descriptor
// that goes with it (attach), and whether the connection ends after it (attach).
struct ControlAnswer {
  std::string text;
  UniqueFd descriptor;
  bool last = false;
};
ControlAnswer AnswerControlRequest(std::string_view line, uid_t peer_uid,
                                   const ControlServerOptions& options, StatusBoard& board);

// The reply text alone, for tests (a descriptor is closed). `peer_uid` is the sender's
// uid (SO_PEERCRED).
std::string HandleControlRequest(std::string_view line, uid_t peer_uid,
                                 const ControlServerOptions& options, StatusBoard& board);

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_CONTROL_CONTROL_SERVER_H_
