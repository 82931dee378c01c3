#include "libclient/status/status_report.h"

#include <chrono>
#include <cstdio>
#include <sstream>

#include "snowflake/time_text.h"

namespace snowflake::status {
namespace {

// What a drained count means, shown whenever it is not zero: the number alone alarms.
constexpr const char* kDrainedMeaning =
    "                (drained: IDs the daemon took back from the ring unissued because they "
    "grew old, generation paused or it stopped; they are never handed out, so they are gaps "
    "in the sequence, not lost or duplicate IDs)\n";

std::string Millis(uint64_t ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", static_cast<double>(ns) / 1e6);
  return text;
}

bool DaemonAnswered(const StatusReport& report) {
  return report.daemon_reply.has_value() && report.daemon_reply->value("ok", false);
}

// The daemon's value for `key` if it answered and has one, else null.
nlohmann::json DaemonValue(const StatusReport& report, const char* key) {
  if (!DaemonAnswered(report)) return nullptr;
  const auto found = report.daemon_reply->find(key);
  return found == report.daemon_reply->end() ? nlohmann::json(nullptr) : *found;
}

std::optional<int64_t> DaemonInt(const StatusReport& report, const char* key) {
  const nlohmann::json value = DaemonValue(report, key);
  if (!value.is_number_integer()) return std::nullopt;
  return value.get<int64_t>();
}

std::string DaemonString(const StatusReport& report, const char* key) {
  const nlohmann::json value = DaemonValue(report, key);
  return value.is_string() ? value.get<std::string>() : std::string();
}

// The daemon's count of IDs taken by clients it could not attribute to a service (all
// per-service slots in use), or null when it does not report one.
nlohmann::json UncountedOf(const StatusReport& report) {
  for (const char* key : {"uncounted_taken", "uncounted"}) {
    const nlohmann::json value = DaemonValue(report, key);
    if (value.is_number_unsigned() || value.is_number_integer()) return value;
  }
  return nullptr;
}

// last_issued_id is a decimal string in the protocol (exact above 2^53).
std::optional<uint64_t> LastIssuedId(const StatusReport& report) {
  const nlohmann::json value = DaemonValue(report, "last_issued_id");
  if (value.is_string()) {
    try {
      return std::stoull(value.get<std::string>());
    } catch (...) {
      return std::nullopt;
    }
  }
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  return std::nullopt;
}

nlohmann::json TimeOrNull(std::optional<int64_t> unix_ms) {
  return unix_ms ? nlohmann::json(FormatTimeText(*unix_ms)) : nlohmann::json(nullptr);
}

nlohmann::json IntOrNull(std::optional<int64_t> value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

// The "renewal" object in words: "waiting on the register etcd http://... /p for 12s
// (since ...); the register has not answered; last error (register): ...".
std::string RenewalLine(const nlohmann::json& renewal) {
  const auto text = [&](const char* key) {
    const auto found = renewal.find(key);
    return found != renewal.end() && found->is_string() ? found->get<std::string>() : "";
  };
  const auto number = [&](const char* key) -> std::optional<int64_t> {
    const auto found = renewal.find(key);
    if (found == renewal.end() || !found->is_number_integer()) return std::nullopt;
    return found->get<int64_t>();
  };
  const std::string store = text("store") == "state_file" ? "state file" : text("store");
  std::string line = "waiting on the " + store;
  if (const std::string where = text("location"); !where.empty()) line += " " + where;
  if (const auto waited = number("waited_ms")) line += " for " + FormatDuration(*waited);
  if (const auto since = number("since_unix_ms")) line += " (since " + FormatTimeText(*since) + ")";
  const auto unanswered = renewal.find("unanswered");
  if (unanswered != renewal.end() && unanswered->is_boolean() && unanswered->get<bool>()) {
    line += "; the " + store + " has not answered";
  }
  if (const std::string error = text("last_error"); !error.empty()) {
    const std::string whose = text("last_error_store") == "state_file" ? "state file"
                                                                       : text("last_error_store");
    line += "; last error" + (whose.empty() ? "" : " (" + whose + ")") + ": " + error;
  } else {
    line += "; no error yet: the first attempt is still under way";
  }
  return line;
}

}  // namespace

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

nlohmann::json ServicesOf(const nlohmann::json& reply) {
  const auto found = reply.find("services");
  if (found == reply.end()) return nullptr;
  nlohmann::json services = nlohmann::json::object();
  if (found->is_object()) {
    // {"orders": 12} or {"orders": {"taken": 12, ...}}
    for (const auto& [name, value] : found->items()) {
      if (value.is_number_integer() && value.get<int64_t>() >= 0) {
        services[name] = value.get<uint64_t>();
      } else if (value.is_object() && value.contains("taken")) {
        services[name] = value["taken"];
      }
    }
  } else if (found->is_array()) {
    // [{"name": "orders", "taken": 12}, ...]
    for (const auto& entry : *found) {
      if (entry.is_object() && entry.contains("name") && entry.contains("taken")) {
        services[entry["name"].get<std::string>()] = entry["taken"];
      }
    }
  }
  return services;
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
      {"incarnation", s.incarnation},
      {"pid", s.daemon_pid},
      {"heartbeat_age_ns", s.heartbeat_age_ns},
      {"ring_fill", s.ring_fill},
      {"ring_capacity", s.ring_capacity},
      {"fill_target", s.fill_target},
      {"published_total", s.published_total},
      {"taken_total", s.taken_total - std::min(s.drained_total, s.taken_total)},
      {"drained_total", s.drained_total},
      {"clock_pauses", s.clock_pauses},
      {"uncounted", s.uncounted},
      {"liveness_ms", s.liveness_ms},
      {"freshness_bound_ms", s.freshness_bound_ms},
  };
  out["ok"] = ServingAndAnswered(report);
  out["runtime_dir"] = report.runtime_dir;
  out["daemon_reachable"] = DaemonAnswered(report);
  out["daemon_error"] =
      report.daemon_error.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.daemon_error);
  // From the control socket: null when the daemon did not answer.
  out["version"] = DaemonValue(report, "version");
  out["instance"] = DaemonValue(report, "instance");
  const auto started = DaemonInt(report, "started_unix_ms");
  out["started_unix_ms"] = IntOrNull(started);
  out["uptime_ms"] =
      IntOrNull(started ? std::optional<int64_t>(report.now_unix_ms - *started) : std::nullopt);
  const auto since = DaemonInt(report, "state_since_unix_ms");
  out["state_since_unix_ms"] = IntOrNull(since);
  out["state_age_ms"] =
      IntOrNull(since ? std::optional<int64_t>(report.now_unix_ms - *since) : std::nullopt);
  out["register_backend"] = DaemonValue(report, "register_backend");
  out["register_location"] = DaemonValue(report, "register_location");
  out["holder_id"] = DaemonValue(report, "holder_id");
  const auto last_id = LastIssuedId(report);
  out["last_issued_id"] = last_id ? nlohmann::json(std::to_string(*last_id)) : nullptr;
  std::optional<int64_t> last_id_ms;
  if (last_id) {
    if (auto layout = IdLayout::Create(s.epoch_unix_ms)) {
      if (auto fields = layout->Decode(*last_id)) last_id_ms = fields->unix_ms;
    }
  }
  out["last_issued_id_unix_ms"] = IntOrNull(last_id_ms);
  out["last_issued_id_time"] = TimeOrNull(last_id_ms);
  out["last_issued_unix_ms"] = DaemonValue(report, "last_issued_unix_ms");
  const auto reserved = DaemonInt(report, "reserved_through_unix_ms");
  out["reserved_through_unix_ms"] = IntOrNull(reserved);
  out["reserved_through_time"] = TimeOrNull(reserved);
  // The renewal the daemon waits for (or that fails): null when none, or no answer.
  out["renewal"] = DaemonValue(report, "renewal");
  out["uncounted_taken"] = UncountedOf(report);
  out["services"] =
      report.daemon_reply ? ServicesOf(*report.daemon_reply) : nlohmann::json(nullptr);
  out["daemon"] = report.daemon_reply ? *report.daemon_reply : nlohmann::json(nullptr);
  return out;
}

std::string StatusToText(const StatusReport& report) {
  const ClientStatus& s = report.segment;
  const nlohmann::json j = StatusToJson(report);
  std::ostringstream out;
  if (DaemonAnswered(report)) {
    out << "snowflaked " << DaemonString(report, "version") << ", instance \""
        << DaemonString(report, "instance") << "\", pid " << s.daemon_pid;
    if (j["uptime_ms"].is_number()) {
      out << ", up " << FormatDuration(j["uptime_ms"].get<int64_t>()) << " (since "
          << FormatTimeText(j["started_unix_ms"].get<int64_t>()) << ")";
    }
    out << "\n";
  } else {
    out << "snowflaked pid " << s.daemon_pid << "; its control socket did not answer ("
        << report.daemon_error << "): what follows is read from the segment\n";
  }
  out << "runtime dir:    " << report.runtime_dir << "\n";
  out << "state:          " << s.state;
  if (j["state_age_ms"].is_number()) {
    out << " for " << FormatDuration(j["state_age_ms"].get<int64_t>());
  }
  if (!s.reason_text.empty()) out << ": " << s.reason_text << " (" << s.reason << ")";
  out << "\n";
  // The segment's status text is the renewal the control socket reports, cut to fit the
  // header: shown only when the socket gave no renewal (it did not answer).
  if (const nlohmann::json renewal = DaemonValue(report, "renewal"); renewal.is_object()) {
    out << "renewal:        " << RenewalLine(renewal) << "\n";
  } else if (!s.status_text.empty()) {
    out << "daemon says:    " << s.status_text << "\n";
  }
  if (s.health != s.state) out << "health:         " << s.health << "\n";
  out << "machine:        " << s.machine;
  if (DaemonAnswered(report)) {
    out << ", from the " << DaemonString(report, "register_backend") << " register "
        << DaemonString(report, "register_location") << " as holder \""
        << DaemonString(report, "holder_id") << "\"";
  }
  out << "\n";
  out << "epoch:          " << s.epoch_unix_ms << " (" << FormatTimeText(s.epoch_unix_ms) << ")\n";
  if (DaemonAnswered(report)) {
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
    if (j["reserved_through_unix_ms"].is_number()) {
      const int64_t reserved = j["reserved_through_unix_ms"].get<int64_t>();
      out << "reserved until: " << FormatTimeText(reserved) << " (" << reserved << ")";
      if (j["last_issued_id_unix_ms"].is_number()) {
        out << ", " << reserved - j["last_issued_id_unix_ms"].get<int64_t>()
            << " ms past the last ID";
      }
      out << "; a restart after a crash numbers above it\n";
    }
  }
  out << "ring:           " << s.ring_fill << " / " << s.ring_capacity << " IDs (fill target "
      << s.fill_target << ")\n";
  out << "IDs published:  " << s.published_total << "\n";
  out << "IDs taken:      " << s.taken_total - std::min(s.drained_total, s.taken_total) << "\n";
  out << "IDs drained:    " << s.drained_total << "\n";
  if (s.drained_total != 0) out << kDrainedMeaning;
  out << "clock pauses:   " << s.clock_pauses << "\n";
  // Takes by clients that found all 255 counter slots in use: in no service's total.
  out << "IDs uncounted:  " << s.uncounted << "\n";
  out << "freshness:      no ID older than " << s.freshness_bound_ms
      << " ms is taken (liveness " << s.liveness_ms << " ms)\n";
  out << "incarnation:    " << s.incarnation << "\n";
  if (const auto retired = DaemonInt(report, "segments_retired"); retired && *retired > 0) {
    // A client wrote the segment's counters: the daemon retired it and serves a fresh one.
    out << "tampering:      " << *retired << " segment(s) retired; the last because "
        << DaemonString(report, "segment_retired_reason") << "\n";
  }
  out << "heartbeat age:  " << Millis(s.heartbeat_age_ns) << " ms\n";
  // The daemon's fronts (its "fronts" member): one line each.
  if (const nlohmann::json fronts = DaemonValue(report, "fronts"); fronts.is_array()) {
    for (const auto& front : fronts) {
      if (!front.is_object()) continue;
      std::string where;
      for (const auto& address : front.value("listen", nlohmann::json::array())) {
        if (address.is_string()) where += (where.empty() ? "" : ", ") + address.get<std::string>();
      }
      auto count = [&](const char* key) -> std::string {
        const auto found = front.find(key);
        return found != front.end() && found->is_number_unsigned() ? found->dump() : "?";
      };
      const auto name = front.find("name");
      out << "front:          "
          << (name != front.end() && name->is_string() ? name->get<std::string>() : "?") << " on "
          << where << ": " << count("connections") << " connections, " << count("requests")
          << " requests, " << count("refused") << " refused\n";
    }
  }
  if (!report.daemon_reply) {
    out << "services:       unknown (" << report.daemon_error << ")\n";
  } else if (!report.daemon_reply->value("ok", false)) {
    out << "services:       unknown (daemon said: "
        << report.daemon_reply->value("error", std::string("no reason given")) << ")\n";
  } else {
    const nlohmann::json services = ServicesOf(*report.daemon_reply);
    const nlohmann::json uncounted = UncountedOf(report);
    if ((services.is_null() || services.empty()) && uncounted.is_null()) {
      out << "services:       none yet\n";
    } else {
      out << "services:       IDs taken per client service name\n";
      auto row = [&](const std::string& name, const std::string& count) {
        out << "  " << name << std::string(name.size() < 32 ? 32 - name.size() : 1, ' ') << count
            << "\n";
      };
      if (services.is_object()) {
        for (const auto& [name, taken] : services.items()) row(name, taken.dump());
      }
      if (!uncounted.is_null()) row("(uncounted)", uncounted.dump());
    }
  }
  return out.str();
}

bool ServingAndAnswered(const StatusReport& report) {
  return report.segment.health == "serving" && DaemonAnswered(report);
}

}  // namespace snowflake::status
