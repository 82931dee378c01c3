#include "libclient/status/status_report.h"

#include <chrono>
#include <cstdio>
#include <sstream>

#include "snowflake/id_layout.h"
#include "snowflake/time_text.h"

namespace snowflake::status {
namespace {

// What a drained count means, shown whenever it is not zero: the number alone alarms.
constexpr const char* kDrainedMeaning =
    "                (drained: IDs the daemon took back from the ring unissued because they "
    "grew old, generation paused or it stopped; they are never handed out, so they are gaps "
    "in the sequence, not lost or duplicate IDs)\n";

// A count read from the consumer region: null (JSON) or "unknown" (text) when the region
// could not be reached (the daemon is down): never a number read from nowhere.
nlohmann::json Known(const ClientStatus& s, uint64_t count) {
  return s.counts_known ? nlohmann::json(count) : nlohmann::json(nullptr);
}
std::string KnownText(const ClientStatus& s, uint64_t count) {
  return s.counts_known ? std::to_string(count) : std::string("unknown");
}

std::string Millis(uint64_t ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", static_cast<double>(ns) / 1e6);
  return text;
}

nlohmann::json TimeOrNull(std::optional<int64_t> unix_ms) {
  return unix_ms ? nlohmann::json(FormatTimeText(*unix_ms)) : nlohmann::json(nullptr);
}

// A fact of the daemon's record, or null when the daemon did not answer.
template <typename Fact>
nlohmann::json FromDaemon(const StatusReport& report, Fact protocol::StatusRecord::*fact) {
  return report.daemon ? nlohmann::json((*report.daemon).*fact) : nlohmann::json(nullptr);
}

// The "renewal" record in words: "waiting on the register etcd http://... /p for 12s
// (since ...); the register has not answered; last error (register): ...".
std::string RenewalLine(const protocol::RenewalStatus& renewal) {
  const auto store_words = [](const std::string& store) {
    return store == "state_file" ? std::string("state file") : store;
  };
  const std::string store = store_words(renewal.store);
  std::string line = "waiting on the " + store;
  if (!renewal.location.empty()) line += " " + renewal.location;
  line += " for " + FormatDuration(renewal.waited_ms);
  line += " (since " + FormatTimeText(renewal.since_unix_ms) + ")";
  if (renewal.unanswered) line += "; the " + store + " has not answered";
  if (!renewal.last_error.empty()) {
    const std::string whose = store_words(renewal.last_error_store);
    line += "; last error" + (whose.empty() ? "" : " (" + whose + ")") + ": " + renewal.last_error;
  } else {
    line += "; no error yet: the first attempt is still under way";
  }
  return line;
}

}  // namespace

void SetDaemonAnswer(StatusReport& report,
                     tl::expected<protocol::StatusRecord, protocol::ControlError> answer) {
  if (answer) {
    report.daemon = std::move(*answer);
    report.daemon_error.clear();
  } else {
    report.daemon.reset();
    report.daemon_error = answer.error().refused
                              ? "snowflaked refused status: " + answer.error().message
                              : answer.error().message;
  }
}

std::string FormatDuration(int64_t ms) {
  if (ms < 0) ms = 0;
  if (ms < 1000) return std::to_string(ms) + " ms";
  const int64_t s = ms / 1000;
  char text[48];
  if (s < 60) {
    std::snprintf(text, sizeof text, "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(text, sizeof text, "%lldm %02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(text, sizeof text, "%lldh %02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60));
  } else {
    std::snprintf(text, sizeof text, "%lldd %02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s / 3600 % 24));
  }
  return text;
}

nlohmann::json StatusToJson(const StatusReport& report) {
  const ClientStatus& s = report.segment;
  // Names shared with the control protocol's status reply (docs/control-protocol.md)
  // mean the same thing here; the first block is read from the segment.
  nlohmann::json out = {
      {"state", s.state},
      {"health", s.health},
      {"reason_code", s.reason},
      {"reason", s.reason_text},
      {"reason_detail", s.reason_detail},
      {"status_text", s.status_text},
      {"machine", s.machine},
      {"epoch_unix_ms", s.epoch_unix_ms},
      {"layout", FormatIdBits(s.id_bits)},
      {"incarnation", s.incarnation},
      {"pid", s.daemon_pid},
      {"heartbeat_age_ns", s.heartbeat_age_ns},
      {"ring_fill", Known(s, s.ring_fill)},
      {"ring_capacity", s.ring_capacity},
      {"fill_target", s.fill_target},
      {"published_total", s.published_total},
      {"taken_total", Known(s, s.taken_total - std::min(s.drained_total, s.taken_total))},
      {"drained_total", s.drained_total},
      {"clock_pauses", s.clock_pauses},
      {"uncounted", Known(s, s.uncounted)},
      {"liveness_ms", s.liveness_ms},
      {"freshness_bound_ms", s.freshness_bound_ms},
  };
  out["ok"] = ServingAndAnswered(report);
  out["runtime_dir"] = report.runtime_dir;
  const std::optional<protocol::StatusRecord>& d = report.daemon;
  out["daemon_reachable"] = d.has_value();
  out["daemon_error"] =
      report.daemon_error.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.daemon_error);
  // From the control socket: null when the daemon did not answer.
  using R = protocol::StatusRecord;
  out["version"] = FromDaemon(report, &R::version);
  out["instance"] = FromDaemon(report, &R::instance);
  out["started_unix_ms"] = FromDaemon(report, &R::started_unix_ms);
  out["uptime_ms"] = d ? nlohmann::json(report.now_unix_ms - d->started_unix_ms) : nullptr;
  out["state_since_unix_ms"] = FromDaemon(report, &R::state_since_unix_ms);
  out["state_age_ms"] = d ? nlohmann::json(report.now_unix_ms - d->state_since_unix_ms) : nullptr;
  out["register_backend"] = FromDaemon(report, &R::register_backend);
  out["register_location"] = FromDaemon(report, &R::register_location);
  out["holder_id"] = FromDaemon(report, &R::holder_id);
  const std::optional<uint64_t> last_id = d ? d->last_issued_id : std::nullopt;
  out["last_issued_id"] = last_id ? nlohmann::json(std::to_string(*last_id)) : nullptr;
  std::optional<int64_t> last_id_ms;
  if (last_id) {
    if (auto layout = IdLayout::Create(s.epoch_unix_ms, s.id_bits)) {
      if (auto fields = layout->Decode(*last_id)) last_id_ms = fields->unix_ms;
    }
  }
  out["last_issued_id_unix_ms"] = last_id_ms ? nlohmann::json(*last_id_ms) : nullptr;
  out["last_issued_id_time"] = TimeOrNull(last_id_ms);
  out["generator_mark_unix_ms"] = FromDaemon(report, &R::generator_mark_unix_ms);
  // Deprecated, removed in the next release: generator_mark_unix_ms under its old name.
  out["last_issued_unix_ms"] = out["generator_mark_unix_ms"];
  out["reserved_through_unix_ms"] = FromDaemon(report, &R::reserved_through_unix_ms);
  out["reserved_through_time"] =
      TimeOrNull(d ? std::optional<int64_t>(d->reserved_through_unix_ms) : std::nullopt);
  // The renewal the daemon waits for (or that fails): null when none, or no answer.
  out["renewal"] = d && d->renewal ? protocol::RenewalToJson(*d->renewal) : nullptr;
  // What a pause for the clock waits for: null when none, or no answer.
  out["clock_wait"] = d && d->clock_wait ? protocol::ClockWaitToJson(*d->clock_wait) : nullptr;
  // Deprecated, removed in the next release: `uncounted` under another name.
  out["uncounted_taken"] = Known(s, s.uncounted);
  out["services"] = FromDaemon(report, &R::services);
  out["daemon"] = d ? protocol::StatusReplyJson(*d) : nlohmann::json(nullptr);
  return out;
}

std::string StatusToText(const StatusReport& report) {
  const ClientStatus& s = report.segment;
  const std::optional<protocol::StatusRecord>& d = report.daemon;
  const nlohmann::json j = StatusToJson(report);
  std::ostringstream out;
  if (d) {
    out << "snowflaked " << d->version << ", instance \"" << d->instance << "\", pid "
        << s.daemon_pid << ", up " << FormatDuration(report.now_unix_ms - d->started_unix_ms)
        << " (since " << FormatTimeText(d->started_unix_ms) << ")\n";
  } else {
    out << "snowflaked pid " << s.daemon_pid << "; its control socket did not answer ("
        << report.daemon_error << "): what follows is read from the segment\n";
  }
  out << "runtime dir:    " << report.runtime_dir << "\n";
  out << "state:          " << s.state;
  if (d) out << " for " << FormatDuration(report.now_unix_ms - d->state_since_unix_ms);
  if (!s.reason_text.empty()) out << ": " << s.reason_text << " (" << s.reason << ")";
  out << "\n";
  // The segment's status text is the renewal the control socket reports, cut to fit the
  // header: shown only when the socket gave no renewal (it did not answer).
  if (d && d->renewal) {
    out << "renewal:        " << RenewalLine(*d->renewal) << "\n";
  } else if (d && d->clock_wait) {
    // What a pause for the clock waits for, and who set it (docs/operations.md).
    const protocol::ClockWait& w = *d->clock_wait;
    // Only a pause ends by itself when the clock passes the mark; out of service waits
    // for `snowflakectl resume` whatever the clock does. The daemon and this reading take
    // the clock apart, so 0 is "now", not late.
    const std::string when =
        w.clock_passes_in_ms >= 0
            ? "it passes it in " + FormatDuration(w.clock_passes_in_ms)
            : "it passed it " + FormatDuration(-w.clock_passes_in_ms) + " ago" +
                  (s.state == "paused"
                       ? std::string(": the pause outlasts its cause")
                       : "; " + std::string(vocab::RecoveryText(vocab::Recovery::kNeedsResume)));
    out << "clock wait:     until the clock passes " << FormatTimeText(w.until_unix_ms)
        << " (unix ms " << w.until_unix_ms << "), set by " << vocab::MarkSourceTextOfCode(w.set_by)
        << "; " << when << "\n";
  } else if (!s.status_text.empty()) {
    out << "daemon says:    " << s.status_text << "\n";
  }
  if (s.health != s.state) out << "health:         " << s.health << "\n";
  out << "machine:        " << s.machine;
  if (d) {
    out << ", from the " << d->register_backend << " register " << d->register_location
        << " as holder \"" << d->holder_id << "\"";
  }
  out << "\n";
  out << "epoch:          " << s.epoch_unix_ms << " (" << FormatTimeText(s.epoch_unix_ms) << ")\n";
  // The bits the segment header records: how this daemon's IDs split (docs/id-layout.md).
  out << "layout:         " << DescribeIdBits(s.id_bits, s.epoch_unix_ms) << "\n";
  if (d) {
    if (j["last_issued_id"].is_string()) {
      out << "last ID made:   " << j["last_issued_id"].get<std::string>();
      if (j["last_issued_id_time"].is_string()) {
        out << ", made at " << j["last_issued_id_time"].get<std::string>() << " ("
            << j["last_issued_id_unix_ms"].get<int64_t>() << ")";
      }
      out << "\n";
    } else {
      out << "last ID made:   none yet\n";
    }
    const int64_t reserved = d->reserved_through_unix_ms;
    out << "reserved until: " << FormatTimeText(reserved) << " (" << reserved << ")";
    if (j["last_issued_id_unix_ms"].is_number()) {
      out << ", " << reserved - j["last_issued_id_unix_ms"].get<int64_t>()
          << " ms past the last ID";
    }
    out << "; a restart after a crash numbers above it\n";
  }
  out << "ring:           " << KnownText(s, s.ring_fill) << " / " << s.ring_capacity
      << " IDs (fill target " << s.fill_target << ")\n";
  out << "IDs published:  " << s.published_total << "\n";
  out << "IDs taken:      "
      << KnownText(s, s.taken_total - std::min(s.drained_total, s.taken_total)) << "\n";
  out << "IDs drained:    " << s.drained_total << "\n";
  if (s.drained_total != 0) out << kDrainedMeaning;
  out << "clock pauses:   " << s.clock_pauses << "\n";
  // Takes by clients that found all 255 counter slots in use: in no service's total.
  out << "IDs uncounted:  " << KnownText(s, s.uncounted) << "\n";
  if (!s.counts_known) {
    out << "                (taken and uncounted live in the consumer region, which only a "
           "running snowflaked hands over)\n";
  }
  out << "freshness:      no ID older than " << s.freshness_bound_ms
      << " ms is taken (liveness " << s.liveness_ms << " ms)\n";
  out << "incarnation:    " << s.incarnation << "\n";
  if (d && d->segments_retired > 0) {
    // A client wrote the segment's counters: the daemon retired it and serves a fresh one.
    out << "tampering:      " << d->segments_retired << " segment(s) retired; the last because "
        << d->segment_retired_reason << "\n";
  }
  out << "heartbeat age:  " << Millis(s.heartbeat_age_ns) << " ms\n";
  // The daemon's fronts: one line each.
  if (d) {
    for (const protocol::FrontStatus& front : d->fronts) {
      std::string where;
      for (const std::string& address : front.listen)
        where += (where.empty() ? "" : ", ") + address;
      out << "front:          " << front.name << " on " << where << ": " << front.connections
          << " connections, " << front.requests << " requests, " << front.refused << " refused\n";
    }
  }
  if (!d) {
    out << "services:       unknown (" << report.daemon_error << ")\n";
  } else if (d->services.empty() && s.uncounted == 0) {
    out << "services:       none yet\n";
  } else {
    out << "services:       IDs taken per client service name\n";
    auto row = [&](const std::string& name, uint64_t count) {
      out << "  " << name << std::string(name.size() < 32 ? 32 - name.size() : 1, ' ') << count
          << "\n";
    };
    for (const auto& [name, taken] : d->services) row(name, taken);
    if (s.uncounted != 0) row("(uncounted)", s.uncounted);
  }
  return out.str();
}

bool ServingAndAnswered(const StatusReport& report) {
  return report.segment.health == "serving" && report.daemon.has_value();
}

}  // namespace snowflake::status
