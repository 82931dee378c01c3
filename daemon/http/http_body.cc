#include "daemon/http/http_body.h"

#include <charconv>
#include <cstring>
#include <nlohmann/json.hpp>

#include "daemon/base/debug_assert.h"

namespace snowflake::daemon {
namespace {

// Copies a literal and returns the end.
template <size_t N>
char* Put(char* at, const char (&text)[N]) {
  std::memcpy(at, text, N - 1);
  return at + N - 1;
}

}  // namespace

void AppendIdsBody(std::span<const uint64_t> ids, IdsFormat format, std::string& out) {
  SNOWFLAKE_REQUIRE(format != IdsFormat::kJsonOne || ids.size() == 1);
  const size_t start = out.size();
  out.resize(start + MaxIdsBodyBytes(ids.size()));
  char* at = out.data() + start;
  char* const end = out.data() + out.size();
  switch (format) {
    case IdsFormat::kText:
      for (const uint64_t id : ids) {
        at = std::to_chars(at, end, id).ptr;
        *at++ = '\n';
      }
      break;
    case IdsFormat::kJsonOne:
      at = Put(at, "{\"id\":\"");
      at = std::to_chars(at, end, ids[0]).ptr;
      at = Put(at, "\"}");
      break;
    case IdsFormat::kJsonBatch:
      at = Put(at, "{\"ids\":[");
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i > 0) *at++ = ',';
        *at++ = '"';
        at = std::to_chars(at, end, ids[i]).ptr;
        *at++ = '"';
      }
      at = Put(at, "]}");
      break;
  }
  out.resize(static_cast<size_t>(at - out.data()));
}

std::string HttpErrorBody(std::string_view code, std::string_view message) noexcept {
  try {
    const nlohmann::json body = {{"error", {{"code", code}, {"message", message}}}};
    return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (...) {
    // The one allocation-free reply: the vocabulary's code for an unexpected failure.
    return R"({"error":{"code":"system_error","message":""}})";
  }
}

HttpReply ErrorReply(unsigned status, std::string_view code, std::string_view message) {
  HttpReply reply;
  reply.status = status;
  reply.body = HttpErrorBody(code, message);
  reply.retry_after = status == 429 || status == 503;
  return reply;
}

}  // namespace snowflake::daemon
