// The bodies of the HTTP front's take replies (docs/http.md), defined once for both ends:
// the front writes them, the failover client (libclient/remote_pool.cc) reads them, and
// the Go taker reads the same golden fixtures (protocol/testdata/id_replies.json).
//
//   /v1/id    {"id":"123"}                        application/json
//   /v1/ids   {"ids":["123","124"]}               application/json
//   either    "123\n124\n"                        text/plain (Accept: text/plain)
//   refusals  {"error":{"code":"…","message":"…"}} application/json, any status but 200
//
// IDs are decimal strings in JSON (a 63-bit number does not survive a double). Pure
// functions, safe from any thread; no I/O.

#ifndef SNOWFLAKE_PROTOCOL_ID_REPLY_H_
#define SNOWFLAKE_PROTOCOL_ID_REPLY_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace snowflake::protocol {

// The body of a take:
//   kJsonOne   {"id":"123"}            (/v1/id; exactly one ID)
//   kJsonBatch {"ids":["123","124"]}   (/v1/ids)
//   kText      "123\n124\n"            (either, with Accept: text/plain)
enum class IdsFormat { kJsonOne, kJsonBatch, kText };

// The most bytes AppendIdsBody() writes for `count` IDs in any format.
constexpr size_t MaxIdsBodyBytes(size_t count) noexcept {
  // 20 digits, two quotes and a comma per ID, and the frame {"ids":[ ]}.
  return count * 23 + 16;
}

// Appends the body of a take of `ids` to `out`: one resize of `out` to the bound above,
// the digits written in place, then one shrink. An ID that is the previous one + 1 (most
// of a batch: one millisecond's sequence) is written by incrementing the previous ID's
// digits; any other with std::to_chars. No allocation per ID (none at all when `out`
// has the capacity). REQUIRES: kJsonOne has exactly one ID.
void AppendIdsBody(std::span<const uint64_t> ids, IdsFormat format, std::string& out);

// The body of a refusal: {"error":{"code":…,"message":…}}. Bytes of the request quoted
// in the message that are not UTF-8 are replaced (U+FFFD), so the body is always valid
// JSON. Never throws.
[[nodiscard]] std::string ErrorBody(std::string_view code, std::string_view message) noexcept;

// Reads a text/plain take reply into `out`: one decimal ID per line, each line ended by
// "\n", every ID below 2^63 (the layout's top bit is 0) and above the one before it, at
// least one and at most out.size(). Returns how many; on any other body nothing is
// promised about `out`, and the error says what was wrong, in the words every taker
// uses: "a malformed reply (not one ID per line)", "a malformed ID", "IDs not strictly
// increasing", "an empty reply".
tl::expected<size_t, std::string> ReadIdsText(std::string_view body, std::span<uint64_t> out);

// The code of a refusal's body ({"error":{"code":"paused",…}} gives "paused"); "" if the
// body is not such an object.
std::string ErrorCodeOf(std::string_view body);

}  // namespace snowflake::protocol

#endif  // SNOWFLAKE_PROTOCOL_ID_REPLY_H_
