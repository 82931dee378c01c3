// The HTTP front's TLS credentials (docs/http.md, "TLS"): the certificate chain, its key,
// the optional client CA and its CRLs of [http], loaded into an OpenSSL server context
// with the [http] TLS settings (TLS 1.2 and 1.3 only, by default ECDHE with AEAD ciphers,
// session tickets only with tls_session_tickets, sealed by keys that outlive any one
// context: tls_ticket_keys.h), and reloaded when the files change (cert-manager, certbot and a
// Kubernetes Secret replace them): Reload() builds a whole new context from the new files
// and only then makes it current, so a bad new pair is refused, logged with the file it
// names, and the old pair keeps serving. Connections keep the context they started with.
//
// Each file is read whole through one descriptor, whose status is what is judged, and
// loaded from those bytes: links are followed (a Kubernetes Secret's ..data swap), but the
// file reached must be a regular one (a FIFO is refused, never waited on), owned by root
// or the daemon's user and writable by no one else; a key may not be readable by other
// users either, except through root's group or one of the daemon's (as PostgreSQL
// refuses a key others may read). Each refusal names the file and the fix.
//
// Thread-safety: Current() from any thread; Reload() from one thread at a time.

#ifndef SNOWFLAKE_DAEMON_HTTP_TLS_CREDENTIALS_H_
#define SNOWFLAKE_DAEMON_HTTP_TLS_CREDENTIALS_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <tl/expected.hpp>

#include "daemon/config/config.h"
#include "snowflake/clock.h"

typedef struct x509_st X509;

namespace boost::asio::ssl {
class context;
}

namespace snowflake::daemon {

class TlsTicketKeys;

class TlsCredentials {
 public:
  // What Reload() found.
  enum class Reloaded { kUnchanged, kTaken, kRefused };

  // Loads the files of `options` (REQUIRES: options.tls()). Errors: a message naming the
  // key (http.tls_cert_file, ...), the file and what is wrong with it: unreadable, not a
  // regular file, another user's, writable by others, not PEM, a key that does not match
  // the certificate, a key readable by other users, a CRL past its nextUpdate or not yet
  // valid; a tls_ciphers, tls_ciphersuites or tls_groups name OpenSSL does not know.
  // Session-ticket keys rotate on `clock`, which must outlive the credentials.
  static tl::expected<std::unique_ptr<TlsCredentials>, std::string> Load(
      const Config::Http& options, Clock& clock) noexcept;
  ~TlsCredentials();
  TlsCredentials(const TlsCredentials&) = delete;
  TlsCredentials& operator=(const TlsCredentials&) = delete;

  // The context for a new connection; the connection keeps it alive as long as it needs.
  std::shared_ptr<boost::asio::ssl::context> Current() const;

  // The notAfter (Unix seconds) of the certificate Current() serves; 0 if unknown.
  int64_t not_after_unix() const;
  // The earliest notAfter of the client CA certificates Current() trusts; 0 without a
  // client CA. Past it, no client certificate that CA signed verifies.
  int64_t client_ca_not_after_unix() const;
  // The earliest nextUpdate (Unix seconds) of the CRLs Current() checks; 0 without a CRL
  // (or if none has a nextUpdate). Past it, OpenSSL refuses every client certificate of
  // that CA (a CRL loaded past it is refused; one that goes stale while in use is not).
  int64_t client_crl_next_update_unix() const;

  // Looks at the files (status only); if any changed since the last look, loads them and
  // makes the new context current, or refuses them (logging why, naming the file) and
  // keeps the current one. A refused set is not retried until a file changes again. A
  // changed client CA or CRL also ends every session ticket issued before it.
  Reloaded Reload() noexcept;
  // Why the last Reload() that returned kRefused refused the files (the message it
  // logged, naming the file). Reload()'s thread only.
  const std::string& refusal() const { return refusal_; }

 private:
  explicit TlsCredentials(const Config::Http& options);

  const Config::Http options_;
  // Set by Load() with tls_session_tickets; thread-safe. Every context built holds it too.
  std::shared_ptr<TlsTicketKeys> ticket_keys_;

  mutable std::mutex mutex_;
  std::shared_ptr<boost::asio::ssl::context> current_;  // guarded by mutex_
  int64_t not_after_unix_ = 0;                          // guarded by mutex_: current_'s
  int64_t client_ca_not_after_unix_ = 0;                // guarded by mutex_: current_'s
  int64_t client_crl_next_update_unix_ = 0;             // guarded by mutex_: current_'s
  // Reload()'s thread only: the files' status the serving context was built from (or last
  // refused at), and a changed status seen once, waiting to stand still for one look.
  std::string signature_;
  std::string pending_signature_;
  // Reload()'s thread only (and Load()): the digest of the client CA and CRL bytes the
  // serving context trusts.
  std::string trust_digest_;
  std::string refusal_;  // Reload()'s thread only
};

// Who a verified client certificate names, for per-client limits: "uri:" and its first SAN
// URI (a workload's stable name, e.g. SPIFFE's, whatever subject it is reissued under; a
// URI over 256 bytes as "uri-sha256:" and its hash), else "cert:" and the SHA-256 of its
// DER issuer followed by its DER subject (each self-delimiting, so two different pairs
// never give the same bytes; a printed subject is ambiguous and ignores the issuer).
// REQUIRES: `peer` is not null.
std::string CertificateClientKey(X509* peer);

// For --check-config: loads the TLS files as the front would (nothing if options.tls() is
// false). Errors: those of TlsCredentials::Load.
[[nodiscard]] tl::expected<void, std::string> CheckTlsFiles(const Config::Http& options) noexcept;

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_HTTP_TLS_CREDENTIALS_H_
