// The HTTP front's audit log (docs/security.md, "Audit log"): a line at info for each
// refused connection, refused or failed TLS handshake, throttled or forbidden request and
// certificate rotation, naming the peer, its identity and its certificate's serial where
// known, and the reason:
//
//   audit: handshake_refused peer=203.0.113.7 source=203.0.113.7 identity=- serial=-
//          reason="certificate verify failed: certificate has expired"
//
// (one line). Rate-limited per kind of event: at most `lines` lines of a kind per
// `interval`; the events past that are counted, and once the interval is over a summary
// line says how many of that kind were dropped ("audit: suppressed kind=refused_allow
// dropped=190 limit=10/10s"), written before the next line of that kind or by Flush(),
// whichever comes first. A suppressed event costs a clock reading and a few atomics; no
// line is formatted for it.
//
// Thread-safe: Record() and Flush() from any thread at once.

#ifndef SNOWFLAKE_DAEMON_HTTP_AUDIT_LOG_H_
#define SNOWFLAKE_DAEMON_HTTP_AUDIT_LOG_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "daemon/config/net_address.h"
#include "snowflake/clock.h"

typedef struct x509_st X509;

namespace snowflake::daemon {

// The kinds of event, each with its own rate limit. The name is the line's first word.
enum class AuditEvent : uint8_t {
  kRefusedAllow,        // refused_allow: closed at accept, outside `allow`
  kRefusedSource,       // refused_source: closed at accept, its source at its cap
  kRefusedHandshakes,   // refused_handshakes: closed at accept, every handshake place taken
  kRefusedConnections,  // refused_connections: 429 too_many_connections (max_connections)
  kHandshakeRefused,    // handshake_refused: the client certificate missing or not verified
  kHandshakeFailed,     // handshake_failed: any other failed handshake (deadline, protocol)
  kThrottled,           // throttled: 429 throttled (max_share, per_client_ids_per_s)
  kForbidden,           // forbidden: 403 ([[http.authorize]])
  kTlsRotated,          // tls_rotated: new TLS files in use
  kTlsRotationRefused,  // tls_rotation_refused: new TLS files refused, the old ones kept
};
inline constexpr size_t kAuditEventCount = 10;

std::string_view AuditEventName(AuditEvent event);

// Who an event is about, as far as the front knows at that point (a connection refused at
// accept has no identity yet). Views: valid for the call they are passed to.
struct AuditPeer {
  const IpAddress* address = nullptr;  // the peer's address; null: unknown
  std::string_view identity;           // its certificate's (CertificateClientKey); "": none
  std::string_view serial;             // its certificate's serial (hex); "": none
};

// A certificate's serial number as the audit log writes it: uppercase hex, as
// `openssl x509 -noout -serial` prints it. "" for a null certificate.
std::string CertificateSerialHex(const X509* certificate);

// One line being written: "audit: <kind>" and then fields, each " name=value". A value
// that is empty is "-"; one with a space, a quote, a backslash or a byte outside
// printable ASCII is quoted, with those escaped (\", \\, \xNN), so a line is one line
// whatever a peer put in its certificate.
class AuditLine {
 public:
  explicit AuditLine(AuditEvent event);

  AuditLine& Field(std::string_view name, std::string_view value);
  AuditLine& Number(std::string_view name, uint64_t value);
  // Always quoted: a sentence ("reason").
  AuditLine& Quoted(std::string_view name, std::string_view value);
  // peer=, source= (its address key: an IPv4 address or an IPv6 /64), identity=, serial=.
  AuditLine& Peer(const AuditPeer& peer);
  // A Unix time as "2026-01-31T12:00:00Z" ("-" for 0: unknown).
  AuditLine& Time(std::string_view name, int64_t unix_seconds);

  const std::string& text() const { return text_; }

 private:
  // Appends " name=" and returns the text, for the value to follow.
  std::string& Name(std::string_view name);

  std::string text_;
};

// The audit log's rate limit, per kind of event.
struct AuditLimits {
  uint32_t lines = 10;                        // at most this many lines of a kind ...
  std::chrono::milliseconds interval{10000};  // ... per this interval
};

class AuditLog {
 public:
  using Limits = AuditLimits;
  // Writes one line (the default: spdlog at info).
  using Sink = std::function<void(std::string_view line)>;

  // Intervals are measured on `clock` (its SteadyNow), which must outlive the log and be
  // safe to call from any thread.
  explicit AuditLog(Clock& clock, Limits limits = {}, Sink sink = nullptr);
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Writes a line of `event`, filled by `fill(AuditLine&)`, unless the kind is past its
  // limit (then `fill` is not called and the event is counted as dropped).
  template <typename Fill>
  void Record(AuditEvent event, Fill&& fill) {
    if (!Admit(event)) return;
    AuditLine line(event);
    fill(line);
    sink_(line.text());
  }

  // Whether a line of `event` may be written now; if not, counted as dropped. Record()
  // is this and the line.
  bool Admit(AuditEvent event);

  // Writes the summary of every kind whose interval is over with events dropped (a
  // serving thread calls it every second, so a flood that stopped is still summed up).
  void Flush() { FlushKinds(false); }
  // Writes the summary of every kind with events dropped, its interval over or not (at
  // the front's stop).
  void FlushAll() { FlushKinds(true); }

  const Limits& limits() const { return limits_; }

 private:
  struct Kind {
    std::atomic<int64_t> window_end_ns{0};  // the current interval's end, steady ns
    std::atomic<uint32_t> written{0};       // lines admitted in the current interval
    std::atomic<uint64_t> dropped{0};       // events not written since the last summary
  };
  int64_t NowNs();
  // A new interval for `event` from `now_ns` (unless another thread began it already, or
  // `force`), with the summary of what the last one dropped.
  void Roll(AuditEvent event, int64_t now_ns, bool force);
  void FlushKinds(bool all);

  const Limits limits_;
  Clock& clock_;
  const Sink sink_;
  std::array<Kind, kAuditEventCount> kinds_;
  std::mutex roll_mutex_;  // one Roll() at a time
};

}  // namespace snowflake::daemon

#endif  // SNOWFLAKE_DAEMON_HTTP_AUDIT_LOG_H_
