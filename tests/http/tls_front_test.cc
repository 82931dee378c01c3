// The HTTP front over TLS and libsnowflake's https:// remotes, with real certificates made
// by the test (make_test_certs.sh, openssl), real snowflaked processes and real TLS on
// 127.0.0.1 (docs/http.md, "TLS"; docs/security.md, the network rows).
//
// Properties:
//   - a TLS front answers TLS 1.2 and 1.3 with its certificate, and nothing else (plain
//     HTTP on its port gets no answer, and is counted);
//   - a reply larger than a TLS record (16 KiB) arrives whole, its body after its header,
//     request after request on a kept connection and for pipelined requests;
//   - with a client CA, only callers with a certificate it signed are answered; the
//     others fail the handshake, counted under reason="client_certificate";
//   - a client refuses a front whose certificate is expired, not yet valid or signed by
//     another CA, naming the remote and the reason, and never asks it over plain HTTP;
//   - a replaced certificate and key are served to new connections without a restart and
//     without a failed request, while connections already open keep going; a bad new pair
//     is refused with a log line naming the file, and the old one keeps serving;
//   - a private key any user can read is refused at start and by --check-config, naming
//     the file and the fix;
//   - a replaced CRL (renamed over the old one, or swapped in a Secret's ..data) refuses
//     the certificates it revokes to new handshakes, the others still served; a CRL past
//     its nextUpdate is refused at start and at a reload (the old one kept), naming it;
//   - a cipher, suite or group name OpenSSL does not know is refused even beside known ones;
//   - with tls_session_tickets a client resumes with a ticket, also after a certificate
//     rotation; without, no ticket is issued; a new client CA or CRL ends every ticket.
//   - refusals at accept, refused handshakes, throttled takes and rotations are audit
//     lines at info naming the peer, the certificate's identity and serial and the reason,
//     and a flood of one kind is at most the rate limit's lines and the count of the rest.
// (A byte changed on the path fails OpenSSL's record MAC whatever this project does, so no
// test of ours could show it; what is ours to get right is verification and no plain
// fallback, above.)

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon_harness.h"
#include "front_daemon.h"
#include "http_probe.h"
#include "snowflake/client.h"
#include "snowflake/id_layout.h"
#include "temp_dir.h"
#include "test_paths.h"
#include "tls_test_client.h"
#include "wait_until.h"

namespace snowflake::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

uint32_t MachineOf(uint64_t id) { return IdLayout().Decode(id)->machine; }

// The certificates, made once for every test of this program.
class Certificates {
 public:
  static const Certificates& Get() {
    static const Certificates* made = new Certificates();
    return *made;
  }
  fs::path operator()(const std::string& name) const { return dir_ / name; }
  const std::string& error() const { return error_; }

 private:
  Certificates() {
    // About 40 openssl runs: seconds, or far more on a loaded host (a bound, not a
    // timed assertion).
    RunOptions options;
    options.timeout = std::chrono::minutes(5);
    const RunResult made = RunCommand(
        {::snowflake::testing::SourcePath("tests/http/make_test_certs.sh"), dir_.path().string()},
        options);
    if (!made.status.ExitedWith(0)) {
      error_ = "make_test_certs.sh " + made.status.ToString() +
               (made.timed_out ? " (timed out)" : "") + ": " + made.err + made.out;
    }
  }
  TempDir dir_{"sf-certs"};
  std::string error_;
};

TlsClientFiles Trusting(const fs::path& ca, const fs::path& cert = {}, const fs::path& key = {}) {
  return TlsClientFiles{ca, cert, key};
}

// Whether a reply says the daemon cannot give IDs right now: a 503 (the daemon pausing on a
// slow reservation fsync, on a loaded host) or a 429 ring_empty (its ring stayed empty for
// the front's wait). An answer over TLS, not a TLS failure.
bool NotServedNow(long status, const std::string& body) {
  return status == 503 || (status == 429 && body.find("\"ring_empty\"") != std::string::npos);
}

// A GET that the daemon could not serve right now (NotServedNow) is asked again, 100 ms
// apart for up to 30 s.
HttpsReply GetServed(HttpsClient& client, uint16_t port, std::string_view target) {
  std::string subject;  // of the connection, seen on its first reply
  HttpsReply reply = testing::AttemptUntil(
      [&] {
        HttpsReply answer = client.Get(port, target);
        if (subject.empty()) subject = answer.subject;
        return answer;
      },
      [](const HttpsReply& answer) {
        return answer.curl_code != 0 || !NotServedNow(answer.status, answer.body);
      },
      30s, 100ms);
  if (reply.subject.empty()) reply.subject = subject;
  return reply;
}

std::string TlsToml(const fs::path& cert, const fs::path& key, const fs::path& client_ca = {}) {
  std::string toml =
      "tls_cert_file = \"" + cert.string() + "\"\ntls_key_file = \"" + key.string() + "\"\n";
  if (!client_ca.empty()) toml += "tls_client_ca_file = \"" + client_ca.string() + "\"\n";
  return toml;
}

// A Client with no local daemon (an empty runtime directory) and these remotes.
tl::expected<Client, Error> RemotesOnlyClient(const TempDir& empty_runtime,
                                              std::vector<std::string> remotes,
                                              const TlsClientFiles& files) {
  ClientOptions options = DaemonHarness::ClientOptionsFor(empty_runtime.path());
  options.remotes = std::move(remotes);
  options.remotes_from_environment = false;
  options.remote_attempt_timeout = 3000ms;
  options.remote_deadline = 8000ms;
  options.remote_max_age = 5000ms;
  options.remotes_ca_file = files.ca;
  options.remotes_cert_file = files.cert;
  options.remotes_key_file = files.key;
  return Client::Open("tls", options);
}
// The serial of the certificate in `pem`, as `openssl x509 -serial` prints it ("" if not).
std::string SerialOf(const fs::path& pem);

class TlsFront : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(certs_.error(), ""); }
  const Certificates& certs_ = Certificates::Get();
};

TEST_F(TlsFront, AnswersTls12AndTls13WithItsCertificate) {
  FrontDaemon front("tls-basic", 11, TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  for (const TlsVersions versions : {TlsVersions::kOnly12, TlsVersions::kOnly13}) {
    HttpsClient sut(Trusting(certs_("ca.pem")), versions);
    const HttpsReply reply = GetServed(sut, front.port, "/v1/id?service=tls");
    ASSERT_TRUE(reply.ok()) << reply.error << " " << reply.status << " " << reply.body;
    EXPECT_EQ(IdsOf(reply.body).size(), 1u) << reply.body;
    EXPECT_NE(reply.subject.find("snowflaked one"), std::string::npos) << reply.subject;
  }
}

TEST_F(TlsFront, PlainHttpOnTheTlsPortGetsNoAnswerAndIsCounted) {
  FrontDaemon front("tls-plain", 12, TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  HttpProbe probe(front.port);
  ASSERT_TRUE(probe.connected());
  const HttpReply reply = probe.Exchange(Get("/v1/id?service=tls"));
  EXPECT_EQ(reply.status, 0) << "a plain request on the TLS port was answered: " << reply.body;

  HttpsClient scraper(Trusting(certs_("ca.pem")));
  ASSERT_TRUE(WaitUntil(
      [&] {
        const HttpsReply metrics = scraper.Get(front.port, "/metrics");
        return SampleValue(metrics.body,
                           "snowflake_http_tls_handshake_failures_total{reason=\"other\"}") >= 1;
      },
      20s, "the failed handshake to be counted"));
}

// A reply to a batch of `count`, whole: status 200 with `count` strictly increasing IDs, or
// one the daemon could not serve right now (NotServedNow: still a whole reply). A reply
// whose body never came reads as status 0.
void ExpectWholeBatch(const HttpReply& reply, size_t count, bool text, const std::string& what) {
  if (NotServedNow(reply.status, reply.body)) return;
  ASSERT_EQ(reply.status, 200) << what << ": no whole reply within the probe's timeout";
  EXPECT_EQ(reply.Header("content-length"), std::to_string(reply.body.size())) << what;
  const std::vector<uint64_t> ids = text ? LinesOf(reply.body) : IdsOf(reply.body);
  ASSERT_EQ(ids.size(), count) << what << ": " << reply.body.substr(0, 200);
  for (size_t i = 1; i < ids.size(); ++i) ASSERT_LT(ids[i - 1], ids[i]) << what;
}

// The request libsnowflake's and the Go binding's remotes send for a batch.
std::string BatchGet(size_t count, bool text, std::string_view extra = "") {
  return Get("/v1/ids?service=tls&count=" + std::to_string(count),
             std::string(text ? "Accept: text/plain\r\n" : "") + std::string(extra));
}

// A batch reply is up to ~90 KB: more than a TLS record, so its body goes out in more
// than one record and after the header's. Each must arrive whole, on a connection kept
// across requests (as Go's and libcurl's clients keep it) and for requests pipelined on
// one connection. Reads are bounded by 5 s, so a body that never comes fails the test.
TEST_F(TlsFront, RepliesLargerThanATlsRecordArriveWholeOnAKeptAndAPipelinedConnection) {
  FrontDaemon front("tls-large", 35, TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  HttpsClient warm(Trusting(certs_("ca.pem")));
  const HttpsReply first = GetServed(warm, front.port, "/v1/id?service=tls");
  ASSERT_TRUE(first.ok()) << first.error << " " << first.status << " " << first.body;

  // Small and large, JSON and text/plain, one after another on one connection: the sizes
  // either side of a record (16 KiB: ~780 JSON IDs, ~860 lines), and the largest batch.
  const std::vector<size_t> counts = {1, 700, 900, 4096, 2, 4096, 1000, 4096};
  HttpProbe kept(front.port, certs_("ca.pem"), 5s);
  ASSERT_TRUE(kept.connected());
  for (size_t i = 0; i < counts.size() * 2; ++i) {
    const size_t count = counts[i % counts.size()];
    const bool text = i >= counts.size();
    ASSERT_NO_FATAL_FAILURE(ExpectWholeBatch(kept.Exchange(BatchGet(count, text)), count, text,
                                             "kept connection, request " + std::to_string(i) +
                                                 ", count " + std::to_string(count) +
                                                 (text ? " text/plain" : " JSON")));
  }

  // Pipelined: four requests in one write, the last closing the connection.
  HttpProbe pipelined(front.port, certs_("ca.pem"), 5s);
  ASSERT_TRUE(pipelined.connected());
  ASSERT_TRUE(pipelined.Send(BatchGet(4096, false) + BatchGet(3, true) + BatchGet(4096, true) +
                             BatchGet(2000, false, "Connection: close\r\n")));
  const std::vector<std::pair<size_t, bool>> asked = {
      {4096, false}, {3, true}, {4096, true}, {2000, false}};
  for (size_t i = 0; i < asked.size(); ++i) {
    ASSERT_NO_FATAL_FAILURE(ExpectWholeBatch(pipelined.Read(), asked[i].first, asked[i].second,
                                             "pipelined request " + std::to_string(i)));
  }
  EXPECT_TRUE(pipelined.ClosedByPeer(5s)) << "Connection: close left the connection open";

  // libcurl on a kept connection, as a remote's client reads a batch.
  for (int i = 0; i < 3; ++i) {
    const HttpsReply batch = GetServed(warm, front.port, "/v1/ids?service=tls&count=4096");
    ASSERT_TRUE(batch.ok()) << "libcurl, batch " << i << ": " << batch.error << " " << batch.status;
    EXPECT_EQ(IdsOf(batch.body).size(), 4096u);
    EXPECT_EQ(batch.new_connections, 0) << "libcurl, batch " << i << " opened a connection";
  }
}

TEST_F(TlsFront, RefusesTls11) {
  FrontDaemon front("tls-old", 13, TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  // The client side allows TLS 1.1 (security level 0), so the refusal is the front's.
  const RunResult old = RunCommand(
      {"openssl", "s_client", "-connect", front.address(), "-tls1_1", "-cipher",
       "DEFAULT:@SECLEVEL=0", "-CAfile", certs_("ca.pem").string()},
      RunOptions{.env = {}, .stdin_text = "", .timeout = 20s, .working_dir = std::nullopt});
  EXPECT_FALSE(old.status.ExitedWith(0)) << old.out;
  EXPECT_NE((old.out + old.err).find("protocol version"), std::string::npos) << old.out << old.err;
  const RunResult current = RunCommand(
      {"openssl", "s_client", "-connect", front.address(), "-tls1_2", "-CAfile",
       certs_("ca.pem").string(), "-verify_return_error"},
      RunOptions{.env = {}, .stdin_text = "", .timeout = 20s, .working_dir = std::nullopt});
  EXPECT_TRUE(current.status.ExitedWith(0)) << current.out << current.err;
}

// `refused` of the front in `snowflakectl status --json` (readable without the network).
uint64_t RefusedInStatus(const FrontDaemon& front) {
  const RunResult cli = RunCommand({kSnowflakectlPath, "status", "--json", "--runtime-dir",
                                    front.harness->runtime_dir().string()});
  if (!cli.status.ExitedWith(0)) return 0;
  const auto doc = nlohmann::json::parse(cli.out, nullptr, false);
  if (!doc.is_object() || !doc["daemon"].is_object() || doc["daemon"]["fronts"].empty()) return 0;
  return doc["daemon"]["fronts"][0]["refused"].get<uint64_t>();
}

// Nothing costly before the caller is known: an address outside `allow` is closed as it
// is accepted, before a handshake (about 1.3 ms of CPU) or a read; it gets no byte back.
TEST_F(TlsFront, AnAddressOutsideAllowIsClosedAtAcceptWithoutATlsByte) {
  FrontDaemon tls(
      "tls-allow", 25,
      "allow = [\"127.0.0.2\"]\n" + TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  ASSERT_NO_FATAL_FAILURE(tls.Start());
  const HelloAnswer refused = SendClientHello(tls.port, 10s);
  ASSERT_TRUE(refused.connected);
  EXPECT_EQ(refused.bytes, 0u) << "a refused address was answered (a handshake before allow)";
  EXPECT_TRUE(refused.closed) << "a refused address's connection stayed open";
  // An address inside `allow` is answered (127.0.0.2 is loopback too).
  const HelloAnswer admitted = SendClientHello(tls.port, 2s, "127.0.0.2");
  ASSERT_TRUE(admitted.connected);
  EXPECT_GT(admitted.bytes, 0u) << "an allowed address got no ServerHello";
  EXPECT_TRUE(WaitUntil([&] { return RefusedInStatus(tls) >= 1; }, 20s, "the refusal counted"));

  FrontDaemon plain("plain-allow", 26, "allow = [\"127.0.0.2\"]\n");
  ASSERT_NO_FATAL_FAILURE(plain.Start());
  HttpProbe probe(plain.port);
  ASSERT_TRUE(probe.connected());
  probe.Send(Get("/v1/id?service=tls"));
  const auto [bytes, closed] = probe.ReadUntilClosed(10s);
  EXPECT_EQ(bytes, 0u) << "a refused address was answered over plain HTTP";
  EXPECT_TRUE(closed);
  EXPECT_EQ(FetchFrom("127.0.0.2", plain.port, "/healthz").status, 200);
}

// The admin listener speaks plain HTTP beside a TLS front (docs/http.md, "The admin
// listener"): a scraper needs no certificate there, and the TLS ports keep serving IDs
// and no metrics.
TEST_F(TlsFront, TheAdminListenerSpeaksPlainHttpBesideATlsFront) {
  const uint16_t admin = FreePort();
  std::optional<FrontDaemon> front;
  do {
    front.emplace("tls-admin", 70,
                  TlsToml(certs_("server.pem"), certs_("server-key.pem")) +
                      "admin_listen = [\"127.0.0.1:" + std::to_string(admin) + "\"]\n");
  } while (front->port == admin);
  ASSERT_NO_FATAL_FAILURE(front->Start());

  const HttpReply metrics = FetchOnce(admin, "/metrics");
  ASSERT_EQ(metrics.status, 200) << metrics.body;
  EXPECT_GT(SampleValue(metrics.body, "snowflake_http_tls_certificate_expiry_timestamp_seconds"), 0)
      << "the TLS front's figures are in the admin listener's scrape";
  EXPECT_EQ(FetchOnce(admin, "/healthz").status, 200);

  HttpsClient sut(Trusting(certs_("ca.pem")));
  const HttpsReply id = GetServed(sut, front->port, "/v1/id?service=tls");
  ASSERT_TRUE(id.ok()) << id.error << " " << id.status << " " << id.body;
  EXPECT_EQ(IdsOf(id.body).size(), 1u) << id.body;
  const HttpsReply not_here = sut.Get(front->port, "/metrics");
  EXPECT_EQ(not_here.status, 404) << not_here.error << " " << not_here.body;
  // And the ID port stays TLS only.
  HttpProbe plain(front->port);
  ASSERT_TRUE(plain.connected());
  plain.Send(Get("/healthz"));
  EXPECT_EQ(plain.Read().status, 0) << "the TLS port answered plain HTTP";
}

// ---- handshakes: a deadline, a bound of their own, no connection slot ---------------------

// Peers that connect and never send a ClientHello hold no connection slot: a caller that
// completes its handshake is served while more of them than max_connections wait.
TEST_F(TlsFront, StalledHandshakesHoldNoConnectionSlot) {
  FrontDaemon front("tls-stall", 40,
                    "max_connections = 4\nidle_timeout_ms = 60000\n" +
                        TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  std::vector<std::unique_ptr<HttpProbe>> stalled;
  for (int i = 0; i < 8; ++i) {
    stalled.push_back(std::make_unique<HttpProbe>(front.port));
    ASSERT_TRUE(stalled.back()->connected()) << "stalled connection " << i;
  }
  HttpsClient sut(Trusting(certs_("ca.pem")));
  const HttpsReply reply = GetServed(sut, front.port, "/v1/id?service=tls");
  EXPECT_EQ(reply.status, 200) << reply.error << " " << reply.body;
}

// One source cannot take the handshake places every other caller needs: past
// max_connections_per_source its connections are closed at accept, so a flood of stalled
// handshakes from one address leaves another address's handshake served.
TEST_F(TlsFront, AStalledHandshakeFloodFromOneSourceLeavesAnotherSourceServed) {
  FrontDaemon front("tls-source", 54,
                    "idle_timeout_ms = 120000\ntls_max_handshakes = 8\n"
                    "tls_handshake_timeout_ms = 60000\nmax_connections_per_source = 4\n" +
                        TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  std::vector<std::unique_ptr<HttpProbe>> stalled;
  for (int i = 0; i < 16; ++i) {
    stalled.push_back(std::make_unique<HttpProbe>(front.port));
    ASSERT_TRUE(stalled.back()->connected()) << "stalled connection " << i;
  }

  HttpProbe other(front.port, certs_("ca.pem"), ProbeOptions{.source = "127.0.0.2"});
  ASSERT_TRUE(other.connected()) << "127.0.0.2's handshake was refused while 127.0.0.1 stalled";
  const HttpReply reply = other.Exchange(Get("/v1/id?service=tls"));
  // 127.0.0.1 is at its cap: the metrics come over 127.0.0.2's connection too.
  const HttpReply metrics = other.Exchange(Get("/metrics"));

  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_GE(
      SampleValue(metrics.body, "snowflake_http_connections_refused_total{reason=\"source\"}"), 12)
      << metrics.body;
}

// The same over plain HTTP, and a place given back is taken again.
TEST_F(TlsFront, APlainSourcePastItsCapIsClosedAtAcceptAndServedAgainOnceBelowIt) {
  FrontDaemon front("plain-source", 55, "max_connections_per_source = 3\n");
  ASSERT_NO_FATAL_FAILURE(front.Start());
  std::vector<std::unique_ptr<HttpProbe>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<HttpProbe>(front.port));
    ASSERT_EQ(held.back()->Exchange(Get("/healthz")).status, 200) << "connection " << i;
  }

  HttpProbe fourth(front.port);
  ASSERT_TRUE(fourth.connected());
  fourth.Send(Get("/v1/id?service=plain"));
  const auto [bytes, closed] = fourth.ReadUntilClosed(10s);
  const HttpReply other = FetchFrom("127.0.0.2", front.port, "/v1/id?service=plain");
  held.pop_back();
  HttpReply again;
  const bool served_again = WaitUntil(
      [&] {
        again = FetchOnce(front.port, "/v1/id?service=plain");
        return again.status == 200;
      },
      10s, "a connection of 127.0.0.1 served once it holds fewer than its cap");

  EXPECT_EQ(bytes, 0u) << "a connection past the source's cap was answered";
  EXPECT_TRUE(closed);
  EXPECT_EQ(other.status, 200) << other.body;
  EXPECT_TRUE(served_again) << again.status << " " << again.body;
}

// Past max_connection_age_ms a connection is closed after its next reply, which says so,
// so callers reconnect (and re-handshake after a CA rotation).
TEST_F(TlsFront, AConnectionPastItsMaximumAgeIsClosedAfterItsNextReply) {
  FrontDaemon front("tls-age", 56,
                    "max_connection_age_ms = 800\nidle_timeout_ms = 60000\n" +
                        TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  HttpProbe sut(front.port, certs_("ca.pem"));
  ASSERT_TRUE(sut.connected());

  const HttpReply young = sut.Exchange(Get("/v1/id?service=age"));
  std::this_thread::sleep_for(1200ms);
  const HttpReply old = sut.Exchange(Get("/v1/id?service=age"));

  EXPECT_EQ(young.status, 200) << young.body;
  EXPECT_NE(young.Header("connection"), "close") << "closed before its maximum age";
  EXPECT_EQ(old.status, 200) << old.body;
  EXPECT_EQ(old.Header("connection"), "close");
  EXPECT_TRUE(sut.ClosedByPeer(10s)) << "kept open past its maximum age";
}

// A handshake has a deadline of its own, far shorter than the idle timeout.
TEST_F(TlsFront, AHandshakeNotFinishedByItsDeadlineIsClosed) {
  FrontDaemon front(
      "tls-hsdeadline", 41,
      "idle_timeout_ms = 120000\n" + TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  HttpProbe stalled(front.port);
  ASSERT_TRUE(stalled.connected());
  EXPECT_TRUE(stalled.ClosedByPeer(30s))
      << "a connection that never sent its ClientHello was kept for the idle timeout";
}

// Past tls_max_handshakes connections still handshaking, a new one is closed at accept.
TEST_F(TlsFront, HandshakesBeyondTheirBoundAreClosedAtAccept) {
  FrontDaemon front("tls-hsbound", 42,
                    "idle_timeout_ms = 120000\ntls_max_handshakes = 2\n"
                    "tls_handshake_timeout_ms = 60000\n" +
                        TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  std::vector<std::unique_ptr<HttpProbe>> stalled;
  for (int i = 0; i < 2; ++i) {
    stalled.push_back(std::make_unique<HttpProbe>(front.port));
    ASSERT_TRUE(stalled.back()->connected());
  }
  const HelloAnswer third = SendClientHello(front.port, 10s);
  ASSERT_TRUE(third.connected);
  EXPECT_EQ(third.bytes, 0u) << "a handshake past tls_max_handshakes was started";
  EXPECT_TRUE(third.closed);
  stalled.clear();  // their handshakes end: new ones are taken again
  HttpsClient sut(Trusting(certs_("ca.pem")));
  HttpsReply metrics;
  ASSERT_TRUE(WaitUntil(
      [&] {
        metrics = sut.Get(front.port, "/metrics");
        return metrics.status == 200;
      },
      20s, "a handshake to be taken once the stalled ones closed"));
  EXPECT_GE(
      SampleValue(metrics.body, "snowflake_http_connections_refused_total{reason=\"handshakes\"}"),
      1)
      << metrics.body;
}

// The first request's deadline counts from connecting, not from the end of the handshake:
// a peer cannot hold a connection for the handshake timeout plus the idle timeout.
TEST_F(TlsFront, TheFirstRequestsDeadlineCountsFromConnecting) {
  FrontDaemon front("tls-firstreq", 43,
                    "idle_timeout_ms = 4000\ntls_handshake_timeout_ms = 3000\n" +
                        TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  // The handshake ends about 2 s after connecting (within its 3 s handshake deadline); the request
  // deadline is then 2 s away, enforced at most 250 ms late. Restarted at the handshake, it would
  // be 4 s away.
  HttpProbe slow(front.port, certs_("ca.pem"),
                 ProbeOptions{.source = "", .timeout = 10s, .hello_delay = 2000ms});
  ASSERT_TRUE(slow.connected()) << "the slow handshake was not completed";
  EXPECT_TRUE(slow.ClosedByPeer(3200ms)) << "the idle timeout started again after the handshake";
}

TEST_F(TlsFront, MutualTlsAnswersOnlyCertificatesOfTheClientCa) {
  FrontDaemon front("tls-mutual", 14,
              TlsToml(certs_("server.pem"), certs_("server-key.pem"), certs_("ca.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());

  HttpsClient right(Trusting(certs_("ca.pem"), certs_("client.pem"), certs_("client-key.pem")));
  const HttpsReply answered = GetServed(right, front.port, "/v1/id?service=tls");
  EXPECT_TRUE(answered.ok()) << answered.error << " " << answered.body;

  HttpsClient wrong_ca(
      Trusting(certs_("ca.pem"), certs_("other-client.pem"), certs_("other-client-key.pem")));
  const HttpsReply refused_wrong = wrong_ca.Get(front.port, "/v1/id?service=tls");
  EXPECT_NE(refused_wrong.curl_code, 0)
      << "answered a certificate of another CA: " << refused_wrong.body;
  EXPECT_EQ(refused_wrong.status, 0);

  HttpsClient expired(
      Trusting(certs_("ca.pem"), certs_("expired-client.pem"), certs_("expired-client-key.pem")));
  const HttpsReply refused_expired = expired.Get(front.port, "/v1/id?service=tls");
  EXPECT_NE(refused_expired.curl_code, 0) << "answered an expired client certificate: "
                                          << refused_expired.body;
  EXPECT_EQ(refused_expired.status, 0);

  HttpsClient none(Trusting(certs_("ca.pem")));
  const HttpsReply refused_none = none.Get(front.port, "/v1/id?service=tls");
  EXPECT_NE(refused_none.curl_code, 0)
      << "answered a caller without a certificate: " << refused_none.body;
  EXPECT_EQ(refused_none.status, 0);

  HttpsClient scraper(Trusting(certs_("ca.pem"), certs_("client.pem"), certs_("client-key.pem")));
  ASSERT_TRUE(WaitUntil(
      [&] {
        const HttpsReply metrics = scraper.Get(front.port, "/metrics");
        return SampleValue(
                   metrics.body,
                   "snowflake_http_tls_handshake_failures_total{reason=\"client_certificate\"}") >=
               3;
      },
      20s, "the three refused handshakes to be counted under client_certificate"));
}

// With a CRL, a client certificate the CA revoked fails the handshake like one of another
// CA, counted under client_certificate; the others are answered.
TEST_F(TlsFront, ARevokedClientCertificateFailsTheHandshake) {
  FrontDaemon front("tls-crl", 53,
                    TlsToml(certs_("server.pem"), certs_("server-key.pem"), certs_("ca.pem")) +
                        "tls_client_crl_file = \"" + certs_("crl.pem").string() + "\"\n");
  ASSERT_NO_FATAL_FAILURE(front.Start());
  HttpsClient revoked(Trusting(certs_("ca.pem"), certs_("client2.pem"), certs_("client2-key.pem")));
  const HttpsReply refused = revoked.Get(front.port, "/v1/id?service=tls");
  EXPECT_NE(refused.curl_code, 0) << "answered a revoked certificate: " << refused.body;
  EXPECT_EQ(refused.status, 0);

  HttpsClient valid(Trusting(certs_("ca.pem"), certs_("client.pem"), certs_("client-key.pem")));
  EXPECT_EQ(GetServed(valid, front.port, "/v1/id?service=tls").status, 200);
  ASSERT_TRUE(WaitUntil(
      [&] {
        return SampleValue(
                   valid.Get(front.port, "/metrics").body,
                   "snowflake_http_tls_handshake_failures_total{reason=\"client_certificate\"}") >=
               1;
      },
      20s, "the revoked certificate's handshake to be counted under client_certificate"));
}

TEST_F(TlsFront, WithMutualTlsEachCertificateIsOneClientForItsRate) {
  FrontDaemon front("tls-percert", 27,
              "per_client_ids_per_s = 100\n" +
                  TlsToml(certs_("server.pem"), certs_("server-key.pem"), certs_("ca.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  HttpsClient a(Trusting(certs_("ca.pem"), certs_("client.pem"), certs_("client-key.pem")));
  HttpsClient c(Trusting(certs_("ca.pem"), certs_("client2.pem"), certs_("client2-key.pem")));

  EXPECT_EQ(GetServed(a, front.port, "/v1/ids?service=tls&count=100").status, 200);
  // A new connection from the same address and certificate: still the same client.
  a.Reset();
  const HttpsReply throttled = a.Get(front.port, "/v1/ids?service=tls&count=100");
  EXPECT_EQ(throttled.status, 429) << throttled.body;
  EXPECT_NE(throttled.body.find("\"throttled\""), std::string::npos) << throttled.body;
  EXPECT_FALSE(throttled.retry_after.empty());
  // Another certificate from the same address is another client, with its own rate.
  const HttpsReply other = GetServed(c, front.port, "/v1/ids?service=tls&count=100");
  EXPECT_EQ(other.status, 200) << other.body;
}

// Two certificates whose subjects print alike ("/CN=a\/O=b": CN "a/O=b", or CN "a\" and
// O "b") are two clients: the identity is a hash of the DER issuer and subject.
TEST_F(TlsFront, CertificatesWhoseSubjectsPrintAlikeAreTwoClients) {
  FrontDaemon front("tls-alike", 44,
                    "per_client_ids_per_s = 100\n" +
                        TlsToml(certs_("server.pem"), certs_("server-key.pem"), certs_("ca.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  HttpsClient slash(
      Trusting(certs_("ca.pem"), certs_("slash-client.pem"), certs_("slash-client-key.pem")));
  HttpsClient two(
      Trusting(certs_("ca.pem"), certs_("two-rdn-client.pem"), certs_("two-rdn-client-key.pem")));
  EXPECT_EQ(GetServed(slash, front.port, "/v1/ids?service=tls&count=100").status, 200);
  const HttpsReply other = GetServed(two, front.port, "/v1/ids?service=tls&count=100");
  EXPECT_EQ(other.status, 200) << "CN=a\\,O=b was taken for CN=a/O=b: " << other.body;
}

// A certificate with a SAN URI is that URI's client, whatever its subject: one workload
// whose certificates are reissued under new subjects keeps one rate.
TEST_F(TlsFront, CertificatesWithOneSanUriAreOneClient) {
  FrontDaemon front("tls-uri", 45,
                    "per_client_ids_per_s = 100\n" +
                        TlsToml(certs_("server.pem"), certs_("server-key.pem"), certs_("ca.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  HttpsClient first(
      Trusting(certs_("ca.pem"), certs_("uri1-client.pem"), certs_("uri1-client-key.pem")));
  HttpsClient second(
      Trusting(certs_("ca.pem"), certs_("uri2-client.pem"), certs_("uri2-client-key.pem")));
  EXPECT_EQ(GetServed(first, front.port, "/v1/ids?service=tls&count=100").status, 200);
  const HttpsReply same = second.Get(front.port, "/v1/ids?service=tls&count=100");
  EXPECT_EQ(same.status, 429) << "a second subject with the same SAN URI had a rate of its own: "
                              << same.body;
}

// [[http.authorize]] says which services and endpoints each identity may use: a workload
// named by its SAN URI takes for its service only; a certificate without an entry gets
// nothing but /healthz, and its 403 names its identity for the operator.
TEST_F(TlsFront, AuthorizationLimitsEachIdentityToItsServicesAndEndpoints) {
  FrontDaemon front("tls-authz", 52,
                    TlsToml(certs_("server.pem"), certs_("server-key.pem"), certs_("ca.pem")) +
                        "[[http.authorize]]\nidentity = \"uri:spiffe://snowflake.test/orders\"\n"
                        "services = [\"orders\"]\nendpoints = [\"id\", \"ids\"]\n");
  ASSERT_NO_FATAL_FAILURE(front.Start());
  HttpsClient orders(
      Trusting(certs_("ca.pem"), certs_("uri1-client.pem"), certs_("uri1-client-key.pem")));
  EXPECT_EQ(GetServed(orders, front.port, "/v1/ids?service=orders&count=3").status, 200);
  for (const char* target : {"/v1/id?service=billing", "/v1/status", "/metrics"}) {
    const HttpsReply refused = orders.Get(front.port, target);
    EXPECT_EQ(refused.status, 403) << target << ": " << refused.body;
    EXPECT_NE(refused.body.find("\"forbidden\""), std::string::npos) << refused.body;
  }

  HttpsClient stranger(Trusting(certs_("ca.pem"), certs_("client.pem"), certs_("client-key.pem")));
  const HttpsReply refused = stranger.Get(front.port, "/v1/id?service=orders");
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_NE(refused.body.find("this client (cert:"), std::string::npos) << refused.body;
  // Each refusal is an audit line naming the identity, what it asked and why
  // (docs/security.md, "Audit log").
  EXPECT_TRUE(front.daemon->WaitForErr(
      "audit: forbidden peer=127.0.0.1 source=127.0.0.1 "
      "identity=uri:spiffe://snowflake.test/orders serial=" +
      SerialOf(certs_("uri1-client.pem")) +
      " endpoint=id service=billing reason=\"its [[http.authorize]] entry does not list "
      "service \\\"billing\\\"\""))
      << front.daemon->err();
  EXPECT_EQ(GetServed(stranger, front.port, "/healthz").status, 200);
}

// ---- TLS settings ------------------------------------------------------------------------

RunResult SClient(const FrontDaemon& front, const fs::path& ca, std::vector<std::string> extra) {
  std::vector<std::string> argv = {"openssl",
                                   "s_client",
                                   "-connect",
                                   front.address(),
                                   "-CAfile",
                                   ca.string(),
                                   "-verify_return_error"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return RunCommand(
      argv, RunOptions{.env = {}, .stdin_text = "", .timeout = 20s, .working_dir = std::nullopt});
}

// TLS 1.2 offers only ECDHE key exchange with AEAD ciphers: a client offering only a CBC
// suite with SHA-1 (in OpenSSL's DEFAULT list) finds no cipher in common.
TEST_F(TlsFront, Tls12OffersOnlyEcdheWithAeadCiphers) {
  FrontDaemon front("tls-ciphers", 46, TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  const RunResult cbc =
      SClient(front, certs_("ca.pem"), {"-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-SHA"});
  EXPECT_FALSE(cbc.status.ExitedWith(0)) << "a CBC-SHA1 suite was negotiated: " << cbc.out;
  const RunResult gcm =
      SClient(front, certs_("ca.pem"), {"-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256"});
  EXPECT_TRUE(gcm.status.ExitedWith(0)) << gcm.out << gcm.err;
}

// No session tickets: a ticket is sealed with a key that lives as long as the TLS context,
// so a stolen key would open every recorded session since. Resumption stays possible
// through the front's own session cache.
TEST_F(TlsFront, IssuesNoSessionTickets) {
  FrontDaemon front("tls-tickets", 47, TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  const RunResult session = SClient(front, certs_("ca.pem"), {"-tls1_2"});
  ASSERT_TRUE(session.status.ExitedWith(0)) << session.out << session.err;
  EXPECT_EQ(session.out.find("TLS session ticket"), std::string::npos) << session.out;
}

// The settings a review asks for are keys: the minimum version, the TLS 1.2 ciphers, the
// groups. A value OpenSSL cannot use is refused by --check-config, naming the key.
TEST_F(TlsFront, MinimumVersionCiphersAndGroupsAreSettings) {
  FrontDaemon front("tls-settings", 48,
                    "tls_min_version = \"1.3\"\ntls_groups = \"P-384\"\n" +
                        TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  EXPECT_FALSE(SClient(front, certs_("ca.pem"), {"-tls1_2"}).status.ExitedWith(0))
      << "TLS 1.2 was served with tls_min_version = 1.3";
  EXPECT_FALSE(
      SClient(front, certs_("ca.pem"), {"-tls1_3", "-groups", "X25519"}).status.ExitedWith(0))
      << "X25519 was negotiated with tls_groups = P-384";
  EXPECT_TRUE(
      SClient(front, certs_("ca.pem"), {"-tls1_3", "-groups", "P-384"}).status.ExitedWith(0));
  FrontDaemon suites("tls-suites", 62,
                     "tls_ciphersuites = \"TLS_CHACHA20_POLY1305_SHA256\"\n" +
                         TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  ASSERT_NO_FATAL_FAILURE(suites.Start());
  EXPECT_FALSE(
      SClient(suites, certs_("ca.pem"), {"-tls1_3", "-ciphersuites", "TLS_AES_256_GCM_SHA384"})
          .status.ExitedWith(0))
      << "TLS_AES_256_GCM_SHA384 was negotiated with tls_ciphersuites = "
         "TLS_CHACHA20_POLY1305_SHA256";
  EXPECT_TRUE(SClient(suites, certs_("ca.pem"),
                      {"-tls1_3", "-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"})
                  .status.ExitedWith(0));

  // An unknown name is refused alone and beside known ones (which OpenSSL's own parsing of
  // a TLS 1.2 cipher list lets through), naming the key and the name.
  struct BadName {
    std::string key, value, named;
  };
  for (const BadName& bad_name : std::vector<BadName>{
           {"tls_ciphers", "NO-SUCH-CIPHER", "NO-SUCH-CIPHER"},
           {"tls_ciphers", "ECDHE+AESGCM:NO-SUCH-CIPHER", "NO-SUCH-CIPHER matches no"},
           {"tls_ciphers", "ECDHE+AESGCM:!aNUL", "!aNUL matches no"},
           {"tls_ciphersuites", "TLS_NO_SUCH_SUITE", "TLS_NO_SUCH_SUITE"},
           {"tls_ciphersuites", "TLS_AES_256_GCM_SHA384:TLS_NO_SUCH_SUITE",
            "no TLS 1.3 suite named TLS_NO_SUCH_SUITE"},
           {"tls_groups", "P-999", "P-999"},
           {"tls_groups", "X25519:P-999", "X25519:P-999"}}) {
    FrontDaemon bad("tls-badset", 49,
                    bad_name.key + " = \"" + bad_name.value + "\"\n" +
                        TlsToml(certs_("server.pem"), certs_("server-key.pem")));
    const RunResult checked = RunCommand(
        {kSnowflakedPath, "--check-config", "--config", bad.options.config_path->string()});
    EXPECT_FALSE(checked.status.ExitedWith(0)) << bad_name.value << ": " << checked.out;
    EXPECT_NE(checked.err.find("http." + bad_name.key), std::string::npos) << checked.err;
    EXPECT_NE(checked.err.find(bad_name.named), std::string::npos) << checked.err;
  }
  // Exclusions and commands that name real ciphers are fine.
  FrontDaemon good("tls-goodset", 49,
                   "tls_ciphers = \"ECDHE+AESGCM:!aNULL:-kRSA:@STRENGTH\"\n" +
                       TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  const RunResult accepted = RunCommand(
      {kSnowflakedPath, "--check-config", "--config", good.options.config_path->string()});
  EXPECT_TRUE(accepted.status.ExitedWith(0)) << accepted.err;
}

// A front serving `cert`: every client verifying against the test CA refuses it, and a
// failover Client's error names the remote and `reason`.
void ExpectClientRefuses(const Certificates& certs, const std::string& cert, uint32_t machine,
                         const std::string& reason) {
  FrontDaemon front("tls-" + cert, machine, TlsToml(certs(cert + ".pem"), certs(cert + "-key.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  HttpsClient curl(Trusting(certs("ca.pem")));
  const HttpsReply reply = curl.Get(front.port, "/v1/id?service=tls");
  EXPECT_NE(reply.curl_code, 0) << "accepted " << cert << ".pem";
  EXPECT_NE(reply.error.find(reason), std::string::npos) << reply.error;

  TempDir empty("sf-noday");
  auto sut = RemotesOnlyClient(empty, {front.https()}, Trusting(certs("ca.pem")));
  ASSERT_TRUE(sut) << sut.error().message;
  auto id = sut->Next();
  ASSERT_FALSE(id) << "took an ID from a front serving " << cert << ".pem";
  EXPECT_NE(id.error().message.find(front.https()), std::string::npos) << id.error().message;
  EXPECT_NE(id.error().message.find(reason), std::string::npos) << id.error().message;
}

TEST_F(TlsFront, ClientRefusesAnExpiredCertificate) {
  ExpectClientRefuses(certs_, "expired", 15, "certificate has expired");
}

TEST_F(TlsFront, ClientRefusesANotYetValidCertificate) {
  ExpectClientRefuses(certs_, "future", 16, "certificate is not yet valid");
}

TEST_F(TlsFront, ClientRefusesACertificateOfAnotherCa) {
  ExpectClientRefuses(certs_, "rogue", 17, "unable to get local issuer certificate");
}

// Signed by the trusted CA, but for another host: the name is checked, not only the CA.
TEST_F(TlsFront, ClientRefusesACertificateOfTheTrustedCaForAnotherName) {
  ExpectClientRefuses(certs_, "wrong-name", 63, "subject name");
}

// A remote that refuses with Retry-After (the front's 429 at max_connections says 1 s) is
// skipped until then, not asked again sooner (the client's own backoff is 25-75 ms).
TEST_F(TlsFront, AFailoverClientSkipsARemoteUntilItsRetryAfter) {
  FrontDaemon front("retry-after", 64, "max_connections = 1\nidle_timeout_ms = 60000\n");
  ASSERT_NO_FATAL_FAILURE(front.Start());
  HttpProbe held(front.port);
  ASSERT_EQ(held.Exchange(Get("/healthz")).status, 200) << "the front's one connection";
  TempDir empty("sf-noday");
  auto sut = RemotesOnlyClient(empty, {front.address()}, TlsClientFiles{});
  ASSERT_TRUE(sut) << sut.error().message;

  auto refused = sut->Next();
  auto again = sut->Next();

  ASSERT_FALSE(refused) << "took an ID past max_connections";
  EXPECT_NE(refused.error().message.find("HTTP 429 too_many_connections (Retry-After 1 s)"),
            std::string::npos)
      << refused.error().message;
  ASSERT_FALSE(again);
  const std::string& text = again.error().message;
  const size_t at = text.find("skipped for ");
  ASSERT_NE(at, std::string::npos) << "asked again at once: " << text;
  EXPECT_GE(std::stoll(text.substr(at + 12)), 500) << text;
}

TEST_F(TlsFront, FailoverTakesFromAnHttpsRemoteWithItsClientCertificate) {
  FrontDaemon front("tls-failover", 18,
              TlsToml(certs_("server.pem"), certs_("server-key.pem"), certs_("ca.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  TempDir empty("sf-noday");
  auto sut =
      RemotesOnlyClient(empty, {front.https()},
                        Trusting(certs_("ca.pem"), certs_("client.pem"), certs_("client-key.pem")));
  ASSERT_TRUE(sut) << sut.error().message;
  uint64_t last = 0;
  for (int i = 0; i < 200; ++i) {
    auto id = sut->Next();
    ASSERT_TRUE(id) << id.error().message;
    EXPECT_GT(*id, last);
    EXPECT_EQ(MachineOf(*id), 18u);
    last = *id;
  }
  // Without its certificate the same front refuses it, and the error says so.
  auto without = RemotesOnlyClient(empty, {front.https()}, Trusting(certs_("ca.pem")));
  ASSERT_TRUE(without) << without.error().message;
  auto refused = without->Next();
  ASSERT_FALSE(refused) << "took an ID from a mutual-TLS front without a certificate";
  EXPECT_NE(refused.error().message.find(front.https()), std::string::npos)
      << refused.error().message;
}

TEST_F(TlsFront, AnHttpsRemoteIsNeverAskedOverPlainHttp) {
  FrontDaemon plain("tls-noplain", 19, "");
  ASSERT_NO_FATAL_FAILURE(plain.Start());
  TempDir empty("sf-noday");
  auto sut = RemotesOnlyClient(empty, {"https://" + plain.address()}, Trusting(certs_("ca.pem")));
  ASSERT_TRUE(sut) << sut.error().message;
  auto id = sut->Next();
  ASSERT_FALSE(id) << "an https:// remote served over plain HTTP";
  EXPECT_NE(id.error().message.find("https://" + plain.address()), std::string::npos)
      << id.error().message;
  // The plain front never served it an ID (its only 200s would be these scrapes).
  const HttpReply metrics = FetchOnce(plain.port, "/metrics");
  EXPECT_EQ(SampleValue(metrics.body, "snowflake_ids_issued_total{path=\"http\",service=\"tls\"}"),
            -1)
      << metrics.body;
}

TEST_F(TlsFront, ClientOptionsRefuseAPlainRemoteBesideTlsFiles) {
  TempDir empty("sf-noday");
  auto sut = RemotesOnlyClient(empty, {"https://127.0.0.1:1", "127.0.0.1:2"},
                               Trusting(certs_("ca.pem")));
  ASSERT_FALSE(sut) << "a plain remote was accepted beside a TLS CA file";
  EXPECT_EQ(sut.error().code, ClientError::kInvalidArgument);
  EXPECT_NE(sut.error().message.find("write it as https://127.0.0.1:2"), std::string::npos)
      << sut.error().message;
}

TEST_F(TlsFront, ClientOptionsRefuseACertificateWithoutItsKey) {
  TempDir empty("sf-noday");
  auto sut = RemotesOnlyClient(empty, {"https://127.0.0.1:1"},
                               Trusting(certs_("ca.pem"), certs_("client.pem"), ""));
  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error().code, ClientError::kInvalidArgument);
  auto scheme = RemotesOnlyClient(empty, {"ftp://127.0.0.1:1"}, Trusting(certs_("ca.pem")));
  ASSERT_FALSE(scheme);
  EXPECT_NE(scheme.error().message.find("ftp://127.0.0.1:1"), std::string::npos);
}

// The certificate's notAfter is a metric, so an alert can fire before clients refuse it.
// make_test_certs.sh makes server.pem valid for 3 days from now; a plain front exports 0.
TEST_F(TlsFront, TheCertificatesExpiryIsExported) {
  FrontDaemon front("tls-expiry", 50, TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  HttpsClient sut(Trusting(certs_("ca.pem")));
  const HttpsReply metrics = GetServed(sut, front.port, "/metrics");
  ASSERT_EQ(metrics.status, 200) << metrics.error;
  const double expiry =
      SampleValue(metrics.body, "snowflake_http_tls_certificate_expiry_timestamp_seconds");
  const double now = static_cast<double>(std::chrono::duration_cast<std::chrono::seconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  EXPECT_GT(expiry, now + 2 * 86400) << metrics.body;
  EXPECT_LT(expiry, now + 4 * 86400) << metrics.body;

  EXPECT_EQ(SampleValue(metrics.body, "snowflake_http_tls_client_ca_expiry_timestamp_seconds"), 0)
      << "a client CA's expiry without a client CA";

  FrontDaemon plain("plain-expiry", 51, "");
  ASSERT_NO_FATAL_FAILURE(plain.Start());
  EXPECT_EQ(SampleValue(FetchOnce(plain.port, "/metrics").body,
                        "snowflake_http_tls_certificate_expiry_timestamp_seconds"),
            0);
}

// The client CA's notAfter too: the earliest of a bundle, which a rotation updates.
TEST_F(TlsFront, TheClientCasExpiryIsExported) {
  FrontDaemon front("tls-caexpiry", 61,
                    TlsToml(certs_("server.pem"), certs_("server-key.pem"), certs_("ca.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  HttpsClient sut(Trusting(certs_("ca.pem"), certs_("client.pem"), certs_("client-key.pem")));
  const HttpsReply metrics = GetServed(sut, front.port, "/metrics");
  ASSERT_EQ(metrics.status, 200) << metrics.error;

  const double expiry =
      SampleValue(metrics.body, "snowflake_http_tls_client_ca_expiry_timestamp_seconds");
  const RunResult enddate = RunCommand({"openssl", "x509", "-enddate", "-noout", "-dateopt",
                                        "iso_8601", "-in", certs_("ca.pem").string()});
  ASSERT_TRUE(enddate.status.ExitedWith(0)) << enddate.err;
  std::tm when{};
  ASSERT_NE(strptime(enddate.out.c_str(), "notAfter=%Y-%m-%d %H:%M:%SZ", &when), nullptr)
      << enddate.out;
  EXPECT_EQ(expiry, static_cast<double>(timegm(&when))) << metrics.body;
}

// ---- rotation ----------------------------------------------------------------------------

// Replaces `to` with `from`'s bytes the way cert-manager and certbot do: a new file renamed
// over the old one.
void Replace(const fs::path& from, const fs::path& to) {
  const fs::path next = to.string() + ".next";
  fs::copy_file(from, next, fs::copy_options::overwrite_existing);
  fs::permissions(next, fs::perms::owner_read | fs::perms::owner_write);
  fs::rename(next, to);
}

TEST_F(TlsFront, RotationUnderLoadServesTheNewPairWithoutAFailedRequest) {
  TempDir files("sf-rotate");
  Replace(certs_("server.pem"), files / "tls.crt");
  Replace(certs_("server-key.pem"), files / "tls.key");
  FrontDaemon front("tls-rotate", 20, TlsToml(files / "tls.crt", files / "tls.key"));
  ASSERT_NO_FATAL_FAILURE(front.Start());

  // Load: two takers on kept connections, two that open a new connection per request.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> failed{0}, answered{0}, unavailable{0}, kept_after_rotation{0};
  std::atomic<bool> rotated{false};
  std::string first_failure;
  std::mutex failure_mutex;
  std::vector<std::thread> load;
  for (int t = 0; t < 4; ++t) {
    load.emplace_back([&, fresh = t >= 2] {
      HttpsClient client(Trusting(certs_("ca.pem")));
      while (!stop.load()) {
        if (fresh) client.Reset();
        const HttpsReply reply = client.Get(front.port, "/v1/id?service=rotate");
        // A 503 is the daemon pausing (a slow fsync of its reservation on a loaded host),
        // a 429 ring_empty its ring empty for the front's wait, answered over TLS: not a
        // failure of the connection or the rotation.
        if (reply.curl_code == 0 && NotServedNow(reply.status, reply.body)) {
          unavailable.fetch_add(1);
          continue;
        }
        if (!reply.ok()) {
          std::lock_guard lock(failure_mutex);
          if (failed.fetch_add(1) == 0) first_failure = reply.error + " " + reply.body;
          continue;
        }
        answered.fetch_add(1);
        if (!fresh && rotated.load() && reply.new_connections == 0)
          kept_after_rotation.fetch_add(1);
      }
    });
  }
  ASSERT_TRUE(WaitUntil([&] { return answered.load() >= 200; }, 60s, "200 answers before"))
      << "first failure: " << first_failure;

  Replace(certs_("server2.pem"), files / "tls.crt");
  Replace(certs_("server2-key.pem"), files / "tls.key");
  rotated = true;
  HttpsClient probe(Trusting(certs_("ca.pem")));
  ASSERT_TRUE(WaitUntil(
      [&] {
        probe.Reset();
        return probe.Get(front.port, "/healthz").subject.find("snowflaked two") !=
               std::string::npos;
      },
      30s, "a new connection to be served the new certificate"));
  const uint64_t at_rotation = answered.load();
  ASSERT_TRUE(
      WaitUntil([&] { return answered.load() >= at_rotation + 200; }, 60s, "200 answers after"));
  stop = true;
  for (auto& thread : load) thread.join();

  std::printf(
      "rotation under load: %llu answered, %llu not served now (503, 429 ring_empty), %llu "
      "failed\n",
      static_cast<unsigned long long>(answered.load()),
      static_cast<unsigned long long>(unavailable.load()),
      static_cast<unsigned long long>(failed.load()));
  EXPECT_EQ(failed.load(), 0u) << "first failure: " << first_failure;
  EXPECT_GT(kept_after_rotation.load(), 0u)
      << "no request went over a connection opened before the rotation";
  EXPECT_TRUE(front.daemon->WaitForErr("new TLS certificate from " + (files / "tls.crt").string()));
}

TEST_F(TlsFront, ABadNewPairIsRefusedNamingTheFileAndTheOldPairKeepsServing) {
  TempDir files("sf-badrot");
  Replace(certs_("server.pem"), files / "tls.crt");
  Replace(certs_("server-key.pem"), files / "tls.key");
  FrontDaemon front("tls-badrot", 21, TlsToml(files / "tls.crt", files / "tls.key"));
  ASSERT_NO_FATAL_FAILURE(front.Start());

  // A key that is not the certificate's.
  Replace(certs_("client-key.pem"), files / "tls.key");
  ASSERT_TRUE(front.daemon->WaitForErr("refusing the changed TLS files", 30s))
      << front.daemon->Describe();
  EXPECT_TRUE(front.daemon->WaitForErr((files / "tls.key").string() + ": does not match"))
      << front.daemon->Describe();
  HttpsClient sut(Trusting(certs_("ca.pem")));
  const HttpsReply reply = GetServed(sut, front.port, "/v1/id?service=tls");
  ASSERT_TRUE(reply.ok()) << reply.error << " " << reply.status << " " << reply.body;
  EXPECT_NE(reply.subject.find("snowflaked one"), std::string::npos) << reply.subject;
  const HttpsReply metrics = sut.Get(front.port, "/metrics");
  EXPECT_GE(SampleValue(metrics.body, "snowflake_http_tls_reloads_total{result=\"refused\"}"), 1);
}

// ---- CRL rotation and expiry ----------------------------------------------------------------

// The front's [http] TLS lines with the test server's pair, mutual TLS against `ca` and
// `crl` as its CRL file.
std::string CrlToml(const Certificates& certs, const fs::path& ca, const fs::path& crl) {
  return TlsToml(certs("server.pem"), certs("server-key.pem")) + "tls_client_ca_file = \"" +
         ca.string() + "\"\ntls_client_crl_file = \"" + crl.string() + "\"\n";
}

// A client whose certificate is `name`.pem, trusting the test CA.
TlsClientFiles ClientFiles(const Certificates& certs, const std::string& name) {
  return Trusting(certs("ca.pem"), certs(name + ".pem"), certs(name + "-key.pem"));
}

// A front with mutual TLS and crl.pem (client2 revoked) is served a new CRL by `rotate`,
// which revokes uri1-client too: new handshakes with uri1-client are refused within the
// reload interval, client.pem is still served, and the reload is counted.
void ExpectCrlRotationRevokes(const Certificates& certs, const FrontDaemon& front,
                              const std::function<void()>& rotate) {
  HttpsClient revoked_later(ClientFiles(certs, "uri1-client"));
  const HttpsReply before = GetServed(revoked_later, front.port, "/v1/id?service=tls");
  ASSERT_EQ(before.status, 200) << before.error << " " << before.body;

  rotate();
  HttpsReply refused;
  const bool revoked = WaitUntil(
      [&] {
        HttpsClient fresh(ClientFiles(certs, "uri1-client"));
        refused = fresh.Get(front.port, "/healthz");
        return refused.curl_code != 0 && refused.status == 0;
      },
      30s, "the new CRL to refuse uri1-client");

  EXPECT_TRUE(revoked) << "still answered: " << refused.status;
  HttpsClient other(ClientFiles(certs, "client"));
  const HttpsReply served = GetServed(other, front.port, "/v1/id?service=tls");
  EXPECT_EQ(served.status, 200) << served.error << " " << served.body;
  const HttpsReply metrics = GetServed(other, front.port, "/metrics");
  EXPECT_GE(SampleValue(metrics.body, "snowflake_http_tls_reloads_total{result=\"ok\"}"), 1)
      << metrics.body;
  EXPECT_EQ(SampleValue(metrics.body, "snowflake_http_tls_reloads_total{result=\"refused\"}"), 0)
      << metrics.body;
}

TEST_F(TlsFront, ACrlRenamedOverTheOldOneRefusesWhatItRevokesToNewHandshakes) {
  TempDir files("sf-crlrot");
  Replace(certs_("crl.pem"), files / "crl.pem");
  FrontDaemon front("tls-crlrot", 70, CrlToml(certs_, certs_("ca.pem"), files / "crl.pem"));
  ASSERT_NO_FATAL_FAILURE(front.Start());

  ExpectCrlRotationRevokes(certs_, front, [&] { Replace(certs_("crl2.pem"), files / "crl.pem"); });
}

// The CRL beside the client CA in a Kubernetes Secret, rotated by the kubelet's ..data swap.
TEST_F(TlsFront, ACrlSwappedInASecretVolumesDataLinkRefusesWhatItRevokes) {
  TempDir files("sf-crlsecret");
  const auto version = [&](const std::string& name, const std::string& crl) {
    const fs::path dir = files / name;
    fs::create_directory(dir);
    Replace(certs_("ca.pem"), dir / "ca.crt");
    Replace(certs_(crl), dir / "ca.crl");
  };
  version("..2026_12_06_1", "crl.pem");
  fs::create_directory_symlink("..2026_12_06_1", files / "..data");
  for (const char* name : {"ca.crt", "ca.crl"}) {
    fs::create_symlink(fs::path("..data") / name, files / name);
  }
  FrontDaemon front("tls-crlsecret", 71, CrlToml(certs_, files / "ca.crt", files / "ca.crl"));
  ASSERT_NO_FATAL_FAILURE(front.Start());

  ExpectCrlRotationRevokes(certs_, front, [&] {
    version("..2026_12_06_2", "crl2.pem");
    fs::create_directory_symlink("..2026_12_06_2", files / "..data_tmp");
    fs::rename(files / "..data_tmp", files / "..data");
  });
}

// A CRL past its nextUpdate would make OpenSSL refuse every client of its CA: it is refused
// at start (and by --check-config) naming the file and its nextUpdate; at a reload it is
// refused the same way and the CRL in use is kept. The CRL's nextUpdate is exported.
TEST_F(TlsFront, AnExpiredCrlIsRefusedByCheckConfigNamingItsNextUpdate) {
  FrontDaemon front("tls-crlold", 72, CrlToml(certs_, certs_("ca.pem"), certs_("crl-expired.pem")));
  const RunResult checked = RunCommand(
      {kSnowflakedPath, "--check-config", "--config", front.options.config_path->string()},
      RunOptions{.env = {}, .stdin_text = "", .timeout = 20s, .working_dir = std::nullopt});
  EXPECT_FALSE(checked.status.ExitedWith(0)) << checked.out;
  EXPECT_NE(checked.err.find("http.tls_client_crl_file " + certs_("crl-expired.pem").string() +
                             ": the CRL of CN=snowflake test CA expired at its nextUpdate"),
            std::string::npos)
      << checked.err;
}

TEST_F(TlsFront, AnExpiredCrlAtAReloadIsRefusedAndTheCrlInUseKept) {
  TempDir files("sf-crlexp");
  Replace(certs_("crl.pem"), files / "crl.pem");
  FrontDaemon front("tls-crlexp", 73, CrlToml(certs_, certs_("ca.pem"), files / "crl.pem"));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  HttpsClient scraper(ClientFiles(certs_, "client"));
  const double next_update =
      SampleValue(GetServed(scraper, front.port, "/metrics").body,
                  "snowflake_http_tls_client_crl_next_update_timestamp_seconds");

  Replace(certs_("crl-expired.pem"), files / "crl.pem");
  ASSERT_TRUE(front.daemon->WaitForErr("refusing the changed TLS files", 30s))
      << front.daemon->Describe();

  EXPECT_TRUE(front.daemon->WaitForErr((files / "crl.pem").string() +
                                       ": the CRL of CN=snowflake test CA expired at its "
                                       "nextUpdate"))
      << front.daemon->Describe();
  HttpsClient valid(ClientFiles(certs_, "client"));
  EXPECT_EQ(GetServed(valid, front.port, "/v1/id?service=tls").status, 200);
  HttpsClient revoked(ClientFiles(certs_, "client2"));
  EXPECT_EQ(revoked.Get(front.port, "/healthz").status, 0) << "the old CRL was dropped";
  const HttpsReply metrics = GetServed(valid, front.port, "/metrics");
  EXPECT_GE(SampleValue(metrics.body, "snowflake_http_tls_reloads_total{result=\"refused\"}"), 1);
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_GT(next_update, now + 2 * 86400);  // make_test_certs.sh: default_crl_days = 3
  EXPECT_LT(next_update, now + 4 * 86400);
  EXPECT_EQ(
      SampleValue(metrics.body, "snowflake_http_tls_client_crl_next_update_timestamp_seconds"),
      next_update)
      << metrics.body;
}

// ---- session tickets --------------------------------------------------------------------------

constexpr std::pair<TlsVersions, const char*> kBothVersions[] = {{TlsVersions::kOnly12, "TLS 1.2"},
                                                                 {TlsVersions::kOnly13, "TLS 1.3"}};

// A client resumes with a ticket, in TLS 1.2 and 1.3; after the certificate and key are
// rotated (a new context) the ticket from before still resumes, the keys being the front's,
// not the context's.
TEST_F(TlsFront, WithTicketsAClientResumesAlsoAfterACertificateRotation) {
  TempDir files("sf-tickets");
  Replace(certs_("server.pem"), files / "tls.crt");
  Replace(certs_("server-key.pem"), files / "tls.key");
  FrontDaemon front("tls-tickets-on", 74,
                    "tls_session_tickets = true\n" + TlsToml(files / "tls.crt", files / "tls.key"));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  std::vector<std::unique_ptr<ResumingClient>> clients;
  for (const auto& [versions, name] : kBothVersions) {
    clients.push_back(std::make_unique<ResumingClient>(Trusting(certs_("ca.pem")), versions));
    const ResumedReply first = clients.back()->Get(front.port, "/healthz");
    const ResumedReply second = clients.back()->Get(front.port, "/healthz");
    ASSERT_TRUE(first.ok) << name << ": " << first.error;
    EXPECT_FALSE(first.reused) << name;
    EXPECT_TRUE(first.has_ticket) << name << ": no ticket issued";
    ASSERT_TRUE(second.ok) << name << ": " << second.error;
    EXPECT_TRUE(second.reused) << name << ": the ticket did not resume";
  }

  Replace(certs_("server2.pem"), files / "tls.crt");
  Replace(certs_("server2-key.pem"), files / "tls.key");
  HttpsClient probe(Trusting(certs_("ca.pem")));
  ASSERT_TRUE(WaitUntil(
      [&] {
        probe.Reset();
        return probe.Get(front.port, "/healthz").subject.find("snowflaked two") !=
               std::string::npos;
      },
      30s, "a new connection to be served the new certificate"));

  for (size_t i = 0; i < clients.size(); ++i) {
    const ResumedReply after = clients[i]->Get(front.port, "/healthz");
    ASSERT_TRUE(after.ok) << kBothVersions[i].second << ": " << after.error;
    EXPECT_EQ(after.status, 200);
    EXPECT_TRUE(after.reused) << kBothVersions[i].second
                              << ": a ticket from before the rotation did not resume";
  }
}

// Tickets are off by default: no ticket is issued in either version, and a TLS 1.3 client
// has nothing to resume with.
TEST_F(TlsFront, WithoutTicketsNoTicketIsIssued) {
  FrontDaemon front("tls-tickets-off", 75, TlsToml(certs_("server.pem"), certs_("server-key.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  for (const auto& [versions, name] : kBothVersions) {
    ResumingClient sut(Trusting(certs_("ca.pem")), versions);
    const ResumedReply first = sut.Get(front.port, "/healthz");
    const ResumedReply second = sut.Get(front.port, "/healthz");
    ASSERT_TRUE(first.ok) << name << ": " << first.error;
    EXPECT_FALSE(first.has_ticket) << name << ": a ticket was issued";
    ASSERT_TRUE(second.ok) << name << ": " << second.error;
    if (versions == TlsVersions::kOnly13) {
      EXPECT_FALSE(second.reused) << name;
    }
  }
}

// A resumed handshake checks no certificate: a new CRL must end the tickets issued before
// it, or a certificate it revokes would keep resuming. After the CRL revoking uri1-client
// is in use, its old ticket gets no answer, and client.pem's old ticket is not resumed but
// answered after a full handshake.
TEST_F(TlsFront, ANewCrlEndsEveryTicketIssuedBeforeIt) {
  TempDir files("sf-crltickets");
  Replace(certs_("crl.pem"), files / "crl.pem");
  FrontDaemon front(
      "tls-crltickets", 76,
      "tls_session_tickets = true\n" + CrlToml(certs_, certs_("ca.pem"), files / "crl.pem"));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  ResumingClient revoked_later(ClientFiles(certs_, "uri1-client"), TlsVersions::kOnly13);
  ResumingClient kept(ClientFiles(certs_, "client"), TlsVersions::kOnly12);
  for (ResumingClient* client : {&revoked_later, &kept}) {
    ASSERT_TRUE(client->Get(front.port, "/healthz").ok);
    const ResumedReply resumed = client->Get(front.port, "/healthz");
    ASSERT_TRUE(resumed.ok) << resumed.error;
    ASSERT_TRUE(resumed.reused);
  }

  Replace(certs_("crl2.pem"), files / "crl.pem");
  ASSERT_TRUE(front.daemon->WaitForErr("session tickets issued before are no longer accepted", 30s))
      << front.daemon->Describe();
  ASSERT_TRUE(WaitUntil(
      [&] {
        HttpsClient fresh(ClientFiles(certs_, "uri1-client"));
        return fresh.Get(front.port, "/healthz").curl_code != 0;
      },
      30s, "the new CRL to refuse uri1-client"));

  const ResumedReply refused = revoked_later.Get(front.port, "/healthz");
  EXPECT_FALSE(refused.ok) << "a revoked certificate resumed its session: " << refused.status;
  const ResumedReply full = kept.Get(front.port, "/healthz");
  EXPECT_TRUE(full.ok) << full.error;
  EXPECT_FALSE(full.reused) << "a ticket from before the new CRL resumed";
}

// ---- start and --check-config -------------------------------------------------------------

TEST_F(TlsFront, AKeyEveryUserCanReadIsRefusedAtStartNamingTheFileAndTheFix) {
  TempDir files("sf-mode");
  Replace(certs_("server.pem"), files / "tls.crt");
  Replace(certs_("server-key.pem"), files / "tls.key");
  ::chmod((files / "tls.key").c_str(), 0644);
  FrontDaemon front("tls-mode", 22, TlsToml(files / "tls.crt", files / "tls.key"));

  const RunResult checked = RunCommand(
      {kSnowflakedPath, "--check-config", "--config", front.options.config_path->string()});
  EXPECT_FALSE(checked.status.ExitedWith(0)) << checked.out;
  for (const std::string& needle :
       {(files / "tls.key").string(), std::string("chmod 600"), std::string("defaultMode")}) {
    EXPECT_NE(checked.err.find(needle), std::string::npos) << needle << " in: " << checked.err;
  }

  Daemon daemon = Daemon::Spawn(front.options);
  const auto status = daemon.Wait(30s);
  ASSERT_TRUE(status) << "the daemon started with a world-readable key";
  EXPECT_FALSE(status->ExitedWith(0));
  // Its stderr may still be on the way to the test after the exit.
  EXPECT_TRUE(daemon.WaitForErr((files / "tls.key").string())) << daemon.err();
  EXPECT_TRUE(daemon.WaitForErr("chmod 600")) << daemon.err();

  ::chmod((files / "tls.key").c_str(), 0600);
  const RunResult fixed = RunCommand(
      {kSnowflakedPath, "--check-config", "--config", front.options.config_path->string()});
  EXPECT_TRUE(fixed.status.ExitedWith(0)) << fixed.err;
}

// ---- the TLS files: what is read is what is judged ----------------------------------------

RunResult CheckConfig(const FrontDaemon& front) {
  RunOptions options;
  options.timeout = 20s;
  return RunCommand(
      {kSnowflakedPath, "--check-config", "--config", front.options.config_path->string()},
      options);
}

// A FIFO at the key path is refused at once: nothing waits for a writer (the accept
// thread reloads the files).
TEST_F(TlsFront, AFifoAtTheKeyPathIsRefusedWithoutWaiting) {
  TempDir files("sf-fifo");
  Replace(certs_("server.pem"), files / "tls.crt");
  ASSERT_EQ(::mkfifo((files / "tls.key").c_str(), 0600), 0) << std::strerror(errno);
  FrontDaemon front("tls-fifo", 57, TlsToml(files / "tls.crt", files / "tls.key"));

  const RunResult checked = CheckConfig(front);

  EXPECT_FALSE(checked.timed_out) << "--check-config waited on a FIFO";
  EXPECT_FALSE(checked.status.ExitedWith(0)) << checked.out;
  EXPECT_NE(checked.err.find((files / "tls.key").string() + ": not a regular file"),
            std::string::npos)
      << checked.err;
}

// A link at the key path (a Kubernetes Secret's files are links) is followed, and the file
// it reaches is judged: another user's key is refused, root's private one is used.
TEST_F(TlsFront, ALinkAtTheKeyPathIsJudgedByTheFileItReaches) {
  ASSERT_EQ(geteuid(), 0u) << "a file of another owner needs root";
  TempDir files("sf-link");
  Replace(certs_("server.pem"), files / "tls.crt");
  Replace(certs_("server-key.pem"), files / "nobodys.key");
  ASSERT_EQ(::chown((files / "nobodys.key").c_str(), 65534, 65534), 0);
  Replace(certs_("server-key.pem"), files / "roots.key");
  fs::create_symlink(files / "nobodys.key", files / "tls.key");
  FrontDaemon front("tls-link", 58, TlsToml(files / "tls.crt", files / "tls.key"));

  const RunResult refused = CheckConfig(front);
  fs::remove(files / "tls.key");
  fs::create_symlink(files / "roots.key", files / "tls.key");
  const RunResult used = CheckConfig(front);

  EXPECT_FALSE(refused.status.ExitedWith(0)) << "took nobody's key: " << refused.out;
  EXPECT_NE(refused.err.find((files / "tls.key").string() + ": owned by uid 65534"),
            std::string::npos)
      << refused.err;
  EXPECT_TRUE(used.status.ExitedWith(0)) << used.err;
}

// Whoever may write the client CA file decides whom the front lets in.
TEST_F(TlsFront, AClientCaFileOthersMayWriteIsRefused) {
  TempDir files("sf-camode");
  fs::copy_file(certs_("ca.pem"), files / "ca.crt");
  FrontDaemon front("tls-camode", 59,
                    TlsToml(certs_("server.pem"), certs_("server-key.pem"), files / "ca.crt"));

  ::chmod((files / "ca.crt").c_str(), 0664);
  const RunResult group = CheckConfig(front);
  ::chmod((files / "ca.crt").c_str(), 0646);
  const RunResult everyone = CheckConfig(front);
  ::chmod((files / "ca.crt").c_str(), 0644);
  const RunResult fixed = CheckConfig(front);

  EXPECT_FALSE(group.status.ExitedWith(0));
  EXPECT_NE(group.err.find("writable by its group (mode 0664)"), std::string::npos) << group.err;
  EXPECT_NE(group.err.find("chmod go-w " + (files / "ca.crt").string()), std::string::npos);
  EXPECT_FALSE(everyone.status.ExitedWith(0));
  EXPECT_NE(everyone.err.find("writable by every user"), std::string::npos) << everyone.err;
  EXPECT_TRUE(fixed.status.ExitedWith(0)) << fixed.err;
}

// A Kubernetes Secret volume: each file is a link into ..data, itself a link to the
// current version's directory, and a rotation swaps ..data at once. The new pair serves
// new connections, and a client CA bundle that gained a CA lets that CA's clients in.
TEST_F(TlsFront, ASecretVolumesLinkSwapRotatesThePairAndTheClientCa) {
  TempDir files("sf-secret");
  const auto version = [&](const std::string& name, const std::string& pair,
                           const std::vector<std::string>& cas) {
    const fs::path dir = files / name;
    fs::create_directory(dir);
    Replace(certs_(pair + ".pem"), dir / "tls.crt");
    Replace(certs_(pair + "-key.pem"), dir / "tls.key");
    std::ofstream bundle(dir / "ca.crt");
    for (const std::string& ca : cas) bundle << std::ifstream(certs_(ca)).rdbuf();
  };
  version("..2026_12_06_1", "server", {"ca.pem"});
  fs::create_directory_symlink("..2026_12_06_1", files / "..data");
  for (const char* name : {"tls.crt", "tls.key", "ca.crt"}) {
    fs::create_symlink(fs::path("..data") / name, files / name);
  }
  FrontDaemon front("tls-secret", 60,
                    TlsToml(files / "tls.crt", files / "tls.key", files / "ca.crt"));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  HttpsClient member(Trusting(certs_("ca.pem"), certs_("client.pem"), certs_("client-key.pem")));
  const HttpsReply before = GetServed(member, front.port, "/v1/id?service=tls");
  HttpsClient newcomer(
      Trusting(certs_("ca.pem"), certs_("other-client.pem"), certs_("other-client-key.pem")));
  const HttpsReply refused = newcomer.Get(front.port, "/v1/id?service=tls");

  // Act: the kubelet's swap, a new version and one rename of ..data.
  version("..2026_12_06_2", "server2", {"ca.pem", "other-ca.pem"});
  fs::create_directory_symlink("..2026_12_06_2", files / "..data_tmp");
  fs::rename(files / "..data_tmp", files / "..data");
  HttpsReply admitted;
  const bool rotated = WaitUntil(
      [&] {
        HttpsClient fresh(
            Trusting(certs_("ca.pem"), certs_("other-client.pem"), certs_("other-client-key.pem")));
        admitted = fresh.Get(front.port, "/v1/id?service=tls");
        return admitted.status == 200;
      },
      30s, "a client of the added CA to be let in");

  EXPECT_EQ(before.status, 200) << before.error << " " << before.body;
  EXPECT_NE(before.subject.find("snowflaked one"), std::string::npos) << before.subject;
  EXPECT_EQ(refused.status, 0) << "a client of another CA was let in before the rotation";
  EXPECT_TRUE(rotated) << admitted.error << " " << admitted.status;
  EXPECT_NE(admitted.subject.find("snowflaked two"), std::string::npos) << admitted.subject;
}

TEST_F(TlsFront, CheckConfigRefusesAKeyThatIsNotTheCertificates) {
  FrontDaemon front("tls-check", 23, TlsToml(certs_("server.pem"), certs_("client-key.pem")));
  const RunResult checked = RunCommand(
      {kSnowflakedPath, "--check-config", "--config", front.options.config_path->string()});
  EXPECT_FALSE(checked.status.ExitedWith(0)) << checked.out;
  EXPECT_NE(checked.err.find("http.tls_key_file " + certs_("client-key.pem").string()),
            std::string::npos)
      << checked.err;
}

// ---- the audit log (docs/security.md, "Audit log") -----------------------------------------

// The serial of the certificate in `pem`, as `openssl x509 -serial` prints it ("" if not).
std::string SerialOf(const fs::path& pem) {
  const RunResult serial =
      RunCommand({"openssl", "x509", "-noout", "-serial", "-in", pem.string()});
  const std::string prefix = "serial=";
  if (!serial.status.ExitedWith(0) || serial.out.rfind(prefix, 0) != 0) return "";
  std::string hex = serial.out.substr(prefix.size());
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r')) hex.pop_back();
  return hex;
}

// The notAfter of the certificate in `pem` as the audit log writes it ("2026-12-09T18:00:00Z").
std::string NotAfterOf(const fs::path& pem) {
  const RunResult enddate = RunCommand(
      {"openssl", "x509", "-enddate", "-noout", "-dateopt", "iso_8601", "-in", pem.string()});
  std::tm when{};
  if (!enddate.status.ExitedWith(0) ||
      strptime(enddate.out.c_str(), "notAfter=%Y-%m-%d %H:%M:%SZ", &when) == nullptr) {
    return "";
  }
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &when);
  return text;
}

// The daemon's stderr lines that contain `needle`.
std::vector<std::string> LinesWith(const Daemon& daemon, std::string_view needle) {
  std::vector<std::string> out;
  const std::string err = daemon.err();
  for (size_t at = 0; at < err.size();) {
    size_t end = err.find('\n', at);
    if (end == std::string::npos) end = err.size();
    const std::string line = err.substr(at, end - at);
    if (line.find(needle) != std::string::npos) out.push_back(line);
    at = end + 1;
  }
  return out;
}

// Waits up to 20 s for a line containing `needle`; the first such line, or "".
std::string AuditLine(Daemon& daemon, std::string_view needle) {
  if (!daemon.WaitForErr(needle, 20s)) return "";
  const std::vector<std::string> lines = LinesWith(daemon, needle);
  return lines.empty() ? "" : lines.front();
}

TEST_F(TlsFront, AuditAnAddressOutsideAllowIsLoggedWithThePeerAndTheReason) {
  FrontDaemon front("audit-allow", 60, "allow = [\"127.0.0.2\"]\n");
  ASSERT_NO_FATAL_FAILURE(front.Start());
  HttpProbe probe(front.port);
  ASSERT_TRUE(probe.connected());
  probe.Send(Get("/v1/id?service=audit"));
  EXPECT_TRUE(probe.ClosedByPeer(10s));
  EXPECT_TRUE(front.daemon->WaitForErr(
      " info: audit: refused_allow peer=127.0.0.1 source=127.0.0.1 identity=- serial=- "
      "reason=\"not in allow\"",
      20s))
      << front.daemon->Describe();
  // An address inside `allow` is served and not audited.
  EXPECT_EQ(FetchFrom("127.0.0.2", front.port, "/healthz").status, 200);
  EXPECT_TRUE(LinesWith(*front.daemon, "peer=127.0.0.2").empty()) << front.daemon->err();
}

TEST_F(TlsFront, AuditRefusedMutualTlsHandshakesNameTheCertificateItsSerialAndWhy) {
  FrontDaemon front("audit-mtls", 61,
                    TlsToml(certs_("server.pem"), certs_("server-key.pem"), certs_("ca.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());

  HttpsClient expired(
      Trusting(certs_("ca.pem"), certs_("expired-client.pem"), certs_("expired-client-key.pem")));
  EXPECT_EQ(expired.Get(front.port, "/v1/id?service=audit").status, 0);
  const std::string expired_serial = SerialOf(certs_("expired-client.pem"));
  ASSERT_NE(expired_serial, "");
  const std::string expired_line = AuditLine(
      *front.daemon, " serial=" + expired_serial +
                         " reason=\"certificate verify failed: certificate has expired\"");
  EXPECT_NE(
      expired_line.find("audit: handshake_refused peer=127.0.0.1 source=127.0.0.1 identity=cert:"),
      std::string::npos)
      << front.daemon->err();

  HttpsClient other_ca(
      Trusting(certs_("ca.pem"), certs_("other-client.pem"), certs_("other-client-key.pem")));
  EXPECT_EQ(other_ca.Get(front.port, "/v1/id?service=audit").status, 0);
  const std::string other_line =
      AuditLine(*front.daemon, " serial=" + SerialOf(certs_("other-client.pem")) +
                                   " reason=\"certificate verify failed: ");
  EXPECT_NE(other_line.find("audit: handshake_refused peer=127.0.0.1 source=127.0.0.1 "
                            "identity=cert:"),
            std::string::npos)
      << front.daemon->err();

  HttpsClient none(Trusting(certs_("ca.pem")));
  EXPECT_EQ(none.Get(front.port, "/v1/id?service=audit").status, 0);
  EXPECT_TRUE(front.daemon->WaitForErr(
      "audit: handshake_refused peer=127.0.0.1 source=127.0.0.1 identity=- serial=- "
      "reason=\"peer did not return a certificate\"",
      20s))
      << front.daemon->err();
}

TEST_F(TlsFront, AuditAThrottledTakeNamesTheIdentitySerialServiceAndRate) {
  FrontDaemon front("audit-throttle", 62,
                    "per_client_ids_per_s = 100\n" +
                        TlsToml(certs_("server.pem"), certs_("server-key.pem"), certs_("ca.pem")));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  HttpsClient a(Trusting(certs_("ca.pem"), certs_("client.pem"), certs_("client-key.pem")));
  EXPECT_EQ(GetServed(a, front.port, "/v1/ids?service=audit&count=100").status, 200);
  const HttpsReply throttled = a.Get(front.port, "/v1/ids?service=audit&count=100");
  EXPECT_EQ(throttled.status, 429) << throttled.body;

  const std::string serial = SerialOf(certs_("client.pem"));
  ASSERT_NE(serial, "");
  const std::string line =
      AuditLine(*front.daemon, " serial=" + serial +
                                   " service=audit count=100 reason=\"per_client_ids_per_s 100\"");
  EXPECT_NE(line.find("audit: throttled peer=127.0.0.1 source=127.0.0.1 identity=cert:"),
            std::string::npos)
      << front.daemon->err();
}

TEST_F(TlsFront, AuditARotationNamesTheFileAndBothSerialsAndARefusedOneWhy) {
  TempDir files("sf-auditrot");
  Replace(certs_("server.pem"), files / "tls.crt");
  Replace(certs_("server-key.pem"), files / "tls.key");
  FrontDaemon front("audit-rotate", 63, TlsToml(files / "tls.crt", files / "tls.key"));
  ASSERT_NO_FATAL_FAILURE(front.Start());
  const std::string one = SerialOf(certs_("server.pem"));
  const std::string two = SerialOf(certs_("server2.pem"));
  ASSERT_NE(one, "");
  ASSERT_NE(two, "");

  Replace(certs_("server2.pem"), files / "tls.crt");
  Replace(certs_("server2-key.pem"), files / "tls.key");
  EXPECT_TRUE(front.daemon->WaitForErr(
      "audit: tls_rotated file=" + (files / "tls.crt").string() + " old_serial=" + one +
          " old_not_after=" + NotAfterOf(certs_("server.pem")) + " new_serial=" + two +
          " new_not_after=" + NotAfterOf(certs_("server2.pem")),
      30s))
      << front.daemon->err();

  // A key that is not the certificate's: refused, the second pair still served.
  Replace(certs_("client-key.pem"), files / "tls.key");
  EXPECT_TRUE(front.daemon->WaitForErr(
      "audit: tls_rotation_refused file=" + (files / "tls.crt").string() + " serial=" + two +
          " not_after=" + NotAfterOf(certs_("server2.pem")) + " reason=\"http.tls_key_file " +
          (files / "tls.key").string() + ": does not match",
      30s))
      << front.daemon->err();
}

// A flood of one kind is at most the rate limit's lines and then the count of the rest:
// every refused connection is a line or counted, once.
TEST_F(TlsFront, AuditAFloodOfRefusedConnectionsIsTenLinesAndTheCountOfTheRest) {
  FrontDaemon front("audit-flood", 64, "allow = [\"127.0.0.2\"]\n");
  ASSERT_NO_FATAL_FAILURE(front.Start());
  constexpr uint64_t kFlood = 200;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < kFlood; ++i) {
    HttpProbe probe(front.port);
    ASSERT_TRUE(probe.connected()) << "connection " << i;
  }
  ASSERT_TRUE(
      WaitUntil([&] { return RefusedInStatus(front) >= kFlood; }, 60s, "every connection refused"));
  const auto flood = std::chrono::steady_clock::now() - start;

  uint64_t lines = 0;
  uint64_t dropped = 0;
  uint64_t summaries = 0;
  const auto count = [&] {
    lines = LinesWith(*front.daemon, "audit: refused_allow ").size();
    dropped = 0;
    const std::vector<std::string> sums =
        LinesWith(*front.daemon, "audit: suppressed kind=refused_allow dropped=");
    summaries = sums.size();
    for (const std::string& sum : sums) {
      dropped += std::stoull(sum.substr(sum.find("dropped=") + 8));
    }
    return lines + dropped == kFlood;
  };
  // The count of the dropped comes once their 10 s are over (the front looks every second).
  EXPECT_TRUE(WaitUntil(count, 60s, "every refusal a line or counted"))
      << lines << " lines, " << dropped << " dropped: " << front.daemon->err();
  // Ten lines per 10 s, over the intervals the flood spanned.
  const uint64_t intervals =
      1 +
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(flood).count() / 10);
  EXPECT_GE(lines, 10u);
  EXPECT_LE(lines, 10 * intervals + 10) << "over " << intervals << " intervals";
  EXPECT_GE(summaries, 1u);
  EXPECT_LE(summaries, intervals + 1);
  std::printf(
      "audit flood: %llu connections in %lld ms: %llu lines, %llu summed up in %llu\n",
      static_cast<unsigned long long>(kFlood),
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(flood).count()),
      static_cast<unsigned long long>(lines), static_cast<unsigned long long>(dropped),
      static_cast<unsigned long long>(summaries));
}

}  // namespace
}  // namespace snowflake::testing
