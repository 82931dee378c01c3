// The control protocol's one definition (protocol/): what the daemon writes reads back as
// the same record; a reply that breaks the protocol is refused naming the key; requests
// and refusals keep their codes; the client's calls say why there is no answer; and the
// keys written are exactly the keys docs/control-protocol.md documents.

#include "protocol/control_protocol.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "protocol/control_client.h"
#include "scripted_control_socket.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace snowflake::protocol {
namespace {

using json = nlohmann::json;
using snowflake::testing::ScriptedControlSocket;
using snowflake::testing::TempDir;

// Every member set away from its default, so a key lost on the way shows.
StatusRecord FullRecord() {
  StatusRecord s;
  s.state = "paused";
  s.reason_code = "register_unreachable";
  s.reason = "paused: machine 3, waiting for the register";
  s.reason_detail = 1'767'225'600'000;
  s.pid = 4242;
  s.version = "1.2.3";
  s.instance = "blue";
  s.runtime_dir = "/run/snowflaked";
  s.state_dir = "/var/lib/snowflaked";
  s.register_backend = "etcd";
  s.register_location = "etcd http://127.0.0.1:2379 /snowflake/";
  s.holder_id = "host-a";
  s.machine = 3;
  s.epoch_unix_ms = 1'767'225'600'000;
  s.ring_capacity = 4096;
  s.ring_fill = 17;
  s.fill_target = 64;
  s.published_total = 1'000'000;
  s.drained_total = 12;
  s.incarnation = 2;
  s.segment_reopened = true;
  s.last_issued_id = 9'007'199'254'740'993ull;  // above 2^53: exact only as a string
  s.generator_mark_unix_ms = 1'767'225'700'001;
  s.reserved_through_unix_ms = 1'767'225'703'001;
  s.clock_pauses = 1;
  s.clock_behind_ms = 5;
  s.started_unix_ms = 1'767'225'600'100;
  s.state_since_unix_ms = 1'767'225'650'000;
  s.services = {{"billing", 3}, {"orders", 12}};
  s.segments_retired = 1;
  s.segment_retired_reason = "head moved backwards";
  s.renewal = RenewalStatus{.store = "register",
                            .location = "etcd http://127.0.0.1:2379 /snowflake/",
                            .since_unix_ms = 1'767'225'649'000,
                            .waited_ms = 1000,
                            .last_error = "timed out",
                            .last_error_store = "register",
                            .unanswered = true};
  s.clock_wait = ClockWait{
      .until_unix_ms = 1'767'225'700'259, .set_by = "register", .clock_passes_in_ms = 258};
  s.fronts = {FrontStatus{.name = "http",
                          .listen = {"127.0.0.1:8080", "[::1]:8080"},
                          .connections = 2,
                          .requests = 99,
                          .refused = 1}};
  return s;
}

TEST(StatusRecord, EveryFactRoundTripsThroughTheWire) {
  const StatusRecord sut = FullRecord();

  const std::string line = Dump(StatusReplyJson(sut));
  const auto reply = ParseReply(line, "test");
  ASSERT_TRUE(reply.has_value()) << reply.error().message;
  const auto read = ReadStatusReply(*reply, "test");

  ASSERT_TRUE(read.has_value()) << read.error().message;
  EXPECT_EQ(*read, sut);
  EXPECT_EQ((*reply)["last_issued_id"], "9007199254740993");
}

TEST(StatusRecord, TheDeprecatedMarkKeyCarriesTheSameValueAndAnOlderDaemonsIsRead) {
  const json written = StatusToJson(FullRecord());
  const json older = json::parse(R"({"state":"serving","last_issued_unix_ms":1767225700001})");

  const auto read = StatusFromJson(older);

  EXPECT_EQ(written["last_issued_unix_ms"], written["generator_mark_unix_ms"]);
  ASSERT_TRUE(read.has_value()) << read.error();
  EXPECT_EQ(read->generator_mark_unix_ms, 1'767'225'700'001);
}

TEST(StatusRecord, MissingKeysKeepTheirDefaultsAndUnknownOnesAreReadPast) {
  const auto read =
      StatusFromJson(json::parse(R"({"state":"serving","from_a_newer_daemon":[1,2]})"));

  ASSERT_TRUE(read.has_value()) << read.error();
  StatusRecord expected;
  expected.state = "serving";
  EXPECT_EQ(*read, expected);
}

TEST(StatusRecord, AKeyOfTheWrongTypeIsRefusedNamingIt) {
  const json base = StatusToJson(FullRecord());
  struct Case {
    const char* what;
    const char* patch;  // JSON merged into a valid reply (RFC 7386)
    std::string named;
  };
  const Case cases[] = {
      {"a number as text", R"({"machine":"3"})", "\"machine\" is \"3\", not an integer"},
      {"a negative count", R"({"ring_fill":-1})", "\"ring_fill\" is -1, not a non-negative"},
      {"an ID as a number", R"({"last_issued_id":12})", "\"last_issued_id\" is 12"},
      {"an ID that is not decimal", R"({"last_issued_id":"12x"})", "a decimal string of a 64-bit"},
      {"an ID beyond 64 bits", R"({"last_issued_id":"18446744073709551616"})", "64-bit ID"},
      {"an integer too large", R"({"pid":18446744073709551615})", "\"pid\" is"},
      {"a bool as a number", R"({"segment_reopened":1})", "not true or false"},
      {"a service count as text", R"({"services":{"orders":"12"}})", "\"services.orders\""},
      {"services as an array", R"({"services":[]})", "\"services\" is [], not an object"},
      {"a renewal field", R"({"renewal":{"waited_ms":"4s"}})", "\"renewal.waited_ms\""},
      {"a renewal that is text", R"({"renewal":"none"})", "\"renewal\" is \"none\""},
      {"a front that is text", R"({"fronts":["http"]})", "\"fronts[0]\" is not an object"},
      {"a front's address", R"({"fronts":[{"listen":[1]}]})", "\"fronts[0].listen\" holds 1"},
      {"a front's count", R"({"fronts":[{"requests":-3}]})", "\"fronts[0].requests\" is -3"},
      {"a state that is not text", R"({"state":2})", "\"state\" is 2, not a string"},
  };
  for (const Case& c : cases) {
    json reply = base;
    reply.merge_patch(json::parse(c.patch));

    const auto read = StatusFromJson(reply);

    ASSERT_FALSE(read.has_value()) << c.what;
    EXPECT_NE(read.error().find(c.named), std::string::npos) << c.what << ": " << read.error();
  }
}

TEST(StatusRecord, AReplyWithoutAStateIsNoStatus) {
  json reply = StatusToJson(FullRecord());
  reply.erase("state");

  const auto as_object = StatusFromJson(reply);
  const auto as_array = StatusFromJson(json::array());

  ASSERT_FALSE(as_object.has_value());
  EXPECT_EQ(as_object.error(), "it has no \"state\"");
  ASSERT_FALSE(as_array.has_value());
}

TEST(ControlRequest, TheThreeCommandsParseAndEverythingElseIsRefusedWithItsCode) {
  EXPECT_EQ(ParseRequest(RequestLine(Command::kStatus)), Command::kStatus);
  EXPECT_EQ(ParseRequest(RequestLine(Command::kResume)), Command::kResume);
  EXPECT_EQ(ParseRequest(RequestLine(Command::kAttach)), Command::kAttach);
  EXPECT_EQ(RequestLine(Command::kStatus), "{\"command\":\"status\"}\n");
  EXPECT_EQ(RequestLine(Command::kAttach), "{\"command\":\"attach\"}\n");
  for (const char* line : {"", "{", "status", "[1,2]", R"({"command":5})", R"({"cmd":"status"})"}) {
    const auto sut = ParseRequest(line);
    ASSERT_FALSE(sut.has_value()) << line;
    EXPECT_EQ(sut.error().code, vocab::ErrorCode::kMalformedRequest) << line;
    EXPECT_TRUE(sut.error().refused);
  }
  const auto unknown = ParseRequest(R"({"command":"reboot"})");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().code, vocab::ErrorCode::kUnknownCommand);
  EXPECT_EQ(unknown.error().message,
            "unknown command \"reboot\": expected \"status\", \"resume\" or \"attach\"");
}

// unknown_command's text in the vocabulary (its words for people when a refusal has no
// message of its own) names every command the socket knows: it once said "only status and
// resume" while the socket also knew attach.
TEST(ControlRequest, TheUnknownCommandTextNamesEveryCommand) {
  const std::string_view text = vocab::ErrorText(vocab::ErrorCode::kUnknownCommand);
  for (const Command command : kCommands) {
    EXPECT_NE(text.find("\"" + std::string(CommandName(command)) + "\""), std::string_view::npos)
        << text << " lacks " << CommandName(command);
  }
}

// The attach reply (docs/control-protocol.md, "attach"): what the daemon writes, the reader
// gives back; a reply missing a key or with one of another type is a bad reply naming it.
TEST(AttachReply, RoundTripsAndRefusesWhatDoesNotFollowTheProtocol) {
  const AttachRecord record{
      .segment_id = 18'446'744'073'709'551'615u, .format_version = 4, .region_bytes = 163'840};

  const auto json = AttachReplyJson(record);
  const auto read = ReadAttachReply(json, "s");

  EXPECT_EQ(
      Dump(json),
      R"({"format_version":4,"ok":true,"region_bytes":163840,"segment_id":"18446744073709551615"})");
  ASSERT_TRUE(read.has_value()) << read.error().message;
  EXPECT_EQ(*read, record);
  for (const char* bad :
       {R"({"ok":true,"format_version":4,"region_bytes":163840})",
        R"({"ok":true,"segment_id":7,"format_version":4,"region_bytes":163840})",
        R"({"ok":true,"segment_id":"7x","format_version":4,"region_bytes":163840})",
        R"({"ok":true,"segment_id":"","format_version":4,"region_bytes":163840})",
        R"({"ok":true,"segment_id":"18446744073709551616","format_version":4,"region_bytes":1})",
        R"({"ok":true,"segment_id":"7","region_bytes":163840})",
        R"({"ok":true,"segment_id":"7","format_version":-4,"region_bytes":163840})",
        R"({"ok":true,"segment_id":"7","format_version":4})"}) {
    const auto sut = ReadAttachReply(nlohmann::json::parse(bad), "the socket");
    ASSERT_FALSE(sut.has_value()) << bad;
    EXPECT_EQ(sut.error().code, vocab::ErrorCode::kBadReply) << bad;
    EXPECT_NE(sut.error().message.find("the socket"), std::string::npos) << sut.error().message;
  }
}

TEST(ControlReply, ARefusalKeepsTheDaemonsCodeAndAnUnknownOneIsRefused) {
  const std::string known = Dump(ErrorReplyJson(vocab::ErrorCode::kPermissionDenied, "no"));

  const auto with_code = ParseReply(known, "s");
  const auto newer = ParseReply(R"({"ok":false,"code":"from_the_future","error":"x"})", "s");
  const auto bare = ParseReply(R"({"ok":false})", "s");

  ASSERT_FALSE(with_code.has_value());
  EXPECT_EQ(with_code.error().code, vocab::ErrorCode::kPermissionDenied);
  EXPECT_EQ(with_code.error().message, "no");
  EXPECT_TRUE(with_code.error().refused);
  ASSERT_FALSE(newer.has_value());
  EXPECT_EQ(newer.error().code, vocab::ErrorCode::kRefused);
  ASSERT_FALSE(bare.has_value());
  EXPECT_EQ(bare.error().message, "no reason given");
}

TEST(ControlReply, ALineThatIsNoReplyIsABadReplyNamingTheSocket) {
  for (const char* line : {"", "hello", "[true]", R"({"state":"serving"})", R"({"ok":"yes"})"}) {
    const auto sut = ParseReply(line, "/run/x/control.sock");

    ASSERT_FALSE(sut.has_value()) << line;
    EXPECT_EQ(sut.error().code, vocab::ErrorCode::kBadReply) << line;
    EXPECT_FALSE(sut.error().refused) << line;
    EXPECT_NE(sut.error().message.find("/run/x/control.sock"), std::string::npos) << line;
  }
}

TEST(ControlReply, AResumeReplyNeedsResumed) {
  const json with = ResumeReplyJson(FullRecord(), true);
  json without = with;
  without.erase("resumed");

  const auto read = ReadResumeReply(with, "s");
  const auto refused = ReadResumeReply(without, "s");

  ASSERT_TRUE(read.has_value()) << read.error().message;
  EXPECT_TRUE(read->resumed);
  EXPECT_EQ(read->status, FullRecord());
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, vocab::ErrorCode::kBadReply);
}

TEST(ControlClient, QueryStatusSendsTheRequestAndReadsTheRecord) {
  TempDir dir("protocol-status");
  ScriptedControlSocket socket(dir.path(), Dump(StatusReplyJson(FullRecord())));

  const auto sut = QueryStatus(dir.path());

  ASSERT_TRUE(sut.has_value()) << sut.error().message;
  EXPECT_EQ(*sut, FullRecord());
  EXPECT_EQ(socket.request(), "{\"command\":\"status\"}\n");
}

TEST(ControlClient, ResumeReturnsTheDaemonsRefusalWithItsCode) {
  TempDir dir("protocol-resume");
  ScriptedControlSocket socket(
      dir.path(), Dump(ErrorReplyJson(vocab::ErrorCode::kTimedOut, "the fill loop did not act")));

  const auto sut = Resume(dir.path());

  ASSERT_FALSE(sut.has_value());
  EXPECT_EQ(sut.error().code, vocab::ErrorCode::kTimedOut);
  EXPECT_TRUE(sut.error().refused);
  EXPECT_EQ(socket.request(), "{\"command\":\"resume\"}\n");
}

TEST(ControlClient, AReplyBreakingTheProtocolIsABadReplyNamingTheKey) {
  TempDir dir("protocol-bad");
  ScriptedControlSocket socket(dir.path(), R"({"ok":true,"state":"serving","machine":"three"})");

  const auto sut = QueryStatus(dir.path());

  ASSERT_FALSE(sut.has_value());
  EXPECT_EQ(sut.error().code, vocab::ErrorCode::kBadReply);
  EXPECT_NE(sut.error().message.find("\"machine\" is \"three\""), std::string::npos)
      << sut.error().message;
}

TEST(ControlClient, NoSocketIsDaemonNotRunningNamingThePath) {
  TempDir dir("protocol-none");

  const auto sut = QueryStatus(dir.path());

  ASSERT_FALSE(sut.has_value());
  EXPECT_EQ(sut.error().code, vocab::ErrorCode::kDaemonNotRunning);
  EXPECT_NE(sut.error().message.find((dir.path() / "control.sock").string()), std::string::npos)
      << sut.error().message;
}

TEST(ControlClient, ASilentDaemonTimesOut) {
  TempDir dir("protocol-silent");
  ScriptedControlSocket socket(dir.path(), std::nullopt);

  const auto sut = QueryStatus(dir.path(), std::chrono::milliseconds(200));

  ASSERT_FALSE(sut.has_value());
  EXPECT_EQ(sut.error().code, vocab::ErrorCode::kTimedOut);
  EXPECT_NE(sut.error().message.find("did not answer"), std::string::npos) << sut.error().message;
}

TEST(ControlClient, ASocketPathTooLongForAfUnixIsAUsageError) {
  const std::filesystem::path long_dir = "/tmp/" + std::string(120, 'd');

  const auto sut = QueryStatus(long_dir);

  ASSERT_FALSE(sut.has_value());
  EXPECT_EQ(sut.error().code, vocab::ErrorCode::kUsage);
  EXPECT_NE(sut.error().message.find("longer than"), std::string::npos) << sut.error().message;
}

// The keys of docs/control-protocol.md's "Status keys" table, `renewal.x` for nested ones.
std::set<std::string> DocumentedKeys() {
  std::ifstream file(::snowflake::testing::SourcePath("docs/control-protocol.md"));
  std::stringstream text;
  text << file.rdbuf();
  const std::string doc = text.str();
  const size_t table = doc.find("## Status keys");
  const size_t end = doc.find("\n## ", table + 1);
  const std::string section = doc.substr(table, end - table);
  std::set<std::string> keys;
  const std::regex row(R"(\n\| `([a-z_.]+)` \|)");
  for (auto it = std::sregex_iterator(section.begin(), section.end(), row);
       it != std::sregex_iterator(); ++it) {
    keys.insert((*it)[1]);
  }
  return keys;
}

std::set<std::string> WrittenKeys() {
  std::set<std::string> keys;
  const json reply = StatusReplyJson(FullRecord());
  for (const auto& [name, value] : reply.items()) {
    keys.insert(name);
    if (name == "renewal" || name == "clock_wait") {
      for (const auto& [inner, unused] : value.items()) keys.insert(name + "." + inner);
    }
  }
  return keys;
}

// attach's client end against replies a daemon would never send (the daemon's own end and
// the descriptor it sends: tests/daemon/control_server_test.cc).
TEST(ControlClient, AnAttachAnswerWithoutADescriptorIsABadReply) {
  TempDir dir("ctl-attach-nofd");
  ScriptedControlSocket socket(
      dir.path(), Dump(AttachReplyJson(AttachRecord{.segment_id = 7,
                                                    .format_version = shm::kVersion,
                                                    .region_bytes = shm::kConsumerRegionSize})));

  const auto sut = Attach(dir.path(), geteuid(), std::chrono::milliseconds(2000));

  EXPECT_EQ(socket.request(), "{\"command\":\"attach\"}\n");
  ASSERT_FALSE(sut.has_value());
  EXPECT_EQ(sut.error().code, vocab::ErrorCode::kBadReply);
  EXPECT_NE(sut.error().message.find("without a descriptor"), std::string::npos)
      << sut.error().message;
}

TEST(ControlClient, AnAttachRefusalKeepsTheDaemonsCode) {
  TempDir dir("ctl-attach-busy");
  ScriptedControlSocket socket(
      dir.path(), Dump(ErrorReplyJson(vocab::ErrorCode::kTooManyConnections, "retry")));

  const auto sut = Attach(dir.path(), geteuid(), std::chrono::milliseconds(2000));

  ASSERT_FALSE(sut.has_value());
  EXPECT_EQ(sut.error().code, vocab::ErrorCode::kTooManyConnections);
  EXPECT_TRUE(sut.error().refused);
}

// SO_PEERCRED: a socket whose listener is not the segment's owner gets no request at all.
TEST(ControlClient, AnAttachToAListenerOfAnotherUserSendsNothing) {
  TempDir dir("ctl-attach-peer");
  ScriptedControlSocket socket(dir.path(), std::nullopt);

  const auto sut = Attach(dir.path(), geteuid() + 1, std::chrono::milliseconds(2000));

  ASSERT_FALSE(sut.has_value());
  EXPECT_EQ(sut.error().code, vocab::ErrorCode::kUntrustedSegment);
  EXPECT_NE(sut.error().message.find("not as the daemon's user"), std::string::npos)
      << sut.error().message;
  EXPECT_EQ(socket.request(), "");
}

TEST(ControlClient, AnAttachGivesUpWhenAskedWhileTheDaemonIsSilent) {
  TempDir dir("ctl-attach-silent");
  ScriptedControlSocket socket(dir.path(), std::nullopt);
  int asked = 0;

  const auto sut = Attach(dir.path(), geteuid(), std::chrono::milliseconds(60'000),
                          [&asked] { return ++asked == 3; });

  ASSERT_FALSE(sut.has_value());
  EXPECT_EQ(sut.error().code, vocab::ErrorCode::kDaemonNotHeartbeating) << sut.error().message;
  EXPECT_EQ(asked, 3);
}

TEST(ControlProtocolDocs, TheStatusKeysTableListsExactlyTheKeysWritten) {
  const std::set<std::string> documented = DocumentedKeys();
  const std::set<std::string> written = WrittenKeys();

  ASSERT_FALSE(documented.empty()) << "no table under \"## Status keys\"";
  for (const std::string& key : written) {
    EXPECT_TRUE(documented.count(key)) << key << " is written but not documented";
  }
  for (const std::string& key : documented) {
    EXPECT_TRUE(written.count(key)) << key << " is documented but not written";
  }
}

}  // namespace
}  // namespace snowflake::protocol
