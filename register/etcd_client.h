// A small typed client of etcd v3 through its JSON gateway (HTTP/1.1 over libcurl), with
// just the calls the register needs: put, range, txn and the lease calls. The wire format
// lives in etcd_json.h; this class adds the transport: endpoint failover, timeouts,
// optional TLS and user/password authentication.
//
// An EtcdClient is NOT safe for concurrent use: it keeps one connection (a CURL handle)
// and one auth token. Give each thread its own client (EtcdRegister's keepalive thread
// does). Every call blocks at most options.request_timeout_ms per endpoint tried.
//
// Failover: the client talks to one endpoint at a time. A request that could not be sent
// at all (connection refused, DNS, TLS handshake) is retried at once on the next endpoint;
// a request that was sent but timed out or was cut off is NOT retried (it may have been
// applied: the caller decides) and the next call starts on the next endpoint.

#ifndef SNOWFLAKE_REGISTER_ETCD_CLIENT_H_
#define SNOWFLAKE_REGISTER_ETCD_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "register/etcd_types.h"

namespace snowflake::reg::etcd {

struct ClientOptions {
  // "http://127.0.0.1:2379" or "https://etcd-a.example:2379"; at least one.
  std::vector<std::string> endpoints;
  int64_t connect_timeout_ms = 1000;
  int64_t request_timeout_ms = 3000;
  // TLS: a CA bundle to verify the servers (empty: the system's), and a client
  // certificate and key for etcd's --client-cert-auth (both or neither).
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  // Authentication (etcd's auth enabled): empty user = none.
  std::string user;
  std::string password;
};

class EtcdClient {
 public:
  explicit EtcdClient(ClientOptions options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // Every call returns the typed answer, or an Error (etcd_types.h) whose message names
  // the call and the endpoint: kUnavailable (no endpoint answered in time: the outcome of
  // a write is unknown), kRejected (etcd's own error: grpc_code), kMalformed (not the
  // gateway's format), kTls (certificates: the server's not trusted, ours unreadable or
  // refused; the message says which config key to check).
  tl::expected<PutResult, Error> Put(std::string_view key, std::string_view value,
                                     int64_t lease = 0) noexcept;
  // A linearizable range of [key, range_end) ("" = the single key); limit 0 = all.
  tl::expected<RangeResult, Error> Range(std::string_view key, std::string_view range_end = {},
                                         int64_t limit = 0) noexcept;
  tl::expected<TxnResult, Error> Txn(const TxnRequest& txn) noexcept;
  tl::expected<LeaseGrant, Error> GrantLease(int64_t ttl_s) noexcept;
  // A lease that is gone is not an error: the answer has alive() == false.
  tl::expected<LeaseKeepAlive, Error> KeepAlive(int64_t lease) noexcept;
  // Revoking a lease that is gone is kRejected with grpc_code 5.
  tl::expected<void, Error> Revoke(int64_t lease) noexcept;
  tl::expected<LeaseTimeToLive, Error> TimeToLive(int64_t lease) noexcept;
  // The answering member's version, cluster id and revision.
  tl::expected<MemberStatus, Error> Status() noexcept;

  // The endpoint the next call starts with.
  const std::string& current_endpoint() const { return options_.endpoints[current_]; }
  const ClientOptions& options() const { return options_; }

 private:
  struct Answer {
    int http_status = 0;
    std::string body;
  };
  // POSTs `body` to `path` ("/v3/kv/put"), failing over as described above, and
  // authenticating first (once per token) if options_.user is set.
  tl::expected<Answer, Error> Post(std::string_view path, const std::string& body) noexcept;
  // One attempt on one endpoint. `sent` tells whether the request may have left.
  tl::expected<Answer, Error> PostTo(const std::string& endpoint, std::string_view path,
                                     const std::string& body, bool with_token,
                                     bool& maybe_sent) noexcept;
  tl::expected<void, Error> Authenticate(const std::string& endpoint) noexcept;
  // Runs `call` through Post and parses with `parse`, adding the call and endpoint to an
  // error's message; renews the token once if etcd says it is invalid.
  template <typename T, typename Parse>
  tl::expected<T, Error> Call(std::string_view path, const std::string& body,
                              Parse&& parse) noexcept;

  ClientOptions options_;
  size_t current_ = 0;
  std::string token_;          // "" until authenticated
  void* curl_ = nullptr;       // CURL*, created on first use
  std::string last_endpoint_;  // where the last answer came from, for messages
};

}  // namespace snowflake::reg::etcd

#endif  // SNOWFLAKE_REGISTER_ETCD_CLIENT_H_
