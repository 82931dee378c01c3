// A real etcd cluster for tests (Debian's etcd-server, /usr/bin/etcd): N members on
// 127.0.0.1 with free ports, each in its own temporary data directory, started and
// stopped by PID. Faults: SIGKILL a member (and start it again on its data), SIGSTOP /
// SIGCONT members, find the leader.
//
//   EtcdCluster cluster(3);
//   ASSERT_TRUE(cluster.ok()) << cluster.error();
//   ... cluster.ClientUrls() ...
//   cluster.Kill(*cluster.Leader());
//
// Destroying the cluster SIGKILLs every member and removes the directories. Use from one
// thread.

#ifndef SNOWFLAKE_TESTS_SUPPORT_ETCD_CLUSTER_H_
#define SNOWFLAKE_TESTS_SUPPORT_ETCD_CLUSTER_H_

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "loopback_port.h"
#include "subprocess.h"
#include "temp_dir.h"

namespace snowflake::testing {

inline const std::string kEtcdPath = "/usr/bin/etcd";
inline const std::string kEtcdctlPath = "/usr/bin/etcdctl";

// Certificates for etcd over TLS on loopback, made with openssl at test time
// (MakeTestCertificates): a CA, a server certificate for 127.0.0.1 signed by it, a client
// certificate signed by it, and a second, unrelated CA (for "wrong CA" tests).
struct TestCertificates {
  std::filesystem::path ca_file;
  std::filesystem::path server_cert;
  std::filesystem::path server_key;
  std::filesystem::path client_cert;
  std::filesystem::path client_key;
  std::filesystem::path other_ca_file;
};
// Writes them into `dir` (which must exist). Errors: openssl's output.
tl::expected<TestCertificates, std::string> MakeTestCertificates(const std::filesystem::path& dir);

// POSTs `body` to `url` and returns the HTTP status and body, or nullopt on no answer
// within `timeout`. With `tls`, verifies the server with its CA and presents its client
// certificate.
struct HttpAnswer {
  long status = 0;
  std::string body;
};
std::optional<HttpAnswer> HttpPost(const std::string& url, const std::string& body,
                                   std::chrono::milliseconds timeout,
                                   const TestCertificates* tls = nullptr);

// The TOML of a snowflaked whose register is this etcd ([daemon] instance, [register]
// backend/machines/holder_id, [register.etcd] endpoints/prefix, then `etcd_extra` lines).
std::string EtcdDaemonToml(const std::string& name, const std::vector<std::string>& endpoints,
                           const std::string& prefix, const std::string& machines,
                           const std::string& etcd_extra = "");

class EtcdCluster {
 public:
  // Starts `members` members and waits (up to `timeout`) until a linearizable read
  // succeeds on every one; a cluster that does not form is started again on new ports,
  // up to three times. Check ok().
  // `extra_args` are passed to every member ("--auth-token-ttl", "2").
  // With `tls`, members serve clients on https only, with client-certificate
  // authentication (--client-cert-auth) against tls->ca_file.
  explicit EtcdCluster(int members = 3,
                       std::chrono::milliseconds timeout = std::chrono::seconds(30),
                       std::vector<std::string> extra_args = {},
                       std::optional<TestCertificates> tls = std::nullopt);
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  int size() const { return static_cast<int>(members_.size()); }
  std::vector<std::string> ClientUrls() const;
  const std::string& ClientUrl(int member) const { return members_[member].client_url; }
  pid_t pid(int member) const;

  // SIGKILL and reap a member (its data stays).
  void Kill(int member);
  // Starts a killed member again on its data directory.
  void Restart(int member);
  // SIGSTOP / SIGCONT.
  void Pause(int member);
  void Resume(int member);
  // The index of the member that currently leads (asks the running members), or nullopt.
  std::optional<int> Leader() const;
  // Waits until a linearizable read succeeds at `member`.
  bool WaitReady(int member, std::chrono::milliseconds timeout) const;
  // Everything the members logged (for failure messages).
  std::string Logs() const;

  // A backup and its restore, as an operator makes them (single-member clusters only):
  // SaveSnapshot writes `etcdctl snapshot save` of the member to `file`; RestoreSnapshot
  // kills the member, replaces its data with `etcdctl snapshot restore` of `file` (the
  // same name, peer URL and token, so the cluster keeps its id and goes back to the
  // snapshot's revision) and starts it again on the same ports, waiting until it answers.
  // Errors: what etcdctl said, or that the member did not come back.
  tl::expected<void, std::string> SaveSnapshot(const std::filesystem::path& file) const;
  tl::expected<void, std::string> RestoreSnapshot(const std::filesystem::path& file);

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    std::string client_url;
    std::string peer_url;
    std::unique_ptr<Process> process;
    bool paused = false;
  };
  void Start(int member, bool existing);
  // Draws ports, starts every member and waits until each is ready: "" on success,
  // otherwise what went wrong (the members are left running; StopAll() ends them).
  std::string StartAll(std::chrono::milliseconds timeout);
  void StopAll();

  TempDir dir_;
  std::vector<Member> members_;
  std::string initial_cluster_;
  std::vector<std::string> extra_args_;
  std::optional<TestCertificates> tls_;
  std::string error_;
};

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_ETCD_CLUSTER_H_
