#include "protocol/id_reply.h"

#include <cassert>
#include <charconv>
#include <cstring>
#include <nlohmann/json.hpp>

namespace snowflake::protocol {
namespace {

// Copies a literal and returns the end.
template <size_t N>
char* Put(char* at, const char (&text)[N]) {
  std::memcpy(at, text, N - 1);
  return at + N - 1;
}

// Writes the decimal text of a run of IDs. A batch's IDs are mostly consecutive (one
// millisecond and machine, the sequence + 1), so the text of the next ID is the last
// one's plus one: after the first ID, an ID that is the previous + 1 costs a copy of the
// held text and a carry through its trailing nines, not a conversion (std::to_chars
// divides by 100 per two digits). Anything else (the first ID, a gap, a new millisecond,
// a carry that adds a digit) is converted with std::to_chars.
class DecimalRun {
 public:
  // Writes `id` at `at` and returns the end. REQUIRES: `end - at` >= 20 (the longest
  // uint64_t); the caller's buffer is sized by MaxIdsBodyBytes, which allows that.
  char* Put(char* at, char* end, uint64_t id) {
    if (held_ && id != 0 && id - 1 == last_ && Increment()) {
      // The held digits but the last, which lives in last_digit_: nine IDs in ten
      // change only it, so the copy reads bytes no recent store touched (a wide load
      // over a just-stored byte would wait for the store to retire).
      if (end - at >= static_cast<std::ptrdiff_t>(sizeof text_)) {
        std::memcpy(at, text_, sizeof text_);  // a fixed size: two vector moves
      } else {
        std::memcpy(at, text_, length_);
      }
    } else {
      length_ = static_cast<size_t>(std::to_chars(text_, text_ + kMaxDigits, id).ptr - text_);
      last_digit_ = text_[length_ - 1];
      std::memcpy(at, text_, length_);
      held_ = true;
    }
    at[length_ - 1] = last_digit_;
    last_ = id;
    return at + length_;
  }

 private:
  static constexpr size_t kMaxDigits = 20;

  // Adds one to the held number. Returns false if that needs one more digit (99…9):
  // the caller converts instead.
  bool Increment() {
    if (last_digit_ != '9') {
      ++last_digit_;
      return true;
    }
    last_digit_ = '0';
    for (size_t i = length_ - 1; i > 0; --i) {
      if (text_[i - 1] != '9') {
        ++text_[i - 1];
        return true;
      }
      text_[i - 1] = '0';
    }
    return false;
  }

  // The last ID's digits (text_[length_ - 1] is stale: last_digit_ holds it), padded
  // for the fixed-size copy.
  char text_[24] = {};
  size_t length_ = 0;
  char last_digit_ = '0';
  uint64_t last_ = 0;
  bool held_ = false;
};

}  // namespace

void AppendIdsBody(std::span<const uint64_t> ids, IdsFormat format, std::string& out) {
  assert(format != IdsFormat::kJsonOne || ids.size() == 1);  // REQUIRES (id_reply.h), debug builds
  const size_t start = out.size();
  out.resize(start + MaxIdsBodyBytes(ids.size()));
  char* at = out.data() + start;
  char* const end = out.data() + out.size();
  DecimalRun digits;
  switch (format) {
    case IdsFormat::kText:
      for (const uint64_t id : ids) {
        at = digits.Put(at, end, id);
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
        at = digits.Put(at, end, ids[i]);
        *at++ = '"';
      }
      at = Put(at, "]}");
      break;
  }
  out.resize(static_cast<size_t>(at - out.data()));
}

std::string ErrorBody(std::string_view code, std::string_view message) noexcept {
  try {
    const nlohmann::json body = {{"error", {{"code", code}, {"message", message}}}};
    return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (...) {
    // The one allocation-free reply: the vocabulary's code for an unexpected failure.
    return R"({"error":{"code":"system_error","message":""}})";
  }
}

tl::expected<size_t, std::string> ReadIdsText(std::string_view body, std::span<uint64_t> out) {
  size_t n = 0;
  size_t start = 0;
  while (start < body.size()) {
    const size_t nl = body.find('\n', start);
    if (nl == std::string_view::npos || n == out.size()) {
      return tl::unexpected(std::string("a malformed reply (not one ID per line)"));
    }
    uint64_t id = 0;
    const char* first = body.data() + start;
    const char* last = body.data() + nl;
    const auto [end, ec] = std::from_chars(first, last, id);
    if (first == last || ec != std::errc() || end != last || id >> 63 != 0) {
      return tl::unexpected(std::string("a malformed ID"));
    }
    if (n > 0 && id <= out[n - 1]) {
      return tl::unexpected(std::string("IDs not strictly increasing"));
    }
    out[n++] = id;
    start = nl + 1;
  }
  if (n == 0) return tl::unexpected(std::string("an empty reply"));
  return n;
}

std::string ErrorCodeOf(std::string_view body) {
  const auto doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return "";
  const auto error = doc.find("error");
  if (error == doc.end() || !error->is_object()) return "";
  const auto code = error->find("code");
  return code != error->end() && code->is_string() ? code->get<std::string>() : "";
}

}  // namespace snowflake::protocol
