// Failover to other daemons' HTTP fronts (docs/client.md, "Remotes and failover").
//
// A Client with remotes wraps each take in RemotePool::Take: the local ring first; while
// the local daemon is not serving (starting, paused, out of service, stopped, hung, dead),
// the remotes over HTTP or HTTPS (libcurl; an https:// remote is verified against the CA
// file and only ever asked over TLS), with
//   - a per-attempt timeout inside an overall deadline,
//   - sticky last-good ordering (the endpoint that answered last is tried first),
//   - a per-endpoint breaker: after a failure the endpoint is skipped for a backoff that
//     doubles per consecutive failure (50 ms .. 2 s) with +-50% jitter,
//   - and a return to the ring on the very next take once the local daemon serves again.
// Whatever the source, a Client never returns an ID at or below one it returned before
// (another host's IDs of the same millisecond may be smaller: they are skipped, and the
// take waits for the next millisecond, at most about 2 ms), nor a remote ID older than
// remote_max_age or further than remote_max_ahead ahead of this host's clock (a remote with
// a skewed clock or of another epoch: its IDs decode, with this Client's epoch, far from
// the clock).
//
// Why libcurl rather than a Beast client: libsnowflake is a small C/C++ library linked
// into every service; libcurl is a stable C ABI with per-request timeouts and keep-alive
// connection reuse built in, and keeps Beast's heavy templates out of the client.
//
// A RemotePool is safe for concurrent use by multiple threads: the breakers and the
// connection handles are guarded by a mutex; requests run outside it, each on its own
// handle. Its deadline, breakers, catch-up waits and a remote ID's age are measured on the
// Client's clock (ClientOptions::clock); one HTTP attempt's timeout is libcurl's, in real
// time, bounded by what that clock says is left of the deadline.

#ifndef SNOWFLAKE_LIBCLIENT_REMOTE_POOL_H_
#define SNOWFLAKE_LIBCLIENT_REMOTE_POOL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "snowflake/client.h"
#include "snowflake/id_layout.h"

namespace snowflake::detail {

class RemotePool {
 public:
  // Takes from the local ring; returns how many IDs it put at the front of the span.
  using LocalTake = std::function<tl::expected<size_t, Error>(std::span<uint64_t>)>;

  // The TLS files for https:// remotes: the options', else the environment's.
  struct TlsFiles {
    std::string ca;    // empty: the system's CAs
    std::string cert;  // empty: no client certificate
    std::string key;
  };

  // Checks `remotes` and `options`' TLS files before a pool is made of them, and returns
  // the files in effect. Errors: kInvalidArgument naming the remote that is not
  // [http://|https://]host:port, or the file that cannot be read, or a certificate without
  // its key (or the reverse).
  static tl::expected<TlsFiles, Error> Check(const std::vector<std::string>& remotes,
                                             const ClientOptions& options);

  // `remotes` are "host:port" ("[v6]:port" for IPv6), "http://host:port" or
  // "https://host:port" (checked by Check(), whose `tls` it takes); `layout` the fleet's
  // epoch and bits (to judge a remote ID's age).
  RemotePool(std::string service, std::vector<std::string> remotes, const ClientOptions& options,
             TlsFiles tls, IdLayout layout);
  ~RemotePool();
  RemotePool(const RemotePool&) = delete;
  RemotePool& operator=(const RemotePool&) = delete;

  // Fills a prefix of `out` (1 <= n <= out.size() <= 4096 IDs) and returns n: strictly
  // increasing and above every ID returned before through this pool.
  // Errors: a local error a remote cannot help with (kInvalidArgument, kSystemError, ...)
  // as is, and so kRingEmpty (the local daemon is alive and refilling: retry here, the
  // vocabulary's action); when the local daemon is not serving (or its ring held only IDs
  // too old to hand out: kTimedOut, or its IDs stay below one already returned) and no
  // remote gave IDs within the deadline, the local error's code with a message naming the
  // local failure and every endpoint tried and why each failed. Which local errors go to
  // the remotes is AnotherDaemonMayServe, the vocabulary's fail_over rows.
  tl::expected<size_t, Error> Take(std::span<uint64_t> out, const LocalTake& local) noexcept;

  // The remotes parsed from SNOWFLAKE_REMOTES ("host:port,host:port"), or empty.
  static std::vector<std::string> FromEnvironment();

 private:
  struct Endpoint;

  // Drops IDs <= the last returned one and publishes the new last; returns how many are
  // left at the front of out[0..n).
  size_t Admit(uint64_t* out, size_t n) noexcept;
  // One HTTP attempt; fills out and returns n, or a reason, with *retry_after set to the
  // refusal's Retry-After (0 if none). Its steps follow.
  tl::expected<size_t, std::string> Fetch(Endpoint& endpoint, std::span<uint64_t> out,
                                          std::chrono::milliseconds timeout,
                                          std::chrono::milliseconds* retry_after);
  // A curl easy handle (CURL*, kept out of this header): an idle one of the endpoint's,
  // else a new one; null if curl cannot make one.
  void* IdleHandle(Endpoint& endpoint);
  // What one request keeps alive until it is done: its header list, curl's error text and
  // the body (defined in remote_pool.cc).
  struct Request;
  // The request on `curl`: the URL, timeouts, TLS only for https:// (verified, with this
  // client's certificate if set), the body into request.
  void SetRequest(void* curl, const Endpoint& endpoint, const std::string& url,
                  std::chrono::milliseconds timeout, Request& request) const;
  // A 200 reply's IDs, checked: the protocol's text body (protocol::ReadIdsText: one
  // decimal per line, at most `want`, strictly increasing), none older than max_age nor
  // further ahead than max_ahead. A reason if not.
  tl::expected<size_t, std::string> ReadIds(const std::string& body, size_t want,
                                            std::span<uint64_t> out) const;
  tl::expected<size_t, Error> TakeRemote(std::span<uint64_t> out, const Error& local_error);

  const std::string service_;
  const std::chrono::milliseconds attempt_timeout_;
  const std::chrono::milliseconds deadline_;
  const std::chrono::milliseconds max_age_;
  const std::chrono::milliseconds max_ahead_;
  const IdLayout layout_;
  const TlsFiles tls_;
  Clock& clock_;  // the Client's (not owned)

  // The largest ID this pool returned (local or remote). Only ever raised, by CAS.
  std::atomic<uint64_t> last_{0};

  std::mutex mutex_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;  // fixed after construction
  size_t preferred_ = 0;                              // guarded by mutex_
  std::minstd_rand jitter_;                           // guarded by mutex_
};

}  // namespace snowflake::detail

#endif  // SNOWFLAKE_LIBCLIENT_REMOTE_POOL_H_
