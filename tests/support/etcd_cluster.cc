#include "etcd_cluster.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "wait_until.h"

namespace snowflake::testing {
namespace {

size_t Collect(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

}  // namespace

tl::expected<TestCertificates, std::string> MakeTestCertificates(
    const std::filesystem::path& dir) {
  const std::string openssl = "/usr/bin/openssl";
  TestCertificates c;
  c.ca_file = dir / "ca.pem";
  c.server_cert = dir / "server.pem";
  c.server_key = dir / "server-key.pem";
  c.client_cert = dir / "client.pem";
  c.client_key = dir / "client-key.pem";
  c.other_ca_file = dir / "other-ca.pem";
  const auto ext = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  // clientAuth too: etcd's own gateway dials the member with the server certificate.
  const std::string server_ext = ext(
      "server.ext", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n");
  const std::string client_ext = ext("client.ext", "extendedKeyUsage=clientAuth\n");
  // P-256 keys: quick to make, accepted by etcd's Go TLS and by OpenSSL.
  const std::vector<std::string> key = {"-newkey", "ec", "-pkeyopt",
                                        "ec_paramgen_curve:prime256v1", "-nodes"};
  auto with = [&](std::vector<std::string> argv, const std::vector<std::string>& more) {
    argv.insert(argv.begin() + 2, more.begin(), more.end());
    return argv;
  };
  const std::vector<std::vector<std::string>> steps = {
      with({openssl, "req", "-x509", "-keyout", (dir / "ca-key.pem").string(), "-out",
            c.ca_file.string(), "-days", "2", "-subj", "/CN=snowflaked test CA"}, key),
      with({openssl, "req", "-x509", "-keyout", (dir / "other-ca-key.pem").string(), "-out",
            c.other_ca_file.string(), "-days", "2", "-subj", "/CN=some other CA"}, key),
      with({openssl, "req", "-keyout", c.server_key.string(), "-out",
            (dir / "server.csr").string(), "-subj", "/CN=127.0.0.1"}, key),
      {openssl, "x509", "-req", "-in", (dir / "server.csr").string(), "-CA", c.ca_file.string(),
       "-CAkey", (dir / "ca-key.pem").string(), "-CAcreateserial", "-out", c.server_cert.string(),
       "-days", "2", "-extfile", server_ext},
      with({openssl, "req", "-keyout", c.client_key.string(), "-out",
            (dir / "client.csr").string(), "-subj", "/CN=snowflaked"}, key),
      {openssl, "x509", "-req", "-in", (dir / "client.csr").string(), "-CA", c.ca_file.string(),
       "-CAkey", (dir / "ca-key.pem").string(), "-CAcreateserial", "-out", c.client_cert.string(),
       "-days", "2", "-extfile", client_ext},
  };
  for (const auto& argv : steps) {
    const RunResult run = RunCommand(argv);
    if (!run.status.ExitedWith(0)) {
      std::string line;
      for (const auto& a : argv) line += a + " ";
      return tl::unexpected(line + "failed: " + run.out + run.err);
    }
  }
  return c;
}

std::string EtcdDaemonToml(const std::string& name, const std::vector<std::string>& endpoints,
                           const std::string& prefix, const std::string& machines,
                           const std::string& etcd_extra) {
  std::string list;
  for (const auto& url : endpoints) {
    if (!list.empty()) list += ", ";
    list += "\"" + url + "\"";
  }
  std::string toml = "[daemon]\ninstance = \"";
  toml += name;
  toml += "\"\n[register]\nbackend = \"etcd\"\nmachines = \"" + machines +
          "\"\nholder_id = \"host-" + name + "\"\n[register.etcd]\nendpoints = [" + list +
          "]\nprefix = \"" + prefix + "\"\n" + etcd_extra;
  return toml;
}

std::optional<HttpAnswer> HttpPost(const std::string& url, const std::string& body,
                                   std::chrono::milliseconds timeout,
                                   const TestCertificates* tls) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return std::nullopt;
  HttpAnswer answer;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  if (tls != nullptr) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, tls->ca_file.c_str());
    curl_easy_setopt(curl, CURLOPT_SSLCERT, tls->client_cert.c_str());
    curl_easy_setopt(curl, CURLOPT_SSLKEY, tls->client_key.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer.body);
  const CURLcode rc = curl_easy_perform(curl);
  if (rc == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &answer.status);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) return std::nullopt;
  return answer;
}

EtcdCluster::EtcdCluster(int members, std::chrono::milliseconds timeout,
                         std::vector<std::string> extra_args,
                         std::optional<TestCertificates> tls)
    : dir_("etcd-cluster"), extra_args_(std::move(extra_args)), tls_(std::move(tls)) {
  members_.resize(static_cast<size_t>(members));
  // A cluster that does not form (a port taken between the check and etcd's bind, a
  // member starved on a loaded host) is started again on new ports and empty data
  // directories. Every failed attempt is printed, and its logs end up in error().
  constexpr int kAttempts = 3;
  std::string failures;
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    std::string why = StartAll(timeout);
    if (why.empty()) return;
    why += Logs();
    StopAll();
    failures += "\n=== attempt " + std::to_string(attempt) + ": " + why;
    std::cerr << "etcd test cluster, attempt " << attempt << " of " << kAttempts
              << " failed: " << why << "\n";
  }
  error_ =
      "etcd test cluster did not form in " + std::to_string(kAttempts) + " attempts:" + failures;
}

std::string EtcdCluster::StartAll(std::chrono::milliseconds timeout) {
  initial_cluster_.clear();
  for (size_t i = 0; i < members_.size(); ++i) {
    Member& m = members_[i];
    m.name = std::to_string(i);  // appended, not "m" + …: GCC 12's -Wrestrict misfires
    m.name.insert(0, 1, 'm');
    std::error_code ignored;
    std::filesystem::remove_all(dir_ / (m.name + ".data"), ignored);
    m.client_port = FreeLoopbackPort();
    m.peer_port = FreeLoopbackPort();
    if (m.client_port == 0 || m.peer_port == 0 || m.client_port == m.peer_port) {
      return "no free loopback port for member " + m.name;
    }
    for (size_t k = 0; k < i; ++k) {
      const Member& o = members_[k];
      if (o.client_port == m.client_port || o.client_port == m.peer_port ||
          o.peer_port == m.client_port || o.peer_port == m.peer_port) {
        return "two members drew the same port";
      }
    }
    m.client_url = (tls_ ? "https://127.0.0.1:" : "http://127.0.0.1:") +
                   std::to_string(m.client_port);
    m.peer_url = "http://127.0.0.1:" + std::to_string(m.peer_port);
    if (i > 0) initial_cluster_ += ',';
    initial_cluster_ += m.name;
    initial_cluster_ += '=';
    initial_cluster_ += m.peer_url;
  }
  try {
    for (int i = 0; i < size(); ++i) Start(i, /*existing=*/false);
  } catch (const std::exception& e) {
    return std::string("cannot start etcd: ") + e.what();
  }
  for (int i = 0; i < size(); ++i) {
    if (!WaitReady(i, timeout)) {
      return "member " + members_[i].name + " did not become ready within " +
             std::to_string(timeout.count()) + " ms";
    }
  }
  return "";
}

void EtcdCluster::StopAll() {
  for (Member& m : members_) {
    if (m.process) {
      m.process->Kill(SIGKILL);
      (void)m.process->Wait(std::chrono::seconds(10));
      m.process.reset();
    }
    m.paused = false;
  }
}

EtcdCluster::~EtcdCluster() { StopAll(); }

void EtcdCluster::Start(int i, bool existing) {
  Member& m = members_[i];
  const auto data = dir_ / (m.name + ".data");
  // Short heartbeats and elections: a lost leader is replaced in about a second on
  // loopback, still far above the loopback round trip even on a loaded host.
  SpawnOptions spawn;
  spawn.out = Output::Null();
  spawn.err = Output::File(dir_ / (m.name + ".log"));
  std::vector<std::string> argv = {kEtcdPath, "--name", m.name, "--data-dir", data.string(), "--listen-client-urls",
       m.client_url, "--advertise-client-urls", m.client_url, "--listen-peer-urls", m.peer_url,
       "--initial-advertise-peer-urls", m.peer_url, "--initial-cluster", initial_cluster_,
       "--initial-cluster-state", existing ? "existing" : "new", "--initial-cluster-token",
       "snowflake-test", "--heartbeat-interval", "100", "--election-timeout", "1000",
       "--logger", "zap", "--log-level", "warn"};
  if (tls_) {
    argv.insert(argv.end(), {"--cert-file", tls_->server_cert.string(), "--key-file",
                             tls_->server_key.string(), "--client-cert-auth",
                             "--trusted-ca-file", tls_->ca_file.string()});
  }
  argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
  m.process = std::make_unique<Process>(Process::Spawn(argv, spawn));
  m.paused = false;
}

std::vector<std::string> EtcdCluster::ClientUrls() const {
  std::vector<std::string> out;
  for (const Member& m : members_) out.push_back(m.client_url);
  return out;
}

pid_t EtcdCluster::pid(int member) const { return members_[member].process->pid(); }

void EtcdCluster::Kill(int member) {
  Member& m = members_[member];
  if (!m.process) return;
  m.process->Kill(SIGKILL);
  (void)m.process->Wait(std::chrono::seconds(10));
  m.process.reset();
}

void EtcdCluster::Restart(int member) {
  if (members_[member].process) return;
  Start(member, /*existing=*/true);
}

tl::expected<void, std::string> EtcdCluster::SaveSnapshot(const std::filesystem::path& file) const {
  if (size() != 1 || tls_) {
    return tl::unexpected(std::string("snapshots are made of one plain member only"));
  }
  const std::string endpoint = members_[0].client_url.substr(members_[0].client_url.find("//") + 2);
  RunOptions run;
  run.env.set = {{"ETCDCTL_API", "3"}};
  auto saved =
      RunCommand({kEtcdctlPath, "--endpoints", endpoint, "snapshot", "save", file.string()}, run);
  if (!saved.status.ExitedWith(0)) {
    return tl::unexpected("etcdctl snapshot save: " + saved.status.ToString() + ": " + saved.err);
  }
  return {};
}

tl::expected<void, std::string> EtcdCluster::RestoreSnapshot(const std::filesystem::path& file) {
  if (size() != 1 || tls_) {
    return tl::unexpected(std::string("snapshots are made of one plain member only"));
  }
  Member& m = members_[0];
  Kill(0);
  const auto data = dir_ / (m.name + ".data");
  std::error_code ignored;
  std::filesystem::remove_all(data, ignored);
  RunOptions run;
  run.env.set = {{"ETCDCTL_API", "3"}};
  auto restored = RunCommand(
      {kEtcdctlPath, "snapshot", "restore", file.string(), "--name", m.name, "--data-dir",
       data.string(), "--initial-cluster", initial_cluster_, "--initial-advertise-peer-urls",
       m.peer_url, "--initial-cluster-token", "snowflake-test"},
      run);
  if (!restored.status.ExitedWith(0)) {
    return tl::unexpected("etcdctl snapshot restore: " + restored.status.ToString() + ": " +
                          restored.err);
  }
  Start(0, /*existing=*/true);
  if (!WaitReady(0, std::chrono::seconds(30))) {
    return tl::unexpected("the restored member did not answer within 30 s: " + Logs());
  }
  return {};
}

void EtcdCluster::Pause(int member) {
  Member& m = members_[member];
  if (m.process && m.process->Kill(SIGSTOP)) m.paused = true;
}

void EtcdCluster::Resume(int member) {
  Member& m = members_[member];
  if (m.process && m.process->Kill(SIGCONT)) m.paused = false;
}

std::optional<int> EtcdCluster::Leader() const {
  for (int i = 0; i < size(); ++i) {
    const Member& m = members_[i];
    if (!m.process || m.paused) continue;
    auto answer = HttpPost(m.client_url + "/v3/maintenance/status", "{}", std::chrono::seconds(2),
                           tls_ ? &*tls_ : nullptr);
    if (!answer || answer->status != 200) continue;
    const auto j = nlohmann::json::parse(answer->body, nullptr, false);
    if (j.is_discarded() || !j.contains("leader") || !j.contains("header")) continue;
    const std::string leader = j["leader"].get<std::string>();
    // Which member has that id: ask each running one for its own id.
    for (int k = 0; k < size(); ++k) {
      const Member& c = members_[k];
      if (!c.process || c.paused) continue;
      auto own = HttpPost(c.client_url + "/v3/maintenance/status", "{}", std::chrono::seconds(2),
                          tls_ ? &*tls_ : nullptr);
      if (!own || own->status != 200) continue;
      const auto o = nlohmann::json::parse(own->body, nullptr, false);
      if (!o.is_discarded() && o.contains("header") &&
          o["header"].value("member_id", std::string()) == leader) {
        return k;
      }
    }
  }
  return std::nullopt;
}

bool EtcdCluster::WaitReady(int member, std::chrono::milliseconds timeout) const {
  enum class Answer { kReady, kDown, kNotYet };
  const Answer last = AttemptUntil(
      [&] {
        if (!members_[member].process || !members_[member].process->Running()) return Answer::kDown;
        // A linearizable read needs a leader and a quorum.
        auto answer = HttpPost(members_[member].client_url + "/v3/kv/range", R"({"key":"AA=="})",
                               std::chrono::seconds(2), tls_ ? &*tls_ : nullptr);
        return answer && answer->status == 200 ? Answer::kReady : Answer::kNotYet;
      },
      [](Answer answer) { return answer != Answer::kNotYet; }, timeout,
      std::chrono::milliseconds(50));
  return last == Answer::kReady;
}

std::string EtcdCluster::Logs() const {
  std::string out;
  for (const Member& m : members_) {
    std::ifstream in(dir_ / (m.name + ".log"));
    std::stringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    if (s.size() > 4000) s = "..." + s.substr(s.size() - 4000);
    out += "\n--- " + m.name + " ---\n" + s;
  }
  return out;
}

}  // namespace snowflake::testing
