#include "daemon/http/tls_credentials.h"

// Boost 1.74's asio headers use std::exchange without including <utility>.
#include <utility>
//
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/ssl/context.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <vector>

#include "daemon/http/tls_ticket_keys.h"
#include "snowflake/unique_fd.h"
#include "util/hex.h"

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

// "0644".
std::string ModeText(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// True if this process is in group `gid` (its own or a supplementary one).
bool InGroup(gid_t gid) {
  if (gid == getegid()) return true;
  const int count = getgroups(0, nullptr);
  if (count <= 0) return false;
  std::vector<gid_t> groups(static_cast<size_t>(count));
  const int got = getgroups(count, groups.data());
  return got > 0 && std::find(groups.begin(), groups.begin() + got, gid) != groups.begin() + got;
}

// A PEM file read is far smaller (a chain of a few certificates, a CRL list).
constexpr size_t kMaxTlsFileBytes = 4u << 20;

// One TLS file, read whole through the descriptor whose status is judged, so what is
// checked is what is loaded. Links are followed (a Kubernetes Secret's files are links
// into its ..data directory, swapped whole on a rotation); the file they reach must be a
// regular file (a FIFO is refused, never waited on), owned by root or this daemon's user,
// and writable by no one else: whoever may write it decides whom the front trusts or what
// key it serves. A private key may be read by no other user either, except through
// root's group or one of the daemon's (as PostgreSQL refuses a key others may read).
tl::expected<std::string, std::string> ReadTlsFile(const char* key,
                                                   const std::filesystem::path& file,
                                                   bool private_key) {
  const UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd.valid()) {
    return tl::unexpected(Named(key, file) + ": cannot read: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return tl::unexpected(Named(key, file) + ": cannot read: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return tl::unexpected(Named(key, file) +
                          ": not a regular file (a FIFO, a device or a directory): point it "
                          "at the PEM file itself");
  }
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    return tl::unexpected(Named(key, file) + ": owned by uid " + std::to_string(st.st_uid) +
                          ", neither root nor this daemon's user (uid " +
                          std::to_string(geteuid()) +
                          "), who could replace it; refusing to use it. chown it to root "
                          "(or to the daemon's user)");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return tl::unexpected(Named(key, file) + ": writable by " +
                          ((st.st_mode & S_IWOTH) != 0 ? "every user" : "its group") + " (mode " +
                          ModeText(st.st_mode) + "); refusing to use it. chmod go-w " +
                          file.string());
  }
  if (private_key && (st.st_mode & S_IROTH) != 0) {
    return tl::unexpected(
        Named(key, file) + ": the private key is readable by every user (mode " +
        ModeText(st.st_mode) + "); refusing to use it. Make it private: chmod 600 " +
        file.string() +
        " (or 640 with the daemon's group), or, from a Kubernetes Secret, set the volume's "
        "defaultMode: 0440 (with the pod's fsGroup) or 0400");
  }
  if (private_key && (st.st_mode & S_IRGRP) != 0 && st.st_gid != 0 && !InGroup(st.st_gid)) {
    return tl::unexpected(Named(key, file) + ": the private key is readable by group " +
                          std::to_string(st.st_gid) +
                          ", neither root's nor one of the daemon's (mode " + ModeText(st.st_mode) +
                          "); refusing to use it. chmod 600 " + file.string() +
                          ", or chgrp it to the daemon's group");
  }
  std::string pem;
  char buffer[16384];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return tl::unexpected(Named(key, file) + ": cannot read: " + std::strerror(errno));
    if (n == 0) return pem;
    pem.append(buffer, static_cast<size_t>(n));
    if (pem.size() > kMaxTlsFileBytes) {
      return tl::unexpected(Named(key, file) + ": larger than " +
                            std::to_string(kMaxTlsFileBytes >> 20) + " MiB: not a PEM file");
    }
  }
}

// A read-only memory BIO over `pem`, which must outlive it.
struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The certificate chain of `pem` (leaf first) into the context; false with OpenSSL's
// errors queued if there is no certificate or one is malformed.
bool UseCertificateChain(SSL_CTX* native, const std::string& pem) {
  Bio bio = MemoryBio(pem);
  if (bio == nullptr) return false;
  X509* leaf = PEM_read_bio_X509_AUX(bio.get(), nullptr, nullptr, nullptr);
  if (leaf == nullptr) return false;
  const bool used = SSL_CTX_use_certificate(native, leaf) == 1;
  X509_free(leaf);
  if (!used || SSL_CTX_clear_chain_certs(native) != 1) return false;
  for (;;) {
    X509* next = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (next == nullptr) {
      // The end of the file is the one error expected here.
      const unsigned long last = ERR_peek_last_error();
      if (ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE) {
        ERR_clear_error();
        return true;
      }
      return false;
    }
    if (SSL_CTX_add0_chain_cert(native, next) != 1) {  // takes `next` on success
      X509_free(next);
      return false;
    }
  }
}

// The certificates and CRLs of `pem` into the context's store, and the certificates'
// subjects into `names` (the client CA list a server sends). How many of each were found.
struct PemObjects {
  int certificates = 0;
  int crls = 0;
};
tl::expected<PemObjects, std::string> AddToStore(X509_STORE* store, const std::string& pem,
                                                 STACK_OF(X509_NAME) * names) {
  Bio bio = MemoryBio(pem);
  if (bio == nullptr) return tl::unexpected(OpenSslErrors());
  STACK_OF(X509_INFO)* infos = PEM_X509_INFO_read_bio(bio.get(), nullptr, nullptr, nullptr);
  if (infos == nullptr) return tl::unexpected(OpenSslErrors());
  PemObjects found;
  bool ok = true;
  for (int i = 0; ok && i < sk_X509_INFO_num(infos); ++i) {
    const X509_INFO* info = sk_X509_INFO_value(infos, i);
    if (info->x509 != nullptr) {
      ok = X509_STORE_add_cert(store, info->x509) == 1;
      if (ok && names != nullptr) {
        X509_NAME* name = X509_NAME_dup(X509_get_subject_name(info->x509));
        ok = name != nullptr && sk_X509_NAME_push(names, name) > 0;
      }
      found.certificates += ok ? 1 : 0;
    }
    if (ok && info->crl != nullptr) {
      ok = X509_STORE_add_crl(store, info->crl) == 1;
      found.crls += ok ? 1 : 0;
    }
  }
  sk_X509_INFO_pop_free(infos, X509_INFO_free);
  if (!ok) return tl::unexpected(OpenSslErrors());
  return found;
}

// The names of `list` (':'-separated) that are not among the TLS 1.3 suites the context
// offers, ", "-separated; "" if there is none.
std::string UnknownTls13Suites(SSL_CTX* native, const std::string& list) {
  std::vector<std::string> offered;
  STACK_OF(SSL_CIPHER)* ciphers = SSL_CTX_get_ciphers(native);
  for (int i = 0; ciphers != nullptr && i < sk_SSL_CIPHER_num(ciphers); ++i) {
    const SSL_CIPHER* cipher = sk_SSL_CIPHER_value(ciphers, i);
    if (std::strcmp(SSL_CIPHER_get_version(cipher), "TLSv1.3") == 0) {
      offered.emplace_back(SSL_CIPHER_standard_name(cipher));
    }
  }
  std::string unknown;
  for (size_t start = 0; start <= list.size();) {
    size_t end = list.find(':', start);
    if (end == std::string::npos) end = list.size();
    const std::string name = list.substr(start, end - start);
    if (!name.empty() && std::find(offered.begin(), offered.end(), name) == offered.end()) {
      unknown += (unknown.empty() ? "" : ", ") + name;
    }
    start = end + 1;
  }
  return unknown;
}

// The elements of a TLS 1.2 cipher list (':'-separated) that match no cipher this OpenSSL
// offers, ", "-separated; "" if each matches one. OpenSSL skips such an element without a
// word as long as another matches, so a misspelt exclusion ("!aNUL") would exclude nothing
// and a misspelt suite would quietly leave the list shorter. Each element is tried alone
// (without its '!', '-' or '+'); "@STRENGTH" and "@SECLEVEL=n" are commands, which
// OpenSSL itself refuses when unknown.
std::string UnmatchedTls12Ciphers(const std::string& list) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> probe(SSL_CTX_new(TLS_server_method()),
                                                          &SSL_CTX_free);
  if (probe == nullptr) return "";  // out of memory: the real context fails too
  std::string unmatched;
  for (size_t start = 0; start <= list.size();) {
    size_t end = list.find(':', start);
    if (end == std::string::npos) end = list.size();
    const std::string element = list.substr(start, end - start);
    start = end + 1;
    std::string name = element;
    if (!name.empty() && (name[0] == '!' || name[0] == '-' || name[0] == '+')) name.erase(0, 1);
    if (name.empty() || name[0] == '@') continue;
    if (SSL_CTX_set_cipher_list(probe.get(), name.c_str()) != 1) {
      unmatched += (unmatched.empty() ? "" : ", ") + element;
    }
  }
  ERR_clear_error();
  return unmatched;
}

// An ASN1 time in Unix seconds; 0 if it cannot be read.
int64_t UnixOf(const ASN1_TIME* time) {
  std::tm when{};
  if (time == nullptr || ASN1_TIME_to_tm(time, &when) != 1) return 0;
  return static_cast<int64_t>(timegm(&when));
}

// "2026-12-06T18:11:31Z".
std::string IsoTime(int64_t unix_seconds) {
  const auto seconds = static_cast<time_t>(unix_seconds);
  std::tm when{};
  gmtime_r(&seconds, &when);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &when);
  return text;
}

// "CN=snowflake test CA".
std::string NameText(const X509_NAME* name) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || X509_NAME_print_ex(bio.get(), name, 0, XN_FLAG_RFC2253) < 0) return "?";
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

// The earliest nextUpdate (Unix seconds) of the CRLs in `store`, 0 if none has one; or why
// one cannot be used: past its nextUpdate (OpenSSL would then refuse every client
// certificate its CA signed, X509_V_ERR_CRL_HAS_EXPIRED) or not yet valid.
tl::expected<int64_t, std::string> CheckCrlTimes(X509_STORE* store) {
  STACK_OF(X509_OBJECT)* objects = X509_STORE_get0_objects(store);
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  int64_t earliest = 0;
  for (int i = 0; objects != nullptr && i < sk_X509_OBJECT_num(objects); ++i) {
    X509_CRL* crl = X509_OBJECT_get0_X509_CRL(sk_X509_OBJECT_value(objects, i));
    if (crl == nullptr) continue;
    const std::string issuer = NameText(X509_CRL_get_issuer(crl));
    const ASN1_TIME* last = X509_CRL_get0_lastUpdate(crl);
    if (last != nullptr && X509_cmp_current_time(last) > 0) {
      return tl::unexpected("the CRL of " + issuer + " is not valid yet (its lastUpdate is " +
                            IsoTime(UnixOf(last)) +
                            "): check the clock of the host that issued it");
    }
    const ASN1_TIME* next = X509_CRL_get0_nextUpdate(crl);
    if (next == nullptr) continue;  // no nextUpdate: never stale
    const int64_t next_unix = UnixOf(next);
    if (X509_cmp_current_time(next) <= 0) {
      return tl::unexpected(
          "the CRL of " + issuer + " expired at its nextUpdate " + IsoTime(next_unix) + " (now " +
          IsoTime(now) +
          "); OpenSSL would refuse every client certificate that CA signed. Publish a fresh "
          "CRL (e.g. openssl ca -gencrl) and replace the file");
    }
    if (earliest == 0 || next_unix < earliest) earliest = next_unix;
  }
  return earliest;
}

// What BuildContext() made: the context, the client CA's and CRLs' bytes hashed (a new
// value means a new trust decision, which ends every session ticket issued before it), and
// the CRLs' earliest nextUpdate (0 without one).
struct Built {
  std::shared_ptr<ssl::context> context;
  std::string trust_digest;
  int64_t crl_next_update_unix = 0;
};

// SHA-256 of the client CA and CRL files' bytes, each preceded by its length.
std::string TrustDigest(const std::string& ca_pem, const std::string& crl_pem) {
  std::string bytes;
  for (const std::string* pem : {&ca_pem, &crl_pem}) {
    bytes += std::to_string(pem->size()) + ":" + *pem;
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return util::HexLower(digest, sizeof digest);
}

// A whole new server context from the files, or why not (naming the file).
tl::expected<Built, std::string> BuildContext(const Config::Http& options) {
  ERR_clear_error();
  auto cert_pem = ReadTlsFile("tls_cert_file", options.tls_cert_file, false);
  if (!cert_pem) return tl::unexpected(cert_pem.error());
  auto key_pem = ReadTlsFile("tls_key_file", options.tls_key_file, true);
  if (!key_pem) return tl::unexpected(key_pem.error());
  std::string ca_pem;
  if (!options.tls_client_ca_file.empty()) {
    auto read = ReadTlsFile("tls_client_ca_file", options.tls_client_ca_file, false);
    if (!read) return tl::unexpected(read.error());
    ca_pem = std::move(*read);
  }
  std::string crl_pem;
  if (!options.tls_client_crl_file.empty()) {
    auto read = ReadTlsFile("tls_client_crl_file", options.tls_client_crl_file, false);
    if (!read) return tl::unexpected(read.error());
    crl_pem = std::move(*read);
  }
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  int64_t crl_next_update_unix = 0;
  SSL_CTX* native = context->native_handle();
  // TLS 1.2 and 1.3 only: older versions have known weaknesses and no client of ours
  // needs them; 1.3 only if the operator says so.
  SSL_CTX_set_min_proto_version(native,
                                options.tls_min_version == "1.3" ? TLS1_3_VERSION : TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(native, TLS1_3_VERSION);
  SSL_CTX_set_options(
      native, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (options.tls_session_tickets) {
    // Sealed by the rotating keys (TlsCredentials installs them). TLS 1.3 sends OpenSSL's
    // default of two tickets, so a client may resume two connections, each ticket once.
    SSL_CTX_set_num_tickets(native, 2);
  } else {
    // No ticket at all, TLS 1.2's (SSL_OP_NO_TICKET) nor TLS 1.3's (which, with that option
    // alone, would still be sent as session-cache references): a TLS 1.2 client may still
    // resume by session ID from this context's own cache, which dies with the context.
    SSL_CTX_set_options(native, SSL_OP_NO_TICKET);
    SSL_CTX_set_num_tickets(native, 0);
  }
  // TLS 1.2's ciphers (OpenSSL's DEFAULT offers static RSA and CBC with SHA-1; the default
  // here is ECDHE with AES-GCM or ChaCha20-Poly1305), TLS 1.3's suites (all AEAD) and the
  // key-exchange groups.
  if (SSL_CTX_set_cipher_list(native, options.tls_ciphers.c_str()) != 1) {
    return tl::unexpected("http.tls_ciphers \"" + options.tls_ciphers +
                          "\": OpenSSL knows no TLS 1.2 cipher in it (e.g. "
                          "\"ECDHE+AESGCM:ECDHE+CHACHA20\"; see `openssl ciphers -v LIST`): " +
                          OpenSslErrors());
  }
  if (const std::string unmatched = UnmatchedTls12Ciphers(options.tls_ciphers);
      !unmatched.empty()) {
    return tl::unexpected("http.tls_ciphers \"" + options.tls_ciphers + "\": " + unmatched +
                          " matches no TLS 1.2 cipher this OpenSSL offers (a misspelt name, or "
                          "one this build lacks, such as RC4, which then excludes nothing): "
                          "correct or remove it; `openssl ciphers -v NAME` shows what a name "
                          "matches");
  }
  // OpenSSL skips a TLS 1.3 suite name it does not know without a word: each name must be
  // among the suites the context then offers.
  const std::string unknown_suites =
      SSL_CTX_set_ciphersuites(native, options.tls_ciphersuites.c_str()) == 1
          ? UnknownTls13Suites(native, options.tls_ciphersuites)
          : options.tls_ciphersuites;
  if (!unknown_suites.empty()) {
    return tl::unexpected("http.tls_ciphersuites \"" + options.tls_ciphersuites +
                          "\": OpenSSL knows no TLS 1.3 suite named " + unknown_suites +
                          " (e.g. \"TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256\"; see "
                          "`openssl ciphers -v -s -tls1_3`)");
  }
  if (SSL_CTX_set1_groups_list(native, options.tls_groups.c_str()) != 1) {
    return tl::unexpected("http.tls_groups \"" + options.tls_groups +
                          "\": OpenSSL does not know every group in it (e.g. "
                          "\"X25519:P-256:P-384\"): " +
                          OpenSslErrors());
  }
  if (!UseCertificateChain(native, *cert_pem)) {
    return tl::unexpected(Named("tls_cert_file", options.tls_cert_file) +
                          ": not a PEM certificate chain: " + OpenSslErrors());
  }
  Bio key_bio = MemoryBio(*key_pem);
  EVP_PKEY* private_key = key_bio == nullptr
                              ? nullptr
                              : PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
  const bool key_used = private_key != nullptr && SSL_CTX_use_PrivateKey(native, private_key) == 1;
  EVP_PKEY_free(private_key);
  if (!key_used) {
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
    X509_STORE* store = SSL_CTX_get_cert_store(native);
    STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
    tl::expected<PemObjects, std::string> added = tl::unexpected(std::string("out of memory"));
    if (names != nullptr) added = AddToStore(store, ca_pem, names);
    if (!added || added->certificates == 0) {
      if (names != nullptr) sk_X509_NAME_pop_free(names, X509_NAME_free);
      return tl::unexpected(
          Named("tls_client_ca_file", options.tls_client_ca_file) +
          ": no PEM CA certificate: " + (added ? std::string("none in the file") : added.error()));
    }
    SSL_CTX_set_client_CA_list(native, names);  // takes ownership
    if (!options.tls_client_crl_file.empty()) {
      // The leaf's issuer must have a CRL in the file (X509_V_FLAG_CRL_CHECK): a client
      // certificate whose CA published none fails, rather than pass unchecked.
      auto crls = AddToStore(store, crl_pem, nullptr);
      if (!crls || crls->crls == 0) {
        return tl::unexpected(
            Named("tls_client_crl_file", options.tls_client_crl_file) +
            ": no PEM CRL: " + (crls ? std::string("none in the file") : crls.error()));
      }
      X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
      auto next_update = CheckCrlTimes(store);
      if (!next_update) {
        return tl::unexpected(Named("tls_client_crl_file", options.tls_client_crl_file) + ": " +
                              next_update.error());
      }
      crl_next_update_unix = *next_update;
      if (crl_next_update_unix > 0 && crl_next_update_unix - std::time(nullptr) < 12 * 3600) {
        spdlog::warn(
            "{}: a CRL reaches its nextUpdate {}, within 12 hours; past it every client "
            "certificate its CA signed is refused. Replace the file with a fresh CRL",
            Named("tls_client_crl_file", options.tls_client_crl_file),
            IsoTime(crl_next_update_unix));
      }
    }
    SSL_CTX_set_verify(native, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    // Session resumption with client certificates needs a context id, or a resumed
    // handshake fails.
    static constexpr unsigned char kSessionContext[] = "snowflaked-http";
    SSL_CTX_set_session_id_context(native, kSessionContext, sizeof kSessionContext - 1);
  }
  return Built{.context = std::move(context),
               .trust_digest = TrustDigest(ca_pem, crl_pem),
               .crl_next_update_unix = crl_next_update_unix};
}

// `built`'s context with the ticket keys installed for `generation` and kept alive by it
// (the keys outlive every context that uses them); the context itself without keys.
tl::expected<std::shared_ptr<ssl::context>, std::string> WithTicketKeys(
    Built& built, const std::shared_ptr<TlsTicketKeys>& keys, uint64_t generation) {
  if (keys == nullptr) return built.context;
  if (!keys->InstallOn(built.context->native_handle(), generation)) {
    return tl::unexpected("http.tls_session_tickets: cannot install the ticket keys: " +
                          OpenSslErrors());
  }
  struct Holder {
    std::shared_ptr<TlsTicketKeys> keys;  // destroyed after the context
    std::shared_ptr<ssl::context> context;
  };
  auto holder = std::make_shared<Holder>(Holder{keys, built.context});
  return std::shared_ptr<ssl::context>(holder, holder->context.get());
}

// A certificate's notAfter, in Unix seconds; 0 if it cannot be read.
int64_t NotAfterOf(const X509* cert) {
  return cert == nullptr ? 0 : UnixOf(X509_get0_notAfter(cert));
}

// The notAfter of the context's certificate; 0 if it cannot be read.
int64_t NotAfterUnix(ssl::context& context) {
  return NotAfterOf(SSL_CTX_get0_certificate(context.native_handle()));
}

// The earliest notAfter of the client CA certificates the context trusts (its store holds
// only those); 0 without a client CA.
int64_t ClientCaNotAfterUnix(ssl::context& context) {
  STACK_OF(X509_OBJECT)* objects =
      X509_STORE_get0_objects(SSL_CTX_get_cert_store(context.native_handle()));
  int64_t earliest = 0;
  for (int i = 0; objects != nullptr && i < sk_X509_OBJECT_num(objects); ++i) {
    const int64_t not_after = NotAfterOf(X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objects, i)));
    if (not_after > 0 && (earliest == 0 || not_after < earliest)) earliest = not_after;
  }
  return earliest;
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
    const Config::Http& options, Clock& clock) noexcept {
  try {
    std::unique_ptr<TlsCredentials> out(new TlsCredentials(options));
    // The signature first: a file replaced while it is read is then seen as changed at the
    // next look, and read again.
    out->signature_ = Signature(options);
    auto built = BuildContext(options);
    if (!built) return tl::unexpected(built.error());
    if (options.tls_session_tickets) {
      out->ticket_keys_ = std::make_shared<TlsTicketKeys>(
          std::chrono::seconds(options.tls_session_ticket_rotate_s), clock);
    }
    auto context =
        WithTicketKeys(*built, out->ticket_keys_,
                       out->ticket_keys_ != nullptr ? out->ticket_keys_->generation() : 0);
    if (!context) return tl::unexpected(context.error());
    out->trust_digest_ = std::move(built->trust_digest);
    out->not_after_unix_ = NotAfterUnix(**context);
    out->client_ca_not_after_unix_ = ClientCaNotAfterUnix(**context);
    out->client_crl_next_update_unix_ = built->crl_next_update_unix;
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

int64_t TlsCredentials::client_ca_not_after_unix() const {
  std::lock_guard lock(mutex_);
  return client_ca_not_after_unix_;
}

int64_t TlsCredentials::client_crl_next_update_unix() const {
  std::lock_guard lock(mutex_);
  return client_crl_next_update_unix_;
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
    auto built = BuildContext(options_);
    if (!built) {
      refusal_ = built.error();
      spdlog::error(
          "http front: refusing the changed TLS files, still serving the previous "
          "certificate: {}",
          built.error());
      return Reloaded::kRefused;
    }
    // A new client CA or CRL is a new decision on whom to let in: a ticket issued under
    // the old one would resume a session whose certificate it no longer admits (a resumed
    // handshake checks no certificate), so every ticket issued so far is dropped with its
    // key, and the contexts still serving seal no more.
    uint64_t generation = 0;
    if (ticket_keys_ != nullptr) {
      const bool trust_changed = built->trust_digest != trust_digest_;
      generation = trust_changed ? ticket_keys_->Forget() : ticket_keys_->generation();
      if (trust_changed) {
        spdlog::info(
            "http front: the client CA or CRL changed: session tickets issued before are no "
            "longer accepted");
      }
    }
    trust_digest_ = built->trust_digest;
    auto context = WithTicketKeys(*built, ticket_keys_, generation);
    if (!context) {
      spdlog::error("http front: refusing the changed TLS files: {}", context.error());
      return Reloaded::kRefused;
    }
    const int64_t not_after = NotAfterUnix(**context);
    const int64_t client_ca_not_after = ClientCaNotAfterUnix(**context);
    {
      std::lock_guard lock(mutex_);
      current_ = std::move(*context);
      not_after_unix_ = not_after;
      client_ca_not_after_unix_ = client_ca_not_after;
      client_crl_next_update_unix_ = built->crl_next_update_unix;
    }
    spdlog::info("http front: new TLS certificate from {} in use for new connections",
                 options_.tls_cert_file.string());
    return Reloaded::kTaken;
  } catch (const std::exception& e) {
    refusal_ = e.what();
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
    return "uri-sha256:" + util::HexLower(digest, sizeof digest);
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
  return "cert:" + util::HexLower(digest, sizeof digest);
}

tl::expected<void, std::string> CheckTlsFiles(const Config::Http& options) noexcept {
  if (!options.tls()) return {};
  // The check reads the files; no ticket key outlives it.
  auto loaded = TlsCredentials::Load(options, Clock::Real());
  if (!loaded) return tl::unexpected(loaded.error());
  return {};
}

}  // namespace snowflake::daemon
