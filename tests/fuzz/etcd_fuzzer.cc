// libFuzzer target: the etcd v3 JSON gateway's answers (register/etcd_json.h), which
// EtcdClient hands every response body to. The parsers are pure functions, so no etcd and
// no socket is needed.
// Input: byte 0 picks the parser (bits 0-3) and the HTTP status (bits 4-7, from a table of
// what a gateway or a proxy in front of it may answer); the rest is the body.
// Property: every parser returns a value or an error whose message says what was wrong;
// a non-200 status is never success; nothing crashes, leaks or reads out of bounds. The
// helpers keep their contracts: a decoded base64 text re-encodes to text that decodes to
// the same bytes, and a parsed int64 prints back to the same number.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "register/etcd_json.h"

namespace {

using namespace snowflake::reg::etcd;

constexpr int kStatuses[16] = {200, 200, 200, 200, 200, 200, 200, 200,
                               400, 401, 404, 408, 429, 500, 502, 503};

template <typename T>
void Check(const tl::expected<T, Error>& result, int status) {
  if (result) {
    if (status != 200) __builtin_trap();  // success only from a 200
    return;
  }
  const Error& e = result.error();
  if (e.message.empty()) __builtin_trap();
  if (e.kind != ErrorKind::kRejected && e.kind != ErrorKind::kMalformed) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int status = kStatuses[data[0] >> 4];
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] & 0x0f) {
    case 0: Check(ParsePutResponse(status, body), status); break;
    case 1: {
      const auto range = ParseRangeResponse(status, body);
      Check(range, status);
      if (range && range->count < 0) __builtin_trap();
      break;
    }
    case 2: {
      const auto txn = ParseTxnResponse(status, body);
      Check(txn, status);
      break;
    }
    case 3: Check(ParseLeaseGrantResponse(status, body), status); break;
    case 4: {
      const auto keepalive = ParseLeaseKeepAliveResponse(status, body);
      Check(keepalive, status);
      break;
    }
    case 5: Check(ParseLeaseTimeToLiveResponse(status, body), status); break;
    case 6: Check(ParseEmptyResponse(status, body), status); break;
    case 7: {
      const auto token = ParseAuthenticateResponse(status, body);
      Check(token, status);
      break;
    }
    case 8: {
      if (const auto bytes = Base64Decode(body)) {
        const auto again = Base64Decode(Base64Encode(*bytes));
        if (!again || *again != *bytes) __builtin_trap();
      }
      break;
    }
    case 9: {
      if (const auto n = ParseInt64(body)) {
        const auto again = ParseInt64(std::to_string(*n));
        if (!again || *again != *n) __builtin_trap();
      }
      break;
    }
    default: {
      // The same body through every parser, as a confused endpoint would answer.
      Check(ParsePutResponse(status, body), status);
      Check(ParseRangeResponse(status, body), status);
      Check(ParseTxnResponse(status, body), status);
      Check(ParseLeaseKeepAliveResponse(status, body), status);
      break;
    }
  }
  return 0;
}
