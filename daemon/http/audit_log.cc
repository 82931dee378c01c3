#include "daemon/http/audit_log.h"

#include <arpa/inet.h>
#include <openssl/asn1.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <ctime>
#include <utility>

namespace snowflake::daemon {
namespace {

constexpr std::array<std::string_view, kAuditEventCount> kNames = {
    "refused_allow",     "refused_source",      "refused_handshakes", "refused_connections",
    "handshake_refused", "handshake_failed",    "throttled",          "forbidden",
    "tls_rotated",       "tls_rotation_refused"};
static_assert(static_cast<size_t>(AuditEvent::kTlsRotationRefused) + 1 == kAuditEventCount,
              "one name per kind");

bool Plain(char c) { return c > ' ' && c < 0x7f && c != '"' && c != '\\'; }

void AppendQuoted(std::string& out, std::string_view value) {
  out.push_back('"');
  for (const char c : value) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c >= ' ' && c < 0x7f) {
      out.push_back(c);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(c));
      out.append(escaped);
    }
  }
  out.push_back('"');
}

void AppendValue(std::string& out, std::string_view value) {
  if (value.empty()) {
    out.push_back('-');
    return;
  }
  for (const char c : value) {
    if (!Plain(c)) return AppendQuoted(out, value);
  }
  out.append(value);
}

// "10s" for a whole number of seconds, else "1500ms".
std::string IntervalText(std::chrono::milliseconds interval) {
  const int64_t ms = interval.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + "s" : std::to_string(ms) + "ms";
}

}  // namespace

std::string_view AuditEventName(AuditEvent event) { return kNames[static_cast<size_t>(event)]; }

std::string CertificateSerialHex(const X509* certificate) {
  if (certificate == nullptr) return "";
  const ASN1_INTEGER* serial = X509_get0_serialNumber(certificate);
  if (serial == nullptr) return "";
  const unsigned char* bytes = ASN1_STRING_get0_data(serial);
  const int length = ASN1_STRING_length(serial);
  if (length <= 0) return "00";
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(static_cast<size_t>(length) * 2 + 1);
  // As i2a_ASN1_INTEGER (`openssl x509 -serial`): a negative serial, which RFC 5280 does
  // not allow but OpenSSL parses, with a minus sign.
  if (ASN1_STRING_type(serial) == V_ASN1_NEG_INTEGER) out.push_back('-');
  for (int i = 0; i < length; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 0x0f]);
  }
  return out;
}

AuditLine::AuditLine(AuditEvent event) {
  text_.reserve(160);
  text_.append("audit: ");
  text_.append(AuditEventName(event));
}

AuditLine& AuditLine::Field(std::string_view name, std::string_view value) {
  AppendValue(Name(name), value);
  return *this;
}

AuditLine& AuditLine::Number(std::string_view name, uint64_t value) {
  return Field(name, std::to_string(value));
}

AuditLine& AuditLine::Quoted(std::string_view name, std::string_view value) {
  AppendQuoted(Name(name), value);
  return *this;
}

std::string& AuditLine::Name(std::string_view name) {
  text_.push_back(' ');
  text_.append(name);
  text_.push_back('=');
  return text_;
}

AuditLine& AuditLine::Peer(const AuditPeer& peer) {
  std::string address;
  std::string source;
  if (peer.address != nullptr) {
    char text[INET6_ADDRSTRLEN] = {};
    if (peer.address->v4) {
      inet_ntop(AF_INET, peer.address->bytes.data() + 12, text, sizeof text);
    } else {
      inet_ntop(AF_INET6, peer.address->bytes.data(), text, sizeof text);
    }
    address = text;
    source = AddressClientKey(*peer.address);
    constexpr std::string_view kPrefix = "addr:";
    if (source.compare(0, kPrefix.size(), kPrefix) == 0) source.erase(0, kPrefix.size());
  }
  return Field("peer", address)
      .Field("source", source)
      .Field("identity", peer.identity)
      .Field("serial", peer.serial);
}

AuditLine& AuditLine::Time(std::string_view name, int64_t unix_seconds) {
  if (unix_seconds == 0) return Field(name, "");
  const std::time_t when = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  char text[32] = {};
  if (gmtime_r(&when, &utc) == nullptr ||
      std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc) == 0) {
    return Number(name, static_cast<uint64_t>(unix_seconds));
  }
  return Field(name, text);
}

AuditLog::AuditLog(Clock& clock, Limits limits, Sink sink)
    : limits_(limits),
      clock_(clock),
      sink_(sink ? std::move(sink)
                 : Sink([](std::string_view line) { spdlog::info("{}", line); })) {}

int64_t AuditLog::NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.SteadyNow().time_since_epoch())
      .count();
}

bool AuditLog::Admit(AuditEvent event) {
  Kind& kind = kinds_[static_cast<size_t>(event)];
  const int64_t now_ns = NowNs();
  if (now_ns >= kind.window_end_ns.load(std::memory_order_acquire)) Roll(event, now_ns, false);
  // Relaxed: counts, ordered with nothing (a race at an interval's turn may let a line
  // more through, never lose a count: each event is written or counted as dropped once).
  if (kind.written.fetch_add(1, std::memory_order_relaxed) < limits_.lines) return true;
  kind.dropped.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void AuditLog::Roll(AuditEvent event, int64_t now_ns, bool force) {
  Kind& kind = kinds_[static_cast<size_t>(event)];
  uint64_t dropped = 0;
  {
    std::lock_guard lock(roll_mutex_);
    if (!force) {
      if (now_ns < kind.window_end_ns.load(std::memory_order_relaxed)) return;
      kind.written.store(0, std::memory_order_relaxed);
      kind.window_end_ns.store(
          now_ns + std::chrono::duration_cast<std::chrono::nanoseconds>(limits_.interval).count(),
          std::memory_order_release);
    }
    dropped = kind.dropped.exchange(0, std::memory_order_relaxed);
  }
  if (dropped == 0) return;
  sink_("audit: suppressed kind=" + std::string(AuditEventName(event)) +
        " dropped=" + std::to_string(dropped) + " limit=" + std::to_string(limits_.lines) + "/" +
        IntervalText(limits_.interval));
}

void AuditLog::FlushKinds(bool all) {
  const int64_t now_ns = NowNs();
  for (size_t i = 0; i < kAuditEventCount; ++i) {
    const Kind& kind = kinds_[i];
    if (kind.dropped.load(std::memory_order_relaxed) == 0) continue;
    if (!all && now_ns < kind.window_end_ns.load(std::memory_order_acquire)) continue;
    Roll(static_cast<AuditEvent>(i), now_ns, all);
  }
}

}  // namespace snowflake::daemon
