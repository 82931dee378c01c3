#include "daemon/http/tls_credentials.h"

// Boost 1.74's asio headers use std::exchange without including <utility>.
#include <utility>
//
#include <openssl/err.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <boost/asio/ssl/context.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "base/hex.h"

namespace snowflake::daemon {
namespace {

namespace ssl = boost::asio::ssl;

// OpenSSL's queued errors as one line (and the queue emptied).
std::string OpenSslErrors() {
  std::string out;
  while (const unsigned long code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    out += (out.empty() ? "" : "; ") + std::string(text);
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

std::string Named(const char* key, const std::filesystem::path& file) {
  return std::string("http.") + key + " " + file.string();
}

// The file exists and this process can read it.
tl::expected<void, std::string> Readable(const char* key, const std::filesystem::path& file) {
  FILE* f = std::fopen(file.c_str(), "rb");
  if (f == nullptr)
    return tl::unexpected(Named(key, file) + ": cannot read: " + std::strerror(errno));
  std::fclose(f);
  return {};
}

// PostgreSQL's rule, as far as "others" go: a private key readable (or writable) by every
// user on the host is not private. Group access is left to the operator (a Kubernetes
// Secret with fsGroup, a `snowflaked` group).
tl::expected<void, std::string> PrivateKeyMode(const std::filesystem::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    return tl::unexpected(Named("tls_key_file", file) + ": cannot read: " + std::strerror(errno));
  }
  if ((st.st_mode & (S_IROTH | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return tl::unexpected(
        Named("tls_key_file", file) + ": the private key is readable by every user (mode " + mode +
        "); refusing to use it. Make it private: chmod 600 " + file.string() +
        " (or 640 with the daemon's group), or, from a Kubernetes Secret, set the volume's "
        "defaultMode: 0440 (with the pod's fsGroup) or 0400");
  }
  return {};
}

// A whole new server context from the files, or why not (naming the file).
tl::expected<std::shared_ptr<ssl::context>, std::string> BuildContext(const Config::Http& options) {
  ERR_clear_error();
  if (auto ok = Readable("tls_cert_file", options.tls_cert_file); !ok)
    return tl::unexpected(ok.error());
  if (auto ok = Readable("tls_key_file", options.tls_key_file); !ok)
    return tl::unexpected(ok.error());
  if (auto ok = PrivateKeyMode(options.tls_key_file); !ok) return tl::unexpected(ok.error());
  if (!options.tls_client_ca_file.empty()) {
    if (auto ok = Readable("tls_client_ca_file", options.tls_client_ca_file); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  if (!options.tls_client_crl_file.empty()) {
    if (auto ok = Readable("tls_client_crl_file", options.tls_client_crl_file); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = context->native_handle();
  // TLS 1.2 and 1.3 only: older versions have known weaknesses and no client of ours
  // needs them; 1.3 only if the operator says so.
  SSL_CTX_set_min_proto_version(native,
                                options.tls_min_version == "1.3" ? TLS1_3_VERSION : TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(native, TLS1_3_VERSION);
  // No session tickets: a ticket is sealed with a key that lives as long as this context
  // (until a rotation or a restart), so whoever gets the key opens every session recorded
  // since. Resumption still works through the context's own session cache.
  SSL_CTX_set_options(native, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                  SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_TICKET);
  // TLS 1.2's ciphers (OpenSSL's DEFAULT offers static RSA and CBC with SHA-1; the default
  // here is ECDHE with AES-GCM or ChaCha20-Poly1305) and the key-exchange groups. TLS
  // 1.3's suites are OpenSSL's, all AEAD.
  if (SSL_CTX_set_cipher_list(native, options.tls_ciphers.c_str()) != 1) {
    return tl::unexpected("http.tls_ciphers \"" + options.tls_ciphers +
                          "\": OpenSSL knows no TLS 1.2 cipher in it (e.g. "
                          "\"ECDHE+AESGCM:ECDHE+CHACHA20\"; see `openssl ciphers -v LIST`): " +
                          OpenSslErrors());
  }
  if (SSL_CTX_set1_groups_list(native, options.tls_groups.c_str()) != 1) {
    return tl::unexpected("http.tls_groups \"" + options.tls_groups +
                          "\": OpenSSL does not know every group in it (e.g. "
                          "\"X25519:P-256:P-384\"): " +
                          OpenSslErrors());
  }
  if (SSL_CTX_use_certificate_chain_file(native, options.tls_cert_file.c_str()) != 1) {
    return tl::unexpected(Named("tls_cert_file", options.tls_cert_file) +
                          ": not a PEM certificate chain: " + OpenSslErrors());
  }
  if (SSL_CTX_use_PrivateKey_file(native, options.tls_key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    // OpenSSL compares the key with the certificate as it loads it.
    const unsigned long last = ERR_peek_last_error();
    const bool mismatch =
        ERR_GET_LIB(last) == ERR_LIB_X509 && ERR_GET_REASON(last) == X509_R_KEY_VALUES_MISMATCH;
    return tl::unexpected(
        Named("tls_key_file", options.tls_key_file) +
        (mismatch ? ": does not match the certificate in " + options.tls_cert_file.string() + ": "
                  : std::string(": not a PEM private key: ")) +
        OpenSslErrors());
  }
  if (SSL_CTX_check_private_key(native) != 1) {
    return tl::unexpected(Named("tls_key_file", options.tls_key_file) +
                          ": does not match the certificate in " + options.tls_cert_file.string() +
                          ": " + OpenSslErrors());
  }
  if (X509* cert = SSL_CTX_get0_certificate(native); cert != nullptr) {
    if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
      spdlog::warn("{}: the certificate has expired; clients will refuse it",
                   Named("tls_cert_file", options.tls_cert_file));
    } else if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
      spdlog::warn("{}: the certificate is not valid yet; clients will refuse it",
                   Named("tls_cert_file", options.tls_cert_file));
    }
  }
  if (!options.tls_client_ca_file.empty()) {
    const char* ca = options.tls_client_ca_file.c_str();
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(ca);
    if (names == nullptr || SSL_CTX_load_verify_locations(native, ca, nullptr) != 1) {
      if (names != nullptr) sk_X509_NAME_pop_free(names, X509_NAME_free);
      return tl::unexpected(Named("tls_client_ca_file", options.tls_client_ca_file) +
                            ": no PEM CA certificate: " + OpenSslErrors());
    }
    SSL_CTX_set_client_CA_list(native, names);  // takes ownership
    if (!options.tls_client_crl_file.empty()) {
      // The leaf's issuer must have a CRL in the file (X509_V_FLAG_CRL_CHECK): a client
      // certificate whose CA published none fails, rather than pass unchecked.
      X509_STORE* store = SSL_CTX_get_cert_store(native);
      X509_LOOKUP* lookup = X509_STORE_add_lookup(store, X509_LOOKUP_file());
      if (lookup == nullptr ||
          X509_load_crl_file(lookup, options.tls_client_crl_file.c_str(), X509_FILETYPE_PEM) <= 0) {
        return tl::unexpected(Named("tls_client_crl_file", options.tls_client_crl_file) +
                              ": no PEM CRL: " + OpenSslErrors());
      }
      X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
    }
    SSL_CTX_set_verify(native, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    // Session resumption with client certificates needs a context id, or a resumed
    // handshake fails.
    static constexpr unsigned char kSessionContext[] = "snowflaked-http";
    SSL_CTX_set_session_id_context(native, kSessionContext, sizeof kSessionContext - 1);
  }
  return context;
}

// The notAfter of the context's certificate, in Unix seconds; 0 if it cannot be read.
int64_t NotAfterUnix(ssl::context& context) {
  X509* cert = SSL_CTX_get0_certificate(context.native_handle());
  std::tm when{};
  if (cert == nullptr || ASN1_TIME_to_tm(X509_get0_notAfter(cert), &when) != 1) return 0;
  return static_cast<int64_t>(timegm(&when));
}

// What changes when a file is replaced (rename, symlink swap, rewrite in place): the
// status of each file, links followed. A missing file has its errno instead.
std::string Signature(const Config::Http& options) {
  std::string out;
  for (const std::filesystem::path* file :
       {&options.tls_cert_file, &options.tls_key_file, &options.tls_client_ca_file,
        &options.tls_client_crl_file}) {
    if (file->empty()) continue;
    struct stat st {};
    if (::stat(file->c_str(), &st) != 0) {
      out += "E" + std::to_string(errno) + ";";
      continue;
    }
    out += std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
           std::to_string(st.st_size) + ":" + std::to_string(st.st_mode) + ":" +
           std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ":" +
           std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec) + ";";
  }
  return out;
}

}  // namespace

TlsCredentials::TlsCredentials(const Config::Http& options) : options_(options) {}
TlsCredentials::~TlsCredentials() = default;

tl::expected<std::unique_ptr<TlsCredentials>, std::string> TlsCredentials::Load(
    const Config::Http& options) noexcept {
  try {
    std::unique_ptr<TlsCredentials> out(new TlsCredentials(options));
    // The signature first: a file replaced while it is read is then seen as changed at the
    // next look, and read again.
    out->signature_ = Signature(options);
    auto context = BuildContext(options);
    if (!context) return tl::unexpected(context.error());
    out->not_after_unix_ = NotAfterUnix(**context);
    out->current_ = std::move(*context);
    return out;
  } catch (const std::exception& e) {
    return tl::unexpected(std::string("http TLS: ") + e.what());
  }
}

std::shared_ptr<ssl::context> TlsCredentials::Current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

int64_t TlsCredentials::not_after_unix() const {
  std::lock_guard lock(mutex_);
  return not_after_unix_;
}

TlsCredentials::Reloaded TlsCredentials::Reload() noexcept {
  try {
    std::string signature = Signature(options_);
    if (signature == signature_) return Reloaded::kUnchanged;
    // A rotation replaces the files one by one (certbot, an operator's cp): load only once
    // they stood still for one look, so a certificate beside the old key is not refused,
    // logged and alerted on for the second it takes.
    if (signature != pending_signature_) {
      pending_signature_ = std::move(signature);
      return Reloaded::kUnchanged;
    }
    signature_ = std::move(signature);
    auto context = BuildContext(options_);
    if (!context) {
      spdlog::error(
          "http front: refusing the changed TLS files, still serving the previous "
          "certificate: {}",
          context.error());
      return Reloaded::kRefused;
    }
    const int64_t not_after = NotAfterUnix(**context);
    {
      std::lock_guard lock(mutex_);
      current_ = std::move(*context);
      not_after_unix_ = not_after;
    }
    spdlog::info("http front: new TLS certificate from {} in use for new connections",
                 options_.tls_cert_file.string());
    return Reloaded::kTaken;
  } catch (const std::exception& e) {
    spdlog::error("http front: reloading the TLS files: {}", e.what());
    return Reloaded::kRefused;
  }
}

std::string CertificateClientKey(X509* peer) {
  constexpr size_t kMaxUriBytes = 256;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(peer, NID_subject_alt_name, nullptr, nullptr));
  std::string uri;
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names) && uri.empty(); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type != GEN_URI) continue;
    const ASN1_IA5STRING* text = name->d.uniformResourceIdentifier;
    uri.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
               static_cast<size_t>(ASN1_STRING_length(text)));
  }
  GENERAL_NAMES_free(names);
  if (!uri.empty() && uri.size() <= kMaxUriBytes) return "uri:" + uri;
  if (!uri.empty()) {
    SHA256(reinterpret_cast<const unsigned char*>(uri.data()), uri.size(), digest);
    return "uri-sha256:" + HexLower(digest, sizeof digest);
  }
  std::string der;
  for (const X509_NAME* name : {X509_get_issuer_name(peer), X509_get_subject_name(peer)}) {
    const unsigned char* bytes = nullptr;
    size_t size = 0;
    if (X509_NAME_get0_der(name, &bytes, &size) == 1) {
      der.append(reinterpret_cast<const char*>(bytes), size);
    }
  }
  SHA256(reinterpret_cast<const unsigned char*>(der.data()), der.size(), digest);
  return "cert:" + HexLower(digest, sizeof digest);
}

tl::expected<void, std::string> CheckTlsFiles(const Config::Http& options) noexcept {
  if (!options.tls()) return {};
  auto loaded = TlsCredentials::Load(options);
  if (!loaded) return tl::unexpected(loaded.error());
  return {};
}

}  // namespace snowflake::daemon
