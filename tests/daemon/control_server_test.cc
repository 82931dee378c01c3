#include "daemon/control/control_server.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "daemon/fronts/daemon_answers.h"
#include "libclient/status/status_report.h"
#include "manual_clock.h"
#include "protocol/descriptor_passing.h"
#include "protocol/vocabulary.h"
#include "snowflake/account_names.h"
#include "snowflake/id_layout.h"
#include "snowflake/segment_layout.h"
#include "snowflake/unique_fd.h"
#include "temp_dir.h"
#include "test_producer.h"

namespace snowflake::daemon {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

// Plays the fill loop's part for resume: handles tickets until stopped.
class FakeLoop {
 public:
  explicit FakeLoop(StatusBoard& board) : board_(board), thread_([this] { Run(); }) {}
  ~FakeLoop() {
    stop_ = true;
    thread_.join();
  }
  int resumes() const { return resumes_; }

 private:
  void Run() {
    uint64_t handled = 0;
    while (!stop_) {
      const uint64_t requested = board_.resume_requested();
      if (requested > handled) {
        ++resumes_;
        DaemonStatus status = board_.Snapshot();
        status.state = "serving";
        board_.Update(status);
        board_.ResumeHandled(requested, true);
        handled = requested;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  StatusBoard& board_;
  std::atomic<bool> stop_{false};
  std::atomic<int> resumes_{0};
  std::thread thread_;
};

int Connect(const std::filesystem::path& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` as is and reads one reply line ("" if the server closed first).
std::string Exchange(int fd, const std::string& request) {
  if (!request.empty() && send(fd, request.data(), request.size(), MSG_NOSIGNAL) < 0) return "";
  std::string reply;
  char c;
  while (recv(fd, &c, 1, 0) == 1) {
    if (c == '\n') return reply;
    reply += c;
  }
  return reply;
}

// Everything a peer receives until the server ends the connection: the reply bytes, and
// each descriptor with the offset of the byte it came with. One byte per recvmsg, so the
// offset is exact: a descriptor arrives with the first byte of the sendmsg that carried it.
struct Received {
  struct Descriptor {
    size_t offset = 0;
    UniqueFd fd;
  };
  std::string bytes;
  std::vector<Descriptor> descriptors;
  // The server ended the connection (EOF, or a reset), rather than the 30 s wait running
  // out with it still open.
  bool closed = false;

  std::vector<std::string> Lines() const {
    std::vector<std::string> lines;
    size_t start = 0;
    for (size_t end; (end = bytes.find('\n', start)) != std::string::npos; start = end + 1) {
      lines.push_back(bytes.substr(start, end - start));
    }
    if (start < bytes.size()) lines.push_back(bytes.substr(start));
    return lines;
  }
};

Received ReceiveUntilClosed(int fd) {
  timeval limit{.tv_sec = 30, .tv_usec = 0};  // a server that keeps it open fails, not hangs
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  Received received;
  for (;;) {
    char byte = 0;
    std::vector<UniqueFd> passed;
    const ssize_t n = protocol::ReceiveWithDescriptors(fd, std::span(&byte, 1), &passed);
    const int err = errno;
    if (n < 0 && err == EINTR) continue;
    if (n > 0) {
      for (UniqueFd& descriptor : passed) {
        received.descriptors.push_back({received.bytes.size(), std::move(descriptor)});
      }
      received.bytes += byte;
      continue;
    }
    // A server that closes with our unread request bytes in its queue resets instead.
    received.closed = n == 0 || err == ECONNRESET;
    return received;
  }
}

void SendAll(int fd, const std::string& bytes) {
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// What an attach reply's region holds, read through its own mapping.
uint64_t RegionSegmentId(int region) {
  void* base = mmap(nullptr, shm::kConsumerRegionSize, PROT_READ, MAP_SHARED, region, 0);
  if (base == MAP_FAILED) {
    ADD_FAILURE() << "cannot map the region: " << std::strerror(errno);
    return 0;
  }
  const uint64_t id = static_cast<const shm::ConsumerRegion*>(base)->segment_id.load();
  munmap(base, shm::kConsumerRegionSize);
  return id;
}

class ControlServerTest : public ::testing::Test {
 protected:
  // The loop's first report, as the daemon publishes it before its control socket starts
  // (Daemon::MakeFillLoop): a board without one answers status with daemon_starting.
  ControlServerTest() { board_.Update(DaemonStatus{}); }
  ControlServerOptions Options() {
    return ControlServerOptions{.socket_path = dir_ / "control.sock"};
  }
  // A real segment in the test's directory, as the daemon's fill loop serves one.
  shm::RingProducer MakeSegment() {
    return snowflake::testing::MakeProducer(
        shm::ProducerOptions{.runtime_dir = dir_.path(),
                             .capacity = 64,
                             .epoch_unix_ms = kDefaultEpochUnixMs,
                             .machine = 1,
                             .mode = 0600,
                             .group = std::nullopt});
  }
  // Attach hands out `producer`'s region, as Daemon::MakeFillLoop sets it up.
  void ServeAttachFrom(const shm::RingProducer& producer) {
    board_.SetAttachSource([&producer] {
      return StatusBoard::AttachPoint{producer.ConsumerDescriptor(), producer.segment_id()};
    });
  }
  // After the test's server and segment are gone: the board outlives both.
  void TearDown() override { board_.SetAttachSource({}); }
  snowflake::testing::TempDir dir_;
  // Starts at a Unix ms no real clock reads during the test: a stamp from the real clock
  // cannot pass for one from this clock.
  snowflake::testing::ManualClock clock_{1'600'000'000'123};
  StatusBoard board_{clock_};
  ControlServerOptions options_ = Options();
};

TEST_F(ControlServerTest, StatusReturnsTheSnapshot) {
  // Arrange
  DaemonStatus status;
  status.state = "serving";
  status.machine = 7;
  status.last_issued_id = 9'007'199'254'740'993ull;  // above 2^53
  board_.Update(status);

  // Act
  const json reply =
      json::parse(HandleControlRequest(R"({"command":"status"})", getuid(), Options(), board_));

  // Assert
  EXPECT_EQ(reply["ok"], true);
  EXPECT_EQ(reply["state"], "serving");
  EXPECT_EQ(reply["machine"], 7);
  EXPECT_EQ(reply["last_issued_id"], "9007199254740993");
}

// A renewal the daemon waits for goes from the daemon's board through the control
// protocol's typed "renewal" object to `snowflakectl status` (JSON and text) unchanged.
TEST_F(ControlServerTest, ARenewalRoundTripsFromTheBoardToTheStatusCommand) {
  // Arrange
  DaemonStatus paused;
  paused.state = "paused";
  paused.reason_code = "register_unreachable";
  paused.renewal = RenewalStatus{
      .store = "register",
      .location = "etcd http://127.0.0.1:1,http://127.0.0.1:2 /p/",
      .since_unix_ms = 1'767'225'600'000,
      .waited_ms = 4'210,
      .last_error = "etcd unreachable at http://127.0.0.1:1,http://127.0.0.1:2: /v3/kv/txn: "
                    "no answer in time: http://127.0.0.1:2: Operation timed out",
      .last_error_store = "register",
      .unanswered = true};
  board_.Update(paused);

  // Act
  const json reply =
      json::parse(HandleControlRequest(R"({"command":"status"})", getuid(), Options(), board_));
  status::StatusReport report;
  report.segment.state = report.segment.health = "paused";
  auto read_back = protocol::StatusFromJson(reply);  // as the status command reads the wire
  ASSERT_TRUE(read_back.has_value()) << read_back.error();
  report.daemon = *read_back;
  const json shown = status::StatusToJson(report);
  const std::string text = status::StatusToText(report);
  DaemonStatus serving;
  serving.state = "serving";
  board_.Update(serving);
  const json serving_reply =
      json::parse(HandleControlRequest(R"({"command":"status"})", getuid(), Options(), board_));

  // Assert
  const json& renewal = reply["renewal"];
  ASSERT_TRUE(renewal.is_object()) << reply.dump();
  EXPECT_EQ(renewal["store"], "register");
  EXPECT_EQ(renewal["location"], "etcd http://127.0.0.1:1,http://127.0.0.1:2 /p/");
  EXPECT_EQ(renewal["since_unix_ms"], 1'767'225'600'000);
  EXPECT_EQ(renewal["waited_ms"], 4'210);
  EXPECT_EQ(renewal["unanswered"], true);
  EXPECT_EQ(renewal["last_error"], paused.renewal->last_error);
  EXPECT_EQ(renewal["last_error_store"], "register");
  EXPECT_EQ(shown["renewal"], renewal);
  EXPECT_THAT(text, HasSubstr("renewal:        waiting on the register etcd "
                              "http://127.0.0.1:1,http://127.0.0.1:2 /p/ for 4s (since "
                              "2026-01-01T00:00:00.000Z); the register has not answered; last "
                              "error (register): etcd unreachable at "));
  EXPECT_TRUE(serving_reply.contains("renewal")) << serving_reply.dump();
  EXPECT_TRUE(serving_reply["renewal"].is_null()) << serving_reply.dump();
}

TEST_F(ControlServerTest, StateSinceKeepsItsTimeUntilTheStateOrReasonChanges) {
  // Arrange
  DaemonStatus status;
  status.state = "serving";
  status.reason_code = "none";

  // Act
  board_.Update(status);
  const int64_t first = board_.Snapshot().state_since_unix_ms;
  clock_.Tick(5);
  status.published_total = 10;  // not a change of state
  board_.Update(status);
  const int64_t unchanged = board_.Snapshot().state_since_unix_ms;
  clock_.Tick(5);
  status.state = "paused";
  status.reason_code = "clock_behind";
  board_.Update(status);
  const int64_t changed = board_.Snapshot().state_since_unix_ms;
  const json reply =
      json::parse(HandleControlRequest(R"({"command":"status"})", getuid(), Options(), board_));

  // Assert: every stamp is the injected clock's reading, not the real clock's.
  EXPECT_EQ(first, 1'600'000'000'123);
  EXPECT_EQ(unchanged, first);
  EXPECT_EQ(changed, 1'600'000'000'133);
  EXPECT_EQ(reply["state_since_unix_ms"], changed);
}

// The fronts' status (HTTP /v1/status, the admin listener) reads now on the clock that
// stamped the board's times, so an age is the difference of two readings of one clock: on
// the test's clock, 5 s after the state changed, whatever the real clock says.
TEST_F(ControlServerTest, TheFrontsStatusAgesAreOnTheBoardsClock) {
  // Arrange
  const shm::RingProducer producer = MakeSegment();
  DaemonStatus status;
  status.state = "serving";
  board_.Update(status);
  clock_.Advance(5'000);

  // Act
  const auto answer = StatusAnswer(dir_.path(), board_);

  // Assert
  ASSERT_TRUE(answer) << answer.error().message;
  EXPECT_EQ((*answer)["state_age_ms"], 5'000) << answer->dump();
}

TEST_F(ControlServerTest, MalformedJsonGetsAnErrorReply) {
  for (const char* line : {"", "{", "status", "[1,2]", R"({"command":5})", R"({"cmd":"status"})"}) {
    const json reply = json::parse(HandleControlRequest(line, getuid(), Options(), board_));

    EXPECT_EQ(reply["ok"], false) << line;
    EXPECT_THAT(reply["error"].get<std::string>(), HasSubstr("malformed request")) << line;
  }
}

TEST_F(ControlServerTest, UnknownCommandGetsAnErrorReply) {
  const json reply =
      json::parse(HandleControlRequest(R"({"command":"reboot"})", getuid(), Options(), board_));

  EXPECT_EQ(reply["ok"], false);
  EXPECT_EQ(reply["error"],
            "unknown command \"reboot\": expected \"status\", \"resume\" or \"attach\"");
}

TEST_F(ControlServerTest, ResumeFromAnotherUidIsRefused) {
  // Arrange: only uid 4242 (and root) may resume; we are neither.
  ControlServerOptions options = Options();
  options.resume_uids = {0, 4242};
  ASSERT_NE(getuid(), 4242u);
  const uid_t peer = getuid() == 0 ? 1000 : getuid();

  // Act
  const json reply =
      json::parse(HandleControlRequest(R"({"command":"resume"})", peer, options, board_));

  // Assert
  EXPECT_EQ(reply["ok"], false);
  // Users are named, their numbers in parentheses (4242 has no name here).
  EXPECT_EQ(reply["error"], "permission denied: " + DescribeUser(peer) +
                                " may not resume; resume needs root or uid 4242");
  EXPECT_NE(DescribeUser(0), "uid 0") << "root has a name: " << DescribeUser(0);
  EXPECT_EQ(DescribeUser(0), "root (uid 0)");
  EXPECT_EQ(board_.resume_requested(), 0u);
}

// Every error reply carries "code", one of the vocabulary's error codes, beside "error" (a
// program decides on the code; a reader of "error" alone still reads the sentence).
void ExpectErrorReply(const std::string& line, vocab::ErrorCode expected, const std::string& what) {
  SCOPED_TRACE(what + ": " + line);
  const json reply = json::parse(line, nullptr, false);
  ASSERT_TRUE(reply.is_object());
  EXPECT_EQ(reply.value("ok", true), false);
  ASSERT_TRUE(reply.contains("code") && reply["code"].is_string());
  const std::string code = reply["code"].get<std::string>();
  EXPECT_TRUE(vocab::ErrorFromName(code).has_value()) << code << " is not a vocabulary code";
  EXPECT_EQ(code, vocab::ErrorName(expected));
  ASSERT_TRUE(reply.contains("error") && reply["error"].is_string());
  EXPECT_FALSE(reply["error"].get<std::string>().empty());
}

TEST_F(ControlServerTest, StatusBeforeTheLoopsFirstReportIsAnsweredDaemonStarting) {
  snowflake::testing::ManualClock clock(1'600'000'000'123);
  StatusBoard unreported(clock);

  const std::string reply =
      HandleControlRequest(R"({"command":"status"})", getuid(), Options(), unreported);
  unreported.Update(DaemonStatus{});
  const json after =
      json::parse(HandleControlRequest(R"({"command":"status"})", getuid(), Options(), unreported));

  ExpectErrorReply(reply, vocab::ErrorCode::kDaemonStarting, "status before the first report");
  EXPECT_EQ(after["ok"], true) << after.dump();
  EXPECT_EQ(after["state"], "starting") << after.dump();
}

TEST_F(ControlServerTest, EveryErrorReplyCarriesItsVocabularyCode) {
  // Arrange: a peer that may not resume, and a resume nobody acts on.
  ControlServerOptions refusing = Options();
  refusing.resume_uids = {0, 4242};
  const uid_t stranger = getuid() == 0 ? 1000 : getuid();
  ControlServerOptions impatient = Options();
  impatient.resume_timeout = std::chrono::milliseconds(10);
  ControlServerOptions one_slot = Options();
  one_slot.max_connections = 1;
  one_slot.reserved_connections = 0;
  ControlServer sut(one_slot, board_);
  ASSERT_TRUE(sut.Start());

  // Act and assert: each refusal the protocol has.
  for (const char* line : {"", "{", "[1,2]", R"({"command":5})"}) {
    ExpectErrorReply(HandleControlRequest(line, getuid(), Options(), board_),
                     vocab::ErrorCode::kMalformedRequest, "malformed");
  }
  ExpectErrorReply(HandleControlRequest(R"({"command":"reboot"})", getuid(), Options(), board_),
                   vocab::ErrorCode::kUnknownCommand, "unknown command");
  ExpectErrorReply(HandleControlRequest(R"({"command":"resume"})", stranger, refusing, board_),
                   vocab::ErrorCode::kPermissionDenied, "resume by a stranger");
  ExpectErrorReply(HandleControlRequest(R"({"command":"resume"})", geteuid(), impatient, board_),
                   vocab::ErrorCode::kTimedOut, "resume without a loop");
  // Over the socket: the one slot held, a second connection is refused; then a request
  // over the size bound on the held one.
  const int held = Connect(dir_ / "control.sock");
  ASSERT_GE(held, 0);
  timeval limit{.tv_sec = 30, .tv_usec = 0};  // a server that never answers fails, not hangs
  setsockopt(held, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  ASSERT_THAT(Exchange(held, "{\"command\":\"status\"}\n"), HasSubstr("\"ok\":true"));
  const int extra = Connect(dir_ / "control.sock");
  ASSERT_GE(extra, 0);
  setsockopt(extra, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  ExpectErrorReply(Exchange(extra, ""), vocab::ErrorCode::kTooManyConnections,
                   "a connection beyond max_connections");
  ExpectErrorReply(Exchange(held, std::string(10'000, 'x')), vocab::ErrorCode::kRequestTooLarge,
                   "a request over 4096 bytes");
  close(extra);
  close(held);
}

TEST_F(ControlServerTest, ResumeWithoutALoopTimesOut) {
  ControlServerOptions options = Options();
  options.resume_timeout = std::chrono::milliseconds(10);

  const json reply =
      json::parse(HandleControlRequest(R"({"command":"resume"})", geteuid(), options, board_));

  EXPECT_EQ(reply["ok"], false);
  EXPECT_THAT(reply["error"].get<std::string>(), HasSubstr("did not act on resume"));
}

TEST_F(ControlServerTest, ServesStatusAndResumeOverTheSocket) {
  // Arrange
  FakeLoop loop(board_);
  ControlServer sut(Options(), board_);
  ASSERT_TRUE(sut.Start());
  const int fd = Connect(dir_ / "control.sock");
  ASSERT_GE(fd, 0);

  // Act: two requests on one connection (SO_PEERCRED: our own uid may resume).
  const json status = json::parse(Exchange(fd, "{\"command\":\"status\"}\n"));
  const json resume = json::parse(Exchange(fd, "{\"command\":\"resume\"}\n"));
  close(fd);

  // Assert
  EXPECT_EQ(status["ok"], true);
  EXPECT_EQ(status["state"], "starting");
  EXPECT_EQ(resume["ok"], true);
  EXPECT_EQ(resume["resumed"], true);
  EXPECT_EQ(resume["state"], "serving");
  EXPECT_EQ(loop.resumes(), 1);
}

TEST_F(ControlServerTest, SocketHasMode0660) {
  ControlServer sut(Options(), board_);

  ASSERT_TRUE(sut.Start());

  struct stat info {};
  ASSERT_EQ(stat((dir_ / "control.sock").c_str(), &info), 0);
  EXPECT_TRUE(S_ISSOCK(info.st_mode));
  EXPECT_EQ(info.st_mode & 0777, 0660u);
}

TEST_F(ControlServerTest, OversizedRequestGetsAnErrorAndTheConnectionIsClosed) {
  // Arrange
  ControlServer sut(Options(), board_);
  ASSERT_TRUE(sut.Start());
  const int fd = Connect(dir_ / "control.sock");
  ASSERT_GE(fd, 0);

  // Act: 10 KB without a newline.
  const json reply = json::parse(Exchange(fd, std::string(10'000, 'x')));
  timeval limit{.tv_sec = 10, .tv_usec = 0};  // a server that keeps it open fails, not hangs
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  char c;
  const ssize_t after = recv(fd, &c, 1, 0);
  const int err = errno;
  close(fd);

  // Assert
  EXPECT_EQ(reply["ok"], false);
  EXPECT_EQ(reply["error"], "request too large (max 4096 bytes)");
  // Closed by the server: EOF, or a reset because our unread excess was discarded.
  EXPECT_TRUE(after == 0 || (after < 0 && err == ECONNRESET)) << after << " " << err;
}

TEST_F(ControlServerTest, GarbageDoesNotStopTheServer) {
  // Arrange
  ControlServer sut(Options(), board_);
  ASSERT_TRUE(sut.Start());
  const int bad = Connect(dir_ / "control.sock");
  ASSERT_GE(bad, 0);
  const std::string garbage("\x00\xff{{\n\n", 6);

  // Act
  const json first = json::parse(Exchange(bad, garbage));
  close(bad);
  const int good = Connect(dir_ / "control.sock");
  const json second = json::parse(Exchange(good, "{\"command\":\"status\"}\n"));
  close(good);

  // Assert
  EXPECT_EQ(first["ok"], false);
  EXPECT_EQ(second["ok"], true);
}

TEST_F(ControlServerTest, LastRequestWithoutNewlineIsAnsweredOnHalfClose) {
  ControlServer sut(Options(), board_);
  ASSERT_TRUE(sut.Start());
  const int fd = Connect(dir_ / "control.sock");
  ASSERT_GE(fd, 0);

  const std::string request = "{\"command\":\"status\"}";
  ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  shutdown(fd, SHUT_WR);
  const json reply = json::parse(Exchange(fd, ""));
  close(fd);

  EXPECT_EQ(reply["ok"], true);
}

TEST_F(ControlServerTest, StopRemovesTheSocket) {
  ControlServer sut(Options(), board_);
  ASSERT_TRUE(sut.Start());
  const int idle = Connect(dir_ / "control.sock");  // a connection open during Stop()

  sut.Stop();

  EXPECT_FALSE(std::filesystem::exists(dir_ / "control.sock"));
  close(idle);
}

TEST_F(ControlServerTest, StartFailsOnAMissingDirectory) {
  ControlServer sut(ControlServerOptions{.socket_path = dir_ / "no" / "control.sock"}, board_);

  auto started = sut.Start();

  ASSERT_FALSE(started);
  EXPECT_THAT(started.error(), HasSubstr("bind"));
}

// ControlSession alone: framing, bounds and closing, without sockets.
TEST_F(ControlServerTest, SessionAnswersEachLineAndKeepsAPartialOne) {
  ControlSession sut(geteuid(), options_, board_);

  sut.OnReceive("{\"command\":\"status\"}\n{\"comm");
  const size_t first = sut.output().size();
  sut.OnReceive("and\":\"status\"}\n");

  EXPECT_GT(first, 0u);
  EXPECT_EQ(std::count(sut.output().begin(), sut.output().end(), '\n'), 2);
  EXPECT_FALSE(sut.mid_request());
  EXPECT_FALSE(sut.closing());
}

TEST_F(ControlServerTest, SessionClosesOnARequestOverTheBoundEvenInPieces) {
  ControlSession sut(geteuid(), options_, board_);

  for (int i = 0; i < 5; ++i) sut.OnReceive(std::string(1000, 'x'));
  sut.OnReceive("{\"command\":\"status\"}\n");  // ignored: the session is closing

  EXPECT_TRUE(sut.closing());
  EXPECT_EQ(sut.output(),
            "{\"code\":\"request_too_large\",\"error\":\"request too large (max 4096 bytes)\","
            "\"ok\":false}\n");
}

TEST_F(ControlServerTest, StatusWithANonUtf8ServiceNameStillSerialises) {
  DaemonStatus status;
  status.services["bad\xff\xfe"] = 3;
  board_.Update(status);

  const json reply =
      json::parse(HandleControlRequest(R"({"command":"status"})", getuid(), Options(), board_));

  EXPECT_EQ(reply["ok"], true);
  EXPECT_EQ(reply["services"].size(), 1u);
}

TEST_F(ControlServerTest, PrivilegedPeersAreRootTheDaemonUserAndResumeUids) {
  ControlServerOptions options = Options();
  options.resume_uids = {4242};

  EXPECT_TRUE(IsPrivilegedPeer(0, options));
  EXPECT_TRUE(IsPrivilegedPeer(geteuid(), options));
  EXPECT_TRUE(IsPrivilegedPeer(4242, options));
  EXPECT_FALSE(IsPrivilegedPeer(4243, options));
}

TEST_F(ControlServerTest, IdleConnectionIsClosedAfterTheIdleTimeout) {
  ControlServerOptions options = Options();
  options.idle_timeout = std::chrono::milliseconds(200);
  ControlServer sut(options, board_);
  ASSERT_TRUE(sut.Start());
  const int fd = Connect(dir_ / "control.sock");
  ASSERT_GE(fd, 0);

  timeval limit{.tv_sec = 30, .tv_usec = 0};  // a server that keeps it open fails, not hangs
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  char c;
  const ssize_t n = recv(fd, &c, 1, 0);
  close(fd);

  EXPECT_EQ(n, 0) << "the server should close an idle connection (errno " << errno << ")";
}

TEST_F(ControlServerTest, SlowReaderIsCutOffAndDoesNotStallOthers) {
  // Arrange: a peer pipelines requests and never reads the replies.
  ControlServerOptions options = Options();
  options.write_timeout = std::chrono::milliseconds(300);
  ControlServer sut(options, board_);
  ASSERT_TRUE(sut.Start());
  const int slow = Connect(dir_ / "control.sock");
  ASSERT_GE(slow, 0);
  const std::string request = "{\"command\":\"status\"}\n";
  std::string burst;
  for (int i = 0; i < 190; ++i) burst += request;  // < 4096 bytes: whole lines per send
  size_t sent_bytes = 0;
  bool blocked = false;
  while (sent_bytes < 20'000 * request.size()) {
    const ssize_t n = send(slow, burst.data(), burst.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) {
      // Both buffers are full: the server stopped reading us. Give it a moment to read
      // what it can, then see whether it still blocks.
      if (blocked) break;
      blocked = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    blocked = false;
    sent_bytes += static_cast<size_t>(n);
  }
  const int sent = static_cast<int>(sent_bytes / request.size());
  // Act: another peer asks for status meanwhile.
  const int other = Connect(dir_ / "control.sock");
  ASSERT_GE(other, 0);
  timeval limit{.tv_sec = 30, .tv_usec = 0};
  setsockopt(other, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  const std::string reply = Exchange(other, request);
  close(other);
  // Then the slow peer reads: it gets fewer replies than requests and then EOF.
  setsockopt(slow, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  // Wait (without reading, which would let it progress) until the server hangs up.
  pollfd hangup{slow, POLLRDHUP, 0};
  const int hung_up = poll(&hangup, 1, 30'000);
  int replies = 0;
  char buf[65536];
  ssize_t n;
  while ((n = recv(slow, buf, sizeof(buf), 0)) > 0) {
    replies += static_cast<int>(std::count(buf, buf + n, '\n'));
  }
  close(slow);

  // Assert
  ASSERT_FALSE(reply.empty());
  EXPECT_EQ(json::parse(reply)["ok"], true);
  EXPECT_EQ(hung_up, 1) << "the server kept a peer that reads nothing for 30 s";
  EXPECT_LT(sent, 20'000) << "the server never stopped reading a peer that does not read";
  EXPECT_LT(replies, sent) << "the server answered everything: it was never cut off";
}

// A group member (uid/gid nobody) holds every connection it can get; root still gets in.
TEST_F(ControlServerTest, GroupMemberHoldingAllSlotsCannotLockOutTheOperator) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another uid";
  // Arrange
  constexpr uid_t kNobody = 65534;
  constexpr gid_t kNogroup = 65534;
  ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);
  ControlServerOptions options = Options();
  options.group = kNogroup;
  options.idle_timeout = std::chrono::minutes(5);  // the hostile connections stay
  // One member may hold every unprivileged slot here: this is the reserved slots' test
  // (OneUserHoldsAtMostItsShareOfTheSlots is the per-user limit's).
  options.max_connections_per_user = options.max_connections;
  FakeLoop loop(board_);
  ControlServer sut(options, board_);
  ASSERT_TRUE(sut.Start());
  int report[2];
  int release[2];
  ASSERT_EQ(pipe(report), 0);
  ASSERT_EQ(pipe(release), 0);
  sockaddr_un addr{};  // built before fork: the child must not allocate (the parent has threads)
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, (dir_ / "control.sock").c_str(), sizeof(addr.sun_path) - 1);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The hostile member: system calls only (the parent has threads).
    close(release[1]);
    close(report[0]);
    if (setgroups(0, nullptr) != 0 || setgid(kNogroup) != 0 || setuid(kNobody) != 0) _exit(2);
    int accepted = 0, refused = 0;
    for (int i = 0; i < 64; ++i) {
      const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
      if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) continue;
      const char request[] = "{\"command\":\"status\"}\n";
      // A refused connection may be closed before the request arrives (EPIPE): its
      // refusal is still queued on this end, so read it either way.
      [[maybe_unused]] const ssize_t sent = send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL);
      char buf[8192];
      const ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
      buf[n > 0 ? n : 0] = '\0';
      if (std::strstr(buf, "\"ok\":true") != nullptr) ++accepted;
      if (std::strstr(buf, "\"code\":\"too_many_connections\"") != nullptr) ++refused;
    }
    char line[64];
    const int len = std::snprintf(line, sizeof(line), "%d %d\n", accepted, refused);
    if (write(report[1], line, static_cast<size_t>(len)) != len) _exit(3);
    char c;
    [[maybe_unused]] const ssize_t r = read(release[0], &c, 1);  // hold everything open
    _exit(0);
  }
  close(report[1]);
  close(release[0]);
  char line[64] = {};
  const ssize_t got = read(report[0], line, sizeof(line) - 1);
  int accepted = -1, refused = -1;
  if (got > 0) std::sscanf(line, "%d %d", &accepted, &refused);

  // Act: the operator (root) asks for status and resume while all of that is held.
  const int fd = Connect(dir_ / "control.sock");
  const std::string status = fd >= 0 ? Exchange(fd, "{\"command\":\"status\"}\n") : "";
  const std::string resume = fd >= 0 ? Exchange(fd, "{\"command\":\"resume\"}\n") : "";
  if (fd >= 0) close(fd);
  close(release[1]);
  int wstatus = 0;
  waitpid(child, &wstatus, 0);
  close(report[0]);

  // Assert
  EXPECT_EQ(accepted, 60);  // 64 slots, 4 reserved
  EXPECT_EQ(refused, 4);
  ASSERT_FALSE(status.empty());
  EXPECT_EQ(json::parse(status)["ok"], true);
  ASSERT_FALSE(resume.empty());
  EXPECT_EQ(json::parse(resume)["resumed"], true);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << wstatus;
}

// One member of the clients' group (nobody) gets at most max_connections_per_user (16)
// slots, so another member (uid 65533) still gets one, for its attach: without the limit
// nobody would hold 60 of the 64 and refuse every other member.
TEST_F(ControlServerTest, OneUserHoldsAtMostItsShareOfTheSlots) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as other uids";
  // Arrange
  constexpr uid_t kNobody = 65534;
  constexpr uid_t kOtherMember = 65533;
  constexpr gid_t kNogroup = 65534;
  ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);
  ControlServerOptions options = Options();
  options.group = kNogroup;
  options.idle_timeout = std::chrono::minutes(5);  // the hostile connections stay
  ASSERT_EQ(options.max_connections_per_user, 16u);
  FakeLoop loop(board_);
  ControlServer sut(options, board_);
  ASSERT_TRUE(sut.Start());
  sockaddr_un addr{};  // built before fork: the children must not allocate
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, (dir_ / "control.sock").c_str(), sizeof(addr.sun_path) - 1);
  // Each child connects `count` times as `uid`, sends status on each and reports how many
  // were answered and how many refused, then holds them until released.
  struct Member {
    pid_t pid = -1;
    int report[2] = {-1, -1};
    int release[2] = {-1, -1};
  };
  const auto start = [&](uid_t uid, int count) {
    Member m;
    if (pipe(m.report) != 0 || pipe(m.release) != 0) return m;
    m.pid = fork();
    if (m.pid == 0) {
      close(m.release[1]);
      close(m.report[0]);
      if (setgroups(0, nullptr) != 0 || setgid(kNogroup) != 0 || setuid(uid) != 0) _exit(2);
      int accepted = 0, refused = 0;
      for (int i = 0; i < count; ++i) {
        const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) continue;
        const char request[] = "{\"command\":\"status\"}\n";
        [[maybe_unused]] const ssize_t sent = send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL);
        char buf[8192];
        const ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        if (std::strstr(buf, "\"ok\":true") != nullptr) ++accepted;
        if (std::strstr(buf, "\"code\":\"too_many_connections\"") != nullptr) ++refused;
      }
      char line[64];
      const int len = std::snprintf(line, sizeof(line), "%d %d\n", accepted, refused);
      if (write(m.report[1], line, static_cast<size_t>(len)) != len) _exit(3);
      char c;
      [[maybe_unused]] const ssize_t r = read(m.release[0], &c, 1);  // hold everything open
      _exit(0);
    }
    close(m.report[1]);
    close(m.release[0]);
    return m;
  };
  const auto counts = [](Member& m) {
    char line[64] = {};
    int accepted = -1, refused = -1;
    if (read(m.report[0], line, sizeof(line) - 1) > 0)
      std::sscanf(line, "%d %d", &accepted, &refused);
    return std::pair{accepted, refused};
  };

  // Act: nobody asks for 64 and holds what it got; then the other member asks for one.
  Member hostile = start(kNobody, 64);
  ASSERT_GT(hostile.pid, 0);
  const auto [hostile_accepted, hostile_refused] = counts(hostile);
  Member other = start(kOtherMember, 1);
  ASSERT_GT(other.pid, 0);
  const auto [other_accepted, other_refused] = counts(other);
  // Both released before either is waited for: the second child inherited the first's
  // release pipe, so the first sees its end only once both let go.
  for (Member* m : {&hostile, &other}) close(m->release[1]);
  for (Member* m : {&hostile, &other}) {
    int wstatus = 0;
    waitpid(m->pid, &wstatus, 0);
    close(m->report[0]);
    EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << wstatus;
  }

  // Assert
  EXPECT_EQ(hostile_accepted, 16);
  EXPECT_EQ(hostile_refused, 48);
  EXPECT_EQ(other_accepted, 1);
  EXPECT_EQ(other_refused, 0);
}

// --- attach: the consumer region's descriptor over the socket (SCM_RIGHTS).

TEST_F(ControlServerTest,
       AnAttachIsAnsweredWithASealedMemfdOfTheRegionWhoseSegmentIdMatchesTheReply) {
  // Arrange
  shm::RingProducer producer = MakeSegment();
  ServeAttachFrom(producer);
  ControlServer sut(Options(), board_);
  ASSERT_TRUE(sut.Start());
  const int fd = Connect(dir_ / "control.sock");
  ASSERT_GE(fd, 0);

  // Act
  SendAll(fd, "{\"command\":\"attach\"}\n");
  Received received = ReceiveUntilClosed(fd);
  close(fd);

  // Assert: the reply (the wire's literal numbers, not the constants they should equal).
  const std::vector<std::string> lines = received.Lines();
  ASSERT_EQ(lines.size(), 1u) << received.bytes;
  const json reply = json::parse(lines[0]);
  EXPECT_EQ(reply["ok"], true) << lines[0];
  EXPECT_EQ(reply["format_version"], 5) << lines[0];
  EXPECT_EQ(reply["region_bytes"], 163840) << lines[0];
  ASSERT_TRUE(reply["segment_id"].is_string()) << lines[0];
  const uint64_t reply_id = std::stoull(reply["segment_id"].get<std::string>());
  EXPECT_EQ(reply_id, producer.segment_id());
  // The descriptor: with the reply's first byte, a memfd (no name in any directory) of
  // exactly the region's size, sealed against every resize and against new seals.
  ASSERT_EQ(received.descriptors.size(), 1u);
  EXPECT_EQ(received.descriptors[0].offset, 0u);
  const int region = received.descriptors[0].fd.get();
  struct stat info {};
  ASSERT_EQ(fstat(region, &info), 0);
  EXPECT_TRUE(S_ISREG(info.st_mode));
  EXPECT_EQ(info.st_size, 163840);
  // F_SEAL_EXEC (0x20, Linux 6.3; glibc may not name it) comes with MFD_NOEXEC_SEAL where
  // the kernel has it: it only forbids making the region executable.
  constexpr int kExecSeal = 0x20;
  EXPECT_EQ(fcntl(region, F_GET_SEALS) & ~kExecSeal, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW);
  const std::string proc_link = "/proc/self/fd/" + std::to_string(region);
  char target[256] = {};
  ASSERT_GT(readlink(proc_link.c_str(), target, sizeof(target) - 1), 0);
  EXPECT_THAT(std::string(target), ::testing::StartsWith("/memfd:snowflake-consumer"));
  EXPECT_EQ(fcntl(region, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC) << "an exec would inherit it";
  EXPECT_EQ(RegionSegmentId(region), reply_id);
  EXPECT_TRUE(received.closed) << "the connection stayed open after attach";
}

TEST_F(ControlServerTest,
       AnAttachBeforeTheFillLoopExistsIsAnsweredDaemonStartingWithoutADescriptor) {
  // Arrange: no attach source, as before Daemon::MakeFillLoop.
  ControlServer sut(Options(), board_);
  ASSERT_TRUE(sut.Start());
  const int fd = Connect(dir_ / "control.sock");
  ASSERT_GE(fd, 0);

  // Act
  SendAll(fd, "{\"command\":\"attach\"}\n");
  Received received = ReceiveUntilClosed(fd);
  close(fd);

  // Assert
  const std::vector<std::string> lines = received.Lines();
  ASSERT_EQ(lines.size(), 1u) << received.bytes;
  ExpectErrorReply(lines[0], vocab::ErrorCode::kDaemonStarting, "attach without a segment");
  EXPECT_TRUE(received.descriptors.empty());
  EXPECT_TRUE(received.closed) << "the connection stayed open after a refused attach";
}

// The slot is freed for the next of a storm of starting processes: a request pipelined
// after the attach is never answered.
TEST_F(ControlServerTest, AnAttachEndsTheConnectionSoARequestAfterItIsNotAnswered) {
  // Arrange
  shm::RingProducer producer = MakeSegment();
  ServeAttachFrom(producer);
  ControlServer sut(Options(), board_);
  ASSERT_TRUE(sut.Start());
  const int fd = Connect(dir_ / "control.sock");
  ASSERT_GE(fd, 0);

  // Act: both requests in one write.
  SendAll(fd, "{\"command\":\"attach\"}\n{\"command\":\"status\"}\n");
  Received received = ReceiveUntilClosed(fd);
  close(fd);

  // Assert
  const std::vector<std::string> lines = received.Lines();
  ASSERT_EQ(lines.size(), 1u) << received.bytes;
  EXPECT_TRUE(json::parse(lines[0]).contains("segment_id")) << lines[0];
  EXPECT_EQ(received.descriptors.size(), 1u);
  EXPECT_TRUE(received.closed) << "the connection stayed open after attach";
}

TEST_F(ControlServerTest,
       StatusThenAttachOnOneConnectionGetsBothRepliesAndTheDescriptorWithTheSecond) {
  // Arrange
  shm::RingProducer producer = MakeSegment();
  ServeAttachFrom(producer);
  ControlServer sut(Options(), board_);
  ASSERT_TRUE(sut.Start());
  const int fd = Connect(dir_ / "control.sock");
  ASSERT_GE(fd, 0);

  // Act: in one write, so both replies are queued together and the server must split its
  // sends where the attach reply begins.
  SendAll(fd, "{\"command\":\"status\"}\n{\"command\":\"attach\"}\n");
  Received received = ReceiveUntilClosed(fd);
  close(fd);

  // Assert
  const std::vector<std::string> lines = received.Lines();
  ASSERT_EQ(lines.size(), 2u) << received.bytes;
  const json status = json::parse(lines[0]);
  const json attach = json::parse(lines[1]);
  EXPECT_EQ(status["ok"], true) << lines[0];
  EXPECT_TRUE(status.contains("state")) << lines[0];
  EXPECT_FALSE(status.contains("segment_id")) << lines[0];
  EXPECT_EQ(attach["ok"], true) << lines[1];
  ASSERT_TRUE(attach["segment_id"].is_string()) << lines[1];
  ASSERT_EQ(received.descriptors.size(), 1u);
  EXPECT_EQ(received.descriptors[0].offset, lines[0].size() + 1)
      << "the descriptor did not come with the attach reply's first byte";
  EXPECT_EQ(RegionSegmentId(received.descriptors[0].fd.get()),
            std::stoull(attach["segment_id"].get<std::string>()));
  EXPECT_TRUE(received.closed) << "the connection stayed open after attach";
}

// ControlSession alone: the descriptor is queued at its reply's offset in the output.
TEST_F(ControlServerTest, SessionQueuesTheRegionAtItsRepliesOffsetAndStopsReadingAfterAttach) {
  shm::RingProducer producer = MakeSegment();
  ServeAttachFrom(producer);
  ControlSession sut(geteuid(), options_, board_);

  sut.OnReceive("{\"command\":\"status\"}\n{\"command\":\"attach\"}\n{\"command\":\"status\"}\n");

  const std::string& output = sut.output();
  EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 2) << output;
  ASSERT_EQ(sut.descriptors().size(), 1u);
  EXPECT_EQ(sut.descriptors().front().offset, output.find('\n') + 1);
  EXPECT_TRUE(sut.descriptors().front().fd.valid());
  EXPECT_TRUE(sut.closing());
}

}  // namespace
}  // namespace snowflake::daemon
