// The typed values of the small etcd v3 client (etcd_client.h): requests and responses
// of the calls the register needs, with every field that etcd's JSON gateway omits when
// it is zero spelled out here with its zero value, so no caller ever has to ask "was it
// absent?". Plain value types, safe to copy between threads.

#ifndef SNOWFLAKE_REGISTER_ETCD_TYPES_H_
#define SNOWFLAKE_REGISTER_ETCD_TYPES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace snowflake::reg::etcd {

// Keys and values are raw bytes (the gateway carries them base64-encoded).
struct KeyValue {
  std::string key;
  std::string value;  // "" when the gateway omits it
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;  // 0 = not bound to a lease
  friend bool operator==(const KeyValue&, const KeyValue&) = default;
};

struct RangeResult {
  int64_t revision = 0;       // the store's revision when the range was served
  uint64_t cluster_id = 0;    // the answering cluster's id (header.cluster_id)
  std::vector<KeyValue> kvs;  // empty when the gateway omits "kvs" (nothing matched)
  int64_t count = 0;
  bool more = false;
};

// One comparison of a transaction. etcd only compares the field the target names; a
// value put in another field never matches, silently, so the constructors below are the
// only way to make one.
struct Compare {
  enum class Target { kVersion, kCreate, kMod, kValue, kLease };
  enum class Result { kEqual, kGreater, kLess, kNotEqual };
  std::string key;
  Target target = Target::kCreate;
  Result result = Result::kEqual;
  int64_t number = 0;  // version, create_revision, mod_revision or lease
  std::string value;   // for kValue

  static Compare KeyAbsent(std::string key) {
    return {std::move(key), Target::kCreate, Result::kEqual, 0, {}};
  }
  static Compare CreateRevision(std::string key, Result r, int64_t rev) {
    return {std::move(key), Target::kCreate, r, rev, {}};
  }
  static Compare ModRevision(std::string key, Result r, int64_t rev) {
    return {std::move(key), Target::kMod, r, rev, {}};
  }
  static Compare Lease(std::string key, int64_t lease) {
    return {std::move(key), Target::kLease, Result::kEqual, lease, {}};
  }
  static Compare ValueEquals(std::string key, std::string value) {
    return {std::move(key), Target::kValue, Result::kEqual, 0, std::move(value)};
  }
};

// One operation of a transaction branch.
struct Op {
  enum class Kind { kPut, kRange, kDelete };
  Kind kind = Kind::kRange;
  std::string key;
  std::string range_end;  // kRange/kDelete: "" = the single key
  std::string value;      // kPut
  int64_t lease = 0;      // kPut: 0 = no lease
  int64_t limit = 0;      // kRange: at most this many keys (0 = all); the answer says `more`

  static Op Put(std::string key, std::string value, int64_t lease = 0) {
    return {Kind::kPut, std::move(key), {}, std::move(value), lease, 0};
  }
  static Op Get(std::string key, std::string range_end = {}, int64_t limit = 0) {
    return {Kind::kRange, std::move(key), std::move(range_end), {}, 0, limit};
  }
  static Op Delete(std::string key) { return {Kind::kDelete, std::move(key), {}, {}, 0, 0}; }
};

struct TxnRequest {
  std::vector<Compare> compare;
  std::vector<Op> success;
  std::vector<Op> failure;
};

// The result of one operation of the branch that ran, in request order.
struct OpResult {
  Op::Kind kind = Op::Kind::kRange;
  RangeResult range;    // kRange only
  int64_t deleted = 0;  // kDelete only
};

struct TxnResult {
  // The store's revision after the transaction: the mod_revision of a key its branch put.
  int64_t revision = 0;
  uint64_t cluster_id = 0;  // the answering cluster's id (header.cluster_id)
  // True only if the gateway said "succeeded": true. Omitted (= false) means the
  // comparisons failed and the failure branch ran.
  bool succeeded = false;
  std::vector<OpResult> responses;
};

struct LeaseGrant {
  int64_t id = 0;
  int64_t ttl_s = 0;
};

// A keepalive's answer. ttl_s == 0 (the gateway omitted "TTL") means the lease is gone:
// expired, revoked or never granted.
struct LeaseKeepAlive {
  int64_t id = 0;
  int64_t ttl_s = 0;
  bool alive() const { return ttl_s > 0; }
};

struct LeaseTimeToLive {
  int64_t id = 0;
  // -1: the lease is gone. 0 (the gateway omits a zero "TTL"): it expires within the
  // second, but it has not yet: its holder may still renew it, so it counts as alive.
  int64_t ttl_s = -1;
  int64_t granted_ttl_s = 0;
  bool alive() const { return ttl_s >= 0; }
};

// /v3/maintenance/status of the member that answered.
struct MemberStatus {
  std::string version;  // the etcd server's version, "3.4.23"
  uint64_t cluster_id = 0;
  int64_t revision = 0;
};

struct PutResult {
  int64_t revision = 0;
};

enum class ErrorKind {
  // No endpoint answered in time, or the answer was cut off. The request may or may not
  // have been applied: a write that ends this way must be treated as NOT committed by
  // whoever relies on it, and as possibly committed by whoever reads after it.
  kUnavailable,
  // etcd answered with an error (grpc_code says which: 5 lease not found, 3 bad
  // argument, 9/16 authentication, 2 quorum lost / deadline exceeded, ...).
  kRejected,
  // An answer that is not what the etcd v3 JSON gateway sends (not JSON, a wrong type, an
  // int64 out of range, bad base64). Never treated as success.
  kMalformed,
  // TLS could not be set up because of certificates, not the network: the server's
  // certificate is not signed by ca_file (or does not name the host), a file of ours is
  // unreadable, or the server refused our client certificate. Nothing was sent. A
  // configuration error: retrying cannot help.
  kTls,
};

struct Error {
  ErrorKind kind = ErrorKind::kUnavailable;
  int grpc_code = 0;  // kRejected only
  int http_status = 0;
  std::string message;  // names the endpoint and the call
  // kRejected only: etcd answered, but could not decide (its own deadline while waiting for
  // a quorum), decided from etcd's own words when the answer was read (ErrorObject).
  bool undecided = false;
};

// True if `e` says etcd could not be reached or could not decide (no endpoint answered,
// no answer in time, or etcd's own "unavailable"/"deadline exceeded": no leader, no
// quorum, a leader change): an outage that may end by itself, as opposed to an answer
// that will not change on a retry (a refusal, bad credentials, a TLS mismatch).
//
// etcd 3.4's JSON gateway words a member that waited for a quorum that never came as HTTP
// 500, code 2 (Unknown), "context deadline exceeded": its own deadline, not a refusal of
// the request, so it is an outage too (the register did not answer).
inline bool IsOutage(const Error& e) {
  if (e.kind == ErrorKind::kUnavailable) return true;
  if (e.kind != ErrorKind::kRejected) return false;
  return e.grpc_code == 14 || e.grpc_code == 4 || e.undecided;
}

}  // namespace snowflake::reg::etcd

#endif  // SNOWFLAKE_REGISTER_ETCD_TYPES_H_
