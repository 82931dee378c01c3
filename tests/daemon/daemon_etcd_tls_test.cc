// The real snowflaked against a real etcd that demands credentials (docs/daemon.md, "The
// etcd register"):
//   - TLS with client-certificate authentication (a CA, server and client certificates
//     made with openssl for this test): the daemon claims and serves with ca_file,
//     cert_file and key_file; with another CA it exits at once with a sentence naming
//     ca_file (a certificate problem is not an outage to wait out);
//   - etcd's user/password authentication: the daemon claims with user and password; with
//     a wrong password it exits at once naming the user and the keys to check.
// One etcd member each: these are about credentials, not about the cluster.

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "daemon_harness.h"
#include "etcd_cluster.h"
#include "snowflake/client.h"

namespace snowflake {
namespace {

using namespace std::chrono_literals;
using testing::Daemon;
using testing::DaemonHarness;
using testing::DaemonOptions;
using testing::EtcdCluster;

class DaemonEtcdCredentials : public ::testing::Test {
 protected:
  DaemonOptions OptionsFor(const std::string& name, const std::string& endpoint,
                           const std::string& etcd_extra) {
    return harness_.NamedOptions(
        name, testing::EtcdDaemonToml(name, {endpoint}, "/cred/", "0-7", etcd_extra));
  }

  // Takes `count` IDs from the daemon of `options`; empty on the first failure.
  static std::vector<uint64_t> Take(const DaemonOptions& options, size_t count) {
    auto client = Client::Open("etcd-cred", DaemonHarness::ClientOptionsFor(options.runtime_dir));
    if (!client) return {};
    std::vector<uint64_t> ids;
    for (size_t i = 0; i < count; ++i) {
      auto id = client->Next();
      if (!id) return {};
      ids.push_back(*id);
    }
    return ids;
  }

  // The daemon must end by itself, non-zero, without READY=1 and without waiting for the
  // register; returns its stderr.
  static std::string ExpectRefusedAtOnce(Daemon& daemon) {
    const auto exit = daemon.Wait(60s);
    EXPECT_TRUE(exit) << "still running (waiting?): " << daemon.Describe();
    if (exit) {
      EXPECT_FALSE(exit->ExitedWith(0)) << daemon.Describe();
    }
    EXPECT_EQ(daemon.notify().CountLine("READY=1"), 0u) << daemon.Describe();
    EXPECT_EQ(daemon.err().find("waiting for the register"), std::string::npos) << daemon.err();
    return daemon.err();
  }

  DaemonHarness harness_{"etcd-cred"};
};

class DaemonEtcdTls : public DaemonEtcdCredentials {
 protected:
  void SetUp() override {
    auto made = testing::MakeTestCertificates(harness_.root());
    ASSERT_TRUE(made) << made.error();
    certs_ = *made;
    cluster_.emplace(1, 30s, std::vector<std::string>{}, certs_);
    ASSERT_TRUE(cluster_->ok()) << cluster_->error();
    ASSERT_EQ(cluster_->ClientUrl(0).rfind("https://", 0), 0u);
  }

  std::string TlsKeys(const std::filesystem::path& ca) const {
    return "ca_file = \"" + ca.string() + "\"\ncert_file = \"" + certs_.client_cert.string() +
           "\"\nkey_file = \"" + certs_.client_key.string() + "\"\n";
  }

  testing::TestCertificates certs_;
  std::optional<EtcdCluster> cluster_;
};

TEST_F(DaemonEtcdTls, ClaimsAndServesOverTlsWithAClientCertificate) {
  // Arrange
  const DaemonOptions options = OptionsFor("tls", cluster_->ClientUrl(0), TlsKeys(certs_.ca_file));

  // Act
  Daemon daemon = harness_.Start(options, 60s);
  const std::vector<uint64_t> ids = Take(options, 1000);

  // Assert
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  EXPECT_EQ(ids.size(), 1000u) << daemon.Describe();
  auto status = Client::Inspect(DaemonHarness::ClientOptionsFor(options.runtime_dir));
  ASSERT_TRUE(status);
  EXPECT_LE(status->machine, 7u);
  EXPECT_TRUE(daemon.Stop().value_or(testing::ExitStatus{}).ExitedWith(0)) << daemon.Describe();
}

TEST_F(DaemonEtcdTls, AnotherCaIsAClearErrorNotAWait) {
  // Arrange: the daemon trusts a CA that did not sign etcd's certificate.
  const DaemonOptions options =
      OptionsFor("wrong-ca", cluster_->ClientUrl(0), TlsKeys(certs_.other_ca_file));

  // Act
  Daemon daemon = Daemon::Spawn(options);
  const std::string err = ExpectRefusedAtOnce(daemon);

  // Assert
  EXPECT_NE(err.find("TLS failed"), std::string::npos) << err;
  EXPECT_NE(err.find("register.etcd.ca_file (" + certs_.other_ca_file.string() + ")"),
            std::string::npos)
      << err;
}

TEST_F(DaemonEtcdTls, NoClientCertificateIsRefusedByEtcd) {
  // Arrange: the right CA, but no client certificate for etcd's --client-cert-auth.
  const DaemonOptions options = OptionsFor(
      "no-cert", cluster_->ClientUrl(0), "ca_file = \"" + certs_.ca_file.string() + "\"\n");

  // Act
  Daemon daemon = Daemon::Spawn(options);
  const std::string err = ExpectRefusedAtOnce(daemon);

  // Assert: etcd's certificate alert, told as what to check.
  EXPECT_NE(err.find("TLS failed"), std::string::npos) << err;
  EXPECT_NE(err.find("check register.etcd.cert_file and key_file"), std::string::npos) << err;
}

class DaemonEtcdAuth : public DaemonEtcdCredentials {
 protected:
  void SetUp() override {
    cluster_.emplace(1);
    ASSERT_TRUE(cluster_->ok()) << cluster_->error();
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"user", "add", "root:s3cret"}, {"auth", "enable"}}) {
      std::vector<std::string> argv = {"/usr/bin/etcdctl", "--endpoints", cluster_->ClientUrl(0)};
      argv.insert(argv.end(), args.begin(), args.end());
      testing::RunOptions run_options;
      run_options.env.set = {{"ETCDCTL_API", "3"}};
      const auto run = testing::RunCommand(argv, run_options);
      ASSERT_TRUE(run.status.ExitedWith(0)) << run.out << run.err;
    }
  }

  std::optional<EtcdCluster> cluster_;
};

TEST_F(DaemonEtcdAuth, ClaimsAndServesWithUserAndPassword) {
  // Arrange: the password in a file, as the docs recommend.
  const auto password_file = harness_.WriteFile("etcd-password", "s3cret\n");
  const DaemonOptions options =
      OptionsFor("auth", cluster_->ClientUrl(0),
                 "user = \"root\"\npassword_file = \"" + password_file.string() + "\"\n");

  // Act
  Daemon daemon = harness_.Start(options, 60s);
  const std::vector<uint64_t> ids = Take(options, 1000);

  // Assert
  ASSERT_TRUE(daemon.ready()) << daemon.Describe();
  EXPECT_EQ(ids.size(), 1000u) << daemon.Describe();
  EXPECT_TRUE(daemon.Stop().value_or(testing::ExitStatus{}).ExitedWith(0)) << daemon.Describe();
}

TEST_F(DaemonEtcdAuth, AWrongPasswordIsAClearErrorNotAWait) {
  // Arrange
  const DaemonOptions options = OptionsFor("wrong-password", cluster_->ClientUrl(0),
                                           "user = \"root\"\npassword = \"not-it\"\n");

  // Act
  Daemon daemon = Daemon::Spawn(options);
  const std::string err = ExpectRefusedAtOnce(daemon);

  // Assert
  EXPECT_NE(err.find("authenticating as \"root\""), std::string::npos) << err;
  EXPECT_NE(err.find("invalid user ID or password"), std::string::npos) << err;
  EXPECT_NE(err.find("check register.etcd.user and register.etcd.password"), std::string::npos)
      << err;
}

}  // namespace
}  // namespace snowflake
