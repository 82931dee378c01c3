// FaultProxy (fault_proxy.h) in front of a real etcd member, driven by the register's own
// client (libcurl, keep-alive): each mode does what it says, and a held request is applied
// when released, after requests that were sent later.

#include "fault_proxy.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "etcd_cluster.h"
#include "register/etcd_client.h"

namespace snowflake::testing {
namespace {

using namespace std::chrono_literals;
using reg::etcd::ErrorKind;
using reg::etcd::EtcdClient;
using ::testing::HasSubstr;

int PortOf(const std::string& url) { return std::stoi(url.substr(url.rfind(':') + 1)); }

class FaultProxyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new EtcdCluster(1); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(cluster_->ok()) << cluster_->error();
    auto proxy = FaultProxy::Start(PortOf(cluster_->ClientUrl(0)));
    ASSERT_TRUE(proxy) << proxy.error();
    sut_ = std::move(*proxy);
    key_ = "/proxy/" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  // A client that only knows the proxy, giving up on an answer after 300 ms.
  EtcdClient ThroughProxy() const {
    reg::etcd::ClientOptions options;
    options.endpoints = {sut_->url()};
    options.request_timeout_ms = 300;
    options.connect_timeout_ms = 300;
    return EtcdClient(options);
  }
  static EtcdClient Direct() {
    reg::etcd::ClientOptions options;
    options.endpoints = {cluster_->ClientUrl(0)};
    return EtcdClient(options);
  }
  // The value of `key` read directly from the member ("<absent>" if none).
  static std::string ValueOf(const std::string& key) {
    auto range = Direct().Range(key);
    if (!range) return "<error: " + range.error().message + ">";
    return range->kvs.empty() ? "<absent>" : range->kvs[0].value;
  }

  static EtcdCluster* cluster_;
  std::unique_ptr<FaultProxy> sut_;
  std::string key_;
};

EtcdCluster* FaultProxyTest::cluster_ = nullptr;

TEST_F(FaultProxyTest, PassForwardsRequestsAndAnswersOnOneKeptAliveConnection) {
  auto client = ThroughProxy();

  auto put = client.Put(key_, "v");
  auto first = client.Range(key_);
  auto second = client.Range(key_);

  ASSERT_TRUE(put) << put.error().message;
  ASSERT_TRUE(first) << first.error().message;
  ASSERT_TRUE(second) << second.error().message;
  ASSERT_EQ(second->kvs.size(), 1u);
  EXPECT_EQ(second->kvs[0].value, "v");
  const auto counts = sut_->counts();
  EXPECT_EQ(counts.connections, 1u);
  EXPECT_EQ(counts.forwarded, 3u);
  EXPECT_THAT(sut_->ForwardedRequestLines(),
              ::testing::ElementsAre("POST /v3/kv/put HTTP/1.1", "POST /v3/kv/range HTTP/1.1",
                                     "POST /v3/kv/range HTTP/1.1"));
  EXPECT_EQ(counts.held, 0u);
  EXPECT_EQ(sut_->last_error(), "");
}

TEST_F(FaultProxyTest, AHeldRequestIsAppliedAfterLaterOnesWhenReleased) {
  // Arrange
  auto client = ThroughProxy();
  auto direct = Direct();
  ASSERT_TRUE(sut_->SetMode(FaultProxy::Mode::kHold));

  // Act: the client gives up on "old"; "new" is written later, elsewhere; then "old"
  // arrives.
  auto held_put = client.Put(key_, "old");
  ASSERT_TRUE(sut_->WaitForHeld(1, 5s));
  const std::string before = ValueOf(key_);
  ASSERT_TRUE(direct.Put(key_, "new"));
  const std::string after_new = ValueOf(key_);
  ASSERT_TRUE(sut_->SetMode(FaultProxy::Mode::kPass));
  auto released = sut_->ReleaseHeld();

  // Assert
  ASSERT_FALSE(held_put) << "a held request was answered";
  EXPECT_EQ(held_put.error().kind, ErrorKind::kUnavailable) << held_put.error().message;
  EXPECT_EQ(before, "<absent>");
  EXPECT_EQ(after_new, "new");
  ASSERT_TRUE(released) << released.error();
  ASSERT_EQ(released->size(), 1u);
  EXPECT_EQ((*released)[0].request_line, "POST /v3/kv/put HTTP/1.1");
  EXPECT_EQ((*released)[0].status, 200) << (*released)[0].body;
  EXPECT_EQ(ValueOf(key_), "old");
  const auto counts = sut_->counts();
  EXPECT_EQ(counts.held, 1u);
  EXPECT_EQ(counts.released, 1u);
  EXPECT_EQ(counts.forwarded, 0u);
  EXPECT_TRUE(sut_->HeldRequestLines().empty());
}

TEST_F(FaultProxyTest, AReleasedDuplicateIsAppliedTwice) {
  // Arrange
  auto client = ThroughProxy();
  ASSERT_TRUE(Direct().Put(key_, "v"));
  ASSERT_TRUE(sut_->SetMode(FaultProxy::Mode::kHold));
  ASSERT_FALSE(client.Put(key_, "again"));
  ASSERT_TRUE(sut_->WaitForHeld(1, 5s));

  // Act
  auto released = sut_->ReleaseHeld(/*copies=*/2);

  // Assert: every put bumps the key's version: 1 + 2 deliveries.
  ASSERT_TRUE(released) << released.error();
  EXPECT_EQ(released->size(), 2u);
  auto range = Direct().Range(key_);
  ASSERT_TRUE(range) << range.error().message;
  ASSERT_EQ(range->kvs.size(), 1u);
  EXPECT_EQ(range->kvs[0].value, "again");
  EXPECT_EQ(range->kvs[0].version, 3);
  EXPECT_EQ(sut_->counts().released, 2u);
}

TEST_F(FaultProxyTest, HoldKeepsOnlyMatchingRequestsAndDiscardForgetsThem) {
  // Arrange
  auto client = ThroughProxy();
  ASSERT_TRUE(sut_->SetMode(FaultProxy::Mode::kHold, "/v3/kv/txn"));
  reg::etcd::TxnRequest txn;
  txn.success = {reg::etcd::Op::Put(key_, "from-txn")};

  // Act
  auto put = client.Put(key_, "from-put");  // passes
  auto held_txn = client.Txn(txn);          // held
  const bool arrived = sut_->WaitForHeld(1, 5s);
  const auto lines = sut_->HeldRequestLines();
  const size_t discarded = sut_->DiscardHeld();

  // Assert
  ASSERT_TRUE(put) << put.error().message;
  EXPECT_FALSE(held_txn);
  EXPECT_TRUE(arrived);
  EXPECT_THAT(lines, ::testing::ElementsAre("POST /v3/kv/txn HTTP/1.1"));
  EXPECT_EQ(discarded, 1u);
  EXPECT_EQ(ValueOf(key_), "from-put");
  EXPECT_EQ(sut_->counts().forwarded, 1u);
}

TEST_F(FaultProxyTest, DropAnswersAppliesRequestsButTheClientTimesOut) {
  auto client = ThroughProxy();
  ASSERT_TRUE(sut_->SetMode(FaultProxy::Mode::kDropAnswers));

  auto put = client.Put(key_, "applied");

  ASSERT_FALSE(put) << "an answer passed in kDropAnswers";
  EXPECT_EQ(put.error().kind, ErrorKind::kUnavailable);
  EXPECT_THAT(put.error().message, HasSubstr("may or may not have been applied"));
  EXPECT_EQ(ValueOf(key_), "applied");
  EXPECT_EQ(sut_->counts().answers_dropped, 1u);
}

TEST_F(FaultProxyTest, BlackholeSwallowsRequestsAndRefuseRefusesUntilPassAgain) {
  // Arrange
  auto client = ThroughProxy();

  // Act
  ASSERT_TRUE(sut_->SetMode(FaultProxy::Mode::kBlackhole));
  auto swallowed = client.Put(key_, "swallowed");
  const std::string after_blackhole = ValueOf(key_);
  auto refused_mode = sut_->SetMode(FaultProxy::Mode::kRefuse);
  auto refused = client.Put(key_, "refused");
  auto pass_mode = sut_->SetMode(FaultProxy::Mode::kPass);
  auto passed = client.Put(key_, "passed");

  // Assert
  ASSERT_FALSE(swallowed);
  EXPECT_THAT(swallowed.error().message, HasSubstr("may or may not have been applied"));
  EXPECT_EQ(after_blackhole, "<absent>");
  EXPECT_EQ(sut_->counts().blackholed, 1u);
  ASSERT_TRUE(refused_mode) << refused_mode.error();
  ASSERT_FALSE(refused);
  // Refused before anything was sent: the client knows nothing was applied.
  EXPECT_THAT(refused.error().message, HasSubstr("no etcd endpoint reachable"));
  ASSERT_TRUE(pass_mode) << pass_mode.error();
  ASSERT_TRUE(passed) << passed.error().message;
  EXPECT_EQ(ValueOf(key_), "passed");
}

TEST_F(FaultProxyTest, NotHttpIsClosedAndNamedInTheLastError) {
  // Arrange: a raw connection.
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(sut_->port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);

  // Act
  const std::string garbage = "HELLO there\r\n\r\n";
  ASSERT_EQ(send(fd, garbage.data(), garbage.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(garbage.size()));
  pollfd p{fd, POLLIN, 0};
  const int ready = poll(&p, 1, 5000);
  char byte = 0;
  const ssize_t n = ready == 1 ? recv(fd, &byte, 1, 0) : -2;
  close(fd);

  // Assert: closed without an answer.
  EXPECT_EQ(n, 0);
  EXPECT_EQ(sut_->counts().malformed, 1u);
  EXPECT_THAT(sut_->last_error(), HasSubstr("not an HTTP/1.1 request line: \"HELLO there\""));
  EXPECT_FALSE(sut_->ReleaseHeld(0));
}

}  // namespace
}  // namespace snowflake::testing
