#include "status_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "control_client.h"
#include "decode_command.h"
#include "exit_codes.h"
#include "runtime_dir_option.h"

namespace snowflake::cli {
namespace {

std::string Millis(uint64_t ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", static_cast<double>(ns) / 1e6);
  return text;
}

bool DaemonAnswered(const StatusReport& report) {
  return report.daemon_reply.has_value() && report.daemon_reply->value("ok", false);
}

}  // namespace

nlohmann::json ServicesOf(const nlohmann::json& reply) {
  const auto found = reply.find("services");
  if (found == reply.end()) return nullptr;
  nlohmann::json services = nlohmann::json::object();
  if (found->is_object()) {
    // {"orders": 12} or {"orders": {"taken": 12, ...}}
    for (const auto& [name, value] : found->items()) {
      if (value.is_number_unsigned()) {
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
  // mean the same thing here; these are read from the segment.
  nlohmann::json out = {
      {"state", s.state},
      {"health", s.health},
      {"reason_code", s.reason},
      {"reason", s.reason_text},
      {"reason_detail", s.reason_detail},
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
  out["daemon_reachable"] = DaemonAnswered(report);
  out["daemon_error"] =
      report.daemon_error.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.daemon_error);
  out["services"] =
      report.daemon_reply ? ServicesOf(*report.daemon_reply) : nlohmann::json(nullptr);
  out["daemon"] = report.daemon_reply ? *report.daemon_reply : nlohmann::json(nullptr);
  return out;
}

std::string StatusToText(const StatusReport& report) {
  const ClientStatus& s = report.segment;
  std::ostringstream out;
  out << "state:          " << s.state;
  if (!s.reason_text.empty()) out << " (" << s.reason_text << ")";
  out << "\n";
  if (s.health != s.state) out << "health:         " << s.health << "\n";
  out << "machine:        " << s.machine << "\n";
  out << "epoch:          " << s.epoch_unix_ms;
  if (s.epoch_unix_ms >= 0 && s.epoch_unix_ms <= kMaxIsoUnixMs) {
    out << " (" << FormatIsoTime(s.epoch_unix_ms) << ")";
  }
  out << "\n";
  out << "incarnation:    " << s.incarnation << "\n";
  out << "daemon pid:     " << s.daemon_pid << "\n";
  out << "heartbeat age:  " << Millis(s.heartbeat_age_ns) << " ms\n";
  out << "ring:           " << s.ring_fill << " / " << s.ring_capacity << " IDs (fill target "
      << s.fill_target << ")\n";
  out << "IDs published:  " << s.published_total << "\n";
  out << "IDs taken:      " << s.taken_total - std::min(s.drained_total, s.taken_total) << "\n";
  out << "IDs drained:    " << s.drained_total << "\n";
  out << "clock pauses:   " << s.clock_pauses << "\n";
  // Takes by clients that found all 255 counter slots in use: in no service's total.
  out << "IDs uncounted:  " << s.uncounted << "\n";
  out << "freshness:      no ID older than " << s.freshness_bound_ms
      << " ms is taken (liveness " << s.liveness_ms << " ms)\n";
  if (!report.daemon_reply) {
    out << "services:       unknown (" << report.daemon_error << ")\n";
  } else if (!report.daemon_reply->value("ok", false)) {
    out << "services:       unknown (daemon said: "
        << report.daemon_reply->value("error", std::string("no reason given")) << ")\n";
  } else {
    const nlohmann::json services = ServicesOf(*report.daemon_reply);
    if (services.is_null() || services.empty()) {
      out << "services:       none\n";
    } else {
      out << "services:\n";
      for (const auto& [name, taken] : services.items()) {
        out << "  " << name << std::string(name.size() < 32 ? 32 - name.size() : 1, ' ')
            << taken.dump() << "\n";
      }
    }
  }
  return out.str();
}

int StatusExitCode(const StatusReport& report) {
  return report.segment.health == "serving" && DaemonAnswered(report) ? kExitOk : kExitUnavailable;
}

void AddStatusCommand(CLI::App& app) {
  CLI::App* command = app.add_subcommand(
      "status",
      "Show the daemon's state, machine number, ring fill, counts and per-service totals. "
      "Reads the segment (works even if the daemon is dead) and asks the control socket. "
      "Exit 0 if the daemon is serving and answering, 1 otherwise.");
  auto json = std::make_shared<bool>(false);
  command->add_flag("--json", *json, "Print one JSON object (keys: docs/cli.md)");
  auto runtime_dir = AddRuntimeDirOption(app, *command);
  command->callback([json, runtime_dir] {
    ClientOptions options;
    options.runtime_dir = runtime_dir();
    auto segment = Client::Inspect(options);
    if (!segment) {
      std::cerr << "snowflakectl: " << segment.error().message << "\n";
      throw CLI::RuntimeError(kExitUnavailable);
    }
    StatusReport report{.segment = std::move(*segment), .daemon_reply = {}, .daemon_error = {}};
    auto reply = SendControlRequest(options.runtime_dir, {{"command", "status"}});
    if (reply) {
      report.daemon_reply = std::move(*reply);
      if (!report.daemon_reply->value("ok", false)) {
        report.daemon_error = report.daemon_reply->value("error", std::string("refused"));
      }
    } else {
      report.daemon_error = reply.error();
    }
    if (*json) {
      std::cout << StatusToJson(report).dump(2) << "\n";
    } else {
      std::cout << StatusToText(report);
    }
    std::cout.flush();
    if (const int status = StatusExitCode(report); status != kExitOk) {
      throw CLI::RuntimeError(status);
    }
  });
}

}  // namespace snowflake::cli
