#include "daemon/http/tls_ticket_keys.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include <cstring>
#include <utility>

#include "util/debug_assert.h"

namespace snowflake::daemon {

struct TlsTicketKeys::Key {
  unsigned char name[kNameBytes];
  unsigned char aes[32];
  unsigned char hmac[32];
  std::chrono::steady_clock::time_point born;
};

void TlsTicketKeys::KeyWipe::operator()(Key* key) const {
  OPENSSL_cleanse(key, sizeof *key);
  delete key;
}

namespace {

// What a context's ex_data holds: the keys and the generation it was built for. Freed
// with the context.
struct Binding {
  TlsTicketKeys* keys;
  uint64_t generation;
};

void FreeBinding(void* /*parent*/, void* ptr, CRYPTO_EX_DATA* /*ad*/, int /*idx*/, long /*argl*/,
                 void* /*argp*/) {
  delete static_cast<Binding*>(ptr);
}

int BindingIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, &FreeBinding);
  return index;
}

// OpenSSL's ticket callback (SSL_CTX_set_tlsext_ticket_key_evp_cb): for sealing 1 (a
// ticket), 0 (none, the handshake goes on); for opening 0 (a full handshake), 1, or 2
// (accepted, renew the ticket).
int TicketCallback(SSL* ssl, unsigned char* name, unsigned char* iv, EVP_CIPHER_CTX* cipher,
                   EVP_MAC_CTX* mac, int seal) {
  const auto* binding =
      static_cast<const Binding*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), BindingIndex()));
  if (binding == nullptr) return 0;
  if (seal == 1) return binding->keys->Seal(binding->generation, name, iv, cipher, mac) ? 1 : 0;
  switch (binding->keys->Open(name, iv, cipher, mac)) {
    case TlsTicketKeys::Opened::kCurrent:
      return 1;
    case TlsTicketKeys::Opened::kPrevious:
      return 2;
    case TlsTicketKeys::Opened::kNone:
      break;
  }
  return 0;
}

// `cipher` set to AES-256-CBC with the key's AES key and `iv`, `mac` to HMAC-SHA256 with
// its HMAC key.
bool KeyContexts(const unsigned char aes[32], const unsigned char hmac[32],
                 const unsigned char iv[16], bool encrypt, EVP_CIPHER_CTX* cipher,
                 EVP_MAC_CTX* mac) {
  static char digest[] = "SHA256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, const_cast<unsigned char*>(hmac), 32),
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end()};
  if (EVP_MAC_CTX_set_params(mac, params) != 1) return false;
  return encrypt ? EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, aes, iv) == 1
                 : EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, aes, iv) == 1;
}

}  // namespace

TlsTicketKeys::TlsTicketKeys(std::chrono::seconds period, Clock& clock)
    : period_(period), clock_(clock) {
  SNOWFLAKE_REQUIRE(period_.count() > 0);
}

TlsTicketKeys::~TlsTicketKeys() = default;

uint64_t TlsTicketKeys::generation() const {
  std::lock_guard lock(mutex_);
  return generation_;
}

uint64_t TlsTicketKeys::Forget() {
  std::lock_guard lock(mutex_);
  current_.reset();
  previous_.reset();
  return ++generation_;
}

bool TlsTicketKeys::RotateIfDue(std::chrono::steady_clock::time_point now) {
  // A key seals in [born, born + period) and opens in [born, born + 2 period): a ticket
  // sealed at the last moment lives one period (the session timeout), so it still opens.
  if (previous_ != nullptr && now >= previous_->born + 2 * period_) previous_.reset();
  if (current_ != nullptr && now >= current_->born + 2 * period_) current_.reset();
  if (current_ != nullptr && now < current_->born + period_) return true;
  KeyPtr fresh(new Key{});
  if (RAND_bytes(fresh->name, sizeof fresh->name) != 1 ||
      RAND_bytes(fresh->aes, sizeof fresh->aes) != 1 ||
      RAND_bytes(fresh->hmac, sizeof fresh->hmac) != 1) {
    return false;
  }
  fresh->born = now;
  previous_ = std::move(current_);
  current_ = std::move(fresh);
  return true;
}

bool TlsTicketKeys::Seal(uint64_t generation, unsigned char name[kNameBytes],
                         unsigned char iv[kIvBytes], EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac) {
  const auto now = clock_.SteadyNow();
  std::lock_guard lock(mutex_);
  // A context of an older generation verified its client against a CA or CRL no longer in
  // use: what it would seal must not be resumed.
  if (generation != generation_) return false;
  if (!RotateIfDue(now) || current_ == nullptr) return false;
  if (RAND_bytes(iv, static_cast<int>(kIvBytes)) != 1) return false;
  std::memcpy(name, current_->name, kNameBytes);
  return KeyContexts(current_->aes, current_->hmac, iv, true, cipher, mac);
}

TlsTicketKeys::Opened TlsTicketKeys::Open(const unsigned char name[kNameBytes],
                                          const unsigned char iv[kIvBytes], EVP_CIPHER_CTX* cipher,
                                          EVP_MAC_CTX* mac) {
  const auto now = clock_.SteadyNow();
  std::lock_guard lock(mutex_);
  // A failed CSPRNG leaves the keys still valid as they were; they may still open.
  (void)RotateIfDue(now);
  for (const auto& [key, opened] : {std::pair{current_.get(), Opened::kCurrent},
                                    std::pair{previous_.get(), Opened::kPrevious}}) {
    if (key == nullptr || CRYPTO_memcmp(key->name, name, kNameBytes) != 0) continue;
    if (!KeyContexts(key->aes, key->hmac, iv, false, cipher, mac)) return Opened::kNone;
    return opened;
  }
  return Opened::kNone;
}

bool TlsTicketKeys::InstallOn(SSL_CTX* context, uint64_t generation) {
  const int index = BindingIndex();
  if (index < 0) return false;
  auto* binding = new Binding{this, generation};
  if (SSL_CTX_set_ex_data(context, index, binding) != 1) {
    delete binding;
    return false;
  }
  // A session, and so a ticket, lives at most one period: every ticket still opens when
  // it is presented, and a key is never needed past its second period.
  SSL_CTX_set_timeout(context, static_cast<long>(period_.count()));
  return SSL_CTX_set_tlsext_ticket_key_evp_cb(context, &TicketCallback) == 1;
}

}  // namespace snowflake::daemon
