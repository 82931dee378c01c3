// HTTPS for tests of the TLS front: a libcurl handle that verifies the front against a CA
// file and may present a client certificate, and keeps its connection alive across Get()s
// (a fresh handle, or Reset(), opens a new one). libcurl, not the code under test, so a
// test sees what any TLS client would.
//
// An HttpsClient must be used from one thread.

#ifndef SNOWFLAKE_TESTS_HTTP_TLS_TEST_CLIENT_H_
#define SNOWFLAKE_TESTS_HTTP_TLS_TEST_CLIENT_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace snowflake::testing {

struct TlsClientFiles {
  std::filesystem::path ca;    // empty: verify nothing (never used by the tests' clients)
  std::filesystem::path cert;  // empty: no client certificate
  std::filesystem::path key;
};

// Which TLS versions the client offers.
enum class TlsVersions { kAny12Or13, kOnly12, kOnly13 };

struct HttpsReply {
  int curl_code = 0;  // CURLE_OK (0) or why the exchange failed
  std::string error;  // curl's message for curl_code ("SSL certificate problem: ...")
  long status = 0;    // HTTP status, 0 without a reply
  std::string body;
  std::string retry_after;   // the Retry-After header, "" if none
  std::string subject;       // the server certificate's subject, on a new connection
  long new_connections = 0;  // connections this Get() opened (0: reused)
  bool ok() const { return curl_code == 0 && status == 200; }
};

class HttpsClient {
 public:
  explicit HttpsClient(TlsClientFiles files, TlsVersions versions = TlsVersions::kAny12Or13);
  ~HttpsClient();
  HttpsClient(const HttpsClient&) = delete;
  HttpsClient& operator=(const HttpsClient&) = delete;

  // GET https://127.0.0.1:port<target> on the kept connection (or a new one).
  HttpsReply Get(uint16_t port, std::string_view target);
  // Forgets the kept connection.
  void Reset();

 private:
  void* handle_ = nullptr;  // CURL*
  TlsClientFiles files_;
  TlsVersions versions_;
};

// One exchange of a ResumingClient.
struct ResumedReply {
  bool ok = false;          // the handshake completed and an HTTP status line arrived
  std::string error;        // why not (OpenSSL's or the socket's words)
  int status = 0;           // the HTTP status, 0 without one
  bool reused = false;      // the server resumed the offered session (SSL_session_reused)
  bool has_ticket = false;  // the session kept afterwards holds a ticket from the server
};

// HTTPS with OpenSSL directly, to see session resumption: each Get() opens a connection,
// offers the session the previous Get() kept (if any), sends one GET with
// "Connection: close", reads to the end (so TLS 1.3's tickets, sent after the handshake,
// are read) and keeps the connection's session for the next Get(). Verifies the front
// for 127.0.0.1 against the CA file. Every read and write is bounded by a 20 s socket
// timeout.
//
// A ResumingClient must be used from one thread.
class ResumingClient {
 public:
  explicit ResumingClient(TlsClientFiles files, TlsVersions versions = TlsVersions::kAny12Or13);
  ~ResumingClient();
  ResumingClient(const ResumingClient&) = delete;
  ResumingClient& operator=(const ResumingClient&) = delete;

  ResumedReply Get(uint16_t port, std::string_view target);
  void ForgetSession();

 private:
  void* context_ = nullptr;  // SSL_CTX*
  void* session_ = nullptr;  // SSL_SESSION*, kept from the last Get(); owned
  std::string setup_error_;  // why the context could not be made, "" if it was
};

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_HTTP_TLS_TEST_CLIENT_H_
