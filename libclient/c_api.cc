// The C ABI over snowflake::Client. Every entry point catches everything: no exception
// may unwind into a C caller.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "snowflake/client.h"
#include "snowflake/snowflake.h"

struct sf_client {
  snowflake::Client client;
};

namespace {

using snowflake::ClientError;

thread_local std::string last_error;

sf_status ToStatus(ClientError code) {
  switch (code) {
    case ClientError::kInvalidServiceName:
      return SF_INVALID_SERVICE_NAME;
    case ClientError::kInvalidArgument:
      return SF_INVALID_ARGUMENT;
    case ClientError::kDaemonNotRunning:
      return SF_DAEMON_NOT_RUNNING;
    case ClientError::kPermissionDenied:
      return SF_PERMISSION_DENIED;
    case ClientError::kIncompatibleVersion:
      return SF_INCOMPATIBLE_VERSION;
    case ClientError::kCorruptSegment:
      return SF_CORRUPT_SEGMENT;
    case ClientError::kUntrustedSegment:
      return SF_UNTRUSTED_SEGMENT;
    case ClientError::kDaemonStarting:
      return SF_DAEMON_STARTING;
    case ClientError::kDaemonPaused:
      return SF_DAEMON_PAUSED;
    case ClientError::kDaemonOutOfService:
      return SF_DAEMON_OUT_OF_SERVICE;
    case ClientError::kDaemonStopped:
      return SF_DAEMON_STOPPED;
    case ClientError::kDaemonNotHeartbeating:
      return SF_DAEMON_NOT_HEARTBEATING;
    case ClientError::kDaemonDead:
      return SF_DAEMON_DEAD;
    case ClientError::kTimedOut:
      return SF_TIMED_OUT;
    case ClientError::kSystemError:
      return SF_SYSTEM_ERROR;
  }
  return SF_SYSTEM_ERROR;
}

// Records the message for sf_last_error; an allocation failure leaves it empty.
sf_status Fail(sf_status status, const char* message) noexcept {
  try {
    last_error = message;
  } catch (...) {
    last_error.clear();
  }
  return status;
}

sf_status Fail(const snowflake::Error& error) noexcept {
  return Fail(ToStatus(error.code), error.message.c_str());
}

}  // namespace

extern "C" {

void sf_options_init(sf_options* opts) {
  if (opts == nullptr) return;
  *opts = sf_options SF_OPTIONS_INIT;
}

sf_status sf_open(const char* service, const sf_options* opts, sf_client** out) {
  if (out == nullptr) return Fail(SF_INVALID_ARGUMENT, "sf_open: out is NULL");
  *out = nullptr;
  if (service == nullptr) return Fail(SF_INVALID_SERVICE_NAME, "sf_open: service is NULL");
  try {
    snowflake::ClientOptions options;
    if (opts != nullptr) {
      // Read only the fields the caller's header knew about.
      sf_options given = sf_options SF_OPTIONS_INIT;
      if (opts->struct_size < offsetof(sf_options, runtime_dir)) {
        return Fail(SF_INVALID_ARGUMENT,
                    "sf_open: sf_options.struct_size is too small; use sf_options_init");
      }
      std::memcpy(&given, opts, std::min<size_t>(opts->struct_size, sizeof(sf_options)));
      options.wait_timeout = std::chrono::milliseconds(given.wait_timeout_ms);
      if (given.runtime_dir != nullptr) options.runtime_dir = given.runtime_dir;
      if (given.max_heartbeat_age_ms != 0) {
        options.max_heartbeat_age = std::chrono::milliseconds(given.max_heartbeat_age_ms);
      }
      if (given.remotes != nullptr) {
        std::string_view rest(given.remotes);
        while (!rest.empty()) {
          const size_t comma = rest.find(',');
          if (comma != 0) options.remotes.emplace_back(rest.substr(0, comma));
          rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        }
      }
    }
    auto maybe_client = snowflake::Client::Open(service, options);
    if (!maybe_client) return Fail(maybe_client.error());
    *out = new sf_client{std::move(*maybe_client)};
    return SF_OK;
  } catch (const std::exception& e) {
    return Fail(SF_SYSTEM_ERROR, e.what());
  } catch (...) {
    return Fail(SF_SYSTEM_ERROR, "sf_open: unknown error");
  }
}

sf_status sf_next(sf_client* c, uint64_t* id) {
  if (c == nullptr || id == nullptr) return Fail(SF_INVALID_ARGUMENT, "sf_next: NULL argument");
  auto taken = c->client.Next();
  if (!taken) return Fail(taken.error());
  *id = *taken;
  return SF_OK;
}

sf_status sf_next_batch(sf_client* c, uint64_t* ids, size_t n, size_t* got) {
  if (got != nullptr) *got = 0;
  if (c == nullptr || ids == nullptr || got == nullptr) {
    return Fail(SF_INVALID_ARGUMENT, "sf_next_batch: NULL argument");
  }
  if (n == 0) return Fail(SF_INVALID_ARGUMENT, "sf_next_batch: n is 0");
  auto taken = c->client.NextBatch(std::span<uint64_t>(ids, n));
  if (!taken) return Fail(taken.error());
  *got = *taken;
  return SF_OK;
}

void sf_close(sf_client* c) { delete c; }

sf_status sf_decode(const sf_client* c, uint64_t id, sf_decoded_id* out) {
  if (out == nullptr) return Fail(SF_INVALID_ARGUMENT, "sf_decode: out is NULL");
  const snowflake::IdLayout layout = c != nullptr ? c->client.layout() : snowflake::IdLayout();
  auto decoded = layout.Decode(id);
  if (!decoded) {
    return Fail(SF_INVALID_ARGUMENT,
                std::string(snowflake::IdErrorMessage(decoded.error())).c_str());
  }
  *out = sf_decoded_id{decoded->unix_ms, decoded->machine, decoded->sequence};
  return SF_OK;
}

const char* sf_status_str(sf_status s) {
  switch (s) {
    case SF_OK:
      return "ok";
    case SF_INVALID_SERVICE_NAME:
      return "invalid_service_name";
    case SF_INVALID_ARGUMENT:
      return "invalid_argument";
    case SF_DAEMON_NOT_RUNNING:
      return "daemon_not_running";
    case SF_PERMISSION_DENIED:
      return "permission_denied";
    case SF_INCOMPATIBLE_VERSION:
      return "incompatible_version";
    case SF_CORRUPT_SEGMENT:
      return "corrupt_segment";
    case SF_UNTRUSTED_SEGMENT:
      return "untrusted_segment";
    case SF_DAEMON_STARTING:
      return "daemon_starting";
    case SF_DAEMON_PAUSED:
      return "daemon_paused";
    case SF_DAEMON_OUT_OF_SERVICE:
      return "daemon_out_of_service";
    case SF_DAEMON_STOPPED:
      return "daemon_stopped";
    case SF_DAEMON_NOT_HEARTBEATING:
      return "daemon_not_heartbeating";
    case SF_DAEMON_DEAD:
      return "daemon_dead";
    case SF_TIMED_OUT:
      return "timed_out";
    case SF_SYSTEM_ERROR:
      return "system_error";
  }
  return "unknown_status";
}

const char* sf_last_error(void) { return last_error.c_str(); }

}  // extern "C"
