#include "register/etcd_client.h"

#include <curl/curl.h>

#include <mutex>

#include "register/etcd_json.h"

namespace snowflake::reg::etcd {
namespace {

// More than any answer of ours can need (a range over 1,024 numbers is ~300 KB): a
// larger one is cut off and reported as malformed rather than filling memory.
constexpr size_t kMaxAnswerBytes = 16 << 20;

size_t Collect(char* data, size_t size, size_t count, void* user) {
  auto* out = static_cast<std::string*>(user);
  const size_t n = size * count;
  if (out->size() + n > kMaxAnswerBytes) return 0;  // makes curl fail with CURLE_WRITE_ERROR
  out->append(data, n);
  return n;
}

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// A transfer that failed on certificates rather than on the network: the server's is not
// trusted (or does not name the host), one of ours cannot be read, or the server answered
// the handshake with a certificate alert (TLS 1.3 sends it after the handshake, so curl
// reports a receive error whose text names the alert).
bool IsCertificateFailure(CURLcode rc, const char* detail) {
  switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
      return true;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR: {
      const std::string_view text(detail);
      return text.find("alert bad certificate") != std::string_view::npos ||
             text.find("alert certificate required") != std::string_view::npos ||
             text.find("alert unknown ca") != std::string_view::npos ||
             text.find("certificate verify failed") != std::string_view::npos;
    }
    default:
      return false;
  }
}

// What to do about a certificate failure, in the config's words.
std::string CertificateHint(CURLcode rc, const ClientOptions& options) {
  switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:
      return options.ca_file.empty()
                 ? "the server's certificate is not signed by a CA this host trusts: set "
                   "register.etcd.ca_file to the etcd cluster's CA"
                 : "the server's certificate is not signed by register.etcd.ca_file (" +
                       options.ca_file +
                       ") or does not name the endpoint's host: check ca_file and endpoints";
    case CURLE_SSL_CACERT_BADFILE:
      return "cannot use register.etcd.ca_file (" + options.ca_file +
             "): check that it exists, is readable and holds PEM certificates";
    case CURLE_SSL_CERTPROBLEM:
      return "cannot use register.etcd.cert_file (" + options.cert_file + ") with key_file (" +
             options.key_file + "): check that both are readable PEM files that belong together";
    default:
      return "the etcd server refused this client's TLS certificate: check register.etcd."
             "cert_file and key_file against the cluster's --trusted-ca-file";
  }
}

bool IsInvalidToken(const Error& e) {
  return e.kind == ErrorKind::kRejected &&
         (e.grpc_code == 16 || e.message.find("invalid auth token") != std::string::npos);
}

}  // namespace

EtcdClient::EtcdClient(ClientOptions options) : options_(std::move(options)) {
  GlobalInit();
  if (options_.endpoints.empty()) options_.endpoints.push_back("http://127.0.0.1:2379");
  for (auto& e : options_.endpoints) {
    while (!e.empty() && e.back() == '/') e.pop_back();
  }
}

EtcdClient::~EtcdClient() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

tl::expected<EtcdClient::Answer, Error> EtcdClient::PostTo(const std::string& endpoint,
                                                           std::string_view path,
                                                           const std::string& body, bool with_token,
                                                           bool& maybe_sent) noexcept {
  maybe_sent = false;
  try {
    if (curl_ == nullptr) curl_ = curl_easy_init();
    CURL* curl = static_cast<CURL*>(curl_);
    if (curl == nullptr) {
      return tl::unexpected(Error{ErrorKind::kUnavailable, 0, 0, "curl_easy_init failed"});
    }
    // Reset keeps the connection cache (so the next call reuses the connection) but
    // clears every option of the previous call.
    curl_easy_reset(curl);
    const std::string url = endpoint + std::string(path);
    Answer answer;
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    std::string auth;
    if (with_token && !token_.empty()) {
      auth = "Authorization: " + token_;
      headers = curl_slist_append(headers, auth.c_str());
    }
    char detail[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, detail);
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    // The gateway speaks HTTP/1.1 JSON; over https libcurl would otherwise offer HTTP/2,
    // which etcd routes towards its gRPC handler.
    curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // timeouts without SIGALRM, thread-safe
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options_.connect_timeout_ms));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout_ms));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer.body);
    // Never go through an HTTP proxy from the environment: the register talks to its
    // own etcd members only.
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
    if (!options_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, options_.ca_file.c_str());
    if (!options_.cert_file.empty()) {
      curl_easy_setopt(curl, CURLOPT_SSLCERT, options_.cert_file.c_str());
      curl_easy_setopt(curl, CURLOPT_SSLKEY, options_.key_file.c_str());
    }
    const CURLcode rc = curl_easy_perform(curl);
    curl_slist_free_all(headers);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);  // `detail` goes out of scope
    last_endpoint_ = endpoint;
    if (rc != CURLE_OK) {
      const std::string why = detail[0] != '\0' ? detail : curl_easy_strerror(rc);
      if (IsCertificateFailure(rc, detail)) {
        // Nothing reached etcd's request handler: a refused handshake applies nothing.
        return tl::unexpected(
            Error{ErrorKind::kTls, 0, 0,
                  endpoint + ": TLS failed (" + why + "): " + CertificateHint(rc, options_)});
      }
      curl_off_t pretransfer_us = 0;
      curl_easy_getinfo(curl, CURLINFO_PRETRANSFER_TIME_T, &pretransfer_us);
      // Before the request started going out (connect, DNS, TLS), nothing was applied.
      maybe_sent = pretransfer_us > 0 && rc != CURLE_COULDNT_CONNECT &&
                   rc != CURLE_COULDNT_RESOLVE_HOST && rc != CURLE_SSL_CONNECT_ERROR;
      return tl::unexpected(Error{ErrorKind::kUnavailable, 0, 0, endpoint + ": " + why});
    }
    maybe_sent = true;
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    answer.http_status = static_cast<int>(status);
    return answer;
  } catch (const std::exception& e) {
    return tl::unexpected(Error{ErrorKind::kUnavailable, 0, 0, endpoint + ": " + e.what()});
  }
}

tl::expected<void, Error> EtcdClient::Authenticate(const std::string& endpoint) noexcept {
  bool maybe_sent = false;
  auto answer = PostTo(endpoint, "/v3/auth/authenticate",
                       AuthenticateBody(options_.user, options_.password), false, maybe_sent);
  if (!answer) return tl::unexpected(answer.error());
  auto token = ParseAuthenticateResponse(answer->http_status, answer->body);
  if (!token) {
    Error e = token.error();
    e.message = "authenticating as \"" + options_.user + "\" at " + endpoint + ": " + e.message;
    if (e.kind == ErrorKind::kRejected && e.grpc_code == 3) {
      // etcd: "authentication failed, invalid user ID or password".
      e.message += ": check register.etcd.user and register.etcd.password (or password_file)";
    }
    return tl::unexpected(e);
  }
  token_ = std::move(*token);
  return {};
}

tl::expected<EtcdClient::Answer, Error> EtcdClient::Post(std::string_view path,
                                                         const std::string& body) noexcept {
  const size_t n = options_.endpoints.size();
  std::string failures;
  // A certificate failure at one endpoint is tried elsewhere too; if no endpoint answered
  // and one refused our TLS, that, not an outage, is the answer.
  bool tls_failed = false;
  for (size_t attempt = 0; attempt < n; ++attempt) {
    const std::string& endpoint = options_.endpoints[current_];
    if (!options_.user.empty() && token_.empty()) {
      if (auto auth = Authenticate(endpoint); !auth) {
        if (auth.error().kind != ErrorKind::kUnavailable && auth.error().kind != ErrorKind::kTls) {
          return tl::unexpected(auth.error());
        }
        tls_failed = tls_failed || auth.error().kind == ErrorKind::kTls;
        failures += (failures.empty() ? "" : "; ") + auth.error().message;
        current_ = (current_ + 1) % n;
        continue;
      }
    }
    bool maybe_sent = false;
    auto answer = PostTo(endpoint, path, body, true, maybe_sent);
    if (answer) return answer;
    tls_failed = tls_failed || answer.error().kind == ErrorKind::kTls;
    failures += (failures.empty() ? "" : "; ") + answer.error().message;
    // Either way the next call starts elsewhere: this endpoint did not answer.
    current_ = (current_ + 1) % n;
    if (maybe_sent) {
      Error e = answer.error();
      e.message = "no answer in time (the request may or may not have been applied): " + failures;
      return tl::unexpected(e);
    }
  }
  if (tls_failed) {
    return tl::unexpected(
        Error{ErrorKind::kTls, 0, 0, "no etcd endpoint accepted this client's TLS: " + failures});
  }
  return tl::unexpected(
      Error{ErrorKind::kUnavailable, 0, 0, "no etcd endpoint reachable: " + failures});
}

template <typename T, typename Parse>
tl::expected<T, Error> EtcdClient::Call(std::string_view path, const std::string& body,
                                        Parse&& parse) noexcept {
  for (int round = 0;; ++round) {
    auto answer = Post(path, body);
    if (!answer) {
      Error e = answer.error();
      e.message = std::string(path) + ": " + e.message;
      return tl::unexpected(e);
    }
    auto parsed = parse(answer->http_status, answer->body);
    if (!parsed && round == 0 && !options_.user.empty() && IsInvalidToken(parsed.error())) {
      token_.clear();  // expired (etcd's simple tokens last 5 minutes): authenticate again
      continue;
    }
    if (!parsed) {
      Error e = parsed.error();
      e.message = std::string(path) + " at " + last_endpoint_ + ": " + e.message;
      return tl::unexpected(e);
    }
    return parsed;
  }
}

tl::expected<PutResult, Error> EtcdClient::Put(std::string_view key, std::string_view value,
                                               int64_t lease) noexcept {
  try {
    return Call<PutResult>("/v3/kv/put", PutBody(key, value, lease), &ParsePutResponse);
  } catch (const std::exception& e) {
    return tl::unexpected(Error{ErrorKind::kUnavailable, 0, 0, e.what()});
  }
}

tl::expected<RangeResult, Error> EtcdClient::Range(std::string_view key, std::string_view range_end,
                                                   int64_t limit) noexcept {
  try {
    return Call<RangeResult>("/v3/kv/range", RangeBody(key, range_end, limit), &ParseRangeResponse);
  } catch (const std::exception& e) {
    return tl::unexpected(Error{ErrorKind::kUnavailable, 0, 0, e.what()});
  }
}

tl::expected<TxnResult, Error> EtcdClient::Txn(const TxnRequest& txn) noexcept {
  try {
    return Call<TxnResult>("/v3/kv/txn", TxnBody(txn), &ParseTxnResponse);
  } catch (const std::exception& e) {
    return tl::unexpected(Error{ErrorKind::kUnavailable, 0, 0, e.what()});
  }
}

tl::expected<LeaseGrant, Error> EtcdClient::GrantLease(int64_t ttl_s) noexcept {
  try {
    return Call<LeaseGrant>("/v3/lease/grant", LeaseGrantBody(ttl_s), &ParseLeaseGrantResponse);
  } catch (const std::exception& e) {
    return tl::unexpected(Error{ErrorKind::kUnavailable, 0, 0, e.what()});
  }
}

tl::expected<LeaseKeepAlive, Error> EtcdClient::KeepAlive(int64_t lease) noexcept {
  try {
    return Call<LeaseKeepAlive>("/v3/lease/keepalive", LeaseIdBody(lease),
                                &ParseLeaseKeepAliveResponse);
  } catch (const std::exception& e) {
    return tl::unexpected(Error{ErrorKind::kUnavailable, 0, 0, e.what()});
  }
}

tl::expected<void, Error> EtcdClient::Revoke(int64_t lease) noexcept {
  try {
    return Call<void>("/v3/lease/revoke", LeaseIdBody(lease), &ParseEmptyResponse);
  } catch (const std::exception& e) {
    return tl::unexpected(Error{ErrorKind::kUnavailable, 0, 0, e.what()});
  }
}

tl::expected<MemberStatus, Error> EtcdClient::Status() noexcept {
  try {
    return Call<MemberStatus>("/v3/maintenance/status", "{}", &ParseStatusResponse);
  } catch (const std::exception& e) {
    return tl::unexpected(Error{ErrorKind::kUnavailable, 0, 0, e.what()});
  }
}

tl::expected<LeaseTimeToLive, Error> EtcdClient::TimeToLive(int64_t lease) noexcept {
  try {
    return Call<LeaseTimeToLive>("/v3/lease/timetolive", LeaseTimeToLiveBody(lease),
                                 &ParseLeaseTimeToLiveResponse);
  } catch (const std::exception& e) {
    return tl::unexpected(Error{ErrorKind::kUnavailable, 0, 0, e.what()});
  }
}

}  // namespace snowflake::reg::etcd
