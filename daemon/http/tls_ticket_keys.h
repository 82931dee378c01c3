// The keys that seal the HTTP front's TLS session tickets (docs/http.md, "Session
// tickets"), held outside any one SSL context so that a certificate reload keeps
// resumption. A current key seals new tickets; the previous one is still accepted, and a
// ticket it opens is renewed under the current key. Each key is made from OpenSSL's CSPRNG
// (RAND_bytes), seals for one period, opens for at most two (a ticket lives at most one
// period: the contexts' session timeout), and is wiped (OPENSSL_cleanse) when dropped.
// Rotation is judged on each use against the daemon's Clock (SteadyNow): no thread of its
// own.
//
// Forget() drops both keys and starts a new generation: a context built for an older one
// seals no ticket, so nothing verified against an old client CA or CRL can be resumed
// after a new one is in use.
//
// Thread-safety: a TlsTicketKeys is safe for concurrent use by multiple threads (handshakes
// run on every serving thread); each call holds one internal mutex for a few microseconds.

#ifndef SNOWFLAKE_DAEMON_HTTP_TLS_TICKET_KEYS_H_
#define SNOWFLAKE_DAEMON_HTTP_TLS_TICKET_KEYS_H_

#include <openssl/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>

#include "snowflake/clock.h"

namespace snowflake::daemon {

class TlsTicketKeys {
 public:
  // The sizes OpenSSL's ticket callback works with: a 16-byte key name in the ticket, a
  // 16-byte IV for AES-256-CBC, and the keys of AES-256 and HMAC-SHA256.
  static constexpr size_t kNameBytes = 16;
  static constexpr size_t kIvBytes = 16;

  // REQUIRES: period > 0. `clock` (its SteadyNow) outlives this and is safe to call from
  // any thread.
  TlsTicketKeys(std::chrono::seconds period, Clock& clock);
  ~TlsTicketKeys();  // wipes the keys
  TlsTicketKeys(const TlsTicketKeys&) = delete;
  TlsTicketKeys& operator=(const TlsTicketKeys&) = delete;

  std::chrono::seconds period() const { return period_; }

  // The generation Forget() last started (0 before any).
  uint64_t generation() const;

  // Drops both keys (wiped) and starts a new generation, which it returns: tickets sealed
  // so far are no longer opened, and contexts built for an older generation seal none.
  uint64_t Forget();

  // Seals a new ticket for a context built for `generation`: the current key's name into
  // `name`, a random IV into `iv`, `cipher` set to encrypt and `mac` keyed with it
  // (rotating first if the current key has sealed for a whole period). False (no ticket
  // is issued; the handshake goes on) for an older generation or if the CSPRNG failed.
  bool Seal(uint64_t generation, unsigned char name[kNameBytes], unsigned char iv[kIvBytes],
            EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac);

  // Which key opened a ticket.
  enum class Opened { kNone, kCurrent, kPrevious };
  // Opens the ticket named `name` with IV `iv`: `cipher` set to decrypt and `mac` keyed
  // with the key of that name if it is still accepted. kNone (a full handshake follows)
  // for an unknown name, a dropped key or a failed OpenSSL call; kPrevious asks OpenSSL to
  // renew the ticket under the current key.
  Opened Open(const unsigned char name[kNameBytes], const unsigned char iv[kIvBytes],
              EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac);

  // Makes `context` seal and open its tickets with these keys, for `generation`, and caps
  // its sessions' lifetime at one period. REQUIRES: this object outlives `context`.
  // False with OpenSSL's errors queued if a call failed.
  bool InstallOn(SSL_CTX* context, uint64_t generation);

 private:
  struct Key;
  struct KeyWipe {
    void operator()(Key* key) const;
  };
  using KeyPtr = std::unique_ptr<Key, KeyWipe>;

  // REQUIRES: mutex_ held. Drops a key past its two periods, and makes a new current key
  // once the current one has sealed for a period (or there is none). False if the CSPRNG
  // failed (then there may be no current key).
  bool RotateIfDue(std::chrono::steady_clock::time_point now);

  // Constant after construction.
  const std::chrono::seconds period_;
  Clock& clock_;

  mutable std::mutex mutex_;
  KeyPtr current_;           // guarded by mutex_; seals, and opens
  KeyPtr previous_;          // guarded by mutex_; opens only
  uint64_t generation_ = 0;  // guarded by mutex_
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_HTTP_TLS_TICKET_KEYS_H_
