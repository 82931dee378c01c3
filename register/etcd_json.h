// The wire format of etcd v3's JSON gateway (grpc-gateway over the v3 API), as pure
// functions: request bodies out, typed responses in. No I/O, no state, so every parser
// can be unit-tested and fuzzed on crafted text.
//
// What the gateway does that a naive reader gets wrong (each is handled here, once):
// - proto3 JSON omits zero values: a failed txn has no "succeeded", a missing key no
//   "kvs"/"count", an expired lease's keepalive no "TTL", an empty value no "value".
//   Every absent field becomes its zero value in etcd_types.h, never "success".
// - int64s are JSON strings ("2324035768177677831"); lease IDs exceed 2^53, so they are
//   parsed with from_chars, never through a double. A JSON integer is accepted too; a
//   float, a bool or text with anything but digits is malformed.
// - keys and values are base64 (standard alphabet, padded).
// - errors come as {"error": "...", "message": "...", "code": N} with an HTTP status.
// - the streaming keepalive wraps its answer in {"result": {...}} or {"error": {...}}.
//
// All functions are thread-safe and never throw.

#ifndef SNOWFLAKE_REGISTER_ETCD_JSON_H_
#define SNOWFLAKE_REGISTER_ETCD_JSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "register/etcd_types.h"

namespace snowflake::reg::etcd {

std::string Base64Encode(std::string_view bytes);
// nullopt if `text` is not padded standard base64.
std::optional<std::string> Base64Decode(std::string_view text);

// The range_end that selects every key starting with `prefix` ("\0" for an empty one).
std::string PrefixEnd(std::string_view prefix);

// Request bodies.
std::string PutBody(std::string_view key, std::string_view value, int64_t lease);
// A linearizable range (never serializable: a minority would answer from stale data).
std::string RangeBody(std::string_view key, std::string_view range_end, int64_t limit);
std::string TxnBody(const TxnRequest& txn);
std::string LeaseGrantBody(int64_t ttl_s);
std::string LeaseIdBody(int64_t id);  // keepalive, revoke
std::string LeaseTimeToLiveBody(int64_t id);
std::string AuthenticateBody(std::string_view name, std::string_view password);

// Response parsers. `http_status` is the HTTP status of the answer, `body` its text.
// Errors: kRejected (etcd's error object, or a non-200 status), kMalformed (anything else
// that is not the expected shape). The message says what was wrong, not where it came
// from; EtcdClient adds the endpoint and the call.
tl::expected<PutResult, Error> ParsePutResponse(int http_status, std::string_view body) noexcept;
tl::expected<RangeResult, Error> ParseRangeResponse(int http_status,
                                                    std::string_view body) noexcept;
tl::expected<TxnResult, Error> ParseTxnResponse(int http_status, std::string_view body) noexcept;
tl::expected<LeaseGrant, Error> ParseLeaseGrantResponse(int http_status,
                                                        std::string_view body) noexcept;
tl::expected<LeaseKeepAlive, Error> ParseLeaseKeepAliveResponse(int http_status,
                                                                std::string_view body) noexcept;
tl::expected<LeaseTimeToLive, Error> ParseLeaseTimeToLiveResponse(int http_status,
                                                                  std::string_view body) noexcept;
// /v3/maintenance/status (its body is "{}").
tl::expected<MemberStatus, Error> ParseStatusResponse(int http_status,
                                                      std::string_view body) noexcept;
// Revoke: an empty answer on success.
tl::expected<void, Error> ParseEmptyResponse(int http_status, std::string_view body) noexcept;
// The token of /v3/auth/authenticate.
tl::expected<std::string, Error> ParseAuthenticateResponse(int http_status,
                                                           std::string_view body) noexcept;

// Parses a decimal int64 ("-12", "2324035768177677831"); nullopt on anything else
// (empty, spaces, '+', overflow).
std::optional<int64_t> ParseInt64(std::string_view text) noexcept;

}  // namespace snowflake::reg::etcd

#endif  // SNOWFLAKE_REGISTER_ETCD_JSON_H_
