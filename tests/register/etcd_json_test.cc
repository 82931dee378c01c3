// The etcd gateway's wire format (register/etcd_json.h) and the register's records
// (register/etcd_records.h) on crafted text: every omitted field, int64s beyond 2^53,
// etcd's error objects, and garbage that must be refused, never read as success.

#include "register/etcd_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "register/etcd_records.h"
#include "snowflake/id_layout.h"
#include "stress_seed.h"

namespace snowflake::reg::etcd {
namespace {

using ::testing::HasSubstr;

TEST(EtcdBase64, RoundTripsEveryLength) {
  std::string bytes;
  for (int i = 0; i < 300; ++i) {
    const std::string encoded = Base64Encode(bytes);
    ASSERT_EQ(encoded.size() % 4, 0u);
    const auto decoded = Base64Decode(encoded);
    ASSERT_TRUE(decoded.has_value()) << encoded;
    EXPECT_EQ(*decoded, bytes);
    bytes.push_back(static_cast<char>(i * 37));
  }
  EXPECT_EQ(Base64Encode("k"), "aw==");
  EXPECT_EQ(Base64Encode("/snowflaked/config"), "L3Nub3dmbGFrZWQvY29uZmln");
}

TEST(EtcdBase64, DecodeRefusesMalformedText) {
  EXPECT_FALSE(Base64Decode("a"));
  EXPECT_FALSE(Base64Decode("aw="));
  EXPECT_FALSE(Base64Decode("a==="));
  EXPECT_FALSE(Base64Decode("aw==aw=="));  // padding in the middle
  EXPECT_FALSE(Base64Decode("a!b="));
  EXPECT_FALSE(Base64Decode("aw=x"));
  EXPECT_EQ(Base64Decode(""), std::string());
}

TEST(EtcdInt64, ParsesOnlyPlainDecimals) {
  EXPECT_EQ(ParseInt64("2324035768177677831"), int64_t{2324035768177677831});
  EXPECT_EQ(ParseInt64("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(ParseInt64("-1"), -1);
  EXPECT_FALSE(ParseInt64("9223372036854775808"));
  EXPECT_FALSE(ParseInt64(""));
  EXPECT_FALSE(ParseInt64(" 1"));
  EXPECT_FALSE(ParseInt64("+1"));
  EXPECT_FALSE(ParseInt64("1e3"));
  EXPECT_FALSE(ParseInt64("12a"));
}

TEST(EtcdPrefixEnd, IncrementsTheLastByte) {
  EXPECT_EQ(PrefixEnd("/a/"), "/a0");
  EXPECT_EQ(PrefixEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixEnd(""), std::string(1, '\0'));
}

TEST(EtcdJson, LeaseIdsBeyondTwoToThe53AreExact) {
  // 2^53 + 1 is not representable in a double: a parse through one would give 2^53.
  const auto sut = ParseLeaseGrantResponse(
      200, R"({"header":{"revision":"1"},"ID":"9007199254740993","TTL":"10"})");
  ASSERT_TRUE(sut) << sut.error().message;
  EXPECT_EQ(sut->id, int64_t{9007199254740993});
  EXPECT_EQ(sut->ttl_s, 10);
  EXPECT_EQ(LeaseIdBody(int64_t{9007199254740993}), R"({"ID":"9007199254740993"})");
}

TEST(EtcdJson, FailedTxnHasNoSucceededField) {
  const auto sut = ParseTxnResponse(
      200,
      R"({"header":{"revision":"3"},"responses":[{"response_range":{"header":{"revision":"3"},)"
      R"("kvs":[{"key":"aw==","create_revision":"2","mod_revision":"2","version":"1",)"
      R"("value":"dg==","lease":"2324035768177677831"}],"count":"1"}}]})");
  ASSERT_TRUE(sut) << sut.error().message;
  EXPECT_FALSE(sut->succeeded);
  ASSERT_EQ(sut->responses.size(), 1u);
  ASSERT_EQ(sut->responses[0].range.kvs.size(), 1u);
  const KeyValue& kv = sut->responses[0].range.kvs[0];
  EXPECT_EQ(kv.key, "k");
  EXPECT_EQ(kv.value, "v");
  EXPECT_EQ(kv.lease, int64_t{2324035768177677831});
  EXPECT_EQ(sut->revision, 3);
}

TEST(EtcdJson, SucceededTxnWithPutAndEmptyRange) {
  const auto sut = ParseTxnResponse(
      200, R"({"header":{"revision":"2"},"succeeded":true,"responses":[)"
           R"({"response_put":{"header":{"revision":"2"}}},{"response_range":{"header":{}}}]})");
  ASSERT_TRUE(sut) << sut.error().message;
  EXPECT_TRUE(sut->succeeded);
  ASSERT_EQ(sut->responses.size(), 2u);
  EXPECT_EQ(sut->responses[0].kind, Op::Kind::kPut);
  EXPECT_EQ(sut->responses[1].kind, Op::Kind::kRange);
  EXPECT_TRUE(sut->responses[1].range.kvs.empty());  // "kvs" omitted: nothing matched
}

TEST(EtcdJson, AnAnswerWithoutItsHeaderRevisionIsRefused) {
  // A raise takes the header's revision as the mark's new mod_revision; a start compares it
  // with the revision it recorded. etcd always sends it (1 or more).
  const auto no_header = ParseTxnResponse(200, R"({"succeeded":true})");
  const auto no_revision = ParseRangeResponse(200, R"({"header":{},"kvs":[]})");
  const auto put = ParsePutResponse(200, R"({"header":{"cluster_id":"7"}})");

  ASSERT_FALSE(no_header);
  EXPECT_THAT(no_header.error().message, HasSubstr("no \"header\""));
  ASSERT_FALSE(no_revision);
  EXPECT_THAT(no_revision.error().message, HasSubstr("no revision"));
  ASSERT_FALSE(put);
}

TEST(EtcdJson, OmittedFieldsAreZeroValues) {
  const auto sut =
      ParseRangeResponse(200, R"({"header":{"revision":"1"},"kvs":[{"key":"aw=="}],"count":"1"})");
  ASSERT_TRUE(sut) << sut.error().message;
  ASSERT_EQ(sut->kvs.size(), 1u);
  EXPECT_EQ(sut->kvs[0].value, "");
  EXPECT_EQ(sut->kvs[0].lease, 0);
  EXPECT_EQ(sut->kvs[0].create_revision, 0);
  const auto empty = ParseRangeResponse(200, R"({"header":{"revision":"3"}})");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->kvs.empty());
  EXPECT_EQ(empty->count, 0);
}

TEST(EtcdJson, ExpiredLeaseKeepAliveHasNoTtl) {
  const auto lost = ParseLeaseKeepAliveResponse(200, R"({"result":{"header":{},"ID":"12345"}})");
  ASSERT_TRUE(lost) << lost.error().message;
  EXPECT_FALSE(lost->alive());
  const auto alive =
      ParseLeaseKeepAliveResponse(200, R"({"result":{"header":{},"ID":"12345","TTL":"5"}})");
  ASSERT_TRUE(alive);
  EXPECT_TRUE(alive->alive());
  EXPECT_EQ(alive->ttl_s, 5);
  // A stream error is not a keepalive.
  const auto error = ParseLeaseKeepAliveResponse(
      200, R"({"error":{"grpc_code":14,"http_code":503,"message":"x","code":14}})");
  ASSERT_FALSE(error);
  EXPECT_EQ(error.error().kind, ErrorKind::kRejected);
  EXPECT_FALSE(ParseLeaseKeepAliveResponse(200, R"({"header":{}})"));
}

TEST(EtcdJson, TimeToLiveOfAGoneLeaseIsMinusOne) {
  const auto sut = ParseLeaseTimeToLiveResponse(200, R"({"header":{},"ID":"12345","TTL":"-1"})");
  ASSERT_TRUE(sut);
  EXPECT_FALSE(sut->alive());
  const auto alive = ParseLeaseTimeToLiveResponse(200, R"({"ID":"7","TTL":"4","grantedTTL":"5"})");
  ASSERT_TRUE(alive);
  EXPECT_EQ(alive->ttl_s, 4);
  EXPECT_EQ(alive->granted_ttl_s, 5);
}

// A lease with under a second left is answered without "TTL" (proto3 drops the zero): it
// has not expired, so `register release` must not treat its holder as gone.
TEST(EtcdJson, TimeToLiveWithoutTtlIsALeaseExpiringNowStillAlive) {
  const auto sut =
      ParseLeaseTimeToLiveResponse(200, R"({"header":{},"ID":"12345","grantedTTL":"5"})");
  ASSERT_TRUE(sut) << sut.error().message;
  EXPECT_EQ(sut->ttl_s, 0);
  EXPECT_TRUE(sut->alive());
}

// The cluster id exceeds int64 (it is a uint64 in etcd's protobuf): parsed without loss.
TEST(EtcdJson, HeaderClusterIdIsReadAsUint64) {
  const auto range =
      ParseRangeResponse(200, R"({"header":{"cluster_id":"14841639068965178418","revision":"9"}})");
  ASSERT_TRUE(range) << range.error().message;
  EXPECT_EQ(range->cluster_id, 14841639068965178418ULL);
  EXPECT_EQ(range->revision, 9);
  const auto txn = ParseTxnResponse(
      200, R"({"header":{"cluster_id":"18446744073709551615","revision":"10"},"succeeded":true})");
  ASSERT_TRUE(txn) << txn.error().message;
  EXPECT_EQ(txn->cluster_id, UINT64_MAX);
  EXPECT_FALSE(ParseRangeResponse(200, R"({"header":{"cluster_id":"-1"}})"));
  EXPECT_FALSE(ParseRangeResponse(200, R"({"header":{"cluster_id":"18446744073709551616"}})"));
  EXPECT_FALSE(ParseRangeResponse(200, R"({"header":{"cluster_id":1.5}})"));
  const auto status = ParseStatusResponse(
      200, R"({"header":{"cluster_id":"7","revision":"12"},"version":"3.4.23","dbSize":"20480"})");
  ASSERT_TRUE(status) << status.error().message;
  EXPECT_EQ(status->version, "3.4.23");
  EXPECT_EQ(status->cluster_id, 7u);
  EXPECT_EQ(status->revision, 12);
}

TEST(EtcdJson, ErrorObjectsAreRejectionsWithTheirCode) {
  const auto sut = ParsePutResponse(
      404, R"({"error":"etcdserver: requested lease not found","message":"etcdserver: )"
           R"(requested lease not found","code":5})");
  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().kind, ErrorKind::kRejected);
  EXPECT_EQ(sut.error().grpc_code, 5);
  EXPECT_EQ(sut.error().http_status, 404);
  EXPECT_THAT(sut.error().message, HasSubstr("requested lease not found"));
  const auto quorum = ParseTxnResponse(
      500,
      R"({"error":"context deadline exceeded","message":"context deadline exceeded","code":2})");
  ASSERT_FALSE(quorum);
  EXPECT_EQ(quorum.error().grpc_code, 2);
  // Non-JSON error pages from a proxy.
  const auto proxy = ParseTxnResponse(502, "<html>Bad Gateway</html>");
  ASSERT_FALSE(proxy);
  EXPECT_EQ(proxy.error().kind, ErrorKind::kRejected);
}

// Without quorum a member's gateway answers a write after its own deadline with code 2:
// the register did not answer (register_unreachable, retry), not a refusal.
TEST(EtcdJson, AGatewayDeadlineWithoutQuorumIsAnOutageAndARefusalIsNot) {
  const auto quorum = ParseTxnResponse(
      500,
      R"({"error":"context deadline exceeded","message":"context deadline exceeded","code":2})");
  const auto no_leader = ParsePutResponse(
      503, R"({"error":"etcdserver: no leader","message":"etcdserver: no leader","code":14})");
  const auto refused = ParsePutResponse(
      404, R"({"error":"etcdserver: requested lease not found","message":"etcdserver: )"
           R"(requested lease not found","code":5})");
  const auto other_unknown =
      ParsePutResponse(500, R"({"error":"something else","message":"something else","code":2})");
  ASSERT_FALSE(quorum);
  ASSERT_FALSE(no_leader);
  ASSERT_FALSE(refused);
  ASSERT_FALSE(other_unknown);
  EXPECT_TRUE(IsOutage(quorum.error())) << quorum.error().message;
  EXPECT_THAT(quorum.error().message,
              HasSubstr("etcd could not decide (code 2, HTTP 500): context deadline exceeded"));
  EXPECT_THAT(no_leader.error().message, HasSubstr("etcd could not decide (code 14, HTTP 503)"));
  EXPECT_THAT(refused.error().message, HasSubstr("etcd refused (code 5, HTTP 404)"));
  EXPECT_TRUE(IsOutage(no_leader.error())) << no_leader.error().message;
  EXPECT_FALSE(IsOutage(refused.error())) << refused.error().message;
  EXPECT_FALSE(IsOutage(other_unknown.error())) << other_unknown.error().message;
}

TEST(EtcdJson, GarbageIsMalformedNeverSuccess) {
  const char* garbage[] = {
      "",
      "null",
      "[]",
      "\"succeeded\"",
      "{",
      R"({"succeeded":"true"})",
      R"({"succeeded":1})",
      R"({"header":{"revision":1.5}})",
      R"({"header":{"revision":"12x"}})",
      R"({"header":"x"})",
      R"({"responses":{}})",
      R"({"responses":[1]})",
      R"({"responses":[{}]})",
      R"({"responses":[{"response_what":{}}]})",
      R"({"responses":[{"response_range":{"kvs":[{"key":"!!"}]}}]})",
      R"({"responses":[{"response_range":{"kvs":"x"}}]})",
      R"({"responses":[{"response_range":{"kvs":[{"lease":"99999999999999999999"}]}}]})",
      R"({"responses":[{"response_range":{"kvs":[{"key":"aw=="},{"key":"aw=="}],"count":"1"}}]})",
  };
  for (const char* text : garbage) {
    const auto sut = ParseTxnResponse(200, text);
    EXPECT_FALSE(sut) << text;
    if (!sut) {
      EXPECT_EQ(sut.error().kind, ErrorKind::kMalformed) << text;
      EXPECT_FALSE(sut.error().message.empty());
    }
  }
  EXPECT_FALSE(ParseLeaseGrantResponse(200, R"({"ID":"0","TTL":"5"})"));
  EXPECT_FALSE(ParseLeaseGrantResponse(200, R"({"ID":"5"})"));
  EXPECT_FALSE(ParseLeaseKeepAliveResponse(200, R"({"result":{"TTL":"-3"}})"));
  EXPECT_FALSE(ParseAuthenticateResponse(200, R"({"token":""})"));
  EXPECT_FALSE(ParseAuthenticateResponse(200, "{\"token\":\"a\\nb\"}"));
}

// A bounded random mutation run: no parser may crash, throw or call garbage a success
// with a nonsensical result.
TEST(EtcdJson, RandomMutationsNeverCrashAndNeverParseGarbage) {
  // Property: a mutated answer either is refused, or is a JSON document whose fields the
  // parser read as they stand (the revision and "succeeded" agree with an independent
  // parse): no garbage is ever read as success.
  const uint64_t seed = snowflake::testing::StressSeedFromEnv();
  std::printf("EtcdJson.RandomMutationsNeverCrashAndNeverParseGarbage seed %llu\n",
              static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const std::string base =
      R"({"header":{"revision":"3"},"succeeded":true,"responses":[{"response_range":)"
      R"({"kvs":[{"key":"aw==","value":"dg==","lease":"2324035768177677831"}],"count":"1"}},)"
      R"({"response_put":{}},{"response_delete_range":{"deleted":"1"}}]})";
  ASSERT_TRUE(ParseTxnResponse(200, base)) << "the unmutated answer must parse";
  int accepted = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string text = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0:
          text[at] = static_cast<char>(rng() % 256);
          break;
        case 1:
          text.erase(at, 1 + rng() % 8);
          break;
        default:
          text.insert(at, 1, "{}[]\":,0-9a"[rng() % 11]);
          break;
      }
    }
    const bool json = nlohmann::json::accept(text);
    auto txn = ParseTxnResponse(200, text);
    if (txn) {
      ++accepted;
      ASSERT_TRUE(json) << "not JSON, yet parsed as a transaction: " << text;
      const auto doc = nlohmann::json::parse(text);
      EXPECT_EQ(txn->succeeded, doc.value("succeeded", false) == true) << text;
      const auto& revision = doc["header"]["revision"];
      EXPECT_EQ(txn->revision,
                std::stoll(revision.is_string() ? revision.get<std::string>() : revision.dump()))
          << text;
    }
    EXPECT_TRUE(!ParseRangeResponse(200, text) || json) << text;
    EXPECT_TRUE(!ParseLeaseKeepAliveResponse(200, text) || json) << text;
    EXPECT_TRUE(!ParseLeaseTimeToLiveResponse(200, text) || json) << text;
    EXPECT_TRUE(!DecodeHolder(text) || json) << text;
    EXPECT_TRUE(!DecodeHighWater(text) || json) << text;
    EXPECT_TRUE(!DecodeFleet(text) || json) << text;
  }
  std::printf("%d of 2000 mutants parsed as a transaction, every one of them JSON\n", accepted);
}

TEST(EtcdJson, TxnBodyNamesTheComparedField) {
  TxnRequest txn;
  txn.compare = {Compare::KeyAbsent("k"), Compare::Lease("k", int64_t{9007199254740993}),
                 Compare::ValueEquals("c", "v"),
                 Compare::ModRevision("k", Compare::Result::kEqual, 7)};
  txn.success = {Op::Put("k", "v", 42), Op::Get("h")};
  txn.failure = {Op::Delete("k")};
  const std::string sut = TxnBody(txn);
  EXPECT_THAT(sut, HasSubstr(R"("create_revision":"0")"));
  EXPECT_THAT(sut, HasSubstr(R"("target":"CREATE")"));
  EXPECT_THAT(sut, HasSubstr(R"("lease":"9007199254740993","result":"EQUAL","target":"LEASE")"));
  EXPECT_THAT(sut, HasSubstr(R"("target":"VALUE","value":"dg==")"));
  EXPECT_THAT(sut, HasSubstr(R"("mod_revision":"7")"));
  EXPECT_THAT(sut, HasSubstr(R"({"request_put":{"key":"aw==","lease":"42","value":"dg=="}})"));
  EXPECT_THAT(sut, HasSubstr(R"({"request_range":{"key":"aA=="}})"));
  EXPECT_THAT(sut, HasSubstr(R"({"request_delete_range":{"key":"aw=="}})"));
}

TEST(EtcdRecords, RoundTripAndCanonicalText) {
  // The record's layout is the fleet's id.layout; the default's is what every fleet record
  // before layouts held.
  const FleetRecord fleet{1767225600000, IdBitsRecordName(kDefaultIdBits)};
  EXPECT_EQ(IdBitsRecordName(kDefaultIdBits), "time41-machine10-sequence12");
  EXPECT_EQ(EncodeFleet(fleet),
            R"({"format":"snowflaked-fleet","version":1,"epoch_unix_ms":1767225600000,)"
            R"("layout":"time41-machine10-sequence12"})");
  EXPECT_EQ(DecodeFleet(EncodeFleet(fleet)), fleet);
  const FleetRecord wide{1767225600000, IdBitsRecordName({41, 16, 6})};
  EXPECT_EQ(EncodeFleet(wide),
            R"({"format":"snowflaked-fleet","version":1,"epoch_unix_ms":1767225600000,)"
            R"("layout":"time41-machine16-sequence6"})");
  EXPECT_EQ(DecodeFleet(EncodeFleet(wide)), wide);
  const HolderRecord holder{"m:default", "host-a", 42, 5};
  EXPECT_EQ(DecodeHolder(EncodeHolder(holder)), holder);
  const HighWaterRecord mark{1767225600123, "m:default"};
  EXPECT_EQ(DecodeHighWater(EncodeHighWater(mark)), mark);
}

TEST(EtcdRecords, DecodersRefuseGarbageWithTheText) {
  EXPECT_THAT(DecodeHighWater("garbage").error(), HasSubstr("\"garbage\""));
  EXPECT_FALSE(DecodeHighWater(R"({"unix_ms":-1,"holder":""})"));
  EXPECT_FALSE(DecodeHighWater(R"({"unix_ms":"5","holder":""})"));
  EXPECT_FALSE(DecodeHighWater(R"({"unix_ms":5})"));
  EXPECT_FALSE(DecodeHighWater(R"({"unix_ms":5,"holder":"","x":1})"));
  EXPECT_FALSE(DecodeHolder(R"({"holder":"","host":"h","pid":1,"since_unix_ms":1})"));
  EXPECT_FALSE(DecodeFleet(R"({"format":"x","version":1,"epoch_unix_ms":1,"layout":"l"})"));
  EXPECT_THAT(
      DecodeFleet(R"({"format":"snowflaked-fleet","version":2,"epoch_unix_ms":1,"layout":"l"})")
          .error(),
      HasSubstr("version"));
}

TEST(EtcdRecords, MachineOfKeyAcceptsOnlyCanonicalNumbers) {
  EXPECT_EQ(MachineOfKey("/p/machines/", "/p/machines/0"), 0u);
  EXPECT_EQ(MachineOfKey("/p/machines/", "/p/machines/1023"), 1023u);
  // The widest layout's numbers: the register's layout bounds what it hands out, not what
  // it can read.
  EXPECT_EQ(MachineOfKey("/p/machines/", "/p/machines/65535"), 65535u);
  EXPECT_FALSE(MachineOfKey("/p/machines/", "/p/machines/65536"));
  EXPECT_FALSE(MachineOfKey("/p/machines/", "/p/machines/07"));
  EXPECT_FALSE(MachineOfKey("/p/machines/", "/p/machines/"));
  EXPECT_FALSE(MachineOfKey("/p/machines/", "/p/machines/x"));
  EXPECT_FALSE(MachineOfKey("/p/machines/", "/q/machines/1"));
  EXPECT_EQ(MachineKey("/p/", 3), "/p/machines/3");
  EXPECT_EQ(HighWaterKey("/p/", 3), "/p/high-water/3");
}

}  // namespace
}  // namespace snowflake::reg::etcd
