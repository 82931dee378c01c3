#include "tls_test_client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace snowflake::testing {
namespace {

size_t AppendTo(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

size_t HeaderTo(char* data, size_t size, size_t count, void* user) {
  const std::string_view line(data, size * count);
  constexpr std::string_view kName = "retry-after:";
  if (line.size() > kName.size()) {
    std::string lower(line.substr(0, kName.size()));
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == kName) {
      std::string value(line.substr(kName.size()));
      while (!value.empty() && (value.front() == ' ')) value.erase(0, 1);
      while (!value.empty() && (value.back() == '\r' || value.back() == '\n')) value.pop_back();
      *static_cast<std::string*>(user) = value;
    }
  }
  return size * count;
}

std::string SslErrors() {
  std::string out;
  while (const unsigned long code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    out += (out.empty() ? "" : "; ") + std::string(text);
  }
  return out;
}

}  // namespace

ResumingClient::ResumingClient(TlsClientFiles files, TlsVersions versions) {
  SSL_CTX* context = SSL_CTX_new(TLS_client_method());
  context_ = context;
  if (context == nullptr) {
    setup_error_ = "SSL_CTX_new: " + SslErrors();
    return;
  }
  SSL_CTX_set_min_proto_version(context,
                                versions == TlsVersions::kOnly13 ? TLS1_3_VERSION : TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(context,
                                versions == TlsVersions::kOnly12 ? TLS1_2_VERSION : TLS1_3_VERSION);
  SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
  if (SSL_CTX_load_verify_locations(context, files.ca.c_str(), nullptr) != 1) {
    setup_error_ = "CA file " + files.ca.string() + ": " + SslErrors();
  } else if (!files.cert.empty() &&
             (SSL_CTX_use_certificate_chain_file(context, files.cert.c_str()) != 1 ||
              SSL_CTX_use_PrivateKey_file(context, files.key.c_str(), SSL_FILETYPE_PEM) != 1)) {
    setup_error_ = "client certificate " + files.cert.string() + ": " + SslErrors();
  }
}

ResumingClient::~ResumingClient() {
  ForgetSession();
  SSL_CTX_free(static_cast<SSL_CTX*>(context_));
}

void ResumingClient::ForgetSession() {
  SSL_SESSION_free(static_cast<SSL_SESSION*>(session_));
  session_ = nullptr;
}

ResumedReply ResumingClient::Get(uint16_t port, std::string_view target) {
  ResumedReply reply;
  if (!setup_error_.empty()) {
    reply.error = setup_error_;
    return reply;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    reply.error = "socket failed";
    return reply;
  }
  const timeval bound{.tv_sec = 20, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    reply.error = "connect failed";
    return reply;
  }
  ERR_clear_error();
  SSL* ssl = SSL_new(static_cast<SSL_CTX*>(context_));
  SSL_set_fd(ssl, fd);
  X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), "127.0.0.1");
  if (session_ != nullptr) SSL_set_session(ssl, static_cast<SSL_SESSION*>(session_));
  if (SSL_connect(ssl) != 1) {
    reply.error = "handshake failed: " + SslErrors() +
                  " (verify: " + X509_verify_cert_error_string(SSL_get_verify_result(ssl)) + ")";
  } else {
    reply.reused = SSL_session_reused(ssl) == 1;
    const std::string request =
        "GET " + std::string(target) + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    std::string received;
    if (SSL_write(ssl, request.data(), static_cast<int>(request.size())) > 0) {
      char buffer[4096];
      for (;;) {
        const int n = SSL_read(ssl, buffer, sizeof buffer);
        if (n <= 0) break;
        received.append(buffer, static_cast<size_t>(n));
      }
    }
    if (received.starts_with("HTTP/1.1 ") && received.size() >= 12) {
      reply.status = std::atoi(received.substr(9, 3).c_str());
      reply.ok = true;
    } else {
      reply.error = "no HTTP reply: " + SslErrors();
    }
    ForgetSession();
    SSL_SESSION* session = SSL_get1_session(ssl);
    session_ = session;
    reply.has_ticket = session != nullptr && SSL_SESSION_has_ticket(session) == 1;
  }
  SSL_shutdown(ssl);
  SSL_free(ssl);
  ::close(fd);
  ERR_clear_error();
  return reply;
}

HttpsClient::HttpsClient(TlsClientFiles files, TlsVersions versions)
    : files_(std::move(files)), versions_(versions) {
  static std::once_flag ready;
  std::call_once(ready, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  handle_ = curl_easy_init();
}

HttpsClient::~HttpsClient() { curl_easy_cleanup(static_cast<CURL*>(handle_)); }

void HttpsClient::Reset() {
  curl_easy_cleanup(static_cast<CURL*>(handle_));
  handle_ = curl_easy_init();
}

HttpsReply HttpsClient::Get(uint16_t port, std::string_view target) {
  CURL* curl = static_cast<CURL*>(handle_);
  HttpsReply reply;
  const std::string url = "https://127.0.0.1:" + std::to_string(port) + std::string(target);
  char error[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 20000L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "https");
  curl_easy_setopt(curl, CURLOPT_CAINFO, files_.ca.c_str());
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!files_.cert.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, files_.cert.c_str());
    curl_easy_setopt(curl, CURLOPT_SSLKEY, files_.key.c_str());
  }
  long version = CURL_SSLVERSION_TLSv1_2;
  if (versions_ == TlsVersions::kOnly12)
    version =
        static_cast<long>(CURL_SSLVERSION_TLSv1_2) | static_cast<long>(CURL_SSLVERSION_MAX_TLSv1_2);
  if (versions_ == TlsVersions::kOnly13) version = CURL_SSLVERSION_TLSv1_3;
  curl_easy_setopt(curl, CURLOPT_SSLVERSION, version);
  curl_easy_setopt(curl, CURLOPT_CERTINFO, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &AppendTo);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &HeaderTo);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &reply.retry_after);
  const CURLcode rc = curl_easy_perform(curl);
  reply.curl_code = static_cast<int>(rc);
  if (rc != CURLE_OK) reply.error = error[0] != '\0' ? error : curl_easy_strerror(rc);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.status);
  curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &reply.new_connections);
  curl_certinfo* certs = nullptr;
  if (curl_easy_getinfo(curl, CURLINFO_CERTINFO, &certs) == CURLE_OK && certs != nullptr &&
      certs->num_of_certs > 0 && reply.new_connections > 0) {
    for (curl_slist* item = certs->certinfo[0]; item != nullptr; item = item->next) {
      const std::string_view field(item->data);
      if (field.starts_with("Subject:")) reply.subject = std::string(field.substr(8));
    }
  }
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  return reply;
}

}  // namespace snowflake::testing
