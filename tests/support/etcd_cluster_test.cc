// The etcd test cluster itself: a cluster that forms answers on ports no outgoing
// connection can be handed, and one that cannot form says why after its retries.

#include "etcd_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace snowflake::testing {
namespace {

using namespace std::chrono_literals;

TEST(LoopbackPort, FreePortsLieBelowTheEphemeralRange) {
  for (int i = 0; i < 50; ++i) {
    const int port = FreeLoopbackPort();
    ASSERT_GT(port, 1024);
    EXPECT_LT(port, EphemeralPortFloor())
        << "the kernel may hand port " << port << " to an outgoing connection";
  }
}

TEST(EtcdCluster, AClusterThatFormsAnswersReads) {
  EtcdCluster cluster(1);
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  const auto answer = HttpPost(cluster.ClientUrl(0) + "/v3/kv/range", R"({"key":"AA=="})", 5s);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status, 200) << answer->body;
}

TEST(EtcdCluster, AClusterThatCannotFormSaysWhyAfterThreeAttempts) {
  // etcd refuses an unknown flag at once: every attempt fails fast, not on the timeout.
  const auto start = std::chrono::steady_clock::now();
  EtcdCluster cluster(1, 20s, {"--no-such-flag-for-this-test"});
  ASSERT_FALSE(cluster.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s) << "a member that exited was waited for";
  EXPECT_THAT(cluster.error(), ::testing::HasSubstr("did not form in 3 attempts"));
  EXPECT_THAT(cluster.error(), ::testing::HasSubstr("=== attempt 3: member m0"));
  EXPECT_THAT(cluster.error(), ::testing::HasSubstr("no-such-flag-for-this-test"));
}

}  // namespace
}  // namespace snowflake::testing
