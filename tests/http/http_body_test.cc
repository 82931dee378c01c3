// The HTTP front's serialiser (daemon/http/http_body.h): the bodies of /v1/id and /v1/ids
// byte for byte as docs/http.md shows them, for one ID and for the largest batch, in JSON
// and in text/plain.
//
// Property: the body is exactly the documented format of the IDs given, in their order,
// whatever their size (1 to 20 digits), and is appended after what the buffer held.

#include "daemon/http/http_body.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon/http/http_request.h"

namespace snowflake::daemon {
namespace {

// The documented formats built the plain way, one std::to_string per ID: the oracle.
std::string Expected(const std::vector<uint64_t>& ids, IdsFormat format) {
  std::string out;
  if (format == IdsFormat::kText) {
    for (const uint64_t id : ids) out += std::to_string(id) + "\n";
    return out;
  }
  if (format == IdsFormat::kJsonOne) return "{\"id\":\"" + std::to_string(ids.at(0)) + "\"}";
  out = "{\"ids\":[";
  for (size_t i = 0; i < ids.size(); ++i) {
    out += (i ? ",\"" : "\"") + std::to_string(ids[i]) + "\"";
  }
  return out + "]}";
}

std::string Body(const std::vector<uint64_t>& ids, IdsFormat format) {
  std::string out;
  AppendIdsBody(ids, format, out);
  return out;
}

TEST(HttpBody, OneIdIsExactlyTheDocumentedBytes) {
  EXPECT_EQ(Body({28130156318822400u}, IdsFormat::kJsonOne), R"({"id":"28130156318822400"})");
  EXPECT_EQ(Body({28130156318822400u}, IdsFormat::kJsonBatch), R"({"ids":["28130156318822400"]})");
  EXPECT_EQ(Body({28130156318822400u}, IdsFormat::kText), "28130156318822400\n");
}

TEST(HttpBody, ABatchOfFourIsExactlyTheDocumentedBytes) {
  const std::vector<uint64_t> ids = {28130156314628096u, 28130156314628097u, 28130156314628098u,
                                     28130156314628099u};
  EXPECT_EQ(
      Body(ids, IdsFormat::kJsonBatch),
      R"({"ids":["28130156314628096","28130156314628097","28130156314628098","28130156314628099"]})");
  EXPECT_EQ(Body(ids, IdsFormat::kText),
            "28130156314628096\n28130156314628097\n28130156314628098\n28130156314628099\n");
}

TEST(HttpBody, TheLargestBatchMatchesThePlainFormatByteForByte) {
  // 4096 IDs of every length from 1 to 20 digits, the widest (2^64 - 1) included: the
  // buffer's bound is reached and never passed.
  std::vector<uint64_t> ids(kMaxHttpBatch);
  uint64_t value = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = i == ids.size() - 1 ? std::numeric_limits<uint64_t>::max() : value;
    value = value * 3 + 7;
    if (value > std::numeric_limits<uint64_t>::max() / 4) value = i;
  }
  for (const IdsFormat format : {IdsFormat::kJsonBatch, IdsFormat::kText}) {
    const std::string body = Body(ids, format);
    EXPECT_EQ(body, Expected(ids, format)) << static_cast<int>(format);
    EXPECT_LE(body.size(), MaxIdsBodyBytes(ids.size()));
  }
  std::vector<uint64_t> all_max(kMaxHttpBatch, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(Body(all_max, IdsFormat::kJsonBatch), Expected(all_max, IdsFormat::kJsonBatch));
  EXPECT_LE(Body(all_max, IdsFormat::kJsonBatch).size(), MaxIdsBodyBytes(kMaxHttpBatch));
  // The JSON form parses, and gives back the IDs as decimal strings in order.
  const auto parsed = nlohmann::json::parse(Body(ids, IdsFormat::kJsonBatch));
  ASSERT_EQ(parsed["ids"].size(), ids.size());
  EXPECT_EQ(parsed["ids"][4095], "18446744073709551615");
}

// Consecutive IDs are written by incrementing the previous ID's text (http_body.cc):
// every carry case against the plain conversion, in both batch formats.
void ExpectLikeThePlainFormat(const std::vector<uint64_t>& ids) {
  for (const IdsFormat format : {IdsFormat::kJsonBatch, IdsFormat::kText}) {
    EXPECT_EQ(Body(ids, format), Expected(ids, format)) << static_cast<int>(format);
  }
}

std::vector<uint64_t> Consecutive(uint64_t first, size_t count) {
  std::vector<uint64_t> ids(count);
  for (size_t i = 0; i < count; ++i) ids[i] = first + i;
  return ids;
}

TEST(HttpBody, ConsecutiveIdsCarryThroughTrailingNines) {
  ExpectLikeThePlainFormat(Consecutive(28130156314628105u, 3));  // …05 … …07: the last digit only
  ExpectLikeThePlainFormat(Consecutive(28130156314628108u, 3));  // …09 → …10
  ExpectLikeThePlainFormat(Consecutive(28130156314628997u, 5));  // …999 → …1000 → …1001
  ExpectLikeThePlainFormat(Consecutive(28130156319999998u, 4));  // a carry through seven nines
  ExpectLikeThePlainFormat(Consecutive(28130156314628096u, 4096));  // a whole millisecond
}

TEST(HttpBody, ConsecutiveIdsThatGainADigitAreWrittenInFull) {
  ExpectLikeThePlainFormat(Consecutive(0, 12));                    // 9 → 10
  ExpectLikeThePlainFormat(Consecutive(998, 4));                   // 999 → 1000
  ExpectLikeThePlainFormat(Consecutive(9999999999999999998u, 3));  // 19 digits → 20
  ExpectLikeThePlainFormat(Consecutive(99999999999999998u, 4));    // 17 digits → 18
}

TEST(HttpBody, IdsThatAreNotThePreviousPlusOneAreConvertedAlone) {
  // A gap, a step back, a repeat, a new millisecond, then a run again.
  ExpectLikeThePlainFormat({28130156314628096u, 28130156314628098u, 28130156314628097u,
                            28130156314628097u, 28130156318822400u, 28130156318822401u, 7u});
  // 0 after the largest ID: 0 - 1 wraps to the previous ID, and must not count as its + 1.
  ExpectLikeThePlainFormat({std::numeric_limits<uint64_t>::max(), 0u, 1u});
  // A run that breaks right after a carry, and resumes from another number.
  ExpectLikeThePlainFormat({199u, 200u, 100u, 101u, 109u, 110u});
}

TEST(HttpBody, TheBodyIsAppendedAfterWhatTheBufferHeld) {
  std::string out = "prefix:";
  AppendIdsBody(std::vector<uint64_t>{0, 1}, IdsFormat::kText, out);
  EXPECT_EQ(out, "prefix:0\n1\n");
}

TEST(HttpBody, ErrorRepliesAreJsonAndAskForRetryOnlyFor429And503) {
  const HttpReply unavailable = ErrorReply(503, "daemon_paused", "the clock moved back");
  EXPECT_EQ(unavailable.body,
            R"({"error":{"code":"daemon_paused","message":"the clock moved back"}})");
  EXPECT_EQ(unavailable.content_type, kJsonContentType);
  EXPECT_GT(unavailable.retry_after_s, 0u);
  EXPECT_GT(ErrorReply(429, "too_many_services", "").retry_after_s, 0u);
  EXPECT_EQ(ErrorReply(400, "bad_count", "").retry_after_s, 0u);
  EXPECT_EQ(ErrorReply(500, "system_error", "").retry_after_s, 0u);
}

}  // namespace
}  // namespace snowflake::daemon
