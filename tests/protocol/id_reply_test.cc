// The take replies' bodies (protocol/id_reply.h), both ends. The writer: the bodies of
// /v1/id and /v1/ids byte for byte as docs/http.md shows them, for one ID and for the
// largest batch, in JSON and in text/plain. The reader and the error codes: every row of
// the golden fixtures (tests/protocol/id_replies.json), which the Go taker runs too.
//
// Property: the body is exactly the documented format of the IDs given, in their order,
// whatever their size (1 to 20 digits), and is appended after what the buffer held; a
// body the reader accepts gives back exactly the IDs written.

#include "protocol/id_reply.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_paths.h"

namespace snowflake::protocol {
namespace {

// The largest batch the front gives (/v1/ids?count=4096, docs/http.md).
constexpr size_t kLargestBatch = 4096;

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

TEST(IdReply, OneIdIsExactlyTheDocumentedBytes) {
  EXPECT_EQ(Body({28130156318822400u}, IdsFormat::kJsonOne), R"({"id":"28130156318822400"})");
  EXPECT_EQ(Body({28130156318822400u}, IdsFormat::kJsonBatch), R"({"ids":["28130156318822400"]})");
  EXPECT_EQ(Body({28130156318822400u}, IdsFormat::kText), "28130156318822400\n");
}

TEST(IdReply, ABatchOfFourIsExactlyTheDocumentedBytes) {
  const std::vector<uint64_t> ids = {28130156314628096u, 28130156314628097u, 28130156314628098u,
                                     28130156314628099u};
  EXPECT_EQ(
      Body(ids, IdsFormat::kJsonBatch),
      R"({"ids":["28130156314628096","28130156314628097","28130156314628098","28130156314628099"]})");
  EXPECT_EQ(Body(ids, IdsFormat::kText),
            "28130156314628096\n28130156314628097\n28130156314628098\n28130156314628099\n");
}

TEST(IdReply, TheLargestBatchMatchesThePlainFormatByteForByte) {
  // 4096 IDs of every length from 1 to 20 digits, the widest (2^64 - 1) included: the
  // buffer's bound is reached and never passed.
  std::vector<uint64_t> ids(kLargestBatch);
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
  std::vector<uint64_t> all_max(kLargestBatch, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(Body(all_max, IdsFormat::kJsonBatch), Expected(all_max, IdsFormat::kJsonBatch));
  EXPECT_LE(Body(all_max, IdsFormat::kJsonBatch).size(), MaxIdsBodyBytes(kLargestBatch));
  // The JSON form parses, and gives back the IDs as decimal strings in order.
  const auto parsed = nlohmann::json::parse(Body(ids, IdsFormat::kJsonBatch));
  ASSERT_EQ(parsed["ids"].size(), ids.size());
  EXPECT_EQ(parsed["ids"][4095], "18446744073709551615");
}

// Consecutive IDs are written by incrementing the previous ID's text (id_reply.cc):
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

TEST(IdReply, ConsecutiveIdsCarryThroughTrailingNines) {
  ExpectLikeThePlainFormat(Consecutive(28130156314628105u, 3));  // …05 … …07: the last digit only
  ExpectLikeThePlainFormat(Consecutive(28130156314628108u, 3));  // …09 → …10
  ExpectLikeThePlainFormat(Consecutive(28130156314628997u, 5));  // …999 → …1000 → …1001
  ExpectLikeThePlainFormat(Consecutive(28130156319999998u, 4));  // a carry through seven nines
  ExpectLikeThePlainFormat(Consecutive(28130156314628096u, 4096));  // a whole millisecond
}

TEST(IdReply, ConsecutiveIdsThatGainADigitAreWrittenInFull) {
  ExpectLikeThePlainFormat(Consecutive(0, 12));                    // 9 → 10
  ExpectLikeThePlainFormat(Consecutive(998, 4));                   // 999 → 1000
  ExpectLikeThePlainFormat(Consecutive(9999999999999999998u, 3));  // 19 digits → 20
  ExpectLikeThePlainFormat(Consecutive(99999999999999998u, 4));    // 17 digits → 18
}

TEST(IdReply, IdsThatAreNotThePreviousPlusOneAreConvertedAlone) {
  // A gap, a step back, a repeat, a new millisecond, then a run again.
  ExpectLikeThePlainFormat({28130156314628096u, 28130156314628098u, 28130156314628097u,
                            28130156314628097u, 28130156318822400u, 28130156318822401u, 7u});
  // 0 after the largest ID: 0 - 1 wraps to the previous ID, and must not count as its + 1.
  ExpectLikeThePlainFormat({std::numeric_limits<uint64_t>::max(), 0u, 1u});
  // A run that breaks right after a carry, and resumes from another number.
  ExpectLikeThePlainFormat({199u, 200u, 100u, 101u, 109u, 110u});
}

TEST(IdReply, TheBodyIsAppendedAfterWhatTheBufferHeld) {
  std::string out = "prefix:";
  AppendIdsBody(std::vector<uint64_t>{0, 1}, IdsFormat::kText, out);
  EXPECT_EQ(out, "prefix:0\n1\n");
}

// --- The golden fixtures, shared with the Go taker.

nlohmann::json Fixtures() {
  const std::string path = ::snowflake::testing::SourcePath("tests/protocol/id_replies.json");
  std::ifstream in(path);
  auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(doc.is_object()) << "cannot read " << path;
  return doc;
}

std::vector<uint64_t> IdsOf(const nlohmann::json& row) {
  std::vector<uint64_t> ids;
  for (const auto& text : row.at("ids")) ids.push_back(std::stoull(text.get<std::string>()));
  return ids;
}

TEST(IdReply, TheWriterGivesEveryGoldenBodyByteForByte) {
  const nlohmann::json doc = Fixtures();
  ASSERT_FALSE(doc["writes"].empty());
  for (const auto& row : doc["writes"]) {
    const std::string format = row.at("format");
    const IdsFormat f = format == "json_one"     ? IdsFormat::kJsonOne
                        : format == "json_batch" ? IdsFormat::kJsonBatch
                                                 : IdsFormat::kText;
    ASSERT_TRUE(format == "json_one" || format == "json_batch" || format == "text") << format;
    EXPECT_EQ(Body(IdsOf(row), f), row.at("body").get<std::string>()) << row.at("name");
  }
}

TEST(IdReply, TheReaderGivesEveryGoldenRowItsIdsOrItsError) {
  const nlohmann::json doc = Fixtures();
  ASSERT_FALSE(doc["reads"].empty());
  for (const auto& row : doc["reads"]) {
    std::vector<uint64_t> out(row.at("room").get<size_t>());
    const auto read = ReadIdsText(row.at("body").get<std::string>(), out);
    if (row.contains("error")) {
      ASSERT_FALSE(read.has_value()) << row.at("name");
      EXPECT_EQ(read.error(), row.at("error").get<std::string>()) << row.at("name");
    } else {
      ASSERT_TRUE(read.has_value()) << row.at("name") << ": " << read.error();
      out.resize(*read);
      EXPECT_EQ(out, IdsOf(row)) << row.at("name");
    }
  }
}

TEST(IdReply, EveryGoldenRefusalGivesItsCode) {
  const nlohmann::json doc = Fixtures();
  ASSERT_FALSE(doc["error_codes"].empty());
  for (const auto& row : doc["error_codes"]) {
    EXPECT_EQ(ErrorCodeOf(row.at("body").get<std::string>()), row.at("code").get<std::string>())
        << row.at("name");
  }
}

// The two ends agree on everything the writer can produce: the largest batch of every
// length, written as text, reads back as itself.
TEST(IdReply, WhatTheWriterWritesTheReaderReadsBack) {
  std::vector<uint64_t> ids(kLargestBatch);
  uint64_t value = 1;
  for (size_t i = 0; i < ids.size(); ++i) {
    value += 1 + (value >> 3);  // increasing, 1 to 19 digits, below 2^63
    if (value >> 62 != 0) value = (uint64_t{1} << 62) + i;
    ids[i] = value;
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::string body;
  AppendIdsBody(ids, IdsFormat::kText, body);
  std::vector<uint64_t> out(ids.size());
  const auto read = ReadIdsText(body, out);
  ASSERT_TRUE(read.has_value()) << read.error();
  EXPECT_EQ(*read, ids.size());
  EXPECT_EQ(out, ids);
  // One ID more than the room is a malformed reply, never a silent truncation.
  std::vector<uint64_t> short_room(ids.size() - 1);
  EXPECT_EQ(ReadIdsText(body, short_room).error(), "a malformed reply (not one ID per line)");
}

TEST(IdReply, ARefusalsBodyIsJsonWithItsCodeAndMessage) {
  EXPECT_EQ(ErrorBody("daemon_paused", "the clock moved back"),
            R"({"error":{"code":"daemon_paused","message":"the clock moved back"}})");
  // Bytes that are not UTF-8 are replaced: the body stays valid JSON, its code readable.
  const std::string body = ErrorBody("bad_request", "path \xff\xfe");
  EXPECT_TRUE(nlohmann::json::accept(body)) << body;
  EXPECT_EQ(ErrorCodeOf(body), "bad_request");
}

}  // namespace
}  // namespace snowflake::protocol
