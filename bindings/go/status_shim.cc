#include "status_shim.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "snowflake/client.h"

namespace {

void Copy(const std::string& text, char* out, size_t size) {
  const size_t n = std::min(text.size(), size - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

}  // namespace

extern "C" sf_status sfgo_inspect(const char* runtime_dir, sfgo_status* out, char** message) {
  *message = nullptr;
  try {
    snowflake::ClientOptions options;
    if (runtime_dir != nullptr && *runtime_dir != '\0') options.runtime_dir = runtime_dir;
    auto status = snowflake::Client::Inspect(options);
    if (!status) {
      *message = strdup(status.error().message.c_str());
      // sf_status numbers ClientError values from 1 in the same order (snowflake.h).
      return static_cast<sf_status>(static_cast<int>(status.error().code) + 1);
    }
    const snowflake::ClientStatus& s = *status;
    *out = sfgo_status{};
    Copy(s.state, out->state, sizeof out->state);
    Copy(s.health, out->health, sizeof out->health);
    Copy(s.reason, out->reason_code, sizeof out->reason_code);
    Copy(s.reason_text, out->reason, sizeof out->reason);
    out->reason_detail = s.reason_detail;
    out->machine = s.machine;
    out->epoch_unix_ms = s.epoch_unix_ms;
    out->incarnation = s.incarnation;
    out->pid = s.daemon_pid;
    out->heartbeat_age_ns = s.heartbeat_age_ns;
    out->ring_fill = s.ring_fill;
    out->ring_capacity = s.ring_capacity;
    out->fill_target = s.fill_target;
    out->published_total = s.published_total;
    out->taken_total = s.taken_total - std::min(s.drained_total, s.taken_total);
    out->drained_total = s.drained_total;
    out->clock_pauses = s.clock_pauses;
    out->uncounted = s.uncounted;
    out->liveness_ms = s.liveness_ms;
    out->freshness_bound_ms = s.freshness_bound_ms;
    return SF_OK;
  } catch (...) {
    *message = strdup("out of memory reading the status");
    return SF_SYSTEM_ERROR;
  }
}
