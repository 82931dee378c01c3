// A fault-injecting TCP proxy for HTTP/1.1 clients (libcurl with keep-alive), placed in
// front of one upstream port on 127.0.0.1 (an etcd member's JSON gateway). It makes the
// network faults that reorder writes happen on demand and deterministically: a request is
// held while its client times out and moves on, and is delivered to the upstream later,
// after newer requests, once or twice, exactly when the test says so.
//
//   auto proxy = FaultProxy::Start(member_port);
//   ASSERT_TRUE(proxy) << proxy.error();
//   ... client endpoints {(*proxy)->url(), member_url} ...
//   (*proxy)->SetMode(FaultProxy::Mode::kHold, "/v3/kv/txn");
//   ... a call through the proxy times out; ASSERT_TRUE((*proxy)->WaitForHeld(1, 5s));
//   ... later calls go elsewhere and commit ...
//   auto late = (*proxy)->ReleaseHeld();  // applied now, after them; the answer is dropped
//
// Requests are cut at their boundaries (the request line and headers, then Content-Length
// bytes of body), so every mode acts on whole requests. Chunked request bodies, TLS and
// anything that is not HTTP/1.1 are not supported: such a connection is closed, counted as
// malformed and described by last_error(). A request line with its headers may be at most
// 64 KiB, a body at most 16 MiB.
//
// Every client connection gets its own upstream connection, opened when it is accepted (a
// connection is refused-like closed at once if the upstream does not accept). Modes (the
// proxy's, at the moment a whole request has arrived):
//   kPass        forward requests and answers (the default);
//   kHold        keep requests whose request line contains the hold filter ("" = every
//                request) in the proxy, unanswered; the connection then holds every later
//                request too (HTTP/1.1 answers in order), until its client gives up and
//                closes it. Other requests pass.
//   kDropAnswers forward requests; the connection then never passes an answer again (its
//                client times out although the upstream applied the request).
//   kBlackhole   accept connections, swallow every request, never answer.
//   kRefuse      close the listening socket and every open connection: connecting is
//                refused (ECONNREFUSED) until the mode changes again, which listens anew on
//                the same port.
// Held requests stay held across mode changes until ReleaseHeld() or DiscardHeld().
//
// Thread-safety: every method may be called from any thread, concurrently with the
// proxy's own threads (an acceptor and one per connection). Each call that changes the
// proxy has taken effect when it returns. Lifetime: destroying the proxy closes every
// socket and joins its threads; held requests are discarded. No call sleeps: waits are on
// conditions, bounded by the caller's timeout.

#ifndef SNOWFLAKE_TESTS_SUPPORT_FAULT_PROXY_H_
#define SNOWFLAKE_TESTS_SUPPORT_FAULT_PROXY_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tl/expected.hpp>
#include <vector>

namespace snowflake::testing {

class FaultProxy {
 public:
  enum class Mode { kPass, kHold, kDropAnswers, kBlackhole, kRefuse };

  // Requests (and connections) counted since Start; every count only grows.
  struct Counts {
    uint64_t connections = 0;      // client connections accepted
    uint64_t forwarded = 0;        // requests passed upstream on their client's connection
    uint64_t held = 0;             // requests held (released or not)
    uint64_t released = 0;         // deliveries by ReleaseHeld (a duplicate counts twice)
    uint64_t answers_dropped = 0;  // requests forwarded in kDropAnswers
    uint64_t blackholed = 0;       // requests swallowed in kBlackhole
    uint64_t malformed = 0;        // connections closed because they were not HTTP/1.1
  };

  // One late delivery of a held request and the upstream's answer to it (which no client
  // sees: the test may inspect it, e.g. to tell whether a transaction succeeded).
  struct Delivery {
    std::string request_line;  // "POST /v3/kv/txn HTTP/1.1"
    int status = 0;            // the answer's HTTP status
    std::string body;          // the answer's body (chunked bodies decoded)
  };

  // Listens on 127.0.0.1 at an ephemeral port in kPass, in front of 127.0.0.1:upstream_port.
  // Errors: the socket calls that failed, with errno's text.
  static tl::expected<std::unique_ptr<FaultProxy>, std::string> Start(int upstream_port);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  int port() const { return port_; }
  // "http://127.0.0.1:<port>".
  std::string url() const;

  // Switches the mode (see above). `hold_filter` and `hold_body_filter` are used by kHold
  // only: a request is held if its request line contains the first and its body the second
  // (one etcd transaction among many: a base64 key it names). Switching to kRefuse returns once the port refuses
  // and every open connection is closed; switching from kRefuse once it listens again.
  // Errors: the port could not be bound again (another process took it), or the acceptor
  // did not confirm within 5 s.
  tl::expected<void, std::string> SetMode(Mode mode, std::string hold_filter = "",
                                          std::string hold_body_filter = "");
  Mode mode() const;

  // Waits up to `timeout` until at least `requests` requests are held (not yet released
  // or discarded). Returns whether they are.
  bool WaitForHeld(size_t requests, std::chrono::milliseconds timeout) const;
  // Waits up to `timeout` until at least `requests` requests were forwarded in all.
  bool WaitForForwarded(uint64_t requests, std::chrono::milliseconds timeout) const;
  // The request lines of the requests held now, oldest first.
  std::vector<std::string> HeldRequestLines() const;

  // Delivers every request held now, oldest first, `copies` times each (2: the same
  // request applied twice), each delivery on a fresh upstream connection, waiting for the
  // upstream's complete answer before the next one; the held list is emptied first. The
  // answers go to no client. Returns the deliveries in order.
  // Errors: the upstream refused the connection, did not answer completely within
  // `timeout` (per delivery), or answered with something that is not HTTP/1.1; the
  // message names the request. Requests not yet delivered when an error occurs are lost.
  tl::expected<std::vector<Delivery>, std::string> ReleaseHeld(
      int copies = 1, std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Forgets every held request without delivering it. Returns how many there were.
  size_t DiscardHeld();

  Counts counts() const;
  // The request lines of the requests forwarded on their client's connection, in the
  // order they were forwarded: what a call sent, for a test that counts it.
  std::vector<std::string> ForwardedRequestLines() const;
  // The last connection or parse error ("" if none), for failure messages.
  std::string last_error() const;

 private:
  struct Held {
    std::string request_line;
    std::string bytes;
  };
  // A live client connection: its sockets, shut down by SetMode(kRefuse) and destruction.
  struct Conn {
    int client = -1;
    int upstream = -1;
  };
  struct Worker {
    std::thread thread;
    std::shared_ptr<bool> done;  // guarded by mutex_
  };

  FaultProxy(int upstream_port, int listen_fd, int port, int wake_read, int wake_write,
             int stop_read, int stop_write);
  void AcceptLoop();
  void Serve(int client, uint64_t id, std::shared_ptr<bool> done);
  void Wake();
  void SetError(std::string error);

  // Constant after Start.
  const int upstream_port_;
  const int port_;
  const int wake_read_;  // SetMode -> acceptor: the mode changed
  const int wake_write_;
  const int stop_read_;  // readable (EOF) once stop_write_ is closed: everyone ends
  int stop_write_;       // closed by the destructor

  // Owned by the acceptor thread.
  int listen_fd_;

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  Mode mode_ = Mode::kPass;         // guarded by mutex_
  std::string hold_filter_;         // guarded by mutex_
  std::string hold_body_filter_;    // guarded by mutex_
  bool listening_ = true;           // guarded by mutex_; acceptor's listen_fd_ >= 0
  bool relisten_failed_ = false;    // guarded by mutex_; leaving kRefuse could not bind
  std::deque<Held> held_;           // guarded by mutex_
  Counts counts_;                   // guarded by mutex_
  std::vector<std::string> forwarded_lines_;  // guarded by mutex_
  std::string last_error_;          // guarded by mutex_
  std::map<uint64_t, Conn> conns_;  // guarded by mutex_
  std::list<Worker> workers_;       // guarded by mutex_
  std::thread acceptor_;
};

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_FAULT_PROXY_H_
